"""Bounded reads of two clusters: exactly once, every field, checkpoints, asyncio,
Arrow batches."""

from __future__ import annotations

import asyncio
import datetime
import time

import multicluster_kafka as mck
import pytest

from conftest import create_topic, metadata, produce, unique

N = 600


@pytest.fixture(scope="module")
def orders(clusters):
    """A topic of 3 partitions on both clusters with N records each."""
    topic = unique("orders")
    for name in ("east", "west"):
        create_topic(clusters[name], topic, 3)
        produce(
            clusters[name],
            topic,
            [f"{name}-{i}".encode() for i in range(N)],
            key=lambda i: str(i).encode(),
            headers=[("source", b"pytest"), ("empty", None)],
        )
    return topic, metadata(clusters, "orders", {"east": [topic], "west": [topic]})


def bounded(meta, **kwargs):
    return mck.Source(meta, streams=["orders"], stopping_offsets="latest", **kwargs)


def check_exactly_once(records):
    values = [r.value.decode() for r in records]
    assert len(values) == len(set(values)), "a record was read twice"
    assert set(values) == {f"{c}-{i}" for c in ("east", "west") for i in range(N)}
    last = {}
    for r in records:
        split = (r.cluster, r.topic, r.partition)
        assert last.get(split, -1) < r.offset, f"{split} out of order"
        last[split] = r.offset


def test_a_bounded_read_of_two_clusters_hands_out_every_record_once(orders):
    topic, meta = orders
    with bounded(meta).open() as stream:
        records = list(stream)
    check_exactly_once(records)
    r = records[0]
    assert r.stream == "orders" and r.streams == ["orders"]
    assert r.cluster in ("east", "west") and r.topic == topic
    assert r.value.decode().startswith(r.cluster)
    assert r.key == r.value.decode().split("-")[1].encode()
    assert r.headers == [("source", b"pytest"), ("empty", None)]
    now_ms = datetime.datetime.now().timestamp() * 1000
    assert 0 < now_ms - r.timestamp < 600_000
    assert "offset=" in repr(r)


def test_a_checkpoint_counts_exactly_the_records_handed_out(orders):
    _, meta = orders
    source = bounded(meta)
    first = []
    with source.open() as stream:
        for record in stream:
            first.append(record)
            if len(first) == 257:
                data = stream.checkpoint().to_bytes()
                break
    checkpoint = mck.Checkpoint.from_bytes(data)
    assert checkpoint.split_count == 6
    with bounded(meta, restore=checkpoint).open() as stream:
        rest = list(stream)
    check_exactly_once(first + rest)


def test_batches_and_records_mix_and_checkpoint_exactly(orders):
    _, meta = orders
    got = []
    with bounded(meta).open() as stream:
        for _ in range(5):
            got.append(next(stream))
        batch = next(iter(stream.batches(max_records=100)))
        assert 1 <= batch.num_rows <= 100
        got.extend(
            type("R", (), {"value": v, "cluster": c, "topic": t, "partition": p, "offset": o})
            for v, c, t, p, o in zip(
                batch.column("value").to_pylist(),
                batch.column("cluster").to_pylist(),
                batch.column("topic").to_pylist(),
                batch.column("partition").to_pylist(),
                batch.column("offset").to_pylist(),
            )
        )
        data = stream.checkpoint().to_bytes()
    with bounded(meta, restore=mck.Checkpoint.from_bytes(data)).open() as stream:
        got.extend(stream)
    check_exactly_once(got)


def test_arrow_batches_match_the_records_row_for_row_in_polars_and_pandas(orders):
    import pandas
    import polars
    import pyarrow

    _, meta = orders
    with bounded(meta).open() as stream:
        records = {(r.cluster, r.partition, r.offset): r for r in stream}
    with bounded(meta).open() as stream:
        batches = list(stream.batches(max_records=250))
    assert all(b.num_rows <= 250 for b in batches)
    table = pyarrow.Table.from_batches(batches)
    assert table.num_rows == len(records) == 2 * N
    frame = polars.from_arrow(table)
    assert frame.schema["value"] == polars.Binary
    for row in frame.iter_rows(named=True):
        r = records[(row["cluster"], row["partition"], row["offset"])]
        assert (row["stream"], row["topic"], row["key"], row["value"]) == (r.stream, r.topic, r.key, r.value)
        assert int(row["timestamp"].timestamp() * 1000) == r.timestamp
        assert [(h["key"], h["value"]) for h in row["headers"]] == r.headers
    df = table.to_pandas()
    assert len(df) == 2 * N
    assert set(df["value"]) == {r.value for r in records.values()}


def test_async_with_and_async_for_read_every_record_once(orders):
    _, meta = orders

    async def read():
        out = []
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        t = asyncio.create_task(ticker())
        async with bounded(meta).open() as stream:
            async for record in stream:
                out.append(record)
        t.cancel()
        return out, ticks

    records, ticks = asyncio.run(read())
    check_exactly_once(records)
    assert ticks > 0, "the event loop ran other tasks meanwhile"


