//! What asking a cluster gives: each partition's offsets, one cluster's report, and
//! where the cluster stands.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::offsets::PartitionFacts;
use crate::base::properties::RefusedProperty;
use crate::error::SourceError;
use crate::kafka::group_describe::GroupReport;

/// One partition as the cluster reported it.
///
/// ```
/// use multicluster_kafka::inspect::PartitionReport;
/// let p = PartitionReport { partition: 0, earliest: 10, latest: 50, committed: Some(40), at_timestamp: None };
/// assert_eq!(p.lag(), Some(10));
/// assert_eq!(p.records(), 40);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReport {
    /// Partition number.
    pub partition: i32,
    /// Earliest offset still in the log.
    pub earliest: i64,
    /// End of the log (high watermark: the offset the next record will get).
    pub latest: i64,
    /// The group's committed offset (the next record it would read), when a group was
    /// asked and it has one.
    pub committed: Option<i64>,
    /// The first offset at or after the asked timestamp, when one was asked and such a
    /// record exists.
    pub at_timestamp: Option<i64>,
}

impl PartitionReport {
    /// Records the group has still to read (`latest − committed`, never negative), or
    /// `None` when it has no committed offset here.
    pub fn lag(&self) -> Option<i64> {
        self.committed.map(|c| (self.latest - c).max(0))
    }

    /// Records in the log now (`latest − earliest`).
    pub fn records(&self) -> i64 {
        (self.latest - self.earliest).max(0)
    }

    /// The facts [`crate::unstable::resolve_start`] needs to decide where a split of
    /// this partition would start.
    pub fn facts(&self) -> PartitionFacts {
        PartitionFacts {
            earliest: self.earliest,
            latest: self.latest,
            committed: self.committed,
            at_timestamp: self.at_timestamp,
        }
    }
}

/// What one cluster reported for the asked topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterReport {
    /// The logical cluster id (the name the metadata uses).
    pub cluster: String,
    /// The Kafka `cluster.id`: the physical identity of the cluster.
    pub kafka_cluster_id: String,
    /// Topic → its partitions in partition order, for asked topics that exist.
    pub topics: BTreeMap<String, Vec<PartitionReport>>,
    /// Asked topics the cluster does not have.
    pub missing_topics: BTreeSet<String>,
    /// When a group was asked: what its coordinator says of it (the protocol its
    /// members use, its state, its members), or why it could not say.
    pub group: Option<Result<GroupReport, String>>,
}

impl ClusterReport {
    /// The group's total lag on `topic`, or `None` when no partition has a committed
    /// offset (or the topic is missing).
    pub fn topic_lag(&self, topic: &str) -> Option<i64> {
        self.topics
            .get(topic)?
            .iter()
            .filter_map(PartitionReport::lag)
            .reduce(|a, b| a + b)
    }
}

/// Where a cluster stands, in the words of the source's per-cluster state machine
/// (`docs/design.md`, "A cluster, in the enumerator") and of `mck consume`.
///
/// ```
/// use multicluster_kafka::inspect::ClusterState;
/// assert_eq!(ClusterState::Unreachable.name(), "unreachable");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterState {
    /// The cluster answered with its Kafka `cluster.id`.
    Connected,
    /// No broker of the bootstrap list answered within the timeout.
    Unreachable,
    /// The cluster answered and refused the client: authentication or TLS failed.
    Rejected,
    /// librdkafka refused the client's properties; the cluster was not tried.
    Refused(RefusedProperty),
}

impl ClusterState {
    /// `connected`, `unreachable`, `rejected` or `refused`.
    pub fn name(&self) -> &'static str {
        match self {
            ClusterState::Connected => "connected",
            ClusterState::Unreachable => "unreachable",
            ClusterState::Rejected => "rejected",
            ClusterState::Refused(_) => "refused",
        }
    }
}

/// What asking one cluster gave: its state, and its report or why there is none (a
/// connected cluster may still fail a later request).
#[derive(Debug)]
pub struct Inspection {
    /// Where the cluster stands.
    pub state: ClusterState,
    /// The report, or the error: one line naming the cluster, never a secret.
    pub result: Result<ClusterReport, SourceError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(committed: Option<i64>) -> PartitionReport {
        PartitionReport {
            partition: 0,
            earliest: 5,
            latest: 20,
            committed,
            at_timestamp: None,
        }
    }

    #[test]
    fn lag_is_what_the_group_has_left_and_never_negative() {
        assert_eq!(partition(Some(12)).lag(), Some(8));
        assert_eq!(partition(None).lag(), None);
        assert_eq!(partition(Some(25)).lag(), Some(0));
        assert_eq!(partition(None).records(), 15);
    }

    #[test]
    fn a_topic_lag_sums_partitions_with_a_committed_offset() {
        let mut second = partition(None);
        second.partition = 1;
        let report = ClusterReport {
            cluster: "east".into(),
            kafka_cluster_id: "k".into(),
            topics: BTreeMap::from([("t".to_string(), vec![partition(Some(10)), second])]),
            missing_topics: BTreeSet::new(),
            group: None,
        };
        assert_eq!(report.topic_lag("t"), Some(10));
        assert_eq!(report.topic_lag("absent"), None);
    }
}
