//! Event-time watermarks against real Apache Kafka brokers (the shared clusters east
//! and west): the lowest cluster holds the watermark, a quiet one stops holding it
//! after the idle timeout, and a restored source never hands out a watermark behind
//! its checkpoint's.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mck_testkit::{TestCluster, TestRecord};
use multicluster_kafka::WatermarkStrategy;
use multicluster_kafka::prelude::*;
use support::{PATIENCE, east, meta, source_over, stream, west};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64
}

/// Records `<prefix><i>` at the given timestamps, to partition 0.
fn at(prefix: &str, timestamps: &[i64]) -> Vec<TestRecord> {
    timestamps
        .iter()
        .enumerate()
        .map(|(i, ts)| {
            TestRecord::value(format!("{prefix}{i}"))
                .to_partition(0)
                .at(*ts)
        })
        .collect()
}

/// Reads batches until `n` records came (within [`PATIENCE`]); returns the watermark
/// each batch carried.
async fn read_batches(source: &mut KafkaSourceStream<Utf8>, n: usize) -> Vec<Option<i64>> {
    let mut marks = Vec::new();
    let mut got = 0;
    let until = Instant::now() + PATIENCE;
    while got < n {
        let left = until.saturating_duration_since(Instant::now());
        let batch = tokio::time::timeout(left, source.next_batch())
            .await
            .unwrap_or_else(|_| panic!("{got} of {n} records within {PATIENCE:?}"))
            .expect("the stream goes on")
            .expect("a batch");
        got += batch.len();
        marks.push(batch.watermark());
    }
    marks
}

/// The shared clusters, `topic` (one partition) created on each, and a time ten
/// minutes ago to stamp records from.
fn topic_on_both(
    topic: &str,
) -> (
    &'static mck_testkit::KafkaCluster,
    &'static mck_testkit::KafkaCluster,
    i64,
) {
    let (e, w) = (east(), west());
    e.create_topic(topic, 1).unwrap();
    w.create_topic(topic, 1).unwrap();
    (e, w, now_ms() - 600_000)
}

/// Builds and opens the source.
async fn open(builder: SourceBuilder<Utf8>) -> KafkaSourceStream<Utf8> {
    builder
        .build()
        .expect("builds")
        .open()
        .await
        .expect("opens")
}

fn assert_never_back(marks: &[Option<i64>]) {
    for pair in marks.windows(2) {
        assert!(pair[0] <= pair[1], "the watermark went back: {marks:?}");
    }
}

