//! # multicluster-kafka
//!
//! Read one logical stream from many Apache Kafka clusters, and follow it while its
//! clusters and topics change, without a restart and without losing or repeating a
//! record. The design follows Apache Flink's FLIP-246 (`DynamicKafkaSource`).
//!
//! The crate is organised by concept:
//!
//! - [`metadata`]: the model (`KafkaStream`, `ClusterMetadata`) and the metadata
//!   services that answer "which clusters and topics make up this stream now?";
//! - [`offsets`]: where reading starts and, in bounded mode, stops;
//! - [`properties`]: librdkafka client properties with secrets redacted;
//! - [`client_context`]: hooks into each cluster's librdkafka clients (OAUTHBEARER
//!   token providers, statistics, errors).
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
#![warn(missing_docs)]

mod active;
pub mod assignment;
pub mod checkpoint;
pub mod client_context;
mod cluster_client;
pub mod deserializer;
mod enumerator;
pub mod error;
pub mod file_source;
pub mod hybrid;
pub mod inspect;
pub mod metadata;
pub mod metrics;
pub mod offsets;
pub mod properties;
mod reader;
pub mod record;
mod retention;
mod source;
pub mod split;

pub use bytes::Bytes;
pub use client_context::{ClientHooks, ClientHooksFactory};
pub use cluster_client::CLIENT_DEFAULTS;
pub use reader::SourceReader;
pub use reader::cluster_consumer::READER_DEFAULTS;
pub use source::{
    DEFAULT_METADATA_DISCOVERY, DEFAULT_METADATA_FAILURE_THRESHOLD, DEFAULT_PARTITION_DISCOVERY,
    DEFAULT_REBUILD_INTERVAL, DEFAULT_RETENTION, KafkaSourceStream, MultiClusterKafkaSource,
    SourceBuilder, SourceCoordinator,
};

/// The names most programs need.
pub mod prelude {
    pub use crate::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore};
    pub use crate::client_context::ClientHooks;
    pub use crate::deserializer::{Deserializer, Json, NullableValue, RawValue, Utf8, ValueOnly};
    pub use crate::error::SourceError;
    pub use crate::metadata::{
        ClusterMetadata, FileMetadataService, KafkaMetadataService, KafkaStream,
        SingleClusterMetadataService, StaticMetadataService,
    };
    pub use crate::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
    pub use crate::record::{Record, RecordBatch};
    pub use crate::{KafkaSourceStream, MultiClusterKafkaSource, SourceBuilder, SourceReader};
    pub use bytes::Bytes;
}
pub mod plan;
