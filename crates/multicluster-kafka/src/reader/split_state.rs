//! What a reader keeps per split (position, stop, lag) and per cluster (the batch
//! being handed out, the cluster's facts).

use std::sync::Arc;

use super::fetch_path::Failed;
use super::pace::Pace;
use crate::base::split::{Fingerprint, KafkaSplit, LastRecord, Search, SplitId};
use crate::metrics as m;

#[derive(Debug)]
pub(super) struct SplitState {
    pub(super) id: SplitId,
    pub(super) next_offset: i64,
    pub(super) stop: Option<i64>,
    pub(super) finished: bool,
    /// What is left to hand out, as the metrics see it.
    lag: Lag,
    /// The last record handed out for this split (on the source, while `search` is
    /// set).
    pub(super) last: Option<Fingerprint>,
    /// On a mirror that has not found `last` yet: the search for it.
    pub(super) search: Option<Box<Search>>,
    /// Set after a search sent the split back to its lower bound (a mirror that
    /// diverged, `onMismatch: lowerBound`): records past this offset are left over
    /// from before and not handed out, until the re-read reaches back to it.
    pub(super) rewound: Option<i64>,
    /// Set when its log was truncated below what was fetched (KIP-320), to the
    /// offset fetched up to then: records below it may still come from before the
    /// truncation, and the first record below the position (or any at or past this
    /// offset) starts the log as it is now.
    pub(super) truncated: Option<i64>,
    /// Its event time and activity, and whether its fetching is paused.
    pub(super) pace: Pace,
}

/// A split's lag: the latest high watermark a poll reported (-1: none yet), and its
/// `mck_split_lag` series, once it has a value, and that value.
#[derive(Debug)]
struct Lag {
    high_watermark: i64,
    series: Option<(metrics::Gauge, i64)>,
}

impl SplitState {
    pub(super) fn new(id: SplitId, next_offset: i64, stop: Option<i64>, finished: bool) -> Self {
        Self {
            id,
            next_offset,
            stop,
            finished,
            lag: Lag {
                high_watermark: -1,
                series: None,
            },
            last: None,
            search: None,
            rewound: None,
            truncated: None,
            pace: Pace::new(next_offset),
        }
    }

    /// The split as it stands: the position after the last record handed out.
    pub(super) fn split(&self) -> KafkaSplit {
        KafkaSplit {
            id: self.id.clone(),
            next_offset: self.next_offset,
            stop_offset: self.stop,
            last: self.last.map(|fingerprint| LastRecord {
                fingerprint,
                search: self.search.as_deref().cloned(),
            }),
        }
    }

    /// Takes a split's last record as it came with its assignment.
    pub(super) fn set_last(&mut self, last: Option<&LastRecord>) {
        self.last = last.map(|l| l.fingerprint);
        self.search = last.and_then(|l| l.search.clone()).map(Box::new);
    }

    /// The split as its fetcher starts it, from the position: with the last record
    /// handed out on this cluster (not while a mirror looks for it), whose leader
    /// epoch lets either fetch path check that the log still holds it.
    pub(super) fn to_fetch(&self) -> KafkaSplit {
        KafkaSplit {
            id: self.id.clone(),
            next_offset: self.next_offset,
            stop_offset: self.stop,
            last: self
                .last
                .filter(|_| self.search.is_none())
                .map(LastRecord::at),
        }
    }

    /// Sets `mck_split_lag` to what is left to hand out: the latest high watermark
    /// (capped at the stop offset) minus the next position. Nothing before the first
    /// watermark is known.
    pub(super) fn report_lag(&mut self) {
        let hw = self.lag.high_watermark;
        if hw < 0 {
            return;
        }
        let end = match self.stop {
            Some(stop) => hw.min(stop),
            None => hw,
        };
        let lag = if self.finished {
            0
        } else {
            (end - self.next_offset).max(0)
        };
        match &mut self.lag.series {
            Some((_, last)) if *last == lag => {}
            Some((gauge, last)) => {
                gauge.set(lag as f64);
                *last = lag;
            }
            None => {
                let id = &self.id;
                let gauge = metrics::gauge!(m::SPLIT_LAG, "cluster" => id.cluster.to_string(), "topic" => id.topic.to_string(), "partition" => id.partition.to_string());
                gauge.set(lag as f64);
                self.lag.series = Some((gauge, lag));
            }
        }
    }

    /// Takes the latest high watermark a poll reported.
    pub(super) fn set_high_watermark(&mut self, hw: i64) {
        self.lag.high_watermark = hw;
    }

    /// The split leaves this reader: its lag series is marked removed (NaN, see
    /// [`crate::metrics::SPLIT_LAG`]).
    pub(super) fn drop_lag(&mut self) {
        if let Some((gauge, _)) = self.lag.series.take() {
            gauge.set(f64::NAN);
        }
    }
}

/// Records polled from one cluster's consumer, handed out by `next` one at a time or
/// by `next_batch` all at once.
pub(super) struct Buffered<V> {
    pub(super) records: Option<crate::record::IntoIter<V>>,
    /// A record of that cluster that failed to deserialize, handed out (as an error)
    /// after the records.
    pub(super) failed: Option<(Arc<str>, Failed)>,
    /// Records and bytes handed out, added to the metrics of `cluster` once
    /// everything is handed out.
    pub(super) counts: (u64, u64),
    pub(super) cluster: Option<Arc<str>>,
    /// Splits whose consumer saw their stop, finished once everything is handed out.
    pub(super) finish_after: Vec<SplitId>,
    /// A mirror found diverged while its records were taken: handed out (as an
    /// error) before anything else.
    pub(super) diverged: Vec<crate::error::SourceError>,
    /// The records and bytes counters of each cluster.
    counters: std::collections::HashMap<Arc<str>, (metrics::Counter, metrics::Counter)>,
}

impl<V> Buffered<V> {
    /// Adds the counts of what was handed out to the cluster's metrics.
    pub(super) fn flush_counts(&mut self) {
        let (records, bytes) = std::mem::take(&mut self.counts);
        if records == 0 {
            return;
        }
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let (r, b) = self.counters.entry(cluster.clone()).or_insert_with(|| {
            (
                metrics::counter!(m::RECORDS, "cluster" => cluster.to_string()),
                metrics::counter!(m::BYTES, "cluster" => cluster.to_string()),
            )
        });
        r.increment(records);
        b.increment(bytes);
    }
}

impl<V> Default for Buffered<V> {
    fn default() -> Self {
        Self {
            records: None,
            failed: None,
            counts: (0, 0),
            cluster: None,
            finish_after: Vec::new(),
            diverged: Vec::new(),
            counters: Default::default(),
        }
    }
}

pub(super) struct ClusterInfo {
    pub(super) kafka_cluster_id: Option<String>,
    pub(super) initial_discovery_done: bool,
}
