//! The reader's watermark: each split's newest timestamp handed out (kept by
//! `accept`) and its activity, combined by [`crate::base::watermark::combine`] once per
//! batch handed out and whenever the program asks.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use super::SourceReader;
use super::split_state::SplitState;
use crate::base::split::SplitId;
use crate::base::watermark::{SplitMark, WatermarkStrategy, combine};
use crate::deserializer::Deserializer;
use crate::metrics as m;

/// How often `mck_watermark_lag_seconds` is set at most.
const METRIC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A reader's watermark state (only with a strategy).
pub(super) struct Watermarks {
    strategy: WatermarkStrategy,
    /// The watermark handed out last (never goes back); restored from a checkpoint.
    current: Option<i64>,
    /// `mck_watermark_lag_seconds` by stream and cluster, and when it was last set.
    gauges: HashMap<(Arc<str>, Arc<str>), metrics::Gauge>,
    metric_at: Option<Instant>,
    /// Each split's part at the last evaluation (kept to reuse its allocation).
    marks: Vec<SplitMark>,
}

impl Watermarks {
    pub(super) fn new(strategy: WatermarkStrategy, restored: Option<i64>) -> Self {
        Self {
            strategy,
            current: restored,
            gauges: HashMap::new(),
            metric_at: None,
            marks: Vec::new(),
        }
    }
}

/// A split's part at `now`: done when finished, out when idle, waiting before its
/// first record. Activity is seen as a position that moved since the last look.
fn mark_of(s: &mut SplitState, strategy: &WatermarkStrategy, now: Instant) -> SplitMark {
    // A split paused by alignment has records waiting: it is not idle.
    s.pace.look(s.next_offset, now);
    if s.finished {
        return match s.pace.newest() {
            Some(ts) => SplitMark::Done(strategy.of_split(ts)),
            None => SplitMark::Out,
        };
    }
    if strategy
        .idle_timeout()
        .is_some_and(|t| now.saturating_duration_since(s.pace.active_at()) >= t)
    {
        return SplitMark::Out;
    }
    match s.pace.newest() {
        Some(ts) => SplitMark::At(strategy.of_split(ts)),
        None => SplitMark::Waiting,
    }
}

impl<D: Deserializer> SourceReader<D> {
    /// This reader's watermark (milliseconds since the epoch) with the records handed
    /// out so far: no record at or before it is expected from its splits any more.
    /// `None` without [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks),
    /// or before every active split handed out a record. It never goes back, and
    /// idle splits do not hold it (see
    /// [`WatermarkStrategy::with_idle_timeout`](crate::WatermarkStrategy::with_idle_timeout)).
    pub fn watermark(&mut self) -> Option<i64> {
        self.update_watermark();
        self.current_watermark()
    }

    /// The strategy, with watermarks on.
    pub(super) fn strategy(&self) -> Option<WatermarkStrategy> {
        self.watermarks.as_ref().map(|w| w.strategy)
    }

    /// The watermark as last computed.
    pub(super) fn current_watermark(&self) -> Option<i64> {
        self.watermarks.as_ref().and_then(|w| w.current)
    }

    /// Recomputes the watermark from the splits (a no-op without a strategy).
    pub(super) fn update_watermark(&mut self) {
        let Some(w) = self.watermarks.as_deref_mut() else {
            return;
        };
        let now = Instant::now();
        let strategy = w.strategy;
        w.marks.clear();
        w.marks
            .extend(self.splits.iter_mut().map(|s| mark_of(s, &strategy, now)));
        w.current = combine(w.current, w.marks.iter().copied());
        if strategy.max_drift().is_some() {
            if self.time_order.is_some() {
                self.align_fetched(&strategy, now);
            } else {
                // Aligned to the lowest split that has a watermark, even while
                // another waits for its first record (the source's watermark waits
                // with it): a split ahead of that one is ahead of the source's
                // watermark to come.
                let lowest = w
                    .marks
                    .iter()
                    .filter_map(|m| match m {
                        SplitMark::At(at) => Some(*at),
                        _ => None,
                    })
                    .min();
                self.align(&strategy, lowest);
            }
        }
        let Some(w) = self.watermarks.as_deref_mut() else {
            return;
        };
        if w.metric_at
            .is_some_and(|at| now.duration_since(at) < METRIC_EVERY)
        {
            return;
        }
        w.metric_at = Some(now);
        // By stream and cluster: the lowest watermark of their active splits.
        let mut lowest: HashMap<(Arc<str>, Arc<str>), i64> = HashMap::new();
        for (s, mark) in self.splits.iter().zip(&w.marks) {
            let SplitMark::At(at) = *mark else { continue };
            for stream in self
                .links
                .stream_index()
                .get(&s.id.cluster, &s.id.topic)
                .iter()
            {
                let e = lowest
                    .entry((stream.clone(), s.id.cluster.clone()))
                    .or_insert(at);
                *e = (*e).min(at);
            }
        }
        let now_ms = crate::base::retention::now_ms();
        for (key, at) in lowest {
            let gauge = w.gauges.entry(key).or_insert_with_key(|(stream, cluster)| {
                metrics::gauge!(m::WATERMARK_LAG, "stream" => stream.to_string(), "cluster" => cluster.to_string())
            });
            gauge.set((now_ms - at) as f64 / 1000.0);
        }
    }
}

