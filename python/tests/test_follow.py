"""Follow runs: live migrations by a file edit and by a Python MetadataService, the
GIL released while waiting, Ctrl-C, closing, logging."""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time

import multicluster_kafka as mck

from conftest import create_topic, metadata, produce, unique, write_yaml


def take(stream, n, within=60.0):
    """n records from a follow run, failing after `within` seconds."""
    out = []
    deadline = time.monotonic() + within
    for record in stream:
        out.append(record)
        if len(out) == n:
            return out
        assert time.monotonic() < deadline, f"only {len(out)} of {n} records"
    raise AssertionError("the follow run ended")


def migrate(clusters, source_of, switch):
    """east holds the stream's first 300 records; `switch` moves it to west, which
    then gets 300 more; every record comes once, east's before west's."""
    topic = unique("migrate")
    for name in ("east", "west"):
        create_topic(clusters[name], topic, 2)
    produce(clusters["east"], topic, [f"east-{i}".encode() for i in range(300)])
    source = source_of(metadata(clusters, "orders", {"east": [topic]}))
    with source.open() as stream:
        first = take(stream, 300)
        switch(metadata(clusters, "orders", {"west": [topic]}))
        produce(clusters["west"], topic, [f"west-{i}".encode() for i in range(300)])
        second = take(stream, 300)
    values = [r.value.decode() for r in first + second]
    assert sorted(values) == sorted([f"east-{i}" for i in range(300)] + [f"west-{i}" for i in range(300)])
    assert {r.cluster for r in first} == {"east"} and {r.cluster for r in second} == {"west"}


def test_a_live_migration_by_a_file_edit(clusters, tmp_path: pathlib.Path):
    path = tmp_path / "streams.yaml"

    def source_of(meta):
        write_yaml(path, meta)
        return mck.Source(str(path), streams=["orders"], starting_offsets="earliest")

    migrate(clusters, source_of, lambda meta: write_yaml(path, meta))


def test_a_live_migration_by_a_python_metadata_service(clusters):
    class Registry(mck.MetadataService):
        def __init__(self, meta):
            self.meta = meta
            self.asked = 0

        def describe(self):
            self.asked += 1
            return self.meta

        def move(self, meta):
            self.meta = meta
            self.changed()

    services = []

    def source_of(meta):
        services.append(Registry(meta))
        # Discovery every 5 min: only changed() can make the switch prompt.
        return mck.Source(services[0], streams=["orders"], starting_offsets="earliest",
                          metadata_discovery_interval=300)

    start = time.monotonic()
    migrate(clusters, source_of, lambda meta: services[0].move(meta))
    assert time.monotonic() - start < 60
    assert services[0].asked >= 2


def test_the_gil_is_released_while_a_stream_waits(clusters):
    topic = unique("gil")
    create_topic(clusters["east"], topic, 1)
    meta = metadata(clusters, "orders", {"east": [topic]})
    counted = 0
    stop = threading.Event()

    def count():
        nonlocal counted
        while not stop.is_set():
            counted += 1

    with mck.Source(meta, streams=["orders"]).open() as stream:
        t = threading.Thread(target=count)
        t.start()
        threading.Timer(1.0, lambda: produce(clusters["east"], topic, [b"late"])).start()
        before = counted
        record = next(stream)
        stop.set()
        t.join()
    assert record.value == b"late"
    assert counted - before > 10_000, "another thread ran while the stream waited"


CTRL_C = textwrap.dedent(
    """
    import sys, time
    import multicluster_kafka as mck
    meta = {"clusters": {"east": {"bootstrapServers": sys.argv[1]}},
            "streams": {"orders": {"clusters": {"east": {"topics": [sys.argv[2]]}}}}}
    stream = mck.Source(meta, streams=["orders"]).open()
    with stream:
        print("reading", flush=True)
        try:
            for record in stream:
                pass
        except KeyboardInterrupt:
            at = time.monotonic()
            print("interrupted", flush=True)
    print("closed", stream.closed, round(time.monotonic() - at, 3), flush=True)
    """
)


def test_ctrl_c_ends_a_blocking_iteration_within_a_second(clusters, tmp_path):
    topic = unique("ctrlc")
    create_topic(clusters["east"], topic, 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C, clusters["east"], topic],
        cwd=tmp_path,  # the installed package, not the source folder
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "reading"
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline().strip() == "interrupted"
    interrupted_in = time.monotonic() - sent
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert interrupted_in < 1.0, interrupted_in
    assert out.startswith("closed True"), out
    assert "Traceback" not in err and "panicked" not in err, err


def threads_and_sockets():
    pid = os.getpid()
    threads = len(os.listdir(f"/proc/{pid}/task"))
    sockets = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return threads, sockets


def test_closing_leaves_no_thread_or_connection(clusters):
    topic = unique("close")
    create_topic(clusters["east"], topic, 3)
    produce(clusters["east"], topic, [b"x"] * 100)
    meta = metadata(clusters, "orders", {"east": [topic]})
    source = mck.Source(meta, streams=["orders"])
    with source.open() as stream:  # the process-wide runtime starts with the first
        take(stream, 100)
    time.sleep(1)
    baseline = threads_and_sockets()
    for _ in range(3):
        with source.open() as stream:
            take(stream, 100)
            during = threads_and_sockets()
        deadline = time.monotonic() + 10
        while threads_and_sockets() != baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threads_and_sockets() == baseline, (baseline, during, threads_and_sockets())
    assert during[1] > baseline[1], "the stream had connections while open"


def test_warnings_reach_python_logging_without_secrets(caplog):
    dead = {"clusters": {"gone": {"bootstrapServers": "127.0.0.1:1",
                                  "properties": {"sasl.password": "hunter2-secret"}}},
            "streams": {"orders": {"clusters": {"gone": {"topics": ["orders"]}}}}}
    caplog.set_level(logging.INFO, logger="multicluster_kafka")
    source = mck.Source(dead, streams=["orders"], properties={"sasl.username": "u"},
                        startup_timeout=1, stopping_offsets="latest")
    try:
        with source.open() as stream:
            list(stream)
    except mck.UnreachableClusterError as e:
        assert "hunter2" not in str(e)
    records = [r for r in caplog.records if r.name == "multicluster_kafka"]
    assert records, "the library's log lines reach the multicluster_kafka logger"
    assert any(r.levelno >= logging.WARNING for r in records), [r.getMessage() for r in records]
    assert all("hunter2" not in r.getMessage() for r in records)
