//! The held records: a queue per split, and the fetched batches the queued records
//! stay in until they go out.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::bound::SplitFacts;
use crate::base::split::SplitId;
use crate::reader::fetch_path::Failed;
use crate::record::{BatchBytes, BatchEntry, RecordBatch};

/// One held record (entry `index` of the held batch `source`: it stays there
/// until it goes out, so a queue holds 16 bytes a record), or a record that failed
/// to deserialize (handed out as an error in its place).
pub(super) enum Held {
    Record { ts: i64, source: u32, index: u32 },
    Failed { ts: i64, failed: Box<Failed> },
}

impl Held {
    pub(super) fn ts(&self) -> i64 {
        match self {
            Held::Record { ts, .. } | Held::Failed { ts, .. } => *ts,
        }
    }
}

/// What a held record counts for in its split's share of memory: its key and value,
/// and about what an entry and Kafka's framing of a record take.
pub(super) fn weight<V>(entry: &BatchEntry<V>) -> usize {
    entry.bytes() as usize + RECORD_OVERHEAD
}

/// See [`weight`].
pub(super) const RECORD_OVERHEAD: usize = 64;

/// A split that holds more than this (by [`weight`]) while others hold the merge
/// back is paused, until it holds half as much.
pub(super) const FULL_BYTES: usize = 4 << 20;

/// A split's held records and what the bound needs of it.
pub(super) struct Queue {
    pub(super) id: SplitId,
    pub(super) items: VecDeque<Held>,
    /// The [`weight`] of its held records.
    pub(super) bytes: usize,
    pub(super) newest: Option<i64>,
    pub(super) fetched_at: Instant,
    /// The fetcher saw its stop: nothing more comes.
    pub(super) done: bool,
}

/// One record of `sources[source]` no longer held: the batch goes with its last
/// one, and its place is `free` again.
pub(super) fn let_go<V>(sources: &mut [Option<Source<V>>], free: &mut Vec<u32>, source: u32) {
    let place = &mut sources[source as usize];
    if let Some(s) = place {
        s.left -= 1;
        if s.left == 0 {
            *place = None;
            free.push(source);
        }
    }
}

/// A fetched batch, while records of it are held: its bytes, and its entries
/// (each taken when it goes out).
pub(super) struct Source<V> {
    pub(super) bytes: BatchBytes,
    pub(super) entries: Vec<Option<BatchEntry<V>>>,
    /// Its records still held.
    left: usize,
}

/// The held records of a reader's splits, and the bytes of the batches they came
/// in: a record goes out copied from there (a value shared from a fetch answer
/// stays shared), never copied while it waits.
pub(crate) struct TimeOrder<V> {
    pub(super) queues: Vec<Queue>,
    /// Looked up for every split each time the merge releases: a fast hasher.
    index: HashMap<SplitId, usize, foldhash::fast::RandomState>,
    pub(super) held: usize,
    pub(super) sources: Vec<Option<Source<V>>>,
    /// Free places in `sources`.
    pub(super) free: Vec<u32>,
    /// The newest timestamp handed out so far: a record older than it is late.
    pub(super) newest_out: i64,
}

impl<V> Default for TimeOrder<V> {
    fn default() -> Self {
        Self {
            queues: Vec::new(),
            index: HashMap::default(),
            held: 0,
            sources: Vec::new(),
            free: Vec::new(),
            newest_out: i64::MIN,
        }
    }
}

impl<V> TimeOrder<V> {
    /// A merge that goes on after `watermark` (restored from a checkpoint): records
    /// at or before it are late, as they were when it was handed out.
    pub fn after(watermark: Option<i64>) -> Self {
        Self {
            newest_out: watermark.map_or(i64::MIN, |w| w.saturating_add(1)),
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
                bytes: 0,
                newest: None,
                fetched_at: now,
                done: false,
            });
            self.queues.len() - 1
        })
    }

    /// Keeps a batch whose records are held; returns its place.
    fn keep(&mut self, bytes: BatchBytes, entries: Vec<Option<BatchEntry<V>>>) -> u32 {
        let left = entries.len();
        let source = Some(Source {
            bytes,
            entries,
            left,
        });
        match self.free.pop() {
            Some(i) => {
                self.sources[i as usize] = source;
                i
            }
            None => {
                self.sources.push(source);
                u32::try_from(self.sources.len() - 1).expect("fewer than 2^32 batches held")
            }
        }
    }

    /// Holds a fetched batch (and the failed record after it); `event` gives a
    /// record's event time from its value and Kafka timestamp. A record without one
    /// takes its split's newest.
    pub fn take(
        &mut self,
        batch: RecordBatch<V>,
        failed: Option<Failed>,
        event: impl Fn(Option<&V>, Option<i64>) -> Option<i64>,
        now: Instant,
    ) {
        let cluster = batch.cluster.clone();
        // A record stamped in the future (a producer's clock ahead) is merged as of
        // now: else it would hold its partition back until event time reached it.
        let wall = crate::base::retention::now_ms();
        let event = |v: Option<&V>, ts: Option<i64>| event(v, ts).map(|t| t.min(wall));
        let (bytes, entries) = batch.into_parts();
        if !entries.is_empty() {
            let topics = bytes.topics.clone();
            let mut held = Vec::with_capacity(entries.len());
            let mut last: Option<(u32, i32, usize)> = None;
            for (index, entry) in entries.iter().enumerate() {
                let i = match last {
                    Some((t, p, i)) if p == entry.partition && t == entry.topic => i,
                    _ => {
                        let id = SplitId {
                            cluster: cluster.clone(),
                            topic: topics[entry.topic as usize].clone(),
                            partition: entry.partition,
                        };
                        let i = self.slot(id, now);
                        last = Some((entry.topic, entry.partition, i));
                        i
                    }
                };
                let q = &mut self.queues[i];
                let ts = event(Some(&entry.value), entry.timestamp())
                    .or(q.newest)
                    .unwrap_or(i64::MIN);
                q.newest = Some(q.newest.map_or(ts, |n| n.max(ts)));
                q.fetched_at = now;
                q.bytes += weight(entry);
                held.push((i, ts, u32::try_from(index).unwrap_or(u32::MAX)));
            }
            let source = self.keep(bytes, entries.into_iter().map(Some).collect());
            for (i, ts, index) in held {
                self.queues[i]
                    .items
                    .push_back(Held::Record { ts, source, index });
                self.held += 1;
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
            self.held += 1;
        }
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

    /// The split's facts, if anything was fetched of it.
    pub fn facts(&self, id: &SplitId) -> Option<SplitFacts> {
        self.queue_of(id).map(|at| self.facts_at(at))
    }

    /// How much the queue `at` holds: records, and their [`weight`].
    pub fn held_at(&self, at: usize) -> (usize, usize) {
        let q = &self.queues[at];
        (q.items.len(), q.bytes)
    }

    /// How much of the split is held: records, and their [`weight`].
    #[cfg(test)]
    pub fn held_of(&self, id: &SplitId) -> (usize, usize) {
        self.queue_of(id).map_or((0, 0), |at| self.held_at(at))
    }

    /// Empties the queues `which` picks, letting go of their records' bytes.
    fn clear_where(&mut self, which: impl Fn(&Queue) -> bool) {
        let mut gone = Vec::new();
        for q in self.queues.iter_mut().filter(|q| which(q)) {
            self.held -= q.items.len();
            q.bytes = 0;
            for item in q.items.drain(..) {
                if let Held::Record { source, .. } = item {
                    gone.push(source);
                }
            }
        }
        for source in gone {
            let_go(&mut self.sources, &mut self.free, source);
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