impl<D: Deserializer> SourceReader<D> {
    /// Marks the splits whose watermark runs too far ahead of `lowest` (the lowest
    /// watermark of the splits that hold the source's back; none: no split is
    /// ahead), and those that no longer do, and pauses or resumes their fetching.
    fn align(&mut self, strategy: &WatermarkStrategy, lowest: Option<i64>) {
        for s in self.splits.iter_mut() {
            let ahead = !s.finished
                && lowest.is_some_and(|low| {
                    s.pace
                        .newest()
                        .is_some_and(|ts| strategy.too_far_ahead(ts, low))
                });
            s.pace.set_ahead(ahead);
        }
        self.sync_pauses();
    }

    /// [`Self::align`] in time order, by the newest timestamps *fetched*: the merge
    /// holds records back by those, so a split is ahead when what it fetched is, and
    /// the lowest is over the splits the merge waits for (neither done nor idle; a
    /// paused split is not idle).
    fn align_fetched(&mut self, strategy: &WatermarkStrategy, now: Instant) {
        let Some(order) = self.time_order.as_deref() else {
            return;
        };
        let idle = strategy.idle_timeout();
        let lowest = self
            .splits
            .iter()
            .filter(|s| !s.finished)
            .filter_map(|s| {
                let f = order.facts(&s.id)?;
                let quiet = !s.pace.is_paused()
                    && idle.is_some_and(|t| now.saturating_duration_since(f.fetched_at) >= t);
                if f.done || quiet {
                    return None;
                }
                f.newest
            })
            .min();
        for s in self.splits.iter_mut() {
            let fetched = order.facts(&s.id).and_then(|f| f.newest);
            let ahead = !s.finished
                && lowest
                    .is_some_and(|low| fetched.is_some_and(|ts| strategy.too_far_ahead(ts, low)));
            s.pace.set_ahead(ahead);
        }
        self.sync_pauses();
    }

    /// Tells the fetchers which splits to pause (too far ahead, or holding too many
    /// records in time order) and which to resume: every split whose fetching is not
    /// as it should be (so also one handed to a new fetcher, which starts unpaused).
    /// Only splits with a fetcher; the others are seen to at a later call.
    pub(super) fn sync_pauses(&mut self) {
        let mut changes: BTreeMap<(Arc<str>, bool), Vec<SplitId>> = BTreeMap::new();
        for s in self.splits.iter_mut() {
            let pause = s.pace.pause_wanted(s.finished);
            if pause == s.pace.is_paused() || self.fetchers.get(&s.id.cluster).is_none() {
                continue;
            }
            s.pace.set_paused(pause);
            changes
                .entry((s.id.cluster.clone(), pause))
                .or_default()
                .push(s.id.clone());
        }
        if changes.is_empty() {
            return;
        }
        for ((cluster, paused), ids) in changes {
            tracing::debug!(reader = self.settings.id, cluster = %cluster, splits = ids.len(), paused, "pausing or resuming splits' fetching");
            if let Some(fetcher) = self.fetchers.get_mut(&cluster) {
                fetcher.pause(ids, paused);
            }
        }
        let paused = self.splits.iter().filter(|s| s.pace.is_paused()).count();
        metrics::gauge!(m::PAUSED_SPLITS, "reader" => self.settings.id.to_string())
            .set(paused as f64);
    }

    /// Whether splits are aligned (their fetching paused when too far ahead).
    pub(super) fn aligning(&self) -> bool {
        self.watermarks
            .as_ref()
            .is_some_and(|w| w.strategy.max_drift().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn split() -> SplitState {
        SplitState::new(SplitId::new("a", "t", 0), 0, None, false)
    }

    #[test]
    fn a_split_waits_for_its_first_record_then_marks_and_goes_idle_without_records() {
        let strategy = WatermarkStrategy::bounded_out_of_orderness(Duration::from_millis(10))
            .with_idle_timeout(Duration::from_secs(5));
        let mut s = split();
        let t0 = s.pace.active_at();
        assert_eq!(mark_of(&mut s, &strategy, t0), SplitMark::Waiting);
        s.next_offset = 1;
        s.pace.handed_out(1_000);
        let t1 = t0 + Duration::from_secs(4);
        assert_eq!(mark_of(&mut s, &strategy, t1), SplitMark::At(989));
        // No record since t1: idle 5 s after it, not after t0.
        assert_eq!(
            mark_of(&mut s, &strategy, t1 + Duration::from_millis(4_999)),
            SplitMark::At(989)
        );
        assert_eq!(
            mark_of(&mut s, &strategy, t1 + Duration::from_secs(5)),
            SplitMark::Out
        );
        // A record again: it holds the watermark again.
        s.next_offset = 2;
        s.pace.handed_out(2_000);
        assert_eq!(
            mark_of(&mut s, &strategy, t1 + Duration::from_secs(6)),
            SplitMark::At(1_989)
        );
        s.finished = true;
        assert_eq!(
            mark_of(&mut s, &strategy, t1 + Duration::from_secs(6)),
            SplitMark::Done(1_989)
        );
    }

    #[test]
    fn without_idleness_a_quiet_split_holds_the_watermark_for_ever() {
        let strategy = WatermarkStrategy::monotonous_timestamps().without_idleness();
        let mut s = split();
        let later = s.pace.active_at() + Duration::from_secs(3_600);
        assert_eq!(mark_of(&mut s, &strategy, later), SplitMark::Waiting);
        s.next_offset = 1;
        s.pace.handed_out(50);
        assert_eq!(
            mark_of(&mut s, &strategy, later + Duration::from_secs(3_600)),
            SplitMark::At(49)
        );
    }
}
