//! Carrying a split's place in the stream from a cluster to its mirror: the source's
//! position and last record in, a lower bound on the mirror and the search for that
//! record out. Pure: the lookups (a timestamp, MirrorMaker's offset sync) are done by
//! the caller and passed in.

use std::time::Duration;

use crate::base::fingerprint::{Fingerprint, LastRecord, Search, Within};
use crate::base::metadata::{MirrorOf, Translate};

/// How far past the last record's timestamp a search by timestamp reads before it
/// calls the mirror diverged: producers' clocks and batching put records a little out
/// of timestamp order.
pub const TIMESTAMP_SEARCH_WINDOW: Duration = Duration::from_secs(60);

/// Where a split was on the source cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePosition {
    /// The offset after the last record handed out there.
    pub next_offset: i64,
    /// The last record handed out there, when known.
    pub last: Option<Fingerprint>,
}

/// What the mirror's partition looked like, and what the lookups found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorFacts {
    /// The mirror's earliest offset.
    pub earliest: i64,
    /// The mirror's end offset.
    pub latest: i64,
    /// The first offset at or after the last record's timestamp, if any record is
    /// that late.
    pub at_timestamp: Option<i64>,
    /// MirrorMaker's newest offset sync at or below the last record's offset, and
    /// whether it came from a checkpoint rather than an offset sync.
    pub sync: Option<(OffsetSync, bool)>,
}

/// One of MirrorMaker 2's offset syncs: the record at `upstream` on the source is at
/// `downstream` on the mirror.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetSync {
    /// Offset on the source.
    pub upstream: i64,
    /// Offset of the same record on the mirror.
    pub downstream: i64,
}

/// Where the split starts on the mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Carried {
    /// At this offset, after a search for the last record from the source (in
    /// `last`), or exactly (no search) when offsets are identical and nothing was
    /// handed out yet.
    At {
        /// The offset reading starts at.
        next_offset: i64,
        /// The search, if one is needed.
        last: Option<LastRecord>,
    },
    /// At the translated lower bound, unverified: nothing tells which record was
    /// handed out last (records between may be read twice).
    Unverified {
        /// The offset reading starts at.
        next_offset: i64,
        /// Why it is not verified.
        why: &'static str,
    },
    /// Nothing to translate with: the split starts at its configured starting offsets.
    NotFound {
        /// Why.
        why: &'static str,
    },
}

/// Translates a split's position on the source to its mirror (see [`Carried`]).
///
/// ```
/// use multicluster_kafka::metadata::{MirrorOf, Translate};
/// use multicluster_kafka::split::Fingerprint;
/// use multicluster_kafka::unstable::translate::*;
/// let last = Fingerprint { offset: 41, timestamp: Some(5), hash: 7, leader_epoch: None };
/// let from = SourcePosition { next_offset: 42, last: Some(last) };
/// let facts = MirrorFacts { earliest: 0, latest: 100, ..Default::default() };
/// let to = carry(&MirrorOf::new("east", Translate::Identical), "orders", from, &facts);
/// assert!(matches!(to, Carried::At { next_offset: 41, last: Some(_) }));
/// ```
pub fn carry(
    mirror: &MirrorOf,
    source_topic: &str,
    from: SourcePosition,
    facts: &MirrorFacts,
) -> Carried {
    let Some(want) = from.last else {
        return carry_unverified(mirror, from, facts);
    };
    let (lower, within, found_by) = match (mirror.translate, facts.sync) {
        (Translate::Identical, _) => (want.offset, Within::Records(1), "identical"),
        (Translate::Mm2, Some((sync, false))) if sync.upstream <= want.offset => {
            // Each source offset holds at most one record: the one looked for is at
            // most this many records after the synced one.
            let span = (want.offset - sync.upstream + 1) as u64;
            (sync.downstream, Within::Records(span), "sync")
        }
        (Translate::Mm2, Some((checkpoint, true))) if checkpoint.upstream <= want.offset => {
            // A checkpoint's downstream offset is one past an older sync MirrorMaker
            // kept, not the copy of its upstream record: only a lower bound, so the
            // search is bounded by time, not by a count of records.
            let Some(ts) = want.timestamp else {
                return Carried::NotFound {
                    why: "the last record has no timestamp to bound a search from a checkpoint",
                };
            };
            let until = ts.saturating_add(TIMESTAMP_SEARCH_WINDOW.as_millis() as i64);
            (
                checkpoint.downstream,
                Within::UntilTimestamp(until),
                "checkpoint",
            )
        }
        _ => {
            let Some(ts) = want.timestamp else {
                return Carried::NotFound {
                    why: "the last record has no timestamp to look up",
                };
            };
            let until = ts.saturating_add(TIMESTAMP_SEARCH_WINDOW.as_millis() as i64);
            // No record that late yet: the mirror lags; read from its end and wait.
            let lower = facts.at_timestamp.unwrap_or(facts.latest);
            (lower, Within::UntilTimestamp(until), "timestamp")
        }
    };
    // Records deleted from the mirror: the search starts at what is there (and finds
    // the record missing). A mirror that lags: reading starts at its newest record
    // (which tells how far behind it is) and waits.
    let lower = lower.max(facts.earliest);
    Carried::At {
        next_offset: lower.min((facts.latest - 1).max(facts.earliest)),
        last: Some(LastRecord {
            fingerprint: want,
            search: Some(Search {
                cluster: mirror.cluster.clone(),
                topic: source_topic.to_string(),
                lower_bound: lower,
                found_by: found_by.to_string(),
                within,
                on_mismatch: mirror.on_mismatch,
                looked_at: 0,
            }),
        }),
    }
}

