//! Records in time order ([`ReadOrder::Time`](crate::ReadOrder::Time)): what the
//! fetchers bring is held per split, and handed out by a merge of the splits' queues
//! on event time, held back by the watermark of what was *fetched*.
//!
//! A record may go out once no split that holds the merge back can still bring an
//! earlier one: each such split's next records are no older than its newest
//! timestamp fetched less the allowed out-of-orderness, so the merge releases records
//! up to the lowest of those. Splits that hold nothing back: finished ones (all
//! their records are here), idle ones (nothing fetched for the idle timeout), and,
//! with none left, everything held goes out. A split that has fetched nothing yet,
//! and is not idle, holds the merge entirely (its first record may be the oldest).
//!
//! Records leave their queues in offset order per split, so positions, checkpoints
//! and stops work as in fetch order: a checkpoint counts exactly the records handed
//! out; the held ones are fetched again after a restart. A late record (older than
//! what already went out) goes out at once, as soon as it is first in its queue.

mod bound;
mod queues;
mod release;
pub(super) mod shape;

pub(super) use queues::TimeOrder;

use std::sync::Arc;
use std::time::Instant;

use super::SourceReader;
use crate::base::split::SplitId;
use crate::deserializer::Deserializer;
use crate::record::RecordBatch;
use bound::{Bound, SplitFacts, bound};
use queues::FULL_BYTES;

impl<D: Deserializer> SourceReader<D> {
    /// Holds what a fetcher answered, for the merge. Returns whether a split it
    /// added to now holds more than a split may while it waits for the others: the
    /// merge should then decide its pause before more answers are held (else a
    /// fetcher that keeps answering fills the queues without end).
    pub(super) fn hold(
        &mut self,
        cluster: Arc<str>,
        batch: RecordBatch<D::Value>,
        polled: super::fetch_path::Polled,
    ) -> bool {
        self.note_high_watermarks(&cluster, polled.high_watermarks);
        self.note_truncated(polled.truncated);
        let Some(mut order) = self.time_order.take() else {
            return false;
        };
        let mut over = false;
        if polled.records > 0 || polled.failed.is_some() {
            // Noted by the fetch thread when event time is the Kafka timestamp
            // (`FetcherSettings::shape`); else each record's is read here.
            let shape = polled.shape.map(|s| *s);
            let event = |v: Option<&D::Value>, ts: Option<i64>| self.event_time(v, ts);
            let (records, bytes) = order.take(
                batch,
                polled.failed.map(|f| *f),
                (event, shape),
                Instant::now(),
            );
            over = over_share((records, bytes), self.held_unit(), 1);
        }
        let finished: Vec<SplitId> = polled
            .finished
            .into_iter()
            .filter(|id| order.finish(id))
            .collect();
        self.time_order = Some(order);
        for id in &finished {
            self.mark_finished(id);
        }
        self.report_lag();
        over
    }

    /// The batch a split's share is counted in (see [`over_share`]).
    fn held_unit(&self) -> usize {
        self.settings.max_batch.min(1024)
    }

    /// Makes what the merge lets out the buffer to hand out; returns how many
    /// records it holds (a failed one counts). Splits holding more than they may
    /// while they wait for the others are paused, and resumed once drained.
    pub(super) fn release_held(&mut self) -> usize {
        // The strategy first: taking the queues and then returning would drop them.
        let Some(strategy) = self.strategy() else {
            return 0;
        };
        let Some(mut order) = self.time_order.take() else {
            return 0;
        };
        let ooo = i64::try_from(strategy.out_of_orderness().as_millis()).unwrap_or(i64::MAX);
        let now = Instant::now();
        // Each split's queue, looked up once (the queues stay put until a split is
        // removed, which this does not do).
        let queues: Vec<Option<usize>> =
            self.splits.iter().map(|s| order.queue_of(&s.id)).collect();
        let facts = self
            .splits
            .iter()
            .zip(&queues)
            .filter(|(s, _)| !s.finished)
            .map(|(s, q)| {
                let mut f = q.map_or(
                    SplitFacts {
                        newest: None,
                        fetched_at: s.pace.active_at(),
                        done: false,
                    },
                    |q| order.facts_at(q),
                );
                if s.pace.is_paused() {
                    // Not fetched because of us: not idle.
                    f.fetched_at = now;
                }
                f
            });
        let bound = bound(facts, ooo, strategy.idle_timeout(), now);
        let released = order.release(bound, self.settings.max_batch);
        // Back-pressure: a split holding much while it waits for the others is
        // paused, unless it is the one the others wait for. Enough is held of each
        // to keep its fetches going (an answer brings up to
        // `max.partition.fetch.bytes`, 1 MiB unless set) while the merge drains it;
        // many small records count by number too.
        let unit = self.held_unit();
        for (s, q) in self.splits.iter_mut().zip(&queues) {
            let (records, bytes) = q.map_or((0, 0), |q| order.held_at(q));
            let newest = q.and_then(|q| order.facts_at(q).newest);
            let waited_for = match bound {
                Bound::Hold => false,
                Bound::Upto(b) => newest.is_none_or(|n| n.saturating_sub(ooo) <= b),
                Bound::All => true,
            };
            let ready = q
                .and_then(|q| order.front_at(q))
                .is_some_and(|t| bound.allows(t));
            let full = is_full(
                (records, bytes),
                unit,
                s.pace.is_full(),
                (waited_for, ready),
            );
            s.pace.set_full(full);
        }
        order.held_gauge.set(order.held as f64);
        self.time_order = Some(order);
        self.sync_pauses();
        let mut found = usize::from(released.failed.is_some());
        self.handout.failed = released.failed;
        if let Some(mut batch) = released.batch {
            found += batch.len();
            batch.set_streams(self.links.stream_index());
            self.handout.cluster = Some(batch.cluster.clone());
            self.handout.records = Some(batch.into_iter());
        } else if let Some((cluster, _)) = &self.handout.failed {
            self.handout.cluster = Some(cluster.clone());
        }
        self.splits.forget_last();
        if found == 0 {
            for id in &released.finished {
                self.mark_finished(id);
            }
        } else {
            self.handout.finish_after.extend(released.finished);
        }
        found
    }
}

