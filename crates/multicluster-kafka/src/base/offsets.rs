//! Where reading starts and, in bounded mode, where it stops.
//!
//! In metadata files these are written as a plain word (`earliest`, `latest`,
//! `committed`) or a one-key map (`{timestamp: 1700000000000}`,
//! `{committed: {reset: earliest}}`,
//! `{specific: {offsets: [{topic: orders, partition: 0, offset: 42}], default: earliest}}`).

use serde::{Deserialize, Serialize};

/// What to do when a committed offset is missing, or an offset is out of range.
///
/// There is deliberately no silent default: the policy is always explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OffsetReset {
    /// Start from the earliest offset still in the log.
    Earliest,
    /// Start from the end of the log.
    Latest,
    /// Fail with an error naming the split.
    None,
}

/// One partition's explicit offset.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionOffset {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// The offset (the next record to read when starting, the first record not to read
    /// when stopping).
    pub offset: i64,
}

/// Where a split starts when no checkpoint says otherwise.
///
/// ```
/// use multicluster_kafka::offsets::{OffsetReset, StartingOffsets};
/// let parsed: StartingOffsets = serde_json::from_str(r#"{"committed":{"reset":"earliest"}}"#).unwrap();
/// assert_eq!(parsed, StartingOffsets::Committed { reset: OffsetReset::Earliest });
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum StartingOffsets {
    /// The earliest offset in the log.
    Earliest,
    /// The end of the log: only records produced after the split starts.
    Latest,
    /// The offset committed under the group id, or `reset` where there is none.
    Committed {
        /// Fallback when the group has no committed offset for the partition.
        reset: OffsetReset,
    },
    /// The first record whose timestamp is at or after this many milliseconds since the
    /// Unix epoch (end of log if there is none).
    Timestamp(i64),
    /// The same offset in every partition, moved into the log's range (earliest when the
    /// log starts after it, the end of the log when it has not reached it).
    Offset(i64),
    /// This many records before the end of each partition's log (from earliest when the
    /// log holds fewer): `kcat -o -N`.
    #[serde(rename = "beforeEnd")]
    BeforeEnd(i64),
    /// Explicit offsets; partitions not listed start at `default`.
    Specific {
        /// Explicit per-partition offsets.
        offsets: Vec<PartitionOffset>,
        /// Where unlisted partitions start.
        #[serde(default = "default_reset")]
        default: OffsetReset,
    },
}

fn default_reset() -> OffsetReset {
    OffsetReset::Earliest
}

/// Where a split stops in bounded mode.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum StoppingOffsets {
    /// The end of the log when the split is discovered.
    Latest,
    /// The offset committed under the group id.
    Committed,
    /// The first record whose timestamp is at or after this many milliseconds.
    Timestamp(i64),
    /// Explicit offsets (exclusive); partitions not listed stop at `latest`.
    Specific {
        /// Explicit per-partition stop offsets.
        offsets: Vec<PartitionOffset>,
    },
}

/// What the cluster said about one partition, as needed to resolve offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionFacts {
    /// Earliest offset still in the log.
    pub earliest: i64,
    /// End of the log (high watermark).
    pub latest: i64,
    /// Offset committed under the group id, if any.
    pub committed: Option<i64>,
    /// First offset at or after the requested timestamp, if any (`None`: no such
    /// record, or no timestamp was asked).
    pub at_timestamp: Option<i64>,
}

/// Why an offset could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OffsetError {
    /// No committed offset and the reset policy is `none`.
    #[error("{split}: no committed offset and the reset policy is `none`")]
    NoCommittedOffset {
        /// The split, as `cluster/topic/partition`.
        split: String,
    },
    /// Bounded by committed offsets, but there is none.
    #[error("{split}: stopping at the committed offset, but the group has none")]
    NoCommittedStop {
        /// The split.
        split: String,
    },
}

impl StartingOffsets {
    /// The timestamp to look up, if this spec needs one.
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            StartingOffsets::Timestamp(t) => Some(*t),
            _ => None,
        }
    }

    /// True when resolving needs the group's committed offsets.
    pub fn needs_committed(&self) -> bool {
        matches!(self, StartingOffsets::Committed { .. })
    }
}

impl StoppingOffsets {
    /// The timestamp to look up, if this spec needs one.
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            StoppingOffsets::Timestamp(t) => Some(*t),
            _ => None,
        }
    }

    /// True when resolving needs the group's committed offsets.
    pub fn needs_committed(&self) -> bool {
        matches!(self, StoppingOffsets::Committed)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_offset_or_a_count_before_the_end_stays_inside_the_log() {
        let facts = PartitionFacts {
            earliest: 10,
            latest: 50,
            ..PartitionFacts::default()
        };
        let start = |spec| resolve_start(&spec, "t", "c", 0, &facts).unwrap();
        assert_eq!(start(StartingOffsets::Offset(20)), 20);
        assert_eq!(start(StartingOffsets::Offset(3)), 10);
        assert_eq!(start(StartingOffsets::Offset(99)), 50);
        assert_eq!(start(StartingOffsets::BeforeEnd(5)), 45);
        assert_eq!(start(StartingOffsets::BeforeEnd(500)), 10);
        let parsed: StartingOffsets = serde_json::from_str(r#"{"beforeEnd":5}"#).unwrap();
        assert_eq!(parsed, StartingOffsets::BeforeEnd(5));
    }

    use super::*;
    use crate::base::resolve::{resolve_start, resolve_stop};

    fn facts(committed: Option<i64>) -> PartitionFacts {
        PartitionFacts {
            earliest: 10,
            latest: 100,
            committed,
            at_timestamp: None,
        }
    }

    #[test]
    fn committed_offsets_use_the_fallback_only_when_missing_or_out_of_range() {
        let spec = StartingOffsets::Committed {
            reset: OffsetReset::Earliest,
        };
        assert_eq!(resolve_start(&spec, "t", "c", 0, &facts(Some(42))), Ok(42));
        assert_eq!(resolve_start(&spec, "t", "c", 0, &facts(None)), Ok(10));
        assert_eq!(resolve_start(&spec, "t", "c", 0, &facts(Some(5))), Ok(10));
        let strict = StartingOffsets::Committed {
            reset: OffsetReset::None,
        };
        let e = resolve_start(&strict, "t", "c", 3, &facts(None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "c/t/3: no committed offset and the reset policy is `none`"
        );
    }

    #[test]
    fn a_timestamp_after_every_record_starts_at_the_end() {
        assert_eq!(
            resolve_start(&StartingOffsets::Timestamp(9), "t", "c", 0, &facts(None)),
            Ok(100)
        );
    }

    #[test]
    fn specific_offsets_fall_back_to_their_default() {
        let spec = StartingOffsets::Specific {
            offsets: vec![PartitionOffset {
                topic: "t".into(),
                partition: 1,
                offset: 77,
            }],
            default: OffsetReset::Latest,
        };
        assert_eq!(resolve_start(&spec, "t", "c", 1, &facts(None)), Ok(77));
        assert_eq!(resolve_start(&spec, "t", "c", 0, &facts(None)), Ok(100));
    }

    #[test]
    fn stopping_at_committed_without_a_commit_is_an_error() {
        assert!(resolve_stop(&StoppingOffsets::Committed, "t", "c", 0, &facts(None)).is_err());
        assert_eq!(
            resolve_stop(&StoppingOffsets::Latest, "t", "c", 0, &facts(None)),
            Ok(100)
        );
    }
}
