//! A split's pace: its newest event time handed out, when its position last moved,
//! and whether its fetching is paused (too far ahead of the others, or holding too
//! many records for time order). Only this file changes it.

use std::time::Instant;

/// The pace of one split.
#[derive(Debug)]
pub(super) struct Pace {
    /// The newest record timestamp handed out (event time).
    newest_ts: Option<i64>,
    /// The position at the last look for activity, and when it last moved (or the
    /// split came), for idleness.
    seen_offset: i64,
    active_at: Instant,
    /// Its watermark ran too far ahead of the source's (alignment).
    ahead: bool,
    /// In time order: it holds too many records waiting for the others.
    full: bool,
    /// Its fetching is paused (for either reason above), as its fetcher was told.
    paused: bool,
}

impl Pace {
    /// A split that starts at `next_offset` now.
    pub(super) fn new(next_offset: i64) -> Self {
        Self {
            newest_ts: None,
            seen_offset: next_offset,
            active_at: Instant::now(),
            ahead: false,
            full: false,
            paused: false,
        }
    }

    /// A record of event time `ts` was handed out.
    #[inline]
    pub(super) fn handed_out(&mut self, ts: i64) {
        if self.newest_ts.is_none_or(|n| ts > n) {
            self.newest_ts = Some(ts);
        }
    }

    /// The newest event time handed out.
    pub(super) fn newest(&self) -> Option<i64> {
        self.newest_ts
    }

    /// When the split was last seen active.
    pub(super) fn active_at(&self) -> Instant {
        self.active_at
    }

    /// Looks for activity at `now`: a position that moved since the last look, or a
    /// paused split (it has records waiting: it is not idle).
    pub(super) fn look(&mut self, next_offset: i64, now: Instant) {
        if next_offset != self.seen_offset || self.paused {
            self.seen_offset = next_offset;
            self.active_at = now;
        }
    }

    pub(super) fn set_ahead(&mut self, ahead: bool) {
        self.ahead = ahead;
    }

    pub(super) fn is_full(&self) -> bool {
        self.full
    }

    pub(super) fn set_full(&mut self, full: bool) {
        self.full = full;
    }

    pub(super) fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether its fetching should be paused, given whether it is finished.
    pub(super) fn pause_wanted(&self, finished: bool) -> bool {
        (self.ahead || self.full) && !finished
    }

    /// Its fetcher was told to pause it or resume it (a new fetcher starts it
    /// resumed).
    pub(super) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }
}
