//! How one stream is shared by several processes: shard mode, where every process
//! runs the same deterministic split-to-shard function and reads only its own shard,
//! and group mode, where each cluster's group coordinator divides the partitions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::base::setting::ConfigError;
use crate::base::split::SplitId;

/// How a source shares its stream with other processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScaleOut {
    /// This process reads every split of the stream (the default).
    #[default]
    Whole,
    /// This process reads the splits of one shard; other processes read the others.
    /// Exactly once per shard (each with its own checkpoints); see [`Shard`].
    Shard(Shard),
    /// Every instance joins the source's group on every cluster of the stream, and
    /// each cluster's group coordinator divides that cluster's partitions among the
    /// instances (Kafka's consumer group protocol, KIP-848, or the classic protocol
    /// when a cluster's properties set `group.protocol=classic`). At least once:
    /// partitions start at the group's committed offsets, and a partition taken back
    /// is committed at the position the program acknowledged (its last commit
    /// through the source). Follow mode only.
    KafkaGroup,
}

/// One shard of a stream: `index` of `count` (`I/N`, as in a Kubernetes StatefulSet
/// ordinal and its replica count).
///
/// A split belongs to shard `(crc32(cluster ␀ topic) + partition) mod count`: every
/// process computes the same owner from the split alone, a topic's partitions are
/// spread evenly over the shards, and partitions added later never move the old ones.
///
/// ```
/// use multicluster_kafka::{Shard, split::SplitId};
/// let shard: Shard = "1/3".parse().unwrap();
/// let owners: Vec<u32> = (0..6)
///     .map(|p| Shard::owner_of(&SplitId::new("east", "orders", p), 3))
///     .collect();
/// // Consecutive partitions of a topic go to consecutive shards.
/// assert_eq!(owners.iter().filter(|o| **o == shard.index()).count(), 2);
/// assert!("3/3".parse::<Shard>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Shard `index` of `count` (`index < count`, `count ≥ 1`).
    pub fn new(index: u32, count: u32) -> Result<Shard, ConfigError> {
        if count == 0 {
            return Err(ConfigError::new(
                "scale_out",
                "a stream has at least one shard (count 0 given)",
            ));
        }
        if index >= count {
            return Err(ConfigError::new(
                "scale_out",
                format!(
                    "shard {index} of {count} does not exist: shards count from 0 to {}",
                    count - 1
                ),
            ));
        }
        Ok(Shard { index, count })
    }

    /// This shard's number, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many shards share the stream.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The shard that owns `split` when the stream has `count` shards.
    pub fn owner_of(split: &SplitId, count: u32) -> u32 {
        Self::owner(&split.cluster, &split.topic, split.partition, count)
    }

    /// The shard that owns partition `partition` of `topic` on `cluster`.
    pub(crate) fn owner(cluster: &str, topic: &str, partition: i32, count: u32) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(cluster.as_bytes());
        h.update(&[0]);
        h.update(topic.as_bytes());
        let base = u64::from(h.finalize());
        let p = u64::from(partition.max(0) as u32);
        ((base + p) % u64::from(count.max(1))) as u32
    }

    /// True when this shard reads partition `partition` of `topic` on `cluster`.
    pub(crate) fn owns(&self, cluster: &str, topic: &str, partition: i32) -> bool {
        Self::owner(cluster, topic, partition, self.count) == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ConfigError;

    /// `I/N`: shard `I` (from 0) of `N`.
    fn from_str(s: &str) -> Result<Shard, ConfigError> {
        let bad = || {
            ConfigError::new(
                "scale_out",
                format!("`{s}` is not a shard: expected I/N, e.g. 0/3 (shard 0 of 3)"),
            )
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i: u32 = i.trim().parse().map_err(|_| bad())?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(i, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!("0/1".parse::<Shard>().unwrap(), Shard::new(0, 1).unwrap());
        assert_eq!(" 2 / 5 ".parse::<Shard>().unwrap().to_string(), "2/5");
        for bad in ["", "1", "1/", "/2", "-1/2", "a/b", "2/2", "0/0", "1/2/3"] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(e.starts_with("scale_out: "), "{bad}: {e}");
        }
    }

    #[test]
    fn the_owner_is_fixed_by_the_split_alone() {
        // A change here reshuffles every deployed shard: the function is part of the
        // on-disk contract (checkpoints hold only their shard's splits).
        let owners: Vec<u32> = (0..8)
            .map(|p| Shard::owner("east", "orders", p, 3))
            .collect();
        let first = owners[0];
        let expected: Vec<u32> = (0..8).map(|p| (first + p) % 3).collect();
        assert_eq!(owners, expected);
        assert_eq!(
            Shard::owner("east", "orders", 0, 1_000_000),
            crc32fast::hash(b"east\0orders") % 1_000_000
        );
    }

    proptest! {
        #[test]
        fn every_split_has_exactly_one_owner_and_topics_spread_evenly(
            cluster in "[a-z]{1,8}", topic in "[a-z.]{1,12}", partitions in 1i32..64, count in 1u32..9,
        ) {
            let mut per_shard = vec![0u32; count as usize];
            for p in 0..partitions {
                let shards: Vec<Shard> = (0..count).map(|i| Shard::new(i, count).unwrap()).collect();
                let owning: Vec<&Shard> = shards.iter().filter(|s| s.owns(&cluster, &topic, p)).collect();
                prop_assert_eq!(owning.len(), 1);
                per_shard[owning[0].index() as usize] += 1;
            }
            let (lo, hi) = (per_shard.iter().min().unwrap(), per_shard.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "{:?}", per_shard);
        }
    }
}
