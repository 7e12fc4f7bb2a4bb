//! Errors of the source.

use crate::checkpoint::CheckpointError;
use crate::deserializer::DeserializeError;
use crate::kafka::offsets::OffsetError;
use crate::kafka::properties::{ClientProperties, REDACTED};
use crate::metadata::MetadataError;

/// Everything that can stop or disturb a source. Each renders as one line and never
/// contains a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The builder was given an invalid combination.
    #[error("invalid source configuration: {0}")]
    Config(String),
    /// The metadata service failed or returned unusable metadata.
    #[error("metadata: {0}")]
    Metadata(#[from] MetadataError),
    /// A subscribed stream id is unknown to the metadata service.
    #[error("unknown stream id(s): {}", .0.join(", "))]
    UnknownStreams(Vec<String>),
    /// A Kafka cluster failed.
    #[error("cluster `{cluster}`: {message}")]
    Cluster {
        /// Logical cluster id.
        cluster: String,
        /// What failed.
        message: String,
    },
    /// Committing offsets failed on some clusters (the others committed).
    #[error("offset commit failed: {}", .failures.iter().map(|(c, m)| format!("cluster `{c}`: {m}")).collect::<Vec<_>>().join("; "))]
    Commit {
        /// Logical cluster id → why its commit failed.
        failures: std::collections::BTreeMap<String, String>,
    },
    /// A start or stop offset could not be resolved.
    #[error("offsets: {0}")]
    Offset(#[from] OffsetError),
    /// A record could not be deserialized (handed out in place of the record; it
    /// counts as handed out).
    #[error(transparent)]
    Deserialize(#[from] DeserializeError),
    /// A checkpoint could not be read, written or applied.
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// A restored position belongs to another physical cluster.
    #[error(
        "cluster `{cluster}`: checkpointed positions belong to Kafka cluster.id {expected}, but the cluster now reports {actual}; refusing to apply them (start fresh explicitly to discard them)"
    )]
    ClusterIdentity {
        /// Logical cluster id.
        cluster: String,
        /// The Kafka `cluster.id` in the checkpoint.
        expected: String,
        /// The Kafka `cluster.id` reported now.
        actual: String,
    },
    /// Offset out of range while reading, and the policy is to fail.
    #[error(
        "{split}: offset {offset} is out of range (the log was truncated or deleted); policy is to fail"
    )]
    OffsetOutOfRange {
        /// The split.
        split: String,
        /// The offset asked for.
        offset: i64,
    },
    /// A file of a file source could not be read, or one of its lines is malformed.
    #[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    File {
        /// The file.
        path: String,
        /// The 1-based line, when the problem is one line.
        line: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// The source was shut down.
    #[error("the source is closed")]
    Closed,
}

impl SourceError {
    /// A cluster error whose message is scrubbed of every secret property value.
    pub(crate) fn cluster(
        cluster: &str,
        what: &str,
        e: &dyn std::fmt::Display,
        props: &ClientProperties,
    ) -> Self {
        let mut message = format!("{what}: {e}");
        for (k, v) in props.iter() {
            if props.is_secret(k) && !v.is_empty() {
                message = message.replace(v, REDACTED);
            }
        }
        SourceError::Cluster {
            cluster: cluster.to_string(),
            message,
        }
    }
}
