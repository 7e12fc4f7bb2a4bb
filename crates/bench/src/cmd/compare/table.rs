//! The table `compare` prints: its rows with their targets, and the throughput
//! figures of one side round by round.

use std::time::Instant;

use mck_bench::peers;

use super::super::throughput::Pass;

/// Which way a ratio has to go to meet its target.
#[derive(Clone, Copy)]
pub(super) enum Target {
    /// ours / peer at least this.
    RatioAtLeast(f64),
    /// ours / peer at most this.
    RatioAtMost(f64),
    /// ours at most this (in the row's unit).
    OursAtMost(f64),
    /// No target (a figure reported for context).
    None,
}

/// One line of the table.
pub(super) struct Row {
    measure: String,
    ours: f64,
    peer: Option<f64>,
    unit: &'static str,
    target: Target,
    /// Why there is no peer figure, when there is none.
    no_peer: &'static str,
}

impl Row {
    pub(super) fn new(
        measure: String,
        (ours, peer): (f64, Option<f64>),
        unit: &'static str,
        target: Target,
        no_peer: &'static str,
    ) -> Self {
        Self {
            measure,
            ours,
            peer,
            unit,
            target,
            no_peer,
        }
    }

    fn ratio(&self) -> Option<f64> {
        self.peer.map(|p| self.ours / p)
    }

    fn met(&self) -> Option<bool> {
        match self.target {
            Target::RatioAtLeast(t) => self.ratio().map(|r| r >= t),
            Target::RatioAtMost(t) => self.ratio().map(|r| r <= t),
            Target::OursAtMost(t) => Some(self.ours <= t),
            Target::None => None,
        }
    }

    pub(super) fn render(&self) -> String {
        let num = |v: f64| {
            if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.4}")
            }
        };
        let target = match self.target {
            Target::RatioAtLeast(t) => format!("≥ {t}×"),
            Target::RatioAtMost(t) => format!("≤ {t}×"),
            Target::OursAtMost(t) => format!("≤ {} {}", num(t), self.unit),
            Target::None => "-".into(),
        };
        format!(
            "| {} | {} {} | {} | {} | {} | {} |",
            self.measure,
            num(self.ours),
            self.unit,
            self.peer.map_or_else(
                || self.no_peer.to_string(),
                |p| format!("{} {}", num(p), self.unit)
            ),
            self.ratio()
                .map_or_else(|| "-".into(), |r| format!("{r:.2}")),
            target,
            match self.met() {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            }
        )
    }
}

/// Throughput figures of one side, round by round, over two windows: from its start
/// (creating its clients; for this project also discovering the stream's partitions)
/// to its last record, and from its first record to its last.
#[derive(Default)]
pub(super) struct Rates {
    /// (records/s, MB/s) from the side's start.
    from_start: Vec<(f64, f64)>,
    /// (records/s, MB/s) from its first record.
    reading: Vec<(f64, f64)>,
}

impl Rates {
    pub(super) fn push(&mut self, pass: &Pass, started: Instant) {
        self.from_start.push(pass.rate_since(started));
        self.reading.push(pass.reading_rate());
    }

    /// Records/s of the latest round: from the start, and from the first record.
    pub(super) fn last(&self) -> String {
        match (self.from_start.last(), self.reading.last()) {
            (Some(s), Some(r)) => format!("{:.0} ({:.0})", s.0, r.0),
            _ => "-".into(),
        }
    }

    /// The round with the median records/s from the first record: (records/s, MB/s).
    pub(super) fn reading_median(&self) -> (f64, f64) {
        median_rate(&self.reading)
    }

    /// The round with the median records/s from the start.
    pub(super) fn start_median(&self) -> (f64, f64) {
        median_rate(&self.from_start)
    }
}

fn median_rate(rounds: &[(f64, f64)]) -> (f64, f64) {
    let mut v = rounds.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v[v.len() / 2]
}

/// The records/s and MB/s rows of one comparison: `ours` and `peer` are (records/s,
/// MB/s); the target is a ratio of at least `target`.
pub(super) fn rate_rows(
    what: &str,
    ours: (f64, f64),
    peer: Option<(f64, f64)>,
    target: f64,
    no_peer: &'static str,
) -> [Row; 2] {
    let target = Target::RatioAtLeast(target);
    [
        Row::new(
            format!("throughput {what} (records/s)"),
            (ours.0, peer.map(|p| p.0)),
            "rec/s",
            target,
            no_peer,
        ),
        Row::new(
            format!("throughput {what} (MB/s)"),
            (ours.1, peer.map(|p| p.1)),
            "MB/s",
            target,
            no_peer,
        ),
    ]
}

pub(super) fn peer_rates(f: Option<peers::Figures>) -> (f64, f64) {
    let f = f.expect("at least one measured round");
    (f.records_per_sec(), f.mb_per_sec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_a_ratio_target_is_met_only_at_or_above_it() {
        let row = |ours| Row {
            measure: "m".into(),
            ours,
            peer: Some(100.0),
            unit: "rec/s",
            target: Target::RatioAtLeast(0.95),
            no_peer: "",
        };
        assert_eq!(row(95.0).met(), Some(true));
        assert_eq!(row(94.0).met(), Some(false));
        assert!(row(94.0).render().contains("| 0.94 |"));
    }
}
