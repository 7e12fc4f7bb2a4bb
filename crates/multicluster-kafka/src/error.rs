//! Errors of the source.

use crate::base::checkpoint::CheckpointError;
pub use crate::base::kafka_error::KafkaErrorKind;
use crate::base::metadata::MetadataError;
use crate::base::offsets::OffsetError;
pub use crate::base::setting::ConfigError;
use crate::deserializer::DeserializeError;

/// Everything that can stop or disturb a source. Each renders as one line and never
/// contains a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The builder was given an invalid setting or combination.
    #[error("invalid source configuration: {0}")]
    Config(#[from] ConfigError),
    /// A task or thread of the source itself failed (a bug: please report it).
    #[error("internal error: {task} failed: {message}")]
    Internal {
        /// Which task.
        task: &'static str,
        /// How it failed.
        message: String,
    },
    /// The metadata service failed or returned unusable metadata.
    #[error("metadata: {0}")]
    Metadata(#[from] MetadataError),
    /// A subscribed stream id is unknown to the metadata service.
    #[error("unknown stream id(s): {}", .0.join(", "))]
    UnknownStreams(Vec<String>),
    /// A request to a Kafka cluster failed, or the cluster refused the client.
    #[error("cluster `{cluster}`: {message}")]
    Kafka {
        /// Logical cluster id.
        cluster: String,
        /// What failed, in the words of the client that met it (never a secret
        /// value).
        message: String,
        /// What kind of failure it is, the same whichever fetch path met it.
        kind: KafkaErrorKind,
        /// Whether the same request may succeed when tried again (a timeout, a broker
        /// down, a leader moving), as opposed to a refusal that stays (credentials,
        /// authorization, an invalid property).
        retriable: bool,
    },
    /// A mirror does not hold the last record handed out from its source where it
    /// must be (it diverged, or records were deleted): the split ends here.
    #[error("{0}")]
    MirrorDiverged(Box<MirrorDivergence>),
    /// A Kafka cluster failed (a condition the source found, not an error code of
    /// librdkafka: no answer within a timeout, an incomplete answer).
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
        "{split}: position {offset} is outside the log{}; records were deleted or the topic re-created (the builder's on_offset_out_of_range resets such a split to the log's earliest or latest offset)",
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
        "{split}: the topic is gone ({reason}) before the split reached its stop at offset {stop}; the run cannot end as asked (the builder's allow_missing_topics ends such splits with a warning)"
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
        "{split}: the cluster refuses to describe the topic to this client's principal (topic authorization failed) before the split reached its stop at offset {stop}; grant it DESCRIBE and READ on the topic, or end such splits with a warning (the builder's allow_missing_topics)"
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
    /// A sharded source could not have, or lost, its shard's membership: another
    /// instance of the shard runs (or one was killed and the broker has not freed its
    /// membership yet), or the cluster holding it does not answer.
    #[error(
        "shard {shard}: cannot hold group.instance.id `{instance}` on cluster `{cluster}`: {message}"
    )]
    ShardTaken {
        /// The shard, as `I/N`.
        shard: String,
        /// The static `group.instance.id` of the shard.
        instance: String,
        /// The logical cluster holding the membership.
        cluster: String,
        /// Why.
        message: String,
    },
    /// The source was shut down.
    #[error("the source is closed")]
    Closed,
}

impl SourceError {
    /// A failed internal task or thread.
    pub(crate) fn internal(task: &'static str, e: impl std::fmt::Display) -> Self {
        SourceError::Internal {
            task,
            message: e.to_string(),
        }
    }

