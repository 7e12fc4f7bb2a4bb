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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::SourceReader;
use super::fetch_path::Failed;
use crate::base::split::SplitId;
use crate::deserializer::Deserializer;
use crate::record::{BatchBytes, BatchEntry, RecordBatch};

/// Up to which event time held records may go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bound {
    /// None: a split that holds the merge back has fetched nothing yet.
    Hold,
    /// Records at or before this time.
    Upto(i64),
    /// Every record: no split holds the merge back.
    All,
}

impl Bound {
    fn allows(self, ts: i64) -> bool {
        match self {
            Bound::Hold => false,
            Bound::Upto(b) => ts <= b,
            Bound::All => true,
        }
    }
}

/// A split's part in the bound, as the reader sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitFacts {
    /// Its newest event time fetched.
    pub newest: Option<i64>,
    /// When it last fetched a record (or came to the reader).
    pub fetched_at: Instant,
    /// Finished, or every record of it up to its stop is held here.
    pub done: bool,
}

/// The bound over all splits' facts: the lowest newest timestamp (less the
/// out-of-orderness, in ms) of the splits that are neither done nor idle.
pub(super) fn bound(
    splits: impl IntoIterator<Item = SplitFacts>,
    out_of_orderness: i64,
    idle_timeout: Option<std::time::Duration>,
    now: Instant,
) -> Bound {
    let mut lowest: Option<i64> = None;
    for s in splits {
        if s.done || idle_timeout.is_some_and(|t| now.saturating_duration_since(s.fetched_at) >= t)
        {
            continue;
        }
        let Some(newest) = s.newest else {
            return Bound::Hold;
        };
        let b = newest.saturating_sub(out_of_orderness);
        lowest = Some(lowest.map_or(b, |l| l.min(b)));
    }
    lowest.map_or(Bound::All, Bound::Upto)
}

/// One held record (entry `index` of the held batch `source`: it stays there
/// until it goes out, so a queue holds 16 bytes a record), or a record that failed
/// to deserialize (handed out as an error in its place).
enum Held {
    Record { ts: i64, source: u32, index: u32 },
    Failed { ts: i64, failed: Box<Failed> },
}

impl Held {
    fn ts(&self) -> i64 {
        match self {
            Held::Record { ts, .. } | Held::Failed { ts, .. } => *ts,
        }
    }
}

/// What a held record counts for in its split's share of memory: its key and value,
/// and about what an entry and Kafka's framing of a record take.
fn weight<V>(entry: &BatchEntry<V>) -> usize {
    entry.bytes() as usize + RECORD_OVERHEAD
}

/// See [`weight`].
const RECORD_OVERHEAD: usize = 64;

/// The most bytes a release sets aside for its batch's keys and values at once.
const RESERVE_MAX: usize = 4 << 20;

/// A split that holds more than this (by [`weight`]) while others hold the merge
/// back is paused, until it holds half as much.
const FULL_BYTES: usize = 4 << 20;

/// A split's held records and what the bound needs of it.
struct Queue {
    id: SplitId,
    items: VecDeque<Held>,
    /// The [`weight`] of its held records.
    bytes: usize,
    newest: Option<i64>,
    fetched_at: Instant,
    /// The fetcher saw its stop: nothing more comes.
    done: bool,
}

