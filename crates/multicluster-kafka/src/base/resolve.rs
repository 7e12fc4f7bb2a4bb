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

/// Where a record at `offset` stands against its split's `stop` (the first offset not
/// read; `None` for an unbounded split): the fetch path and the hand-out both judge
/// records by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AgainstStop {
    /// Before the stop, and not the last record before it.
    Before,
    /// The last record before the stop: the split is finished once it is handed out.
    Last,
    /// At or after the stop: not the split's; the split is finished.
    Beyond,
}

/// Judges a record at `offset` against `stop` (see [`AgainstStop`]).
pub(crate) fn against_stop(offset: i64, stop: Option<i64>) -> AgainstStop {
    match stop {
        Some(stop) if offset >= stop => AgainstStop::Beyond,
        Some(stop) if offset + 1 >= stop => AgainstStop::Last,
        _ => AgainstStop::Before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_before_its_stop_the_last_one_or_beyond() {
        assert_eq!(against_stop(5, None), AgainstStop::Before);
        assert_eq!(against_stop(3, Some(5)), AgainstStop::Before);
        assert_eq!(against_stop(4, Some(5)), AgainstStop::Last);
        assert_eq!(against_stop(5, Some(5)), AgainstStop::Beyond);
        assert_eq!(against_stop(9, Some(5)), AgainstStop::Beyond);
        // An empty range: the first record is already beyond.
        assert_eq!(against_stop(0, Some(0)), AgainstStop::Beyond);
    }
}
