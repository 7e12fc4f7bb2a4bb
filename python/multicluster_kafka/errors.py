"""The exceptions of multicluster_kafka: one class per kind of failure the library
tells apart, all under :class:`SourceError`, each with the library's one-line
message (never a secret)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "SourceError",
    "ConfigError",
    "MetadataError",
    "UnknownStreamError",
    "ClusterError",
    "UnreachableClusterError",
    "AccessError",
    "ClusterIdentityError",
    "MirrorDivergedError",
    "OffsetError",
    "OffsetOutOfRangeError",
    "TopicError",
    "CommitError",
    "CheckpointError",
    "ShardTakenError",
    "ClosedError",
    "InternalError",
]


class SourceError(Exception):
    """Anything that stops or disturbs a multi-cluster source."""


class ConfigError(SourceError, ValueError):
    """An invalid argument of ``Source``, setting or client property."""


class MetadataError(SourceError):
    """The metadata (file, dict or service) is unusable or could not be read.

    ``retriable`` says whether reading it again later may succeed."""

    retriable: bool = False


class UnknownStreamError(MetadataError):
    """A subscribed stream id is not in the metadata."""


class ClusterError(SourceError):
    """A Kafka cluster failed or refused a request.

    ``cluster`` is the logical cluster id, ``kind`` the kind of failure
    (``"transport"``, ``"timeout"``, ``"authentication"``, ``"tls"``,
    ``"authorization"``, ``"configuration"``, ...), ``retriable`` whether the same
    request may succeed later."""

    cluster: Optional[str] = None
    kind: str = "other"
    retriable: bool = False


class UnreachableClusterError(ClusterError):
    """A cluster did not answer (no broker reachable, or not within a timeout), for
    example at start-up within ``startup_timeout``."""


class AccessError(ClusterError):
    """A cluster refused the client: credentials, TLS or authorization."""


class ClusterIdentityError(ClusterError):
    """Restored positions belong to another physical cluster (its ``cluster.id``)."""


class MirrorDivergedError(SourceError):
    """A mirror does not hold the last record read from its source where it must."""

    cluster: Optional[str] = None


class OffsetError(SourceError):
    """A start or stop offset could not be resolved (no committed offset, say)."""


class OffsetOutOfRangeError(OffsetError):
    """A split's position is outside its log (records deleted, topic re-created).

    ``split`` is ``cluster/topic/partition``."""

    split: Optional[str] = None


class TopicError(SourceError):
    """A bounded read's topic is gone or no longer shown to the client.

    ``split`` is ``cluster/topic/partition``."""

    split: Optional[str] = None


class CommitError(SourceError):
    """Committing offsets failed on some clusters."""


class CheckpointError(SourceError):
    """A checkpoint could not be read or applied."""


class ShardTakenError(SourceError):
    """Another instance holds this shard's membership."""

    cluster: Optional[str] = None


class ClosedError(SourceError):
    """The stream is closed."""


class InternalError(SourceError):
    """A task of the source itself failed (a bug: please report it)."""
