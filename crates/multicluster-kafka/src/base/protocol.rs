//! What the enumerator and the readers say to each other.

use std::sync::Arc;

use crate::base::properties::ClientProperties;
use crate::base::split::{KafkaSplit, SplitId};

/// What the enumerator tells a reader.
#[derive(Debug)]
pub(crate) enum ReaderEvent {
    /// Facts about a cluster, recorded in this reader's checkpoints.
    ClusterInfo {
        cluster: Arc<str>,
        kafka_cluster_id: Option<String>,
        initial_discovery_done: bool,
    },
    /// New splits to read, with the final consumer properties of their cluster.
    Assign {
        cluster: Arc<str>,
        properties: ClientProperties,
        splits: Vec<KafkaSplit>,
        /// When the enumerator sent them (for the `assign` phase metric).
        sent: std::time::Instant,
    },
    /// No split will ever be assigned again (bounded mode).
    NoMoreSplits,
    /// Stop reading these splits and forget them (their topic or cluster left the
    /// metadata). A cluster left with no split has its consumer closed.
    Remove {
        ids: Vec<SplitId>,
        /// Keep their positions until then (ms since the epoch), if set.
        retain_until_ms: Option<i64>,
        /// Answered, once the positions are retained, with the splits at the
        /// positions handed out.
        confirm: Option<tokio::sync::oneshot::Sender<Vec<KafkaSplit>>>,
    },
    /// The cluster's client properties changed: rebuild its consumer with these and
    /// resume every split at its current position.
    Rebuild {
        cluster: Arc<str>,
        properties: ClientProperties,
    },
    /// The cluster left the metadata: forget its facts.
    ForgetCluster { cluster: Arc<str> },
    /// The metadata service kept failing past the threshold (reading goes on with
    /// the last good metadata).
    MetadataFailed(crate::base::metadata::MetadataError),
    /// A topic is no longer on the cluster, or no longer shown to this principal
    /// (`unauthorized`), in a bounded run: its unfinished splits cannot reach their
    /// stops.
    TopicGone {
        cluster: Arc<str>,
        topic: String,
        unauthorized: bool,
    },
    /// A sharded source lost its shard's membership: reading must stop.
    ShardLost {
        shard: String,
        instance: String,
        cluster: String,
        message: String,
    },
    /// Retained positions of a re-added cluster belong to another physical cluster.
    IdentityMismatch {
        cluster: Arc<str>,
        expected: String,
        actual: String,
    },
}

/// What a reader tells the enumerator.
#[derive(Debug)]
pub(crate) enum ReaderNotice {
    /// The reader is gone; these splits (at the positions handed out) need a new owner.
    Closed {
        reader: usize,
        splits: Vec<KafkaSplit>,
    },
    /// A split reached its stop.
    Finished,
}
