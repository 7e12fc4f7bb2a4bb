//! # multicluster-kafka
//!
//! Read one logical stream from many Apache Kafka clusters, and follow it while its
//! clusters and topics change, without a restart and without losing or repeating a
//! record. The design follows Apache Flink's FLIP-246 (`DynamicKafkaSource`).
//!
//! The crate is organised in layers, each using only those below it (drawn in the
//! repository's `docs/design.md`), bottom to top:
//!
//! - plain data and pure decisions: [`split`]s, [`record`]s, [`error`]s, the
//!   [`deserializer`], [`metrics`] names, [`checkpoint`]s, where reading starts and
//!   stops ([`offsets`]), client [`properties`] (secrets redacted), the hooks a program
//!   puts into each cluster's clients ([`hooks`]: OAUTHBEARER tokens, statistics,
//!   errors), the metadata model, and the pure parts in [`unstable`];
//! - `kafka/`: one cluster's librdkafka clients, their configuration and their events;
//! - `reader/` (the parallel readers: applying assignments, a fetcher per cluster on
//!   at most one thread per core, handing records out in order) and `enumerator/` (the
//!   single coordinator: subscription, connecting in the background, partition
//!   discovery, restore, live reconciliation, assignment, commits);
//! - `source/`: the builder ([`SourceBuilder`]) and the running handles
//!   ([`KafkaSourceStream`], [`SourceCoordinator`], [`SourceReader`]);
//! - [`metadata`] (the model, `KafkaStream` and `ClusterMetadata`, and the services that
//!   answer "which clusters and topics make up this stream now?": file, static,
//!   single-cluster, or your own), [`hybrid`] (files first, then Kafka:
//!   [`file_source`]) and [`inspect`] (what a stream looks like now, for the CLI's
//!   `describe` and `plan`).
//!
//! ```
//! use multicluster_kafka::metadata::{ClusterMetadata, KafkaStream};
//!
//! let east = ClusterMetadata::builder("127.0.0.1:9092")
//!     .topic("orders")
//!     .build()
//!     .unwrap();
//! let stream = KafkaStream::new("orders-stream").with_cluster("east", east);
//! assert_eq!(stream.clusters["east"].topics.len(), 1);
//! ```
#![deny(missing_docs)]

mod base;
pub mod deserializer;
mod enumerator;
pub mod error;
pub mod file_source;
pub mod hybrid;
pub mod inspect;
mod kafka;
mod lookups;
pub mod metadata;
pub mod metrics;
pub(crate) mod native;
mod reader;
pub mod record;
mod source;

pub use base::ack::AckRequests;
pub use base::assignment::AssignmentStrategy;
pub use base::hooks;
pub use base::{checkpoint, split};
pub use base::{offsets, properties};

pub use base::hooks::{ClientHooks, ClientHooksFactory};
pub use base::watermark::{DEFAULT_IDLE_TIMEOUT, ReadOrder, WatermarkStrategy};
pub use bytes::Bytes;
pub use kafka::config::CLIENT_DEFAULTS;
pub use reader::SourceReader;
pub use reader::cluster_consumer::READER_DEFAULTS;
pub use source::{
    Committer, DEFAULT_BOUNDED_STARTUP_TIMEOUT, DEFAULT_METADATA_DISCOVERY,
    DEFAULT_METADATA_FAILURE_THRESHOLD, DEFAULT_PARTITION_DISCOVERY, DEFAULT_REBUILD_INTERVAL,
    DEFAULT_RETENTION, DEFAULT_SHARD_LOCK_WAIT, KafkaSourceStream, MultiClusterKafkaSource,
    ScaleOut, Shard, SourceBuilder, SourceCoordinator,
};

/// Building blocks of the source that its command-line tool and benchmarks use: the
/// pure reconciliation [`plan`](unstable::plan) of two metadata snapshots, split
/// [`assign`](unstable::assign)ment, and where a split starts or stops given a
/// partition's offsets ([`resolve_start`](unstable::resolve_start),
/// [`resolve_stop`](unstable::resolve_stop)).
///
/// The native fetch path's Kafka client is the `multicluster-kafka-client` crate.
///
/// **Unstable:** not part of the crate's supported API; anything here may change or go
/// in any release, semver notwithstanding.
pub mod unstable {
    pub use crate::base::assignment::{assign, per_cluster_owner};
    pub use crate::base::plan;
    pub use crate::base::resolve::{resolve_start, resolve_stop};
    pub use crate::base::translate;
}

/// The names most programs need.
pub mod prelude {
    pub use crate::base::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore};
    pub use crate::base::hooks::ClientHooks;
    pub use crate::base::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
    pub use crate::deserializer::{
        DeserializeError, Deserializer, Json, NullableValue, RawValue, Utf8, ValueOnly,
    };
    pub use crate::error::SourceError;
    pub use crate::metadata::{
        ClusterMetadata, FileMetadataService, KafkaMetadataService, KafkaStream,
        SingleClusterMetadataService, StaticMetadataService,
    };
    pub use crate::record::{RawRecord, Record, RecordBatch};
    pub use crate::{KafkaSourceStream, MultiClusterKafkaSource, SourceBuilder, SourceReader};
    pub use bytes::Bytes;
}
