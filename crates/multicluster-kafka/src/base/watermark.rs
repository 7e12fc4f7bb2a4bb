//! Event time: the watermark strategy a program sets, and the pure rule that turns
//! each split's newest timestamp and activity into the source's watermark.
//!
//! A split's watermark is the newest record timestamp handed out of it, less the
//! allowed out-of-orderness and one millisecond: no record at or before it is
//! expected any more. The source's watermark is the minimum over the splits that
//! hold it back: those not finished and not idle. It never goes back: a split added
//! while running, or one whose records are late, holds it where it is rather than
//! moving it back to their time.

use std::sync::Arc;
use std::time::Duration;

/// A program's event timestamp (milliseconds since the epoch) of a deserialized value;
/// see [`SourceBuilder::event_timestamps`](crate::SourceBuilder::event_timestamps).
pub type EventTimestamps<V> = Arc<dyn Fn(&V) -> Option<i64> + Send + Sync>;

/// How a source derives its watermark; see
/// [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks).
///
/// ```
/// use std::time::Duration;
/// use multicluster_kafka::WatermarkStrategy;
///
/// let s = WatermarkStrategy::bounded_out_of_orderness(Duration::from_secs(2))
///     .with_idle_timeout(Duration::from_secs(30));
/// assert_eq!(s.out_of_orderness(), Duration::from_secs(2));
/// assert_eq!(s.idle_timeout(), Some(Duration::from_secs(30)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatermarkStrategy {
    out_of_orderness: Duration,
    idle_timeout: Option<Duration>,
    max_drift: Option<Duration>,
}

/// The order a source hands records out in; see
/// [`SourceBuilder::order`](crate::SourceBuilder::order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadOrder {
    /// As fetched: each partition in offset order, the clusters' batches
    /// interleaved as they arrive (the fastest).
    #[default]
    Fetch,
    /// By event time across every split of a reader: records are held until no
    /// split that is neither idle nor finished can still bring an earlier one (by
    /// its newest timestamp fetched less the allowed out-of-orderness), then handed
    /// out oldest first; each partition still in offset order. Needs
    /// [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks), whose
    /// out-of-orderness and idle timeout it uses.
    Time,
}

/// How long a split may go without a record before it stops holding the watermark
/// back, unless set otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

impl WatermarkStrategy {
    /// Records may come up to `d` older than the newest one of their split (by the
    /// Kafka record's timestamp) and still be ahead of the watermark. Splits go idle
    /// after [`DEFAULT_IDLE_TIMEOUT`] without a record.
    pub fn bounded_out_of_orderness(d: Duration) -> Self {
        Self {
            out_of_orderness: d,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_drift: None,
        }
    }

    /// Records come in timestamp order within each split.
    pub fn monotonous_timestamps() -> Self {
        Self::bounded_out_of_orderness(Duration::ZERO)
    }

    /// A split (so also a whole cluster, quiet or unreachable) with no record for
    /// `timeout` stops holding the watermark back; it holds it again from its next
    /// record.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// No split is ever idle: a quiet one holds the watermark back until its next
    /// record.
    pub fn without_idleness(mut self) -> Self {
        self.idle_timeout = None;
        self
    }

    /// Aligns the splits' watermarks: a split whose watermark runs ahead of the
    /// source's by more than `max_drift` stops being fetched (the cluster's other
    /// splits go on) until the rest catch up or go idle. A backlog on one cluster
    /// then flows at the pace of the others instead of beside them. A paused split
    /// does not count as idle: it has records waiting.
    pub fn with_alignment(mut self, max_drift: Duration) -> Self {
        self.max_drift = Some(max_drift);
        self
    }

    /// The most a split's watermark runs ahead of the source's before it is paused,
    /// if splits are aligned.
    pub fn max_drift(&self) -> Option<Duration> {
        self.max_drift
    }

    /// The allowed out-of-orderness.
    pub fn out_of_orderness(&self) -> Duration {
        self.out_of_orderness
    }

    /// The idle timeout, if splits go idle.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Whether a split whose newest timestamp handed out is `newest_ms` runs too far
    /// ahead of the source's watermark `source_ms` (never without alignment).
    pub(crate) fn too_far_ahead(&self, newest_ms: i64, source_ms: i64) -> bool {
        self.max_drift.is_some_and(|d| {
            let drift = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
            self.of_split(newest_ms) > source_ms.saturating_add(drift)
        })
    }

