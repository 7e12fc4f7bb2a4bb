//! Looking at clusters from outside a source: which topics and partitions a cluster
//! has, their earliest and latest offsets, and a consumer group's committed offsets
//! and lag. This is what `mck describe` and `mck plan` show.
//!
//! Every function here **blocks** on network calls bounded by
//! [`InspectOptions::timeout`]; call them from a plain thread or `spawn_blocking`,
//! never from an async worker thread. [`inspect_clusters`] asks several clusters at
//! once, one thread each, so a slow or unreachable cluster costs its own timeout and
//! does not delay the others.
//!
//! Errors are [`SourceError::Cluster`](crate::error::SourceError::Cluster): one line,
//! naming the logical cluster id, and never containing a secret property value.
//!
//! ```no_run
//! use std::collections::BTreeSet;
//! use std::time::Duration;
//! use multicluster_kafka::inspect::{InspectOptions, inspect_cluster};
//! use multicluster_kafka::properties::ClientProperties;
//!
//! let props: ClientProperties = [("bootstrap.servers", "127.0.0.1:9092")].into_iter().collect();
//! let topics = BTreeSet::from(["orders".to_string()]);
//! let options = InspectOptions::new(Duration::from_secs(10)).group("orders-reader");
//! let report = inspect_cluster("east", &props, &topics, &options)?;
//! for (topic, partitions) in &report.topics {
//!     for p in partitions {
//!         println!("{topic}/{}: {}..{} lag {:?}", p.partition, p.earliest, p.latest, p.lag());
//!     }
//! }
//! # Ok::<(), multicluster_kafka::error::SourceError>(())
//! ```

mod client;
mod cluster;
mod clusters;
mod mirror;
mod report;

use std::time::Duration;

pub use self::cluster::{inspect_at_times, inspect_cluster, inspect_cluster_state};
pub use self::clusters::{ClusterQuery, inspect_cluster_states, inspect_clusters};
pub use self::mirror::{MirrorMakerSyncs, SyncWanted, mirror_maker_syncs, newest_timestamps};
pub use self::report::{ClusterReport, ClusterState, Inspection, PartitionReport};
pub use crate::kafka::group_describe::{GroupProtocol, GroupReport};

/// What to look up, and how long each cluster call may take.
///
/// ```
/// use std::time::Duration;
/// use multicluster_kafka::inspect::InspectOptions;
/// let o = InspectOptions::new(Duration::from_secs(5)).group("g").timestamp(1_700_000_000_000);
/// assert_eq!(o.group.as_deref(), Some("g"));
/// assert_eq!(o.timeout, Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectOptions {
    /// Timeout of each call to a cluster (metadata, watermarks, committed offsets).
    pub timeout: Duration,
    /// Consumer group whose committed offsets to look up; none when `None`.
    pub group: Option<String>,
    /// Look up, for each partition, the first offset at or after this timestamp (ms
    /// since the Unix epoch); none when `None`.
    pub timestamp: Option<i64>,
}

impl InspectOptions {
    /// Options with this timeout, no group and no timestamp.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            group: None,
            timestamp: None,
        }
    }

    /// Also looks up this group's committed offsets.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Also looks up the offset of each partition at this timestamp (ms).
    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

impl Default for InspectOptions {
    /// A 10 s timeout, no group, no timestamp.
    fn default() -> Self {
        Self::new(Duration::from_secs(10))
    }
}
