"""Real Kafka for the package's tests: two single-broker KRaft clusters, `east` and
`west`, started once per test session by the test kit's `mck-test-kafka` (child JVMs
from Maven Central jars, as the Rust tests start theirs). Records are produced with
confluent-kafka, a client no one here wrote."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = pathlib.Path(__file__).resolve().parents[2]


def _test_kafka_binary() -> str:
    """The test kit's binary: $MCK_TEST_KAFKA, else built into the repository's
    target dir."""
    given = os.environ.get("MCK_TEST_KAFKA")
    if given:
        return given
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is needed to build mck-test-kafka (or set MCK_TEST_KAFKA)")
    subprocess.run(
        [cargo, "build", "--quiet", "-p", "mck-testkit", "--bin", "mck-test-kafka"],
        cwd=REPO,
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    return str(pathlib.Path(target) / "debug" / "mck-test-kafka")


class Kafka:
    """The running `mck-test-kafka`: its clusters, and its commands (`mirror ...`)."""

    def __init__(self, proc: subprocess.Popen, clusters: dict):
        self.proc = proc
        self.clusters = clusters

    def command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer == "ok", f"mck-test-kafka: {line}: {answer or 'no answer'}"


@pytest.fixture(scope="session")
def kafka():
    """Two single-broker clusters, east and west; the brokers stop when the session
    ends (their stdin closes) or dies."""
    proc = subprocess.Popen(
        [_test_kafka_binary(), "east", "west"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        pytest.fail(f"Kafka did not start (mck-test-kafka exited {proc.returncode}; see its stderr above)")
    try:
        yield Kafka(proc, json.loads(line))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


@pytest.fixture(scope="session")
def clusters(kafka):
    """{"east": bootstrap, "west": bootstrap}."""
    return kafka.clusters


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, values, key=None, headers=None, partition=None) -> None:
    """Produces each value (bytes or str) in order; `partition` pins them."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        kwargs = {}
        if partition is not None:
            kwargs["partition"] = partition
        k = key(i) if callable(key) else key
        p.produce(topic, value=v, key=k, headers=headers, **kwargs)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(30) == 0, "confluent-kafka could not deliver every record"


def metadata(clusters: dict, stream: str, topics: dict) -> dict:
    """The metadata file's layout: `topics` maps a cluster name to its topics."""
    return {
        "clusters": {name: {"bootstrapServers": clusters[name]} for name in topics},
        "streams": {stream: {"clusters": {name: {"topics": t} for name, t in topics.items()}}},
    }


def write_yaml(path: pathlib.Path, meta: dict) -> None:
    """Writes the metadata as a file (JSON is YAML) by rename, as editors and
    ConfigMaps do."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, path)