def test_async_for_without_async_with_connects_off_the_event_loop(orders):
    _, meta = orders
    stream = bounded(meta).open()
    # What the loop calls first does not connect (that would block the loop).
    assert stream._try_next() is True and not stream.closed

    async def read():
        return [r async for r in stream]

    records = asyncio.run(read())
    stream.close()
    check_exactly_once(records)


def test_a_cancelled_wait_loses_no_record(clusters):
    """asyncio.wait_for timeouts around a follow run's waits: every record still comes
    once, and a checkpoint taken after a timeout counts only records handed out."""
    topic = unique("cancel")
    create_topic(clusters["east"], topic, 1)
    meta = metadata(clusters, "orders", {"east": [topic]})

    async def read():
        got = []
        async with mck.Source(meta, streams=["orders"], starting_offsets="earliest").open() as stream:
            loop = asyncio.get_running_loop()

            def slowly():
                for chunk in range(10):
                    time.sleep(0.05)
                    produce(clusters["east"], topic, [str(chunk * 20 + i).encode() for i in range(20)])

            producing = loop.run_in_executor(None, slowly)
            timeouts = 0
            while len(got) < 200:
                try:
                    got.append(await asyncio.wait_for(stream.__anext__(), 0.01))
                except asyncio.TimeoutError:
                    timeouts += 1
            await producing
            checkpoint = stream.checkpoint()
        return got, checkpoint, timeouts

    got, checkpoint, timeouts = asyncio.run(read())
    assert [r.value for r in got] == [str(i).encode() for i in range(200)]
    assert timeouts > 0
    with mck.Source(
        meta, streams=["orders"], restore=checkpoint, stopping_offsets="latest"
    ).open() as stream:
        assert list(stream) == []


def test_a_source_opens_again_and_records_outlive_their_stream(orders):
    _, meta = orders
    source = bounded(meta)
    stream = source.open()
    with stream:
        first = list(stream)
    assert stream.closed
    with pytest.raises(mck.ClosedError):
        next(stream)
    with source.open() as again:
        second = list(again)
    assert len(first) == len(second) == 2 * N
    assert sorted(r.value for r in first) == sorted(r.value for r in second)


def test_starting_offsets_forms(orders, clusters):
    _, meta = orders
    with bounded(meta, starting_offsets={"beforeEnd": 2}).open() as stream:
        assert len(list(stream)) == 2 * 3 * 2
    with bounded(meta, starting_offsets="latest").open() as stream:
        assert list(stream) == []
    future = datetime.datetime.now() + datetime.timedelta(hours=1)
    with bounded(meta, starting_offsets=future).open() as stream:
        assert list(stream) == []
    with bounded(meta, starting_offsets={"offset": N}).open() as stream:
        assert list(stream) == []


def test_duckdb_queries_the_batches_as_they_are(orders):
    import duckdb
    import pyarrow

    _, meta = orders
    with bounded(meta).open() as stream:
        records = pyarrow.Table.from_batches(list(stream.batches()))
    rows = duckdb.sql(
        "select cluster, count(*), count(distinct value) from records group by cluster order by cluster"
    ).fetchall()
    assert rows == [("east", N, N), ("west", N, N)]


def test_large_values_are_shared_not_copied_into_each_batch(clusters):
    """Values above 12 bytes point into the fetched bytes: the value column's data
    buffers are the fetch's, shared by key and value columns."""
    import pyarrow

    topic = unique("large")
    create_topic(clusters["east"], topic, 1)
    values = [bytes([i % 256]) * 5000 for i in range(50)]
    produce(clusters["east"], topic, values)
    meta = metadata(clusters, "orders", {"east": [topic]})
    with bounded(meta).open() as stream:
        batches = list(stream.batches())
    got = [v for b in batches for v in b.column("value").to_pylist()]
    assert got == values
    for b in batches:
        keys, vals = b.column("key"), b.column("value")
        assert vals.type == pyarrow.binary_view()
        # Views reference data buffers instead of inlining: buffers after the
        # validity and view buffers. Key and value columns share the same ones.
        value_data = [buf.address for buf in vals.buffers()[2:] if buf is not None]
        key_data = [buf.address for buf in keys.buffers()[2:] if buf is not None]
        assert value_data and value_data == key_data


def test_time_order_interleaves_two_clusters_by_timestamp(clusters):
    from confluent_kafka import Producer

    topic = unique("timed")
    base = int(time.time() * 1000) - 60_000
    for offset, name in enumerate(("east", "west")):
        create_topic(clusters[name], topic, 1)
        p = Producer({"bootstrap.servers": clusters[name]})
        for i in range(100):
            p.produce(topic, value=f"{name}-{i}".encode(), timestamp=base + 2 * i + offset)
        assert p.flush(30) == 0
    meta = metadata(clusters, "orders", {"east": [topic], "west": [topic]})
    source = bounded(meta, order="time", watermarks=0.0, idle_timeout=1.0)
    with source.open() as stream:
        records = list(stream)
        watermark = stream.watermark
    stamps = [r.timestamp for r in records]
    assert len(records) == 200
    assert stamps == sorted(stamps), "handed out in event-time order across clusters"
    assert [r.cluster for r in records[:4]] == ["east", "west", "east", "west"]
    assert watermark is not None and watermark >= base + 100
