"""Read one logical stream from many Apache Kafka clusters, and follow it while its
clusters and topics change, without losing or repeating a record.

>>> import multicluster_kafka as mck
>>> source = mck.Source(metadata="streams.yaml", streams=["orders"],
...                     stopping_offsets="latest")                # doctest: +SKIP
>>> with source.open() as stream:                                 # doctest: +SKIP
...     for record in stream:
...         print(record.cluster, record.offset, record.value)

See docs/python.md in the repository for the whole guide.
"""

from ._native import Checkpoint, MetadataService, Record, Source, Stream, __version__
from . import errors
from .errors import *  # noqa: F403 (the exception classes, listed in errors.__all__)
from .hooks import ClientHooks, OAuthToken

__all__ = [
    "Source",
    "Stream",
    "Record",
    "Checkpoint",
    "MetadataService",
    "ClientHooks",
    "OAuthToken",
    "__version__",
    *errors.__all__,
]