    /// Whether the operation that failed may succeed when tried again without any
    /// change: a cluster that does not answer, a timeout, a broker or leader moving, a
    /// metadata service that fails for now, a commit that did not reach a coordinator.
    /// Not for invalid settings, refused credentials or authorization, positions
    /// outside the log, records that cannot be deserialized, or a closed source.
    pub fn is_retriable(&self) -> bool {
        match self {
            SourceError::Kafka { retriable, .. } => *retriable,
            SourceError::Cluster { .. } | SourceError::Commit { .. } => true,
            SourceError::Metadata(m) => m.is_retriable(),
            SourceError::Config(_)
            | SourceError::MirrorDiverged(_)
            | SourceError::Internal { .. }
            | SourceError::UnknownStreams(_)
            | SourceError::Offset(_)
            | SourceError::Deserialize(_)
            | SourceError::Checkpoint(_)
            | SourceError::ClusterIdentity { .. }
            | SourceError::OffsetOutOfRange { .. }
            | SourceError::TopicGone { .. }
            | SourceError::TopicNotAuthorized { .. }
            | SourceError::File { .. }
            | SourceError::ShardTaken { .. }
            | SourceError::Closed => false,
        }
    }

    /// Whether the source reads on after handing out this error from its stream, as
    /// a warning rather than an end: it keeps the last good metadata when the
    /// metadata service fails, goes on retrying a cluster that fails or refuses it
    /// (the other clusters read on meanwhile), and hands out the record after one that
    /// could not be deserialized. Every other error ends what it is about (a split, a
    /// bounded run, the source). Independent of [`is_retriable`](Self::is_retriable),
    /// which says whether the same request may succeed if tried again.
    pub fn reads_on(&self) -> bool {
        matches!(
            self,
            SourceError::Metadata(_)
                | SourceError::Cluster { .. }
                | SourceError::Kafka { .. }
                | SourceError::Deserialize(_)
                | SourceError::MirrorDiverged(_)
        )
    }

    /// What kind of failure a cluster's client met, for [`SourceError::Kafka`].
    pub fn kafka_kind(&self) -> Option<KafkaErrorKind> {
        match self {
            SourceError::Kafka { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The logical cluster an error is about, when it is about one.
    pub fn cluster_id(&self) -> Option<&str> {
        match self {
            SourceError::Kafka { cluster, .. }
            | SourceError::Cluster { cluster, .. }
            | SourceError::ClusterIdentity { cluster, .. } => Some(cluster),
            _ => None,
        }
    }
}

/// Where a mirror was searched for the last record handed out from its source, and
/// what was expected (see [`SourceError::MirrorDiverged`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "split `{split}`: the mirror does not hold the last record handed out from `{source_split}` \
     ({expected}) where it must be: looked at {looked_at} record(s) from offset {lower_bound} \
     (lower bound by {found_by}) up to offset {last_offset}; the mirror diverged or records were \
     deleted (mirrorOf.onMismatch: lowerBound continues at the lower bound instead)"
)]
pub struct MirrorDivergence {
    /// The split on the mirror (`cluster/topic/partition`).
    pub split: String,
    /// The split on the source the record was handed out from.
    pub source_split: String,
    /// The record looked for (offset on the source, timestamp, hash).
    pub expected: String,
    /// Where the search started on the mirror.
    pub lower_bound: i64,
    /// How the lower bound was found (`identical`, `sync`, `checkpoint`, `timestamp`).
    pub found_by: String,
    /// Records looked at.
    pub looked_at: u64,
    /// The last offset looked at.
    pub last_offset: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_reads_on_after_a_cluster_or_metadata_failure_and_not_after_an_end() {
        let cluster = SourceError::Cluster {
            cluster: "east".into(),
            message: "no answer".into(),
        };
        assert!(cluster.reads_on());
        let refused = SourceError::Kafka {
            cluster: "east".into(),
            message: "authentication failed".into(),
            kind: KafkaErrorKind::Authentication,
            retriable: false,
        };
        assert!(refused.reads_on() && !refused.is_retriable());
        let gone = SourceError::TopicGone {
            split: "east/t/0".into(),
            stop: 3,
            reason: "deleted".into(),
        };
        assert!(!gone.reads_on());
        assert!(!SourceError::Closed.reads_on());
    }
}
