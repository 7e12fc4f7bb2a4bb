//! Stream metadata: which clusters and topics make up a logical stream.
//!
//! A [`KafkaMetadataService`] is the source of truth. A cluster or topic absent from
//! its answer is no longer read. Implementations:
//!
//! - [`StaticMetadataService`]: in memory, replaceable at run time;
//! - [`FileMetadataService`]: a YAML or JSON file, hot reloaded;
//! - [`SingleClusterMetadataService`]: every topic of one cluster is a stream of the
//!   same name.

//!
//! The model, the service trait and the errors are plain data at the bottom of the
//! crate (`base::metadata`); this module holds the services and re-exports the rest.

pub mod file;
mod single_cluster;
mod static_service;

pub use crate::base::metadata::{
    ClusterMetadata, ClusterMetadataBuilder, KafkaMetadataService, KafkaStream, MetadataError,
    MirrorOf, OnMismatch, SourceLocation, Translate, check_consistent,
};
pub use file::FileMetadataService;
pub use single_cluster::SingleClusterMetadataService;
pub use static_service::StaticMetadataService;