fn carry_unverified(mirror: &MirrorOf, from: SourcePosition, facts: &MirrorFacts) -> Carried {
    match (mirror.translate, facts.sync) {
        (Translate::Identical, _) => Carried::At {
            next_offset: from.next_offset.max(facts.earliest),
            last: None,
        },
        (Translate::Mm2, Some((sync, checkpoint))) if sync.upstream <= from.next_offset => {
            // MirrorMaker's own rule for a sync: exact at a synced offset, else one past
            // it; a checkpoint has applied it already.
            let next_offset = if checkpoint || sync.upstream == from.next_offset {
                sync.downstream
            } else {
                sync.downstream + 1
            };
            Carried::Unverified {
                next_offset: next_offset.max(facts.earliest),
                why: "no record was handed out from the source to verify against",
            }
        }
        _ => Carried::NotFound {
            why: "no record was handed out from the source, and the mirror keeps no offsets to translate with",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::metadata::OnMismatch;

    fn fp(offset: i64, ts: i64) -> Fingerprint {
        Fingerprint {
            offset,
            timestamp: Some(ts),
            hash: 9,
            leader_epoch: None,
        }
    }

    fn search(c: Carried) -> (i64, Search) {
        match c {
            Carried::At {
                next_offset,
                last: Some(LastRecord {
                    search: Some(s), ..
                }),
            } => (next_offset, s),
            other => panic!("expected a search, got {other:?}"),
        }
    }

    fn facts(earliest: i64, latest: i64) -> MirrorFacts {
        MirrorFacts {
            earliest,
            latest,
            ..Default::default()
        }
    }

    #[test]
    fn identical_offsets_look_at_exactly_one_record() {
        let m = MirrorOf::new("east", Translate::Identical);
        let from = SourcePosition {
            next_offset: 42,
            last: Some(fp(41, 5)),
        };
        let c = carry(&m, "orders", from, &facts(0, 100));
        let (at, s) = search(c);
        assert_eq!((at, s.lower_bound, s.within), (41, 41, Within::Records(1)));
        assert_eq!(s.found_by, "identical");
        // A mirror that lags starts at its end and waits for the record.
        let (at, s) = search(carry(&m, "orders", from, &facts(0, 30)));
        assert_eq!((at, s.lower_bound), (29, 41));
        // Nothing handed out yet: the same offset, nothing to look for.
        let none = SourcePosition {
            next_offset: 7,
            last: None,
        };
        assert_eq!(
            carry(&m, "orders", none, &facts(0, 30)),
            Carried::At {
                next_offset: 7,
                last: None
            }
        );
    }

    #[test]
    fn an_offset_sync_bounds_the_search_by_the_records_between() {
        let mut m = MirrorOf::new("east", Translate::Mm2);
        m.on_mismatch = OnMismatch::LowerBound;
        let sync = OffsetSync {
            upstream: 30,
            downstream: 12,
        };
        let f = MirrorFacts {
            sync: Some((sync, false)),
            ..facts(0, 100)
        };
        let from = SourcePosition {
            next_offset: 41,
            last: Some(fp(40, 5)),
        };
        let c = carry(&m, "orders", from, &f);
        let (at, s) = search(c);
        assert_eq!(
            (at, s.within, s.on_mismatch),
            (12, Within::Records(11), OnMismatch::LowerBound)
        );
        assert_eq!(
            (s.cluster.as_str(), s.topic.as_str(), s.found_by.as_str()),
            ("east", "orders", "sync")
        );
        // A sync past the record is no use: timestamps then.
        let late = MirrorFacts {
            sync: Some((
                OffsetSync {
                    upstream: 50,
                    downstream: 20,
                },
                true,
            )),
            at_timestamp: Some(9),
            ..facts(0, 100)
        };
        let (at, s) = search(carry(&m, "orders", from, &late));
        assert_eq!((at, s.found_by.as_str()), (9, "timestamp"));
        // A checkpoint: a lower bound only, searched by time.
        let by_checkpoint = MirrorFacts {
            sync: Some((sync, true)),
            ..facts(0, 100)
        };
        let (at, s) = search(carry(&m, "orders", from, &by_checkpoint));
        assert_eq!((at, s.found_by.as_str()), (12, "checkpoint"));
        assert!(matches!(s.within, Within::UntilTimestamp(_)));
        // Without a record handed out: MirrorMaker's own rule, unverified.
        let none = SourcePosition {
            next_offset: 35,
            last: None,
        };
        assert!(matches!(
            carry(&m, "orders", none, &f),
            Carried::Unverified {
                next_offset: 13,
                ..
            }
        ));
    }

    #[test]
    fn timestamps_search_up_to_the_window_past_the_record() {
        let m = MirrorOf::new("east", Translate::Timestamp);
        let from = SourcePosition {
            next_offset: 41,
            last: Some(fp(40, 1_000)),
        };
        let f = MirrorFacts {
            at_timestamp: Some(17),
            ..facts(5, 100)
        };
        let (at, s) = search(carry(&m, "orders", from, &f));
        assert_eq!(at, 17);
        assert_eq!(
            s.within,
            Within::UntilTimestamp(1_000 + TIMESTAMP_SEARCH_WINDOW.as_millis() as i64)
        );
        // No record that late on the mirror yet: wait at its end (from its newest
        // record, which says how far behind it is).
        let (at, s) = search(carry(&m, "orders", from, &facts(5, 100)));
        assert_eq!((at, s.lower_bound), (99, 100));
        // Records deleted from the mirror: the search starts at what is there.
        let f = MirrorFacts {
            at_timestamp: Some(2),
            ..facts(5, 100)
        };
        assert_eq!(search(carry(&m, "orders", from, &f)).0, 5);
        let none = SourcePosition {
            next_offset: 41,
            last: None,
        };
        assert!(matches!(
            carry(&m, "orders", none, &f),
            Carried::NotFound { .. }
        ));
    }
}
