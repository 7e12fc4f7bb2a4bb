//! Readers: the parallel workers that own splits, fetch from each cluster they have
//! splits on, and hand records out in order while tracking positions.

pub(crate) mod cluster_consumer;
mod fetch_path;
mod fetcher;
mod native;
mod native_fetch;

mod apply;
mod fetchers;
mod links;
mod pace;
mod splits;
pub(crate) use links::SharedHandles;
mod handout;
mod positions;
mod reopen;
mod split_state;
mod staging;
mod time_order;
mod watermarks;

use crate::base::config::ReadPolicy;
pub(crate) use crate::base::protocol::{ReaderEvent, ReaderNotice};
use split_state::Buffered;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::base::split::KafkaSplit;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::record::{Record, RecordBatch};

/// One of the source's parallel readers: a stream of records from the splits it owns.
///
/// Records are handed out one at a time by [`SourceReader::next`], or a polled batch
/// at a time by [`SourceReader::next_batch`] (cheaper per record); the two can be
/// mixed. Positions count only the records handed out; a
/// [`checkpoint`](SourceReader::checkpoint) resumes each split at exactly the record
/// after the last one handed out. Dropping a reader returns its splits (at those
/// positions) to the enumerator, which gives them to the other readers.
pub struct SourceReader<D: Deserializer> {
    settings: ReaderSettings<D>,
    /// The enumerator's events, the notices back, and the handles shared with it.
    links: links::Links,
    /// One fetcher per cluster this reader has splits on, and their answers.
    fetchers: fetchers::Fetchers<D>,
    /// The splits this reader owns, with their positions.
    splits: splits::Splits,
    /// What the last poll found and is not handed out yet (boxed: it is touched once
    /// per batch, and keeps the reader small to move).
    handout: Box<Buffered<D::Value>>,
    /// Event time, when the source has a watermark strategy.
    watermarks: Option<Box<watermarks::Watermarks>>,
    /// In time order: the records fetched and held for the merge.
    time_order: Option<Box<time_order::TimeOrder<D::Value>>>,
    closed: bool,
}

impl<D: Deserializer> std::fmt::Debug for SourceReader<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceReader")
            .field("id", &self.settings.id)
            .field("splits", &self.splits.len())
            .finish()
    }
}

/// What a reader is made with and keeps as it is.
pub(crate) struct ReaderSettings<D: Deserializer> {
    pub id: usize,
    pub deserializer: Arc<D>,
    pub max_batch: usize,
    pub poll_timeout: Duration,
    pub include_headers: bool,
    pub policy: ReadPolicy,
    /// The program's hooks for each cluster's librdkafka clients.
    pub client_hooks: Option<crate::base::hooks::ClientHooksFactory>,
    /// The shard of a sharded source, recorded in its checkpoints.
    pub shard: Option<crate::base::shard::Shard>,
    /// The program's event timestamps of values (else the Kafka timestamps count).
    pub event_timestamps: Option<crate::base::watermark::EventTimestamps<D::Value>>,
}

/// What a reader is made of.
pub(crate) struct ReaderParts<D: Deserializer> {
    pub settings: ReaderSettings<D>,
    pub events: mpsc::UnboundedReceiver<ReaderEvent>,
    pub notices: mpsc::UnboundedSender<ReaderNotice>,
    pub shared: links::SharedHandles,
    /// The watermark strategy, and the watermark restored from a checkpoint.
    pub watermarks: Option<(crate::base::watermark::WatermarkStrategy, Option<i64>)>,
    /// Hand records out in time order.
    pub time_order: bool,
}

impl<D: Deserializer> SourceReader<D> {
    pub(crate) fn new(parts: ReaderParts<D>) -> Self {
        let id = parts.settings.id;
        Self {
            settings: parts.settings,
            links: links::Links::new(parts.events, parts.notices, parts.shared),
            fetchers: fetchers::Fetchers::new(),
            splits: splits::Splits::default(),
            handout: Box::default(),
            time_order: parts.time_order.then(|| {
                let restored = parts
                    .watermarks
                    .as_ref()
                    .and_then(|(_, restored)| *restored);
                Box::new(time_order::TimeOrder::after(restored, id))
            }),
            watermarks: parts
                .watermarks
                .map(|(s, restored)| Box::new(watermarks::Watermarks::new(s, restored))),
            closed: false,
        }
    }

