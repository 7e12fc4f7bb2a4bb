//! The release: held records handed out oldest first, as far as the bound allows.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::bound::Bound;
use super::queues::{Held, TimeOrder};
use super::shape::weight_of;
use crate::base::split::SplitId;
use crate::reader::fetch_path::Failed;
use crate::record::RecordBatch;

/// What one release hands out: records of one cluster in time order, or a failed
/// record alone; and the splits whose last records (up to their stop) went out.
pub(crate) struct Released<V> {
    pub batch: Option<RecordBatch<V>>,
    pub failed: Option<(Arc<str>, Failed)>,
    pub finished: Vec<SplitId>,
}

impl<V> TimeOrder<V> {
    /// Hands out what `bound` allows, oldest first: up to `max` records of one
    /// cluster (the cluster of the oldest), stopping before a record of another
    /// cluster or a failed one; a failed record first in line goes out alone.
    ///
    /// Records of a split go out in runs: all of its records older than the next
    /// split's first at once, without going back to the heap for each, and moved
    /// into the batch together.
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
        // Records older than one handed out before (a cluster that came back with
        // records older than the others', say): they go out at once, and are counted.
        let mut late = 0u64;
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
                            q.records -= 1;
                            self.held -= 1;
                            if q.done && q.items.is_empty() {
                                out.finished.push(q.id.clone());
                            }
                        }
                        break;
                    }
                    // Room for as many records as may go out, so that the batch
                    // is not grown (and copied) as it fills. Only keys are
                    // copied (into `data`); values stay in the batches they came in.
                    let room = max.min(self.held);
                    let mut b = RecordBatch::new(q.id.cluster.clone());
                    b.entries.reserve(room);
                    out.batch.insert(b)
                }
            };
            while let Some(front) = q.items.front_mut() {
                let run = match front {
                    Held::Run(run) => run,
                    // A failed record after records: it waits for the next release.
                    Held::Failed { .. } => break 'heads,
                };
                // How many of the run go out now: those the bound allows, before
                // what the next split has first, as many as there is room for.
                let room = max.saturating_sub(batch.len());
                let mut n = 0;
                while let Some(&t) = run.ts.get(n) {
                    if n == room || !bound.allows(t) || next.is_some_and(|x| (t, i) > x) {
                        break;
                    }
                    if t < self.newest_out {
                        late += 1;
                    } else {
                        self.newest_out = t;
                    }
                    n += 1;
                }
                if n > 0 {
                    run.ts.drain(..n);
                    let bytes = batch.extend_from(&run.from, run.entries.drain(..n), &mut data);
                    q.bytes = q.bytes.saturating_sub(weight_of(bytes, n));
                    q.records -= n;
                    self.held -= n;
                }
                match run.ts.front() {
                    None => {
                        q.items.pop_front();
                    }
                    Some(_) if n == room => break 'heads,
                    Some(&t) => {
                        heads.push(Reverse((t, i)));
                        break;
                    }
                }
            }
            if q.done && q.items.is_empty() {
                out.finished.push(q.id.clone());
            }
        }
        if let Some(b) = &mut out.batch {
            b.set_data(data);
            if late > 0 {
                metrics::counter!(crate::metrics::LATE_RECORDS, "cluster" => b.cluster.to_string())
                    .increment(late);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::time_order::bound::{SplitFacts, bound};
    use crate::record::BatchEntry;
    use bytes::Bytes;
    use std::time::{Duration, Instant};

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
    fn records_go_out_in_time_order_one_cluster_at_a_time_keys_and_all() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        o.take(
            batch("a", &[(0, 0, 10), (0, 1, 30), (1, 0, 15)]),
            None,
            (kafka_ts, None),
            now,
        );
        o.take(
            batch("b", &[(0, 0, 12), (0, 1, 20)]),
            None,
            (kafka_ts, None),
            now,
        );
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
            (kafka_ts, None),
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
            (kafka_ts, None),
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
        o.take(
            batch("a", &[(0, 0, year_3000)]),
            None,
            (kafka_ts, None),
            now,
        );
        let newest = o.facts(&id("a", 0)).unwrap().newest.unwrap();
        assert!(
            (wall..wall + 60_000).contains(&newest),
            "{newest} is not about now ({wall})"
        );
        // A later record of another split, stamped now, goes out after it.
        o.take(
            batch("b", &[(0, 0, wall + 60_000)]),
            None,
            (kafka_ts, None),
            now,
        );
        let b = o.release(Bound::Upto(wall + 60_000), 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0"]);
    }

    #[test]
    fn keys_and_values_stay_where_they_came_through_the_merge() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        let answer = Bytes::from(vec![7u8; 3000]);
        o.take(
            shared_batch("a", &answer, &[(0, 0, 10, 0..1000), (0, 1, 30, 1000..2000)]),
            None,
            (kafka_ts, None),
            now,
        );
        o.take(batch("a", &[(1, 0, 20)]), None, (kafka_ts, None), now);
        o.take(
            shared_batch("a", &answer, &[(2, 0, 25, 2000..3000)]),
            None,
            (kafka_ts, None),
            now,
        );
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0", "a/1/0", "a/2/0", "a/0/1"]);
        let buffers: Vec<&Bytes> = b.byte_buffers().collect();
        assert!(buffers[0].is_empty(), "nothing copied into its own data");
        assert_eq!(
            buffers.len(),
            5,
            "the answer once, and the data of each of the three batches"
        );
        for (i, from) in [(0, 0), (2, 2000), (3, 1000)] {
            let (buffer, range) = b.value_span(i).unwrap();
            assert_eq!(
                buffers[buffer].as_ptr(),
                answer.as_ptr(),
                "record {i}'s value is shared from the answer itself"
            );
            assert_eq!(range, from..from + 1000);
        }
        assert_eq!(b.get(1).unwrap().raw_value(), Some(&b"raw 0"[..]));
        for (i, key) in [(0, "k0"), (1, "k0"), (2, "k0"), (3, "k1")] {
            let r = b.get(i).unwrap();
            assert_eq!(r.key, Some(key.as_bytes()), "record {i}");
            assert_eq!(r.key_bytes().unwrap(), key.as_bytes());
            let (buffer, range) = b.key_span(i).unwrap();
            assert_ne!(buffer, 0, "record {i}'s key is shared");
            assert_eq!(&buffers[buffer][range], key.as_bytes());
        }
        let owned: Vec<Option<Bytes>> = b.into_iter().map(|r| r.key).collect();
        let k = |s: &'static str| Some(Bytes::from_static(s.as_bytes()));
        assert_eq!(owned, [k("k0"), k("k0"), k("k0"), k("k1")]);
        assert_eq!(o.held_of(&id("a", 0)), (0, 0));
        assert!(o.queues.iter().all(|q| q.items.is_empty()), "no run kept");
    }

    /// The fetch thread's note of a batch (its times and runs) holds it as reading
    /// each record would: same queues, same weights, same records out in the same
    /// order, a record without a timestamp and one stamped in the future included.
    #[test]
    fn a_batch_held_by_its_shape_is_held_as_one_read_record_by_record() {
        use crate::reader::time_order::shape::Shape;
        let now = Instant::now();
        let year_3000 = 32_503_680_000_000;
        let make = || {
            let mut b = batch(
                "a",
                &[
                    (0, 0, 10),
                    (0, 1, 40),
                    (1, 0, 15),
                    (1, 2, year_3000),
                    (0, 2, 30),
                ],
            );
            let untimed = BatchEntry::new(
                (0, 1, 1),
                (None, None),
                crate::record::RawSpans::default(),
                None,
                Default::default(),
                "a/1/1".to_string(),
            );
            b.entries.insert(3, untimed);
            b
        };
        let mut read = TimeOrder::default();
        read.take(make(), None, (kafka_ts, None), now);
        let mut shaped = TimeOrder::default();
        let b = make();
        let shape = Shape::of(&b);
        // Event times are not asked for: the shape has them.
        let wrong = |_: Option<&String>, _: Option<i64>| Some(0);
        shaped.take(b, None, (wrong, Some(shape)), now);
        for split in [id("a", 0), id("a", 1)] {
            assert_eq!(read.held_of(&split), shaped.held_of(&split), "{split:?}");
            let (r, s) = (read.facts(&split).unwrap(), shaped.facts(&split).unwrap());
            let (r, s) = (r.newest.unwrap(), s.newest.unwrap());
            assert!((r - s).abs() < 60_000, "{split:?}: {r} against {s}");
            assert!(r < year_3000, "a future timestamp is merged as of now");
        }
        assert_eq!(read.facts(&id("a", 0)).unwrap().newest, Some(40));
        assert_eq!(shaped.facts(&id("a", 0)).unwrap().newest, Some(40));
        let order = ["a/0/0", "a/1/0", "a/1/1", "a/0/1", "a/0/2", "a/1/2"];
        assert_eq!(values(&read.release(Bound::All, 100).batch.unwrap()), order);
        assert_eq!(
            values(&shaped.release(Bound::All, 100).batch.unwrap()),
            order
        );

        // A shape that does not fit the batch (records were dropped from it after
        // it was noted) is not used: each record is read.
        let mut fallback = TimeOrder::default();
        let shape = Shape::of(&make());
        fallback.take(batch("a", &[(0, 0, 10)]), None, (wrong, Some(shape)), now);
        assert_eq!(fallback.facts(&id("a", 0)).unwrap().newest, Some(0));
    }

    /// After a restore, records at or before the checkpoint's watermark are late:
    /// newer ones went out before the restart. They still go out, and are counted.
    #[test]
    fn after_a_restore_records_at_or_before_the_watermark_are_counted_late() {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let now = Instant::now();
        let mut o = TimeOrder::after(Some(20), 0);
        o.take(
            batch("a", &[(0, 0, 10), (0, 1, 20), (0, 2, 21)]),
            None,
            (kafka_ts, None),
            now,
        );
        let b = metrics::with_local_recorder(&recorder, || o.release(Bound::All, 100))
            .batch
            .unwrap();
        assert_eq!(values(&b), ["a/0/0", "a/0/1", "a/0/2"]);
        let late: u64 = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(k, ..)| k.key().name() == crate::metrics::LATE_RECORDS)
            .map(|(_, _, _, v)| match v {
                metrics_util::debugging::DebugValue::Counter(c) => c,
                _ => 0,
            })
            .sum();
        assert_eq!(late, 2, "10 and 20 are at or before the watermark 20");
    }

    #[test]
    fn removed_splits_lose_what_is_held_of_them() {
        let now = Instant::now();
        let mut o = TimeOrder::default();
        o.take(
            batch("a", &[(0, 0, 10), (1, 0, 5)]),
            None,
            (kafka_ts, None),
            now,
        );
        assert_eq!(o.held_of(&id("a", 1)).0, 1);
        o.remove(&[id("a", 1)]);
        assert_eq!(o.held_of(&id("a", 1)), (0, 0));
        assert!(o.facts(&id("a", 1)).is_none());
        let b = o.release(Bound::All, 100).batch.unwrap();
        assert_eq!(values(&b), ["a/0/0"]);
        assert!(o.is_empty());
    }
}
