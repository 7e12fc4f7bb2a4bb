//! Where a split starts and stops, from the spec and what the cluster says of the
//! partition (its earliest, latest and committed offsets, and the offset for a time).

use crate::base::offsets::{
    OffsetError, OffsetReset, PartitionFacts, StartingOffsets, StoppingOffsets,
};

fn reset_to(reset: OffsetReset, facts: &PartitionFacts) -> Option<i64> {
    match reset {
        OffsetReset::Earliest => Some(facts.earliest),
        OffsetReset::Latest => Some(facts.latest),
        OffsetReset::None => None,
    }
}

/// Where a split starts, from the spec and the partition facts. A committed offset
/// outside `[earliest, latest]` is clamped into it only through the explicit reset
/// policy; it is never silently reset.
///
/// ```
/// use multicluster_kafka::offsets::*;
/// use multicluster_kafka::unstable::resolve_start;
/// let facts = PartitionFacts { earliest: 10, latest: 50, committed: None, at_timestamp: Some(30) };
/// assert_eq!(resolve_start(&StartingOffsets::Timestamp(0), "t/0", "east", 0, &facts), Ok(30));
/// let spec = StartingOffsets::Committed { reset: OffsetReset::Latest };
/// assert_eq!(resolve_start(&spec, "t/0", "east", 0, &facts), Ok(50));
/// ```
pub fn resolve_start(
    spec: &StartingOffsets,
    topic: &str,
    cluster: &str,
    partition: i32,
    facts: &PartitionFacts,
) -> Result<i64, OffsetError> {
    let split = || format!("{cluster}/{topic}/{partition}");
    Ok(match spec {
        StartingOffsets::Earliest => facts.earliest,
        StartingOffsets::Latest => facts.latest,
        StartingOffsets::Committed { reset } => match facts.committed {
            Some(c) if c >= facts.earliest && c <= facts.latest => c,
            Some(_) | None => reset_to(*reset, facts)
                .ok_or_else(|| OffsetError::NoCommittedOffset { split: split() })?,
        },
        StartingOffsets::Timestamp(_) => facts.at_timestamp.unwrap_or(facts.latest),
        StartingOffsets::Offset(o) => (*o).clamp(facts.earliest, facts.latest.max(facts.earliest)),
        StartingOffsets::BeforeEnd(n) => facts.latest.saturating_sub(*n).max(facts.earliest),
        StartingOffsets::Specific { offsets, default } => offsets
            .iter()
            .find(|o| o.topic == topic && o.partition == partition)
            .map(|o| o.offset)
            .or_else(|| reset_to(*default, facts))
            .ok_or_else(|| OffsetError::NoCommittedOffset { split: split() })?,
    })
}

/// Where a bounded split stops (exclusive).
pub fn resolve_stop(
    spec: &StoppingOffsets,
    topic: &str,
    cluster: &str,
    partition: i32,
    facts: &PartitionFacts,
) -> Result<i64, OffsetError> {
    Ok(match spec {
        StoppingOffsets::Latest => facts.latest,
        StoppingOffsets::Committed => {
            facts
                .committed
                .ok_or_else(|| OffsetError::NoCommittedStop {
                    split: format!("{cluster}/{topic}/{partition}"),
                })?
        }
        StoppingOffsets::Timestamp(_) => facts.at_timestamp.unwrap_or(facts.latest),
        StoppingOffsets::Specific { offsets } => offsets
            .iter()
            .find(|o| o.topic == topic && o.partition == partition)
            .map(|o| o.offset)
            .unwrap_or(facts.latest),
    })
}
