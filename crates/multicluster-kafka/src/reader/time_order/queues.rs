//! The held records: a queue per split of the runs of its records each fetched
//! batch brought, which stay as they were fetched until they go out.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::bound::SplitFacts;
use super::shape::{NO_TIME, Shape, weight};
use crate::base::split::SplitId;
use crate::reader::fetch_path::Failed;
use crate::record::{BatchBytes, BatchEntry, RecordBatch};

/// What a split's queue holds: a run of its records from one fetched batch, or a
/// record that failed to deserialize (handed out as an error in its place).
pub(super) enum Held<V> {
    Run(Run<V>),
    Failed { ts: i64, failed: Box<Failed> },
}

/// A split's records from one fetched batch, in offset order, with their event
/// times; never empty while queued. They go out a run at a time, moved into the
/// released batch together.
pub(super) struct Run<V> {
    /// The bytes of the batch they came in, where their keys and values are.
    pub(super) from: Arc<BatchBytes>,
    pub(super) entries: VecDeque<BatchEntry<V>>,
    pub(super) ts: VecDeque<i64>,
}

impl<V> Held<V> {
    /// The event time of its first record.
    pub(super) fn ts(&self) -> i64 {
        match self {
            Held::Run(run) => run.ts.front().copied().unwrap_or(i64::MIN),
            Held::Failed { ts, .. } => *ts,
        }
    }
}

/// A split that holds more than this (by [`weight`]) while others hold the merge
/// back is paused, until it holds half as much: an answer brings up to
/// `max.partition.fetch.bytes` (1 MiB unless set), so it is fetched again before it
/// runs dry. Held records are read cold when they go out; what is held of 64
/// splits at 4 MiB each cost more CPU than the fetches it saved.
pub(super) const FULL_BYTES: usize = 2 << 20;

/// A split's held records and what the bound needs of it.
pub(super) struct Queue<V> {
    pub(super) id: SplitId,
    pub(super) items: VecDeque<Held<V>>,
    /// The records held (a failed one counts).
    pub(super) records: usize,
    /// The [`weight`] of its held records.
    pub(super) bytes: usize,
    pub(super) newest: Option<i64>,
    pub(super) fetched_at: Instant,
    /// The fetcher saw its stop: nothing more comes.
    pub(super) done: bool,
}

/// The held records of a reader's splits, in the batches' bytes they were fetched
/// in: a record goes out with its value where it was (a value shared from a fetch
/// answer stays shared), never copied while it waits.
pub(crate) struct TimeOrder<V> {
    pub(super) queues: Vec<Queue<V>>,
    /// Looked up for every split each time the merge releases: a fast hasher.
    index: HashMap<SplitId, usize, foldhash::fast::RandomState>,
    pub(super) held: usize,
    /// The newest timestamp handed out so far: a record older than it is late.
    pub(super) newest_out: i64,
    /// `mck_held_records` of the reader, set at each release.
    pub(super) held_gauge: metrics::Gauge,
}

impl<V> Default for TimeOrder<V> {
    fn default() -> Self {
        Self {
            queues: Vec::new(),
            index: HashMap::default(),
            held: 0,
            newest_out: i64::MIN,
            held_gauge: metrics::Gauge::noop(),
        }
    }
}

