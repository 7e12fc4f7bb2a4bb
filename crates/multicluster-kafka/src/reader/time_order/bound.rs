//! The merge's bound: up to which event time held records may go out, from what
//! each split has fetched.

use std::time::Instant;

/// Up to which event time held records may go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// None: a split that holds the merge back has fetched nothing yet.
    Hold,
    /// Records at or before this time.
    Upto(i64),
    /// Every record: no split holds the merge back.
    All,
}

impl Bound {
    pub(super) fn allows(self, ts: i64) -> bool {
        match self {
            Bound::Hold => false,
            Bound::Upto(b) => ts <= b,
            Bound::All => true,
        }
    }
}

/// A split's part in the bound, as the reader sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitFacts {
    /// Its newest event time fetched.
    pub newest: Option<i64>,
    /// When it last fetched a record (or came to the reader).
    pub fetched_at: Instant,
    /// Finished, or every record of it up to its stop is held here.
    pub done: bool,
}

/// The bound over all splits' facts: the lowest newest timestamp (less the
/// out-of-orderness, in ms) of the splits that are neither done nor idle.
pub(crate) fn bound(
    splits: impl IntoIterator<Item = SplitFacts>,
    out_of_orderness: i64,
    idle_timeout: Option<std::time::Duration>,
    now: Instant,
) -> Bound {
    let mut lowest: Option<i64> = None;
    for s in splits {
        if s.done || idle_timeout.is_some_and(|t| now.saturating_duration_since(s.fetched_at) >= t)
        {
            continue;
        }
        let Some(newest) = s.newest else {
            return Bound::Hold;
        };
        let b = newest.saturating_sub(out_of_orderness);
        lowest = Some(lowest.map_or(b, |l| l.min(b)));
    }
    lowest.map_or(Bound::All, Bound::Upto)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_bound_is_the_lowest_newest_of_splits_neither_done_nor_idle() {
        let now = Instant::now();
        let at = |newest, ago: u64, done| SplitFacts {
            newest,
            fetched_at: now - Duration::from_secs(ago),
            done,
        };
        let idle = Some(Duration::from_secs(5));
        assert_eq!(
            bound(
                [at(Some(10), 0, false), at(Some(7), 1, false)],
                2,
                idle,
                now
            ),
            Bound::Upto(5)
        );
        assert_eq!(
            bound([at(Some(10), 0, false), at(None, 1, false)], 0, idle, now),
            Bound::Hold,
            "a split with nothing fetched yet holds everything"
        );
        assert_eq!(
            bound([at(Some(10), 0, false), at(None, 6, false)], 0, idle, now),
            Bound::Upto(10),
            "unless it is idle"
        );
        assert_eq!(
            bound([at(Some(3), 9, false), at(Some(1), 0, true)], 0, idle, now),
            Bound::All,
            "idle and done splits hold nothing back"
        );
        assert_eq!(
            bound([at(Some(3), 9, false)], 0, None, now),
            Bound::Upto(3),
            "without idleness a quiet split holds the merge"
        );
    }
}
