"""Type stubs of the native part of multicluster_kafka (see its docstrings)."""

from __future__ import annotations

import datetime
import os
from typing import Any, Callable, Iterator, Literal, Mapping, Optional, Sequence, Union

import pyarrow

from .hooks import ClientHooks

__version__: str

Seconds = Union[float, int, datetime.timedelta]
StartingOffsets = Union[
    Literal["earliest", "latest", "committed"],
    datetime.datetime,
    Mapping[str, Any],
]
StoppingOffsets = Union[Literal["latest", "committed"], datetime.datetime, Mapping[str, Any]]
Metadata = Union[str, "os.PathLike[str]", Mapping[str, Any], "MetadataService"]

class MetadataService:
    """Base class of a program's own metadata service.

    A subclass implements :meth:`describe` and calls :meth:`changed` when it has
    news; every source reading from it then describes its streams again at once
    (it also does every ``metadata_discovery_interval``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def describe(self) -> Mapping[str, Any]:
        """The streams in the metadata file's layout:
        ``{"clusters": {id: {"bootstrapServers": ...}}, "streams": {id: {"clusters": {id: {"topics": [...]}}}}}``."""
    def changed(self) -> None:
        """Tells the sources reading from this service to describe it again now."""

class Source:
    """A multi-cluster source's settings; :meth:`open` starts reading.

    ``metadata`` is a metadata file's path (watched for edits), a dict in the same
    layout, or a :class:`MetadataService`. Give ``streams`` (ids) or
    ``stream_pattern`` (a regular expression over ids). Every other option is named
    as the Rust builder's (``SourceBuilder``); durations are seconds or
    ``datetime.timedelta`` (``float("inf")`` for none). Raises
    :class:`~multicluster_kafka.ConfigError` or
    :class:`~multicluster_kafka.MetadataError` at once for bad arguments."""

    def __init__(
        self,
        metadata: Metadata,
        *,
        streams: Optional[Sequence[str]] = None,
        stream_pattern: Optional[str] = None,
        group: Optional[str] = None,
        starting_offsets: Optional[StartingOffsets] = None,
        stopping_offsets: Optional[StoppingOffsets] = None,
        properties: Optional[Mapping[str, Union[str, int, float, bool]]] = None,
        restore: Optional[Checkpoint] = None,
        scale_out: Optional[str] = None,
        watermarks: Optional[Seconds] = None,
        order: Optional[Literal["fetch", "time"]] = None,
        idle_timeout: Optional[Seconds] = None,
        startup_timeout: Optional[Seconds] = None,
        client_timeout: Optional[Seconds] = None,
        partition_discovery_interval: Optional[Seconds] = None,
        metadata_discovery_interval: Optional[Seconds] = None,
        max_batch_size: Optional[int] = None,
        include_headers: Optional[bool] = None,
        on_offset_out_of_range: Optional[Literal["earliest", "latest", "none"]] = None,
        allow_missing_topics: Optional[bool] = None,
        new_partition_starting_offsets: Optional[StartingOffsets] = None,
        discard_positions_of_replaced_clusters: Optional[bool] = None,
        metadata_failure_threshold: Optional[int] = None,
        assignment_strategy: Optional[Literal["per_cluster", "global"]] = None,
        rebuild_interval: Optional[Seconds] = None,
        removed_position_retention: Optional[Seconds] = None,
        shard_lock_wait: Optional[Seconds] = None,
        client_hooks: Union[ClientHooks, Callable[[str], Optional[ClientHooks]], None] = None,
    ) -> None: ...
    def open(self) -> Stream:
        """A stream over the source. It connects when first used (``with``,
        ``async with`` or the first record); a source opens again after a close."""
    @property
    def bounded(self) -> bool:
        """True when the source ends (``stopping_offsets`` set)."""

class Stream(Iterator[Record]):
    """Records from a running source, one by one (``for``, ``async for``) or as
    Arrow batches (:meth:`batches`). ``with`` and ``async with`` close it."""

    def __iter__(self) -> Stream: ...
    def __next__(self) -> Record: ...
    def __enter__(self) -> Stream: ...
    def __exit__(self, *args: Any) -> bool: ...
    async def __aenter__(self) -> Stream: ...
    async def __aexit__(self, *args: Any) -> bool: ...
    def __aiter__(self) -> Stream: ...
    async def __anext__(self) -> Record: ...
    def checkpoint(self) -> Checkpoint:
        """A checkpoint of exactly the records handed out so far; store it with what
        the program made of them."""
    def commit(self, checkpoint: Checkpoint) -> None:
        """Commits the checkpoint's offsets to every cluster under ``group``."""
    def batches(self, max_records: int = 10_000) -> Iterator[pyarrow.RecordBatch]:
        """The records as ``pyarrow.RecordBatch``es of at most ``max_records`` rows
        (columns stream, cluster, topic, partition, offset, timestamp, key, value,
        headers); needs pyarrow."""
    @property
    def watermark(self) -> Optional[int]:
        """With ``watermarks``: the watermark of what was handed out (ms)."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Stops reading and lets every connection and thread of the stream go."""

class Record:
    """One record; its fields are made when read, and it outlives its stream."""

    @property
    def stream(self) -> Optional[str]:
        """The (first) subscribed stream the record belongs to."""
    @property
    def streams(self) -> list[str]: ...
    @property
    def cluster(self) -> str:
        """The logical cluster id (the metadata's name, not Kafka's cluster.id)."""
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> Optional[int]:
        """Milliseconds since the epoch."""
    @property
    def key(self) -> Optional[bytes]: ...
    @property
    def value(self) -> Optional[bytes]:
        """The value; None for a tombstone."""
    @property
    def headers(self) -> list[tuple[str, Optional[bytes]]]: ...

class Checkpoint:
    """Where a source is in every split; ``Source(restore=...)`` starts there."""

    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> Checkpoint:
        """Raises :class:`~multicluster_kafka.CheckpointError` for bytes that are not one."""
    @property
    def split_count(self) -> int: ...