    /// The watermark of a split whose newest timestamp handed out is `newest_ms`.
    pub(crate) fn of_split(&self, newest_ms: i64) -> i64 {
        let ooo = i64::try_from(self.out_of_orderness.as_millis()).unwrap_or(i64::MAX);
        newest_ms.saturating_sub(ooo).saturating_sub(1)
    }
}

/// One split's part in the source's watermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitMark {
    /// Idle, or finished before handing out a record: does not hold the watermark
    /// back.
    Out,
    /// Finished, with this watermark: holds nothing back while other splits are
    /// active; once none is, the watermark reaches the lowest of these (every record
    /// of them was handed out, as at the end of a bounded run).
    Done(i64),
    /// Active with no record handed out yet: holds the watermark where it is.
    Waiting,
    /// Active with this watermark.
    At(i64),
}

/// The source's watermark after `previous`, given every split's part: the minimum
/// over the active splits, never behind `previous`. A split still waiting for its
/// first record holds it at `previous`. With no split active, it is the lowest of
/// the finished splits' (idle ones hold nothing back), else it stays at `previous`.
pub(crate) fn combine(
    previous: Option<i64>,
    marks: impl IntoIterator<Item = SplitMark>,
) -> Option<i64> {
    let lower = |min: Option<i64>, w: i64| Some(min.map_or(w, |m: i64| m.min(w)));
    let (mut min, mut done) = (None, None);
    for m in marks {
        match m {
            SplitMark::Out => {}
            SplitMark::Waiting => return previous,
            SplitMark::At(w) => min = lower(min, w),
            SplitMark::Done(w) => done = lower(done, w),
        }
    }
    match (previous, min.or(done)) {
        (Some(p), Some(m)) => Some(p.max(m)),
        (None, m) => m,
        (p, None) => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SplitMark::*;

    #[test]
    fn a_split_s_watermark_is_its_newest_timestamp_less_the_out_of_orderness_and_a_ms() {
        let s = WatermarkStrategy::bounded_out_of_orderness(Duration::from_millis(500));
        assert_eq!(s.of_split(10_000), 9_499);
        assert_eq!(WatermarkStrategy::monotonous_timestamps().of_split(7), 6);
        assert_eq!(s.of_split(i64::MIN), i64::MIN, "saturates");
    }

    #[test]
    fn the_source_s_watermark_is_the_minimum_of_active_splits_and_never_goes_back() {
        assert_eq!(combine(None, [At(5), At(3), Out]), Some(3));
        assert_eq!(combine(Some(4), [At(5), At(3)]), Some(4), "never back");
        assert_eq!(combine(Some(4), [At(9), At(6)]), Some(6));
        assert_eq!(combine(Some(4), [Out, Out]), Some(4), "all idle: held");
        assert_eq!(combine(None, [Out]), None);
        assert_eq!(
            combine(Some(4), [At(9), Waiting]),
            Some(4),
            "a split without records yet holds it"
        );
        assert_eq!(combine(None, []), None);
    }

    #[test]
    fn finished_splits_count_only_once_no_split_is_active() {
        assert_eq!(combine(Some(4), [At(6), Done(2), Done(9)]), Some(6));
        assert_eq!(
            combine(Some(4), [Done(7), Done(9), Out]),
            Some(7),
            "the end of a bounded run: every record handed out"
        );
        assert_eq!(combine(Some(8), [Done(7)]), Some(8), "never back");
        assert_eq!(combine(Some(4), [Waiting, Done(9)]), Some(4));
    }

    #[test]
    fn a_split_is_too_far_ahead_only_past_the_drift_and_only_with_alignment() {
        let plain = WatermarkStrategy::monotonous_timestamps();
        assert!(!plain.too_far_ahead(1_000_000, 0), "no alignment");
        let s = plain.with_alignment(Duration::from_millis(100));
        assert_eq!(s.max_drift(), Some(Duration::from_millis(100)));
        // The split's watermark is its newest timestamp less 1 ms.
        assert!(!s.too_far_ahead(1_101, 1_000), "1100 is 100 ahead: within");
        assert!(s.too_far_ahead(1_102, 1_000), "1101 is 101 ahead");
        assert!(!s.too_far_ahead(500, 1_000), "behind");
        assert!(!s.too_far_ahead(i64::MAX, i64::MAX), "saturates");
    }

    #[test]
    fn idleness_can_be_set_or_turned_off() {
        let s = WatermarkStrategy::bounded_out_of_orderness(Duration::ZERO);
        assert_eq!(s.idle_timeout(), Some(DEFAULT_IDLE_TIMEOUT));
        assert_eq!(s.without_idleness().idle_timeout(), None);
    }
}