impl<V> TimeOrder<V> {
    /// Reader `reader`'s merge, going on after `watermark` (restored from a
    /// checkpoint): records at or before it are late, as they were when it was
    /// handed out.
    pub fn after(watermark: Option<i64>, reader: usize) -> Self {
        Self {
            newest_out: watermark.map_or(i64::MIN, |w| w.saturating_add(1)),
            held_gauge: metrics::gauge!(crate::metrics::HELD_RECORDS, "reader" => reader.to_string()),
            ..Self::default()
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// The split's queue (made if it has none).
    fn slot(&mut self, id: SplitId, now: Instant) -> usize {
        *self.index.entry(id).or_insert_with_key(|id| {
            self.queues.push(Queue {
                id: id.clone(),
                items: VecDeque::new(),
                records: 0,
                bytes: 0,
                newest: None,
                fetched_at: now,
                done: false,
            });
            self.queues.len() - 1
        })
    }

    /// Holds a fetched batch (and the failed record after it); `event` gives a
    /// record's event time from its value and Kafka timestamp, unless the fetch
    /// thread noted the batch's [`Shape`] (event time then is the Kafka timestamp). A
    /// record without one takes its split's newest. Returns the most records and
    /// the most [`weight`] a split it added to holds now.
    pub fn take(
        &mut self,
        batch: RecordBatch<V>,
        failed: Option<Failed>,
        (event, shape): (
            impl Fn(Option<&V>, Option<i64>) -> Option<i64>,
            Option<Shape>,
        ),
        now: Instant,
    ) -> (usize, usize) {
        let mut most = (0, 0);
        let cluster = batch.cluster.clone();
        // A record stamped in the future (a producer's clock ahead) is merged as of
        // now: else it would hold its partition back until event time reached it.
        let wall = crate::base::retention::now_ms();
        let event = |v: Option<&V>, ts: Option<i64>| event(v, ts).map(|t| t.min(wall));
        let (bytes, mut entries) = batch.into_parts();
        if !entries.is_empty() {
            // The runs of one partition's records (queue, length), and every
            // record's event time.
            let (runs, mut times) = match shape.filter(|s| s.fits(entries.len())) {
                Some(shape) => self.runs_of_shape(&cluster, &bytes, &entries, shape, now),
                None => self.runs_of_entries(&cluster, &bytes, &entries, event, now),
            };
            // Cut from the end, each run's records in one copy (the first in none).
            let mut pieces = Vec::with_capacity(runs.len());
            for &(_, len) in runs.iter().rev() {
                let at = entries.len() - len;
                pieces.push(if at == 0 {
                    (std::mem::take(&mut entries), std::mem::take(&mut times))
                } else {
                    (entries.split_off(at), times.split_off(at))
                });
            }
            let from = Arc::new(bytes);
            for ((i, len), (entries, ts)) in runs.into_iter().zip(pieces.into_iter().rev()) {
                let q = &mut self.queues[i];
                q.fetched_at = now;
                q.records += len;
                self.held += len;
                q.items.push_back(Held::Run(Run {
                    from: from.clone(),
                    entries: entries.into(),
                    ts: ts.into(),
                }));
                most = (most.0.max(q.records), most.1.max(q.bytes));
            }
        }
        if let Some(f) = failed {
            let id = SplitId {
                cluster,
                topic: f.topic.clone(),
                partition: f.partition,
            };
            let i = self.slot(id, now);
            let q = &mut self.queues[i];
            let ts = event(None, f.timestamp).or(q.newest).unwrap_or(i64::MIN);
            q.newest = Some(q.newest.map_or(ts, |n| n.max(ts)));
            q.fetched_at = now;
            q.items.push_back(Held::Failed {
                ts,
                failed: Box::new(f),
            });
            q.records += 1;
            self.held += 1;
            most = (most.0.max(q.records), most.1.max(q.bytes));
        }
        most
    }

    /// The queue of `entry`'s split (made if new).
    fn slot_of(
        &mut self,
        cluster: &Arc<str>,
        bytes: &BatchBytes,
        entry: &BatchEntry<V>,
        now: Instant,
    ) -> usize {
        let id = SplitId {
            cluster: cluster.clone(),
            topic: bytes.topics[entry.topic as usize].clone(),
            partition: entry.partition,
        };
        self.slot(id, now)
    }

    /// [`Self::take`]'s runs and times, each record's event time read from it.
    fn runs_of_entries(
        &mut self,
        cluster: &Arc<str>,
        bytes: &BatchBytes,
        entries: &[BatchEntry<V>],
        event: impl Fn(Option<&V>, Option<i64>) -> Option<i64>,
        now: Instant,
    ) -> (Vec<(usize, usize)>, Vec<i64>) {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut times = Vec::with_capacity(entries.len());
        let mut last: Option<(u32, i32)> = None;
        for entry in entries {
            if last != Some((entry.topic, entry.partition)) {
                runs.push((self.slot_of(cluster, bytes, entry, now), 0));
                last = Some((entry.topic, entry.partition));
            }
            let Some((i, len)) = runs.last_mut() else {
                continue;
            };
            *len += 1;
            let q = &mut self.queues[*i];
            let ts = event(Some(&entry.value), entry.timestamp())
                .or(q.newest)
                .unwrap_or(i64::MIN);
            q.newest = Some(q.newest.map_or(ts, |n| n.max(ts)));
            q.bytes += weight(entry);
            times.push(ts);
        }
        (runs, times)
    }

    /// [`Self::take`]'s runs and times from the batch's [`Shape`] (which
    /// [`Shape::fits`] it): only each run's first record is read.
    fn runs_of_shape(
        &mut self,
        cluster: &Arc<str>,
        bytes: &BatchBytes,
        entries: &[BatchEntry<V>],
        shape: Shape,
        now: Instant,
    ) -> (Vec<(usize, usize)>, Vec<i64>) {
        let Shape {
            mut times,
            runs: shaped,
        } = shape;
        let mut runs = Vec::with_capacity(shaped.len());
        let mut at = 0;
        for (len, weight) in shaped {
            let Some(first) = entries.get(at) else {
                break;
            };
            let i = self.slot_of(cluster, bytes, first, now);
            let q = &mut self.queues[i];
            q.bytes += weight;
            for t in times.get_mut(at..at + len).unwrap_or_default() {
                let ts = if *t == NO_TIME {
                    q.newest.unwrap_or(i64::MIN)
                } else {
                    *t
                };
                q.newest = Some(q.newest.map_or(ts, |n| n.max(ts)));
                *t = ts;
            }
            runs.push((i, len));
            at += len;
        }
        (runs, times)
    }

    /// The fetcher saw the split's stop. Returns whether it holds nothing (so it is
    /// finished now; else once its last held record goes out).
    pub fn finish(&mut self, id: &SplitId) -> bool {
        match self.index.get(id) {
            Some(&i) => {
                let q = &mut self.queues[i];
                q.done = true;
                q.items.is_empty()
            }
            None => true,
        }
    }

    /// Where the split's queue is, if anything was fetched of it (valid until a
    /// split is removed).
    pub fn queue_of(&self, id: &SplitId) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The facts of the split whose queue is `at` ([`Self::queue_of`]).
    pub fn facts_at(&self, at: usize) -> SplitFacts {
        let q = &self.queues[at];
        SplitFacts {
            newest: q.newest,
            fetched_at: q.fetched_at,
            done: q.done,
        }
    }

    /// The event time of the next record of the queue `at`, if it holds any.
    pub fn front_at(&self, at: usize) -> Option<i64> {
        self.queues[at].items.front().map(Held::ts)
    }

    /// The split's facts, if anything was fetched of it.
    pub fn facts(&self, id: &SplitId) -> Option<SplitFacts> {
        self.queue_of(id).map(|at| self.facts_at(at))
    }

    /// How much the queue `at` holds: records, and their [`weight`].
    pub fn held_at(&self, at: usize) -> (usize, usize) {
        let q = &self.queues[at];
        (q.records, q.bytes)
    }

    /// How much of the split is held: records, and their [`weight`].
    #[cfg(test)]
    pub fn held_of(&self, id: &SplitId) -> (usize, usize) {
        self.queue_of(id).map_or((0, 0), |at| self.held_at(at))
    }

    /// Empties the queues `which` picks, letting go of their records' bytes.
    fn clear_where(&mut self, which: impl Fn(&Queue<V>) -> bool) {
        for q in self.queues.iter_mut().filter(|q| which(q)) {
            self.held -= q.records;
            q.records = 0;
            q.bytes = 0;
            q.items.clear();
        }
    }

    /// Drops what is held of `cluster`'s splits (its fetcher starts again from the
    /// positions handed out and brings them again), keeping what the bound needs.
    pub fn drop_held(&mut self, cluster: &str) {
        self.clear_where(|q| *q.id.cluster == *cluster);
        for q in self.queues.iter_mut().filter(|q| *q.id.cluster == *cluster) {
            q.done = false;
        }
    }

    /// Forgets these splits and what is held of them.
    pub fn remove(&mut self, ids: &[SplitId]) {
        if !ids.iter().any(|id| self.index.contains_key(id)) {
            return;
        }
        self.clear_where(|q| ids.contains(&q.id));
        self.queues.retain(|q| !ids.contains(&q.id));
        self.index = self
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.id.clone(), i))
            .collect();
    }
}