/// Whether a split holding `held` (records, [`weight`](shape::weight)) is to be
/// paused as full (`was_full`: it was): while it holds more than its share (half of
/// it once paused) and the merge waits for others; or, when the merge waits for it
/// (`waited_for`), only while its next record can go out now (`ready`): it then
/// holds plenty to hand out, and is fetched again once that has gone out (else a
/// reader slower than the fetches held all of it), while pausing it with nothing
/// to hand out would stop the merge. A split of which nothing may go out yet, and
/// that the merge does not wait for, is ahead of it: its share is a part as large
/// ([`AHEAD_SHARE`]), so that splits far ahead in time (a cluster whose records are
/// all newer than the others') hold little while they wait.
fn is_full(
    held: (usize, usize),
    unit: usize,
    was_full: bool,
    (waited_for, ready): (bool, bool),
) -> bool {
    let share = match (waited_for, ready) {
        (_, true) => 1,
        (true, false) => return false,
        (false, false) => AHEAD_SHARE,
    };
    over_share(held, unit, share) || (was_full && over_share(held, unit, 2 * share))
}

/// A split none of whose held records may go out yet (all are newer than the
/// bound, and it does not hold the bound back) holds this part of its share: it
/// shows how far it is, and what more it would fetch would only wait.
const AHEAD_SHARE: usize = 16;

/// Whether a split holding `records` of this [`weight`](shape::weight) holds more
/// than its `share`-th part of what it may hold while it waits for the others:
/// [`FULL_BYTES`], or (many small records count by number too) 64 batches of `unit`
/// records.
fn over_share((records, bytes): (usize, usize), unit: usize, share: usize) -> bool {
    bytes > FULL_BYTES / share || records > 64 * unit / share
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_is_full_over_its_share_unless_the_merge_waits_for_it_with_nothing_to_hand_out() {
        let unit = 1024;
        let (under, over, half) = (
            (10, 1 << 20),
            (10, FULL_BYTES + 1),
            (10, FULL_BYTES / 2 + 1),
        );
        let many = (64 * unit + 1, 1 << 20);
        // The merge waits for others; this split has records that may go out now.
        let waits_for_others = (false, true);
        for held in [over, many] {
            assert!(is_full(held, unit, false, waits_for_others));
            assert!(
                is_full(held, unit, false, (true, true)),
                "waited for, ready"
            );
            assert!(
                !is_full(held, unit, true, (true, false)),
                "waited for with nothing to hand out: paused, the merge would stop"
            );
        }
        assert!(!is_full(under, unit, false, waits_for_others));
        assert!(!is_full(under, unit, false, (true, true)));
        assert!(!is_full(half, unit, false, waits_for_others), "not yet");
        assert!(
            is_full(half, unit, true, waits_for_others),
            "paused until half"
        );
        assert!(is_full(half, unit, true, (true, true)));
    }

    #[test]
    fn a_split_whose_records_all_wait_holds_a_small_part_of_its_share() {
        let unit = 1024;
        let ahead = (false, false);
        let part = FULL_BYTES / AHEAD_SHARE;
        assert!(!is_full((10, part), unit, false, ahead));
        assert!(is_full((10, part + 1), unit, false, ahead));
        assert!(is_full(
            (64 * unit / AHEAD_SHARE + 1, 10),
            unit,
            false,
            ahead
        ));
        assert!(
            !is_full((10, part + 1), unit, false, (false, true)),
            "once its next record may go out, it holds its whole share"
        );
        assert!(
            !is_full((10, FULL_BYTES), unit, true, (true, false)),
            "never paused while the merge waits for it"
        );
    }
}
