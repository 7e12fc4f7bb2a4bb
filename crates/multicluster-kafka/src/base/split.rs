//! Splits: one partition of one topic on one cluster, with where reading starts and
//! (in bounded mode) stops.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::base::fingerprint::{Fingerprint, LastRecord, Search, Within, record_hash};

/// Identifies a split: `(cluster, topic, partition)`.
///
/// Its text form is `cluster/topic/partition`. Kafka topic names cannot contain `/`
/// and the partition is a number, so the form is parsed from the right and stays
/// unambiguous whatever the logical cluster id contains (`-`, `/`, …).
///
/// ```
/// use multicluster_kafka::split::SplitId;
/// let id = SplitId::new("east-1/a", "orders-v2", 3);
/// assert_eq!(id.to_string(), "east-1/a/orders-v2/3");
/// assert_eq!("east-1/a/orders-v2/3".parse::<SplitId>().unwrap(), id);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SplitId {
    /// Logical cluster id.
    pub cluster: Arc<str>,
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition number.
    pub partition: i32,
}

impl SplitId {
    /// A split id.
    pub fn new(cluster: impl AsRef<str>, topic: impl AsRef<str>, partition: i32) -> Self {
        Self {
            cluster: Arc::from(cluster.as_ref()),
            topic: Arc::from(topic.as_ref()),
            partition,
        }
    }
}

impl fmt::Display for SplitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.cluster, self.topic, self.partition)
    }
}

/// A split id string that does not have the `cluster/topic/partition` form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a split id of the form cluster/topic/partition")]
pub struct BadSplitId(pub String);

impl FromStr for SplitId {
    type Err = BadSplitId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadSplitId(s.to_string());
        let (rest, partition) = s.rsplit_once('/').ok_or_else(bad)?;
        let partition: i32 = partition.parse().map_err(|_| bad())?;
        let (cluster, topic) = rest.rsplit_once('/').ok_or_else(bad)?;
        if cluster.is_empty() || topic.is_empty() || partition < 0 {
            return Err(bad());
        }
        Ok(SplitId::new(cluster, topic, partition))
    }
}

/// A split with concrete offsets: where the next record to hand out is, and where the
/// split ends (exclusive), if it is bounded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaSplit {
    /// Which partition.
    pub id: SplitId,
    /// Offset of the next record to read.
    pub next_offset: i64,
    /// First offset not to read; `None` when unbounded.
    pub stop_offset: Option<i64>,
    /// The last record handed out for this split's place in the stream, when known:
    /// what a mirror continues after (see [`LastRecord`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastRecord>,
}

impl KafkaSplit {
    /// True when there is nothing left to read.
    pub fn is_finished(&self) -> bool {
        matches!(self.stop_offset, Some(stop) if self.next_offset >= stop)
    }

    /// The leader epoch of the record just before the position, when the split
    /// knows it (its last record handed out, on its own cluster): a fetch path checks
    /// the position with it (KIP-320), so a log truncated below it is found.
    pub(crate) fn epoch_before(&self) -> Option<i32> {
        self.last
            .as_ref()
            .filter(|l| l.search.is_none() && l.fingerprint.offset + 1 == self.next_offset)
            .and_then(|l| l.fingerprint.leader_epoch)
            .filter(|e| *e >= 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn split_ids_round_trip_through_text(
            cluster in "[a-z0-9/_.-]{1,12}",
            topic in "[a-zA-Z0-9._-]{1,12}",
            partition in 0i32..10_000,
        ) {
            prop_assume!(!cluster.starts_with('/') || cluster.len() > 1);
            let id = SplitId::new(&cluster, &topic, partition);
            prop_assert_eq!(id.to_string().parse::<SplitId>().unwrap(), id);
        }
    }

    #[test]
    fn malformed_split_ids_are_rejected() {
        for s in ["", "a", "a/b", "a/b/x", "/b/1", "a//1", "a/b/-1"] {
            assert!(s.parse::<SplitId>().is_err(), "{s}");
        }
    }
}
