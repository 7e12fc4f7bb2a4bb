"""Python reading speed: multicluster_kafka's per-record iteration and Arrow batches
against confluent-kafka's `Consumer.consume(num_messages=...)` loop, on the same
brokers and the same records, in one run.

    pip install ./python confluent-kafka pyarrow        # a release build of the package
    cargo build --release -p mck-testkit --bin mck-test-kafka
    python python/bench/bench.py --records 1000000 --size 100 --size 1024

It starts one single-broker Kafka cluster (the test kit's `mck-test-kafka`), produces
`--records` records of each `--size` with confluent-kafka into a topic of 4
partitions, and reads them all `--runs` times with each reader, each run in a fresh
process, in turn. A run is timed from the reader's creation to its last record; its
CPU is the process's user + system time over the same span (every thread). It prints
one Markdown table: the median records/s and CPU µs per record of each reader, and
each as a ratio against confluent-kafka's (tuned, see TUNED; with its defaults too).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
READERS = ("confluent-kafka tuned", "confluent-kafka", "records", "batches")
# confluent-kafka's best here: with librdkafka's default queue limits (64 MiB,
# 100 000 messages) its consumer stops fetching for fetch.queue.backoff.ms (1 s) each
# time the queue fills, 5x slower on a backlog. The ratios are against this one.
TUNED = {"queued.max.messages.kbytes": 1_048_576, "queued.min.messages": 10_000_000,
         "fetch.queue.backoff.ms": 0}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def read(reader: str, bootstrap: str, topic: str, n: int) -> dict:
    """One run in this process: how long reading every record took."""
    start, cpu0 = time.perf_counter(), cpu()
    count = 0
    if reader.startswith("confluent-kafka"):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                      "enable.auto.commit": False, **(TUNED if reader.endswith("tuned") else {})})
        partitions = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while count < n:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error():
                    raise RuntimeError(m.error())
                m.value()
                count += 1
        c.close()
    else:
        import multicluster_kafka as mck

        meta = {"clusters": {"bench": {"bootstrapServers": bootstrap}},
                "streams": {"bench": {"clusters": {"bench": {"topics": [topic]}}}}}
        source = mck.Source(meta, streams=["bench"], stopping_offsets="latest")
        with source.open() as stream:
            if reader == "records":
                for record in stream:
                    record.value
                    count += 1
            else:
                for batch in stream.batches(max_records=10_000):
                    batch.column("value")
                    count += batch.num_rows
    assert count == n, f"{reader} read {count} of {n}"
    return {"seconds": time.perf_counter() - start, "cpu": cpu() - cpu0}


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "compression.type": "none", "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"%d" % i)
                break
            except BufferError:
                p.poll(0.1)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, action="append")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        reader, bootstrap, topic, n = args.child
        print(json.dumps(read(reader, bootstrap, topic, int(n))))
        return
    binary = os.environ.get("MCK_TEST_KAFKA", str(REPO / "target/release/mck-test-kafka"))
    kafka = subprocess.Popen([binary, "bench"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    bootstrap = json.loads(kafka.stdout.readline())["bench"]
    rows = []
    try:
        for size in args.size or [100]:
            topic = f"bench-{size}-{uuid.uuid4().hex[:6]}"
            produce(bootstrap, topic, args.records, size)
            runs = {r: [] for r in READERS}
            for _ in range(args.runs):
                for reader in READERS:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", reader, bootstrap, topic, str(args.records)],
                        check=True, capture_output=True, text=True, cwd="/",
                    ).stdout
                    runs[reader].append(json.loads(out.strip().splitlines()[-1]))
            base = None
            for reader in READERS:
                rate = statistics.median(args.records / r["seconds"] for r in runs[reader])
                per = statistics.median(r["cpu"] / args.records * 1e6 for r in runs[reader])
                if base is None:
                    base = (rate, per)
                rows.append((size, reader, rate, per, rate / base[0], per / base[1]))
    finally:
        kafka.stdin.close()
        kafka.wait()
    print(f"| value | reader | records/s | CPU µs/record | records/s vs confluent-kafka tuned | CPU vs confluent-kafka tuned |")
    print("|---|---|---|---|---|---|")
    for size, reader, rate, per, r_ratio, c_ratio in rows:
        print(f"| {size} B | {reader} | {rate:,.0f} | {per:.2f} | {r_ratio:.2f}x | {c_ratio:.2f}x |")


if __name__ == "__main__":
    main()
