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
    /// Holds what a fetcher answered, for the merge.
    pub(super) fn hold(
        &mut self,
        cluster: Arc<str>,
        batch: RecordBatch<D::Value>,
        polled: super::fetch_path::Polled,
    ) {
        self.note_high_watermarks(&cluster, polled.high_watermarks);
        self.note_truncated(polled.truncated);
        let Some(mut order) = self.time_order.take() else {
            return;
        };
        if polled.records > 0 || polled.failed.is_some() {
            // Noted by the fetch thread when event time is the Kafka timestamp
            // (`FetcherSettings::shape`); else each record's is read here.
            let shape = polled.shape.map(|s| *s);
            let event = |v: Option<&D::Value>, ts: Option<i64>| self.event_time(v, ts);
            order.take(
                batch,
                polled.failed.map(|f| *f),
                (event, shape),
                Instant::now(),
            );
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
        let unit = self.settings.max_batch.min(1024);
        for (s, q) in self.splits.iter_mut().zip(&queues) {
            let (records, bytes) = q.map_or((0, 0), |q| order.held_at(q));
            let newest = q.and_then(|q| order.facts_at(q).newest);
            let waited_for = match bound {
                Bound::Hold => false,
                Bound::Upto(b) => newest.is_none_or(|n| n.saturating_sub(ooo) <= b),
                Bound::All => true,
            };
            let over = |share: usize| bytes > FULL_BYTES / share || records > 64 * unit / share;
            let full = !waited_for && (over(1) || (s.pace.is_full() && over(2)));
            s.pace.set_full(full);
        }
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