    /// This reader's index.
    pub fn id(&self) -> usize {
        self.settings.id
    }

    /// Number of splits this reader owns (finished ones included).
    pub fn split_count(&self) -> usize {
        self.splits.len()
    }

    fn is_done(&self) -> bool {
        self.links.no_more_splits()
            && self.handout.records.is_none()
            && self.handout.failed.is_none()
            && self.handout.diverged.is_empty()
            && self.time_order.as_ref().is_none_or(|o| o.is_empty())
            && !self.fetchers.any_to_start()
            && self.splits.all_finished()
    }

    /// The next record, or `None` once the input has ended (bounded mode: every split
    /// reached its stop and no more splits will come).
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        loop {
            if self.closed {
                return None;
            }
            if let Some(r) = self.pop() {
                return Some(r);
            }
            match self.fill().await {
                Ok(true) => return None,
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next batch of records: what one poll of a cluster's consumer found (at most
    /// [`max_batch_size`](crate::SourceBuilder::max_batch_size) records, all of one
    /// cluster), or `None` once the input has ended. A record that fails to
    /// deserialize ends its batch and is handed out alone as an error by the next
    /// call.
    ///
    /// Positions advance when the batch is handed out: a checkpoint taken after this
    /// returns resumes each split right after its last record in the batch. Records
    /// left over from [`next`](Self::next) come first. Cheaper per record than
    /// `next`: no per-record call, queue or reference counting of the cluster and
    /// topic.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        // A fetch path may poll more (records it put straight into the batch).
        self.next_batch_up_to(self.settings.max_batch).await
    }

    /// [`next_batch`](Self::next_batch), with at most `max` records (at least one):
    /// the rest of what was polled comes with the next call, and positions advance
    /// only past the records handed out. For a reader that must stop at an exact
    /// count without taking records it will not use.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next_batch_up_to(
        &mut self,
        max: usize,
    ) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        loop {
            if self.closed {
                return None;
            }
            if let Some(r) = self.take_batch(max) {
                return Some(r);
            }
            match self.fill().await {
                Ok(true) => return None,
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Waits until [`next`](Self::next) or [`next_batch`](Self::next_batch) has
    /// something to return at once (records, an error or the end of the input), and
    /// takes nothing: for a program that waits in one place and takes records in
    /// another, as an event loop does when a thread waits for it. A failure met while
    /// waiting is kept for the next call.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn ready(&mut self) {
        loop {
            if self.closed
                || self.handout.records.is_some()
                || self.handout.failed.is_some()
                || !self.handout.diverged.is_empty()
            {
                return;
            }
            match self.fill().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    // Handed out before any record, as a mirror's divergence is.
                    self.handout.diverged.push(e);
                    return;
                }
            }
        }
    }

    /// Stops reading and closes every consumer (waiting for them and the fetch
    /// threads, on the blocking pool), returning unfinished splits to the enumerator.
    pub async fn close(mut self) {
        let fetchers = self.shutdown();
        let threads = self.fetchers.stop_threads();
        let _ = tokio::task::spawn_blocking(move || {
            for fetcher in fetchers {
                fetcher.wait();
            }
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }

    /// Returns unfinished splits to the enumerator and stops the fetchers (each closes
    /// its consumer on its own thread).
    fn shutdown(&mut self) -> Vec<fetcher::Closed> {
        if !self.closed {
            self.closed = true;
            let _ = self.drain_events();
            // The splits leave this reader (to another, or with the source): their
            // series are marked removed before anyone else reports them.
            self.splits.drop_lags();
            let splits: Vec<KafkaSplit> = self
                .positions()
                .into_iter()
                .filter(|s| !s.is_finished())
                .collect();
            self.links.notice(ReaderNotice::Closed {
                reader: self.settings.id,
                splits,
            });
        }
        self.fetchers.stop()
    }
}

impl<D: Deserializer> Drop for SourceReader<D> {
    fn drop(&mut self) {
        // The fetchers let their consumers go, and the fetch threads end, by
        // themselves.
        drop(self.shutdown());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::properties::ClientProperties;
    use crate::base::split::SplitId;
    use crate::metrics as m;
    use crate::record::BatchEntry;
    use fetch_path::Polled;
    use std::collections::BTreeMap;

    /// A program slower than its fetchers, reading two clusters: the answers waiting
    /// in the reader stay at one per cluster (they grew by a batch per refill before,
    /// without bound), and every record still comes out once.
    #[test]
    fn answers_waiting_for_a_slow_program_stay_one_per_cluster() {
        use crate::metadata::{ClusterMetadata, KafkaStream, StaticMetadataService};
        use mck_testkit::TestCluster;
        let kafka = mck_testkit::shared_cluster("reader-ready")
            .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
        let topic = "ready";
        kafka.create_topic(topic, 2).unwrap();
        mck_testkit::fill_values(kafka, topic, 2, 2_000, "v");
        let meta = || {
            ClusterMetadata::builder(kafka.bootstrap_servers())
                .topics([topic])
                .build()
                .unwrap()
        };
        // Two logical clusters on one broker: each record is read twice, once
        // through each.
        let stream = KafkaStream::new("s")
            .with_cluster("one", meta())
            .with_cluster("two", meta());
        let rt = mck_testkit::runtime();
        rt.block_on(async {
            let (coordinator, mut readers) = crate::MultiClusterKafkaSource::builder()
                .metadata_service(StaticMetadataService::new([stream]).unwrap())
                .stream_ids(["s"])
                .deserializer(crate::deserializer::Utf8)
                .stopping_offsets(crate::base::offsets::StoppingOffsets::Latest)
                .max_batch_size(50)
                .build()
                .unwrap()
                .open_parallel()
                .await
                .unwrap();
            let mut reader = readers.pop().expect("one reader");
            let (mut records, mut most) = (0, 0);
            let read = tokio::time::timeout(Duration::from_secs(120), async {
                while let Some(batch) = reader.next_batch_up_to(5).await {
                    records += batch.expect("a batch").len();
                    most = most.max(reader.fetchers.ready_len());
                    // Slower than the fetchers.
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            })
            .await;
            assert!(read.is_ok(), "the bounded read ends; {records} records");
            assert_eq!(records, 2 * 4_000, "each record once through each cluster");
            assert!(
                most <= 2,
                "{most} answers waited in the reader for two clusters"
            );
            reader.close().await;
            coordinator.close().await;
        });
    }

    fn reader() -> SourceReader<crate::deserializer::Utf8> {
        let (_events_tx, events) = mpsc::unbounded_channel();
        let (notices, _notices_rx) = mpsc::unbounded_channel();
        SourceReader::new(ReaderParts {
            settings: ReaderSettings {
                id: 0,
                deserializer: Arc::new(crate::deserializer::Utf8),
                max_batch: 1024,
                poll_timeout: Duration::from_millis(100),
                include_headers: false,
                policy: ReadPolicy::default(),
                client_hooks: None,
                shard: None,
                event_timestamps: None,
            },
            events,
            notices,
            shared: SharedHandles {
                clients: Default::default(),
                retained: Default::default(),
                active: Default::default(),
                stream_index: Default::default(),
            },
            watermarks: None,
            time_order: false,
        })
    }

    /// Hands out one batch of `a`/`t` records: (partition, offset, timestamp).
    fn hand_out_timed(
        r: &mut SourceReader<crate::deserializer::Utf8>,
        records: &[(i32, i64, i64)],
    ) -> RecordBatch<String> {
        let mut batch = RecordBatch::new("a".into());
        let t: Arc<str> = "t".into();
        let k = batch.topic_index(&t);
        for (p, o, ts) in records {
            batch
                .entries
                .push(BatchEntry::timed(k, *p, *o, *ts, format!("{p}/{o}")));
        }
        r.handout.records = Some(batch.into_iter());
        r.take_batch(usize::MAX).unwrap().unwrap()
    }

    /// Records without headers get their fingerprint hash only when they are the
    /// last of their split handed out; that is the one positions (and checkpoints)
    /// keep, as if every record had been hashed. A record with headers keeps the hash
    /// it was fetched with.
    #[test]
    fn the_last_record_of_each_split_handed_out_keeps_its_fingerprint_hash() {
        use crate::record::RawSpans;
        let mut r = reader();
        r.apply(assign(&[(0, 0), (1, 0), (2, 0)])).unwrap();
        let mut batch = RecordBatch::new("a".into());
        let t = batch.topic_index(&Arc::from("t"));
        batch.data = bytes::Bytes::from_static(b"k0v0k1v1k2v2k3v3");
        let at = |i: usize| RawSpans {
            key: Some((4 * i, 2)),
            value: Some((4 * i + 2, 2)),
        };
        // Runs of splits interleave: 0, 1, 0, 2 (with headers, known hash 77), 2.
        for (p, o, raw, hash) in [
            (0, 0, at(0), None),
            (1, 0, at(1), None),
            (0, 1, at(2), None),
            (2, 0, at(3), Some(77)),
        ] {
            batch.entries.push(BatchEntry::new(
                (t, p, o),
                (Some(5), hash),
                raw,
                // The batch's leader epoch, which the last record keeps.
                Some(10 + p + o as i32),
                Default::default(),
                format!("{p}/{o}"),
            ));
        }
        r.handout.records = Some(batch.into_iter());
        let handed = r.take_batch(usize::MAX).unwrap().unwrap();
        assert_eq!(handed.len(), 4);
        let last = |p: i32| {
            let split = r.positions().into_iter().find(|s| s.id.partition == p);
            let last = split.and_then(|s| s.last).expect("a last record");
            let f = last.fingerprint;
            (f.offset, f.hash, f.leader_epoch)
        };
        let hash = |k: &[u8], v: &[u8]| crate::base::split::record_hash(Some(k), Some(v), &[]);
        assert_eq!(last(0), (1, hash(b"k2", b"v2"), Some(11)));
        assert_eq!(last(1), (0, hash(b"k1", b"v1"), Some(11)));
        assert_eq!(last(2), (0, 77, Some(12)));
    }

    /// A batch of at most `max` records leaves the rest for the next call, and the
    /// positions move only past what was handed out.
    #[test]
    fn a_batch_of_at_most_n_records_leaves_the_rest_and_their_positions() {
        let mut r = reader();
        r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
        let mut batch = RecordBatch::new("a".into());
        let k = batch.topic_index(&Arc::from("t"));
        for (p, o) in [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1)] {
            let entry = BatchEntry::timed(k, p, o, 1, format!("{p}/{o}"));
            batch.entries.push(entry);
        }
        r.handout.records = Some(batch.into_iter());
        let next = |r: &mut SourceReader<_>| {
            r.positions()
                .iter()
                .map(|s| (s.id.partition, s.next_offset))
                .collect::<Vec<_>>()
        };
        let values = |b: RecordBatch<String>| b.into_iter().map(|r| r.value).collect::<Vec<_>>();
        let first = r.take_batch(2).unwrap().unwrap();
        assert_eq!(values(first), ["0/0", "0/1"]);
        assert_eq!(next(&mut r), [(0, 2), (1, 0)]);
        let second = r.take_batch(0).unwrap().unwrap();
        assert_eq!(values(second), ["1/0"], "at least one record");
        assert_eq!(values(r.take_batch(9).unwrap().unwrap()), ["0/2", "1/1"]);
        assert_eq!(next(&mut r), [(0, 3), (1, 2)]);
        assert!(r.take_batch(9).is_none());
    }

    /// `mck_watermark_lag_seconds` by stream and cluster: the wall clock less the
    /// lowest watermark of the stream's splits on the cluster.
    #[test]
    fn the_watermark_lag_is_reported_by_stream_and_cluster() {
        use crate::metadata::{ClusterMetadata, KafkaStream};
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let mut r = reader();
        let stream = KafkaStream::new("orders").with_cluster(
            "a",
            ClusterMetadata::builder("localhost:9092")
                .topic("t")
                .build()
                .unwrap(),
        );
        r.links
            .stream_index()
            .set(&BTreeMap::from([("orders".to_string(), stream)]));
        r.watermarks = Some(Box::new(watermarks::Watermarks::new(
            crate::WatermarkStrategy::monotonous_timestamps(),
            None,
        )));
        let an_hour_ago = crate::base::retention::now_ms() - 3_600_000;
        metrics::with_local_recorder(&recorder, || {
            r.apply(assign(&[(0, 0)])).unwrap();
            hand_out_timed(&mut r, &[(0, 0, an_hour_ago)]);
        });
        let lag: Vec<(String, f64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(k, ..)| k.key().name() == m::WATERMARK_LAG)
            .filter_map(|(k, _, _, v)| match v {
                metrics_util::debugging::DebugValue::Gauge(g) => {
                    let labels: Vec<String> = k
                        .key()
                        .labels()
                        .map(|l| format!("{}={}", l.key(), l.value()))
                        .collect();
                    Some((labels.join(","), g.into_inner()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(lag.len(), 1, "{lag:?}");
        assert_eq!(lag[0].0, "stream=orders,cluster=a");
        assert!((3_600.0..3_660.0).contains(&lag[0].1), "{lag:?}");
    }

    /// With the program's event timestamps, the watermark follows them (here the
    /// offset, in seconds, from the value `partition/offset`), not the Kafka record's.
    #[test]
    fn the_watermark_follows_the_program_s_event_timestamps() {
        let mut r = reader();
        r.watermarks = Some(Box::new(watermarks::Watermarks::new(
            crate::WatermarkStrategy::monotonous_timestamps(),
            None,
        )));
        r.settings.event_timestamps = Some(Arc::new(|v: &String| {
            let offset: i64 = v.split('/').nth(1)?.parse().ok()?;
            Some(offset * 1_000)
        }));
        r.apply(assign(&[(0, 0)])).unwrap();
        let b = hand_out_timed(&mut r, &[(0, 0, 99_999), (0, 7, 5)]);
        assert_eq!(b.watermark(), Some(6_999));
    }

    /// The watermark comes with each batch: the lowest split's newest timestamp less
    /// the out-of-orderness; it waits for every split's first record, never goes back
    /// (a late record, a split added with old records), starts where a checkpoint
    /// left it, and goes into the reader's checkpoints.
    #[test]
    fn the_watermark_comes_with_batches_and_checkpoints_and_never_goes_back() {
        let mut r = reader();
        let strategy =
            crate::WatermarkStrategy::bounded_out_of_orderness(Duration::from_millis(100));
        r.watermarks = Some(Box::new(watermarks::Watermarks::new(strategy, Some(500))));
        r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
        let b = hand_out_timed(&mut r, &[(0, 0, 1_000), (0, 1, 3_000)]);
        assert_eq!(
            b.watermark(),
            Some(500),
            "partition 1 has handed out nothing yet"
        );
        let b = hand_out_timed(&mut r, &[(1, 0, 2_000), (0, 2, 2_500)]);
        assert_eq!(
            b.watermark(),
            Some(1_899),
            "partition 1's 2000 less 100 and 1 ms"
        );
        let b = hand_out_timed(&mut r, &[(1, 1, 1_200)]);
        assert_eq!(
            b.watermark(),
            Some(1_899),
            "a late record moves nothing back"
        );
        r.apply(assign(&[(2, 0)])).unwrap();
        let b = hand_out_timed(&mut r, &[(2, 0, 10), (1, 2, 9_000)]);
        assert_eq!(
            b.watermark(),
            Some(1_899),
            "nor does a split added with old records"
        );
        assert_eq!(r.checkpoint().unwrap().watermark_ms, Some(1_899));
        let b = hand_out_timed(&mut r, &[(2, 1, 8_000)]);
        assert_eq!(
            b.watermark(),
            Some(2_899),
            "partition 0's 3000 is now the lowest"
        );
    }

    fn assign(partitions: &[(i32, i64)]) -> ReaderEvent {
        ReaderEvent::Assign {
            cluster: "a".into(),
            properties: ClientProperties::default(),
            splits: partitions
                .iter()
                .map(|(p, next_offset)| KafkaSplit {
                    id: SplitId::new("a", "t", *p),
                    next_offset: *next_offset,
                    stop_offset: None,
                    last: None,
                })
                .collect(),
            sent: std::time::Instant::now(),
        }
    }

    #[test]
    fn records_waiting_for_a_removed_split_never_come_out_even_if_it_is_assigned_again() {
        let mut r = reader();
        r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
        // A polled batch waiting to be handed out: offsets 0..3 of both partitions.
        let mut batch = RecordBatch::new("a".into());
        let t: Arc<str> = "t".into();
        let k = batch.topic_index(&t);
        for offset in 0..3 {
            for partition in [0, 1] {
                let value = format!("{partition}/{offset}");
                batch
                    .entries
                    .push(BatchEntry::bare(k, partition, offset, value));
            }
        }
        r.handout.records = Some(batch.into_iter());
        assert_eq!(r.pop().unwrap().unwrap().value, "0/0");
        // Partition 1 is removed, then assigned again from offset 0 (its retained
        // position was gone, say): the old batch's records of it are not its records.
        r.apply(ReaderEvent::Remove {
            ids: vec![SplitId::new("a", "t", 1)],
            retain_until_ms: None,
            confirm: None,
        })
        .unwrap();
        r.apply(assign(&[(1, 0)])).unwrap();
        let mut rest = Vec::new();
        while let Some(record) = r.pop() {
            rest.push(record.unwrap().value);
        }
        assert_eq!(rest, ["0/1", "0/2"]);
        let p1 = r.splits.iter().find(|s| s.id.partition == 1).unwrap();
        assert_eq!(p1.next_offset, 0, "partition 1 starts over at 0");
    }

    /// `mck_split_lag` per partition of `a`/`t` set since the last snapshot (the
    /// debugging recorder's snapshots reset gauges to 0).
    fn lags(snapshotter: &metrics_util::debugging::Snapshotter) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (k, _, _, v) in snapshotter.snapshot().into_vec() {
            if let (true, metrics_util::debugging::DebugValue::Gauge(g)) =
                (k.key().name() == m::SPLIT_LAG, v)
                && let Some(p) = k.key().labels().find(|l| l.key() == "partition")
            {
                out.insert(p.value().to_string(), g.into_inner());
            }
        }
        out
    }

    #[test]
    fn lag_is_the_latest_watermark_minus_what_was_handed_out_and_nan_once_removed() {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let lag = |p: &str| lags(&snapshotter).get(p).copied();
        let t: Arc<str> = "t".into();
        let polled = |records: usize, hws: &[(i32, i64)]| Polled {
            records,
            high_watermarks: hws.iter().map(|(p, h)| (t.clone(), *p, *h)).collect(),
            ..Polled::default()
        };
        let batch_of = |offsets: std::ops::Range<i64>| {
            let mut batch = RecordBatch::new("a".into());
            let k = batch.topic_index(&t);
            for offset in offsets {
                batch
                    .entries
                    .push(BatchEntry::bare(k, 0, offset, offset.to_string()));
            }
            batch
        };
        let mut r = reader();
        metrics::with_local_recorder(&recorder, || {
            r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
            // Offsets 0..3 of partition 0; watermarks 10 (partition 0) and 5
            // (partition 1, nothing fetched of it yet).
            let found = r.buffer("a".into(), batch_of(0..3), polled(3, &[(0, 10), (1, 5)]));
            assert_eq!(found, Some(3));
            assert_eq!(lags(&snapshotter), BTreeMap::new(), "not handed out yet");
            assert_eq!(r.take_batch(usize::MAX).unwrap().unwrap().len(), 3);
            let both = lags(&snapshotter);
            assert_eq!((both["0"], both["1"]), (7.0, 5.0));
            // The next batch (no new watermark) handed out one record at a time: the
            // lag falls when the batch is done.
            assert_eq!(
                r.buffer("a".into(), batch_of(3..9), polled(6, &[])),
                Some(6)
            );
            while r.pop().is_some() {}
            assert_eq!(lag("0"), Some(1.0));
            // A poll with a watermark and no record: reported at once.
            let empty = RecordBatch::new("a".into());
            assert_eq!(r.buffer("a".into(), empty, polled(0, &[(0, 12)])), None);
            assert_eq!(lag("0"), Some(3.0));
            // Caught up.
            assert_eq!(
                r.buffer("a".into(), batch_of(9..12), polled(3, &[])),
                Some(3)
            );
            assert_eq!(r.take_batch(usize::MAX).unwrap().unwrap().len(), 3);
            assert_eq!(lag("0"), Some(0.0));
            // A removed split's series is marked removed.
            r.apply(ReaderEvent::Remove {
                ids: vec![SplitId::new("a", "t", 1)],
                retain_until_ms: None,
                confirm: None,
            })
            .unwrap();
            assert!(lag("1").is_some_and(f64::is_nan));
            // A closing reader gives its splits away: their series too.
            drop(r);
            assert!(lag("0").is_some_and(f64::is_nan));
        });
    }
}
