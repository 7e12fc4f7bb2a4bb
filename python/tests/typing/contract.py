"""The contract of the package as a program uses it, checked by mypy against the
installed stubs (test_stubs.py); the last line is a typo mypy must catch."""

import asyncio
import multicluster_kafka as mck

source = mck.Source("streams.yaml", streams=["orders"], group="g", starting_offsets={"committed": "earliest"},
                    stopping_offsets=None, properties={"security.protocol": "SASL_SSL"}, restore=None)
with source.open() as stream:
    for record in stream:
        n: int = record.offset + record.partition
        v: bytes | None = record.value
        h = record.headers
    cp = stream.checkpoint()
    data: bytes = cp.to_bytes()
    stream.commit(mck.Checkpoint.from_bytes(data))
    for batch in stream.batches(max_records=10_000):
        batch.num_rows

async def main() -> None:
    async with source.open() as s:
        async for r in s:
            print(r.cluster)

try:
    pass
except mck.UnreachableClusterError as e:
    print(e.cluster, e.kind, e.retriable)
source.opn()  # a typo the checker must catch
