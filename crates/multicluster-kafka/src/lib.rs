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
//! - [`properties`]: librdkafka client properties with secrets redacted.
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

pub mod metadata;
pub mod offsets;
pub mod properties;