#[test]
fn the_lowest_cluster_holds_the_watermark_until_it_is_idle() {
    let (e, w, base) = topic_on_both("wm-idle");
    let topic = "wm-idle";
    e.produce(topic, &at("e", &[base, base + 5_000, base + 9_000]))
        .unwrap();
    w.produce(topic, &at("w", &[base + 1_000, base + 2_000]))
        .unwrap();
    let idle = Duration::from_secs(3);
    let s = stream(
        "s",
        vec![("east", meta(e, &[topic])), ("west", meta(w, &[topic]))],
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open(source_over(s)
            .watermarks(
                WatermarkStrategy::bounded_out_of_orderness(Duration::from_millis(500))
                    .with_idle_timeout(idle),
            )).await;
        // West's last record is handed out after this.
        let reading = Instant::now();
        let marks = read_batches(&mut source, 5).await;
        assert_never_back(&marks);
        // West's newest record (2 s) less 500 ms and 1 ms: east (9 s) is ahead.
        let held = base + 2_000 - 501;
        assert_eq!(source.watermark(), Some(held), "batches: {marks:?}");

        // East goes on; west stays quiet. Within the idle timeout west still holds
        // the watermark; after it, east alone moves it.
        let fed = Instant::now();
        let mut newest = base + 9_000;
        let mut moved_at = None;
        while fed.elapsed() < idle * 4 {
            newest += 1_000;
            e.produce(topic, &at("later", &[newest])).unwrap();
            read_batches(&mut source, 1).await;
            let wm = source.watermark().expect("a watermark");
            assert!(wm >= held, "went back to {wm}");
            if wm > held {
                moved_at.get_or_insert(Instant::now());
                assert!(wm <= newest - 501, "ahead of east's newest record");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let moved_at = moved_at.expect("east alone moves the watermark once west is idle");
        let quiet = moved_at - reading;
        assert!(
            quiet >= idle,
            "west stopped holding the watermark {quiet:?} after its last record could come, before its idle timeout of {idle:?}"
        );
        assert_eq!(source.watermark(), Some(newest - 501));

        // West comes back, behind east: the watermark does not go back to its time,
        // and west holds it again.
        w.produce(topic, &at("w-back", &[base + 3_000])).unwrap();
        read_batches(&mut source, 1).await;
        assert_eq!(source.watermark(), Some(newest - 501));
        source.close().await;
    });
}

#[test]
fn a_restored_source_starts_at_its_checkpoint_s_watermark() {
    let (e, w, base) = topic_on_both("wm-restore");
    let topic = "wm-restore";
    e.produce(topic, &at("e", &[base + 4_000, base + 8_000]))
        .unwrap();
    w.produce(topic, &at("w", &[base + 6_000])).unwrap();
    let s = || {
        stream(
            "s",
            vec![("east", meta(e, &[topic])), ("west", meta(w, &[topic]))],
        )
    };
    let strategy = WatermarkStrategy::monotonous_timestamps().without_idleness();
    let rt = mck_testkit::runtime();
    let cp = rt.block_on(async {
        let mut source = open(source_over(s()).watermarks(strategy)).await;
        read_batches(&mut source, 3).await;
        assert_eq!(source.watermark(), Some(base + 6_000 - 1));
        let cp = source.checkpoint().expect("a checkpoint");
        source.close().await;
        cp
    });
    assert_eq!(cp.watermark_ms, Some(base + 6_000 - 1));
    let cp = Checkpoint::decode(&cp.encode()).expect("decodes");

    // Late records on west, older than the watermark handed out before.
    w.produce(topic, &at("late", &[base + 1_000])).unwrap();
    rt.block_on(async {
        let mut source = open(source_over(s()).watermarks(strategy).restore_from(cp)).await;
        assert_eq!(
            source.watermark(),
            Some(base + 6_000 - 1),
            "before any record"
        );
        let marks = read_batches(&mut source, 1).await;
        assert_eq!(marks, vec![Some(base + 6_000 - 1)], "not moved back");
        e.produce(topic, &at("e-more", &[base + 20_000])).unwrap();
        read_batches(&mut source, 1).await;
        // West's newest is its late record: it holds the watermark where it was.
        assert_eq!(source.watermark(), Some(base + 6_000 - 1));
        w.produce(topic, &at("w-more", &[base + 12_000])).unwrap();
        read_batches(&mut source, 1).await;
        assert_eq!(source.watermark(), Some(base + 12_000 - 1));
        source.close().await;
    });
}

/// The program's event time, read from each record's value, drives the watermark;
/// the Kafka timestamps (the time of producing here) play no part.
#[test]
fn the_watermark_follows_timestamps_in_the_values() {
    let e = east();
    let topic = "wm-values";
    e.create_topic(topic, 1).unwrap();
    let values = [1_000_i64, 4_000, 3_000];
    let records: Vec<TestRecord> = values
        .iter()
        .map(|t| TestRecord::value(format!("at={t}")).to_partition(0))
        .collect();
    e.produce(topic, &records).unwrap();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open(
            source_over(stream("s", vec![("east", meta(e, &[topic]))]))
                .watermarks(WatermarkStrategy::monotonous_timestamps().without_idleness())
                .event_timestamps(|v: &String| v.strip_prefix("at=")?.parse().ok()),
        )
        .await;
        read_batches(&mut source, 3).await;
        assert_eq!(
            source.watermark(),
            Some(3_999),
            "the newest value's time less 1 ms"
        );
        source.close().await;
    });
}

/// A bounded run's splits finish at their last record; at the end the watermark is
/// where all of its records put it: the lowest split's newest timestamp.
#[test]
fn a_bounded_run_ends_with_the_watermark_of_every_record_read() {
    let (e, w, base) = topic_on_both("wm-bounded");
    let topic = "wm-bounded";
    e.produce(topic, &at("e", &[base + 1_000, base + 5_000]))
        .unwrap();
    w.produce(topic, &at("w", &[base + 3_000])).unwrap();
    let s = stream(
        "s",
        vec![("east", meta(e, &[topic])), ("west", meta(w, &[topic]))],
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open(
            source_over(s)
                .watermarks(WatermarkStrategy::monotonous_timestamps())
                .stopping_offsets(StoppingOffsets::Latest),
        )
        .await;
        let mut marks = Vec::new();
        while let Some(batch) = tokio::time::timeout(PATIENCE, source.next_batch())
            .await
            .expect("the bounded run ends")
        {
            marks.push(batch.expect("a batch").watermark());
        }
        assert_never_back(&marks);
        assert_eq!(
            source.watermark(),
            Some(base + 3_000 - 1),
            "batches: {marks:?}"
        );
        assert_eq!(
            source.checkpoint().unwrap().watermark_ms,
            Some(base + 3_000 - 1)
        );
        source.close().await;
    });
}