/// One record of `sources[source]` no longer held: the batch goes with its last
/// one, and its place is `free` again.
fn let_go<V>(sources: &mut [Option<Source<V>>], free: &mut Vec<u32>, source: u32) {
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
struct Source<V> {
    bytes: BatchBytes,
    entries: Vec<Option<BatchEntry<V>>>,
    /// Its records still held.
    left: usize,
}

/// What one release hands out: records of one cluster in time order, or a failed
/// record alone; and the splits whose last records (up to their stop) went out.
pub(super) struct Released<V> {
    pub batch: Option<RecordBatch<V>>,
    pub failed: Option<(Arc<str>, Failed)>,
    pub finished: Vec<SplitId>,
}

/// The held records of a reader's splits, and the bytes of the batches they came
/// in: a record goes out copied from there (a value shared from a fetch answer
/// stays shared), never copied while it waits.
pub(super) struct TimeOrder<V> {
    queues: Vec<Queue>,
    /// Looked up for every split each time the merge releases: a fast hasher.
    index: HashMap<SplitId, usize, foldhash::fast::RandomState>,
    held: usize,
    sources: Vec<Option<Source<V>>>,
    /// Free places in `sources`.
    free: Vec<u32>,
}

impl<V> Default for TimeOrder<V> {
    fn default() -> Self {
        Self {
            queues: Vec::new(),
            index: HashMap::default(),
            held: 0,
            sources: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<V> TimeOrder<V> {
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

    /// Hands out what `bound` allows, oldest first: up to `max` records of one
    /// cluster (the cluster of the oldest), stopping before a record of another
    /// cluster or a failed one; a failed record first in line goes out alone.
    ///
    /// Records of a split go out in runs: all of its records older than the next
    /// split's first at once, without going back to the heap for each.
    pub fn release(&mut self, bound: Bound, max: usize) -> Released<V> {
        let mut out = Released {
            batch: None,
            failed: None,
            finished: Vec::new(),
        };
        if self.held == 0 || bound == Bound::Hold {
            return out;
        }
        let mut heads: BinaryHeap<Reverse<(i64, usize)>> = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.items.front().map(|h| Reverse((h.ts(), i))))
            .collect();
        let mut data: Vec<u8> = Vec::new();
        'heads: while let Some(Reverse((ts, i))) = heads.pop() {
            if !bound.allows(ts) {
                break;
            }
            // The run ends before what the next split has first (ties to the lower
            // queue, as the heap orders them).
            let next = heads.peek().map(|Reverse(n)| *n);
            let q = &mut self.queues[i];
            let batch = match &mut out.batch {
                Some(b) if *b.cluster != *q.id.cluster || b.len() >= max => break,
                Some(b) => b,
                None => {
                    if matches!(q.items.front(), Some(Held::Failed { .. })) {
                        if let Some(Held::Failed { failed, .. }) = q.items.pop_front() {
                            out.failed = Some((q.id.cluster.clone(), *failed));
                            self.held -= 1;
                            if q.done && q.items.is_empty() {
                                out.finished.push(q.id.clone());
                            }
                        }
                        break;
                    }
                    // Room for as many records as may go out, so that the batch
                    // is not grown (and copied) as it fills: sized by this
                    // split's records.
                    let room = max.min(self.held);
                    let per = (q.bytes / q.items.len().max(1)).saturating_sub(RECORD_OVERHEAD);
                    data.reserve(room.saturating_mul(per).min(RESERVE_MAX));
                    let mut b = RecordBatch::new(q.id.cluster.clone());
                    b.entries.reserve(room);
                    out.batch.insert(b)
                }
            };
            while let Some(front) = q.items.front() {
                let t = front.ts();
                if !bound.allows(t) || next.is_some_and(|n| (t, i) > n) {
                    heads.push(Reverse((t, i)));
                    break;
                }
                if batch.len() >= max {
                    break 'heads;
                }
                match q.items.pop_front() {
                    Some(Held::Record { source, index, .. }) => {
                        self.held -= 1;
                        if let Some(Some(s)) = self.sources.get_mut(source as usize)
                            && let Some(entry) =
                                s.entries.get_mut(index as usize).and_then(Option::take)
                        {
                            q.bytes = q.bytes.saturating_sub(weight(&entry));
                            batch.push_from(&s.bytes, entry, &mut data);
                        }
                        let_go(&mut self.sources, &mut self.free, source);
                    }
                    Some(failed @ Held::Failed { .. }) => {
                        // A failed record after records: it waits for the next release.
                        q.items.push_front(failed);
                        break 'heads;
                    }
                    None => break,
                }
            }
            if q.done && q.items.is_empty() {
                out.finished.push(q.id.clone());
            }
        }
        if let Some(b) = &mut out.batch {
            b.set_data(data);
        }
        out
    }
}

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
            let event = |v: Option<&D::Value>, ts: Option<i64>| self.event_time(v, ts);
            order.take(batch, polled.failed.map(|f| *f), event, Instant::now());
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
            self.states.iter().map(|s| order.queue_of(&s.id)).collect();
        let facts = self
            .states
            .iter()
            .zip(&queues)
            .filter(|(s, _)| !s.finished)
            .map(|(s, q)| {
                let mut f = q.map_or(
                    SplitFacts {
                        newest: None,
                        fetched_at: s.active_at,
                        done: false,
                    },
                    |q| order.facts_at(q),
                );
                if s.paused {
                    // Not fetched because of us: not idle.
                    f.fetched_at = now;
                }
                f
            });
        let bound = bound(facts, ooo, strategy.idle_timeout(), now);
        let released = order.release(bound, self.max_batch);
        // Back-pressure: a split holding much while it waits for the others is
        // paused, unless it is the one the others wait for. Enough is held of each
        // to keep its fetches going (an answer brings up to
        // `max.partition.fetch.bytes`, 1 MiB unless set) while the merge drains it;
        // many small records count by number too.
        let unit = self.max_batch.min(1024);
        for (s, q) in self.states.iter_mut().zip(&queues) {
            let (records, bytes) = q.map_or((0, 0), |q| order.held_at(q));
            let newest = q.and_then(|q| order.facts_at(q).newest);
            let waited_for = match bound {
                Bound::Hold => false,
                Bound::Upto(b) => newest.is_none_or(|n| n.saturating_sub(ooo) <= b),
                Bound::All => true,
            };
            let over = |share: usize| bytes > FULL_BYTES / share || records > 64 * unit / share;
            s.full = !waited_for && (over(1) || (s.full && over(2)));
        }
        self.time_order = Some(order);
        self.sync_pauses();
        let mut found = usize::from(released.failed.is_some());
        self.handout.failed = released.failed;
        if let Some(mut batch) = released.batch {
            found += batch.len();
            batch.set_streams(&self.stream_index);
            self.handout.cluster = Some(batch.cluster.clone());
            self.handout.records = Some(batch.into_iter());
        } else if let Some((cluster, _)) = &self.handout.failed {
            self.handout.cluster = Some(cluster.clone());
        }
        self.last = None;
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;

    fn id(cluster: &str, partition: i32) -> SplitId {
        SplitId::new(cluster, "t", partition)
    }

    /// A batch of `cluster`'s topic `t`: (partition, offset, timestamp), each with
    /// the key `k<offset>` and the value `cluster/partition/offset`.
    fn batch(cluster: &str, records: &[(i32, i64, i64)]) -> RecordBatch<String> {
        let mut b = RecordBatch::new(cluster.into());
        let t: Arc<str> = "t".into();
        let topic = b.topic_index(&t);
        let mut data = Vec::new();
        for (p, o, ts) in records {
            let mut span = |bytes: String| {
                let start = data.len();
                data.extend_from_slice(bytes.as_bytes());
                Some((start, bytes.len() as u32))
            };
            let raw = crate::record::RawSpans {
                key: span(format!("k{o}")),
                value: span(format!("raw {o}")),
            };
            b.entries.push(entry(cluster, (topic, *p, *o), *ts, raw));
        }
        b.set_data(data);
        b
    }

    /// The entry of record `at` (topic index, partition, offset) with its key and
    /// value at `raw`, valued `cluster/partition/offset`.
    fn entry(
        cluster: &str,
        at: (u32, i32, i64),
        ts: i64,
        raw: crate::record::RawSpans,
    ) -> BatchEntry<String> {
        let value = format!("{cluster}/{}/{}", at.1, at.2);
        BatchEntry::new(at, (Some(ts), None), raw, None, Default::default(), value)
    }

    /// A batch of `cluster`'s topic `t` whose values are shared from `answer`, one
    /// record per (partition, offset, timestamp, value's range in `answer`).
    fn shared_batch(
        cluster: &str,
        answer: &Bytes,
        records: &[(i32, i64, i64, std::ops::Range<usize>)],
    ) -> RecordBatch<String> {
        let mut b = RecordBatch::new(cluster.into());
        let t: Arc<str> = "t".into();
        let topic = b.topic_index(&t);
        b.shared.push(answer.clone());
        let mut data = Vec::new();
        for (p, o, ts, range) in records {
            let key = format!("k{o}");
            let k = (data.len(), key.len() as u32);
            data.extend_from_slice(key.as_bytes());
            let len = range.len() as u32;
            let raw = crate::record::RawSpans {
                key: Some(k),
                value: crate::record::shared_span(0, range.start, len),
            };
            b.entries.push(entry(cluster, (topic, *p, *o), *ts, raw));
        }
        b.set_data(data);
        b
    }

    fn kafka_ts(_: Option<&String>, ts: Option<i64>) -> Option<i64> {
        ts
    }

    fn values(b: &RecordBatch<String>) -> Vec<String> {
        b.iter().map(|r| r.value.clone()).collect()
    }

    fn facts(o: &TimeOrder<String>, ids: &[SplitId], now: Instant) -> Bound {
        let splits = ids.iter().map(|id| {
            o.facts(id).unwrap_or(SplitFacts {
                newest: None,
                fetched_at: now,
                done: false,
            })
        });
        bound(splits, 0, Some(Duration::from_secs(5)), now)
    }

    #[test]
    fn the_bound_is_the_lowest_newest_of_splits_neither_done_nor_idle() {
        let now = Instant::now();
        let at = |newest, ago: u64, done| SplitFacts {
            newest,
            fetched_at: now - Duration::from_secs(ago),
            done,
        };
        let idle = Some(Duration::from_secs(5));
        assert_eq!(
            bound(
                [at(Some(10), 0, false), at(Some(7), 1, false)],
                2,
                idle,
                now
            ),
            Bound::Upto(5)
        );
        assert_eq!(
            bound([at(Some(10), 0, false), at(None, 1, false)], 0, idle, now),
            Bound::Hold,
            "a split with nothing fetched yet holds everything"
        );
        assert_eq!(
            bound([at(Some(10), 0, false), at(None, 6, false)], 0, idle, now),
            Bound::Upto(10),
            "unless it is idle"
        );
        assert_eq!(
            bound([at(Some(3), 9, false), at(Some(1), 0, true)], 0, idle, now),
            Bound::All,
            "idle and done splits hold nothing back"
        );
        assert_eq!(
            bound([at(Some(3), 9, false)], 0, None, now),
            Bound::Upto(3),
            "without idleness a quiet split holds the merge"
        );
    }

    #[test]
    fn records_go_out_in_time_order_one_cluster_at_a_time_keys_and_all() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        o.take(
            batch("a", &[(0, 0, 10), (0, 1, 30), (1, 0, 15)]),
            None,
            kafka_ts,
            now,
        );
        o.take(batch("b", &[(0, 0, 12), (0, 1, 20)]), None, kafka_ts, now);
        let ids = [id("a", 0), id("a", 1), id("b", 0)];
        // a/1's newest is 15: nothing after 15 may go out yet.
        assert_eq!(facts(&o, &ids, now), Bound::Upto(15));
        let r = o.release(Bound::Upto(15), 100);
        let b = r.batch.unwrap();
        assert_eq!(
            values(&b),
            ["a/0/0"],
            "b/0/0 (12) is next, of another cluster"
        );
        assert_eq!(b.get(0).unwrap().key, Some(&b"k0"[..]));
        assert_eq!(b.get(0).unwrap().raw_value(), Some(&b"raw 0"[..]));
        let b = o.release(Bound::Upto(15), 100).batch.unwrap();
        assert_eq!(values(&b), ["b/0/0"]);
        let b = o.release(Bound::Upto(15), 100).batch.unwrap();
        assert_eq!(values(&b), ["a/1/0"]);
        assert!(
            o.release(Bound::Upto(15), 100).batch.is_none(),
            "20 and 30 wait"
        );
        assert!(!o.is_empty());
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["b/0/1"]);
        let b = o.release(Bound::All, 1).batch.unwrap();
        assert_eq!(values(&b), ["a/0/1"]);
        assert!(o.is_empty());
    }

    #[test]
    fn a_split_s_records_keep_their_offset_order_even_when_its_timestamps_go_back() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        o.take(
            batch("a", &[(0, 0, 50), (0, 1, 5), (1, 0, 20)]),
            None,
            kafka_ts,
            now,
        );
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["a/1/0", "a/0/0", "a/0/1"]);
    }

    #[test]
    fn a_failed_record_goes_out_alone_in_its_place_and_done_splits_finish_when_emptied() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        let failed = Failed {
            topic: "t".into(),
            partition: 0,
            offset: 1,
            timestamp: Some(20),
            hash: 0,
            bytes: 3,
            error: crate::deserializer::DeserializeError {
                cluster: "a".into(),
                topic: "t".into(),
                partition: 0,
                offset: 1,
                reason: "bad".into(),
            },
        };
        o.take(
            batch("a", &[(0, 0, 10), (1, 0, 30)]),
            Some(failed),
            kafka_ts,
            now,
        );
        assert!(!o.finish(&id("a", 0)), "a/0 still holds records");
        assert!(o.finish(&id("z", 9)), "nothing held of an unknown split");
        let r = o.release(Bound::All, 100);
        assert_eq!(values(&r.batch.unwrap()), ["a/0/0"]);
        assert!(r.finished.is_empty());
        let r = o.release(Bound::All, 100);
        assert!(r.batch.is_none());
        assert_eq!(r.failed.unwrap().1.offset, 1);
        assert_eq!(r.finished, [id("a", 0)]);
        let r = o.release(Bound::All, 100);
        assert_eq!(values(&r.batch.unwrap()), ["a/1/0"]);
        assert!(o.is_empty());
    }

    #[test]
    fn a_record_stamped_in_the_future_is_merged_as_of_when_it_was_fetched() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        let wall = crate::base::retention::now_ms();
        let year_3000 = 32_503_680_000_000;
        o.take(batch("a", &[(0, 0, year_3000)]), None, kafka_ts, now);
        let newest = o.facts(&id("a", 0)).unwrap().newest.unwrap();
        assert!(
            (wall..wall + 60_000).contains(&newest),
            "{newest} is not about now ({wall})"
        );
        // A later record of another split, stamped now, goes out after it.
        o.take(batch("b", &[(0, 0, wall + 60_000)]), None, kafka_ts, now);
        let b = o.release(Bound::Upto(wall + 60_000), 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0"]);
    }

    #[test]
    fn shared_values_stay_shared_through_the_merge_and_small_ones_are_copied() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        let answer = Bytes::from(vec![7u8; 3000]);
        o.take(
            shared_batch("a", &answer, &[(0, 0, 10, 0..1000), (0, 1, 30, 1000..2000)]),
            None,
            kafka_ts,
            now,
        );
        o.take(batch("a", &[(1, 0, 20)]), None, kafka_ts, now);
        o.take(
            shared_batch("a", &answer, &[(2, 0, 25, 2000..3000)]),
            None,
            kafka_ts,
            now,
        );
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0", "a/1/0", "a/2/0", "a/0/1"]);
        let buffers: Vec<&Bytes> = b.byte_buffers().collect();
        assert_eq!(buffers.len(), 2, "its data, and the answer once");
        for (i, from) in [(0, 0), (2, 2000), (3, 1000)] {
            let (buffer, range) = b.value_span(i).unwrap();
            assert_eq!(buffer, 1, "record {i}'s value is shared");
            assert_eq!(
                buffers[1].as_ptr(),
                answer.as_ptr(),
                "from the answer itself"
            );
            assert_eq!(range, from..from + 1000);
        }
        assert_eq!(b.value_span(1).unwrap().0, 0, "a small value is copied");
        assert_eq!(b.get(1).unwrap().raw_value(), Some(&b"raw 0"[..]));
        assert_eq!(b.get(3).unwrap().key, Some(&b"k1"[..]));
        assert_eq!(o.held_of(&id("a", 0)), (0, 0));
        assert!(o.sources.iter().all(Option::is_none), "no batch kept");
    }

    #[test]
    fn removed_splits_lose_what_is_held_of_them() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        o.take(batch("a", &[(0, 0, 10), (1, 0, 5)]), None, kafka_ts, now);
        assert_eq!(o.held_of(&id("a", 1)).0, 1);
        o.remove(&[id("a", 1)]);
        assert_eq!(o.held_of(&id("a", 1)), (0, 0));
        assert!(o.facts(&id("a", 1)).is_none());
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0"]);
        assert!(o.is_empty());
    }
}
