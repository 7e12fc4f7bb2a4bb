//! Where reading starts and, in bounded mode, where it stops.
//!
//! In metadata files these are written as a plain word (`earliest`, `latest`,
//! `committed`) or a one-key map (`{timestamp: 1700000000000}`,
//! `{committed: {reset: earliest}}`, `{specific: [{topic: orders, partition: 0, offset: 42}]}`).

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
#[serde(rename_all = "lowercase")]
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
#[serde(rename_all = "lowercase")]
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
