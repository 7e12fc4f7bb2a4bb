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
    /// A split's position is outside its log while reading (records deleted by
    /// retention or `kafka-delete-records`, a topic re-created), and the out-of-range
    /// policy is to fail. The split is read no further.
    #[error(
        "{split}: position {offset} is outside the log{}; records were deleted or the topic re-created (reset with --on-missing-offset earliest|latest, or the builder's on_offset_out_of_range)",
        match (log_start, log_end) {
            (Some(s), Some(e)) => format!(" (offsets {s} to {e})"),
            _ => String::new(),
        }
    )]
    OffsetOutOfRange {
        /// The split, as `cluster/topic/partition`.
        split: String,
        /// The position asked for.
        offset: i64,
        /// The log's first offset, when it could be looked up.
        log_start: Option<i64>,
        /// The log's end (the next offset to be written), when it could be looked up.
        log_end: Option<i64>,
    },
    /// A topic was deleted while a bounded run read it: its split cannot reach its
    /// stop.
    #[error(
        "{split}: the topic is gone ({reason}) before the split reached its stop at offset {stop}; the run cannot end as asked (allow missing topics, e.g. --allow-missing-topics, to end such splits with a warning)"
    )]
    TopicGone {
        /// The split, as `cluster/topic/partition`.
        split: String,
        /// Where the split was to stop.
        stop: i64,
        /// What the broker said.
        reason: String,
    },
    /// A bounded run's topic is no longer shown to the client's principal (topic
    /// authorization failed) before one of its splits reached its stop.
    #[error(
        "{split}: the cluster refuses to describe the topic to this client's principal (topic authorization failed) before the split reached its stop at offset {stop}; grant it DESCRIBE and READ on the topic, or allow missing topics (e.g. --allow-missing-topics) to end such splits with a warning"
    )]
    TopicNotAuthorized {
        /// The split, as `cluster/topic/partition`.
        split: String,
        /// Where the split was to stop.
        stop: i64,
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
