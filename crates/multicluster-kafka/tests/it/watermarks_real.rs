//! Event time against real Apache Kafka brokers (the shared clusters east, west and
//! north): the lowest cluster holds the watermark, a quiet one stops holding it after
//! the idle timeout, and a restored source never hands out a watermark behind its
//! checkpoint's; records in time order (three clusters merged by timestamp, a quiet
//! cluster holding live records back no longer than its idle timeout); and an hour of
//! backlog (stamped by Kafka's own Java producer) paced by alignment beside a live
//! cluster.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use multicluster_kafka::{ReadOrder, WatermarkStrategy};
use support::{PATIENCE, cluster, east, meta, now_ms, source_over, stream, west};

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

/// The next record within [`PATIENCE`], or `None` at the end of a bounded stream.
async fn next(source: &mut KafkaSourceStream<Utf8>) -> Option<Record<String>> {
    tokio::time::timeout(PATIENCE, source.next())
        .await
        .unwrap_or_else(|_| panic!("no record within {PATIENCE:?}"))
        .map(|r| r.expect("a record"))
}

/// Asserts every record came once (by cluster and value) and timestamps never went
/// back; returns the values by cluster.
fn assert_time_ordered_once(got: &[Record<String>]) -> BTreeMap<String, BTreeSet<String>> {
    let mut by_cluster: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut newest = i64::MIN;
    for (i, r) in got.iter().enumerate() {
        let ts = r.timestamp.expect("a timestamp");
        assert!(
            ts >= newest,
            "record {i} ({}/{} @{ts}) is older than one before it (@{newest})",
            r.cluster,
            r.value
        );
        newest = ts;
        assert!(
            by_cluster
                .entry(r.cluster.to_string())
                .or_default()
                .insert(r.value.clone()),
            "{}/{} came twice",
            r.cluster,
            r.value
        );
    }
    by_cluster
}

/// Three clusters, two partitions each, written one cluster after the other with
/// interleaved timestamps: read as fetched they come cluster by cluster; in time
/// order they come merged, each once, and the bounded run hands every one out.
#[test]
fn three_clusters_come_merged_by_timestamp_each_record_once() {
    let topic = "order-three";
    let clusters = [
        ("east", east()),
        ("west", west()),
        ("north", cluster("north")),
    ];
    let base = now_ms() - 600_000;
    let per_cluster = 300;
    for (k, (name, c)) in clusters.iter().enumerate() {
        c.create_topic(topic, 2).unwrap();
        let records: Vec<TestRecord> = (0..per_cluster)
            .map(|i| {
                // Cluster k's i-th record is at base + 30 i + 10 k: the three
                // clusters take turns.
                TestRecord::value(format!("{name}-{i}"))
                    .to_partition((i % 2) as i32)
                    .at(base + 30 * i as i64 + 10 * k as i64)
            })
            .collect();
        c.produce(topic, &records).unwrap();
    }
    let s = stream(
        "s",
        clusters
            .iter()
            .map(|(name, c)| (*name, meta(*c, &[topic])))
            .collect(),
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = source_over(s)
            .watermarks(WatermarkStrategy::monotonous_timestamps())
            .order(ReadOrder::Time)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .expect("builds")
            .open()
            .await
            .expect("opens");
        let mut got = Vec::new();
        while let Some(r) = next(&mut source).await {
            got.push(r);
        }
        let by_cluster = assert_time_ordered_once(&got);
        for (name, _) in &clusters {
            assert_eq!(
                by_cluster.get(*name).map_or(0, BTreeSet::len),
                per_cluster,
                "every record of {name}"
            );
        }
        // Merged, not one cluster after the other.
        let turns = got
            .windows(2)
            .filter(|w| w[0].cluster != w[1].cluster)
            .count();
        assert!(
            turns >= 3 * per_cluster - 3,
            "only {turns} turns between clusters"
        );
        let cp = source.checkpoint().expect("a checkpoint");
        // It counts exactly what was handed out: every record.
        assert!(
            cp.splits().all(|s| s.next_offset == per_cluster as i64 / 2),
            "{cp:?}"
        );
        source.close().await;
    });
}

/// East is live; west's topic is quiet. West holds east's records back while it may
/// still bring older ones: at the start (nothing fetched of it yet) and after each of
/// its records, but never longer than its idle timeout.
#[test]
fn a_quiet_cluster_holds_live_records_back_no_longer_than_the_idle_timeout() {
    let topic = "order-quiet";
    let (e, w) = (east(), west());
    e.create_topic(topic, 1).unwrap();
    w.create_topic(topic, 1).unwrap();
    let idle = Duration::from_secs(2);
    let s = stream(
        "s",
        vec![("east", meta(e, &[topic])), ("west", meta(w, &[topic]))],
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let opened = Instant::now();
        let mut source = source_over(s)
            .watermarks(WatermarkStrategy::monotonous_timestamps().with_idle_timeout(idle))
            .order(ReadOrder::Time)
            .build()
            .expect("builds")
            .open()
            .await
            .expect("opens");
        e.produce(topic, &[TestRecord::value("e-first").at(now_ms())])
            .unwrap();
        let first = next(&mut source).await.expect("a record");
        assert_eq!(first.value, "e-first");
        let held = opened.elapsed();
        assert!(
            held >= idle,
            "east's first record came {held:?} after the start: west was not held for"
        );
        assert!(held < idle + Duration::from_secs(8), "held {held:?}");

        // West idle: east's records come as they arrive.
        for i in 0..3 {
            let sent = Instant::now();
            e.produce(
                topic,
                &[TestRecord::value(format!("e-live-{i}")).at(now_ms())],
            )
            .unwrap();
            let r = next(&mut source).await.expect("a record");
            assert_eq!(r.value, format!("e-live-{i}"));
            assert!(
                sent.elapsed() < idle,
                "took {:?} with west idle",
                sent.elapsed()
            );
        }

        // West speaks (a second behind east, so the merge lets it out at once): it
        // holds east's newer records again, until it goes idle again: no sooner than
        // the idle timeout after west's record was written.
        let west_spoke = Instant::now();
        w.produce(topic, &[TestRecord::value("w-one").at(now_ms() - 1_000)])
            .unwrap();
        let r = next(&mut source).await.expect("a record");
        assert_eq!(r.value, "w-one");
        let sent = Instant::now();
        e.produce(topic, &[TestRecord::value("e-after").at(now_ms())])
            .unwrap();
        let r = next(&mut source).await.expect("a record");
        assert_eq!(r.value, "e-after");
        let waited = sent.elapsed();
        assert!(
            waited < idle + Duration::from_secs(3),
            "west held east's record {waited:?}, longer than its idle timeout {idle:?}"
        );
        // Measured from west's record, not from east's: a loaded machine may take a
        // while to hand west's record out, and west's idle time runs meanwhile.
        let held = west_spoke.elapsed();
        assert!(
            held >= idle * 9 / 10,
            "east's record came {held:?} after west's: west did not hold it for its idle timeout {idle:?}"
        );
        source.close().await;
    });
}

/// An hour of backlog on east, written by Kafka's Java producer with old timestamps,
/// beside a live west. With alignment, west's fetching pauses while east's watermark
/// is far behind: no west record comes while the middle of the backlog is read. Once
/// the backlog is read and east goes idle, west resumes: nothing lost, each once.
#[test]
fn an_hour_of_backlog_is_paced_by_alignment_and_nothing_is_lost() {
    let topic = "align-backlog";
    let (e, w) = (east(), west());
    e.create_topic(topic, 2).unwrap();
    w.create_topic(topic, 1).unwrap();
    let start = now_ms();
    let backlog = 40_000;
    let span = 50 * 60_000; // from an hour ago to ten minutes ago
    let old: Vec<(i64, i32, String)> = (0..backlog)
        .map(|i| {
            let ts = start - 3_600_000 + span * i / backlog;
            (ts, (i % 2) as i32, format!("old-{i}"))
        })
        .collect();
    // West: live records (stamped when sent) from Kafka's Java producer, one every
    // 10 ms, until the test stops it.
    let live = Arc::new(AtomicBool::new(true));
    let producer = {
        let live = live.clone();
        let mut java = w
            .java_producer(topic, &[])
            .expect("the Java producer starts");
        std::thread::spawn(move || {
            let mut n = 0;
            while live.load(Ordering::Relaxed) {
                java.send(&format!("live-{n}")).expect("sent");
                n += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            java.finish().expect("the Java producer finishes");
            n
        })
    };
    e.produce_timed_with_java(topic, &old)
        .expect("the Java producer writes the backlog");
    // West has been live for a while (its Java producer started first).
    std::thread::sleep(Duration::from_secs(2));
    let drift = Duration::from_secs(30);
    let s = stream(
        "s",
        vec![("east", meta(e, &[topic])), ("west", meta(w, &[topic]))],
    );
    let rt = mck_testkit::runtime();
    let (got, written) = rt.block_on(async {
        let mut source = source_over(s)
            .watermarks(
                WatermarkStrategy::monotonous_timestamps()
                    .with_idle_timeout(Duration::from_secs(2))
                    .with_alignment(drift),
            )
            .build()
            .expect("builds")
            .open()
            .await
            .expect("opens");
        let mut got: Vec<Record<String>> = Vec::new();
        let mut old_seen: i64 = 0;
        let (middle_from, middle_to) = (start - 2_400_000, start - 1_200_000);
        let mut live_in_middle = Vec::new();
        let mut in_middle = false;
        while old_seen < backlog {
            let r = next(&mut source).await.expect("a record");
            if got.len().is_multiple_of(100) {
                // A program that takes its time (a lake writer, say): reading the
                // backlog takes seconds, while west's records keep coming.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if r.cluster.as_ref() == "east" {
                old_seen += 1;
                let ts = r.timestamp.expect("a timestamp");
                in_middle = (middle_from..middle_to).contains(&ts);
            } else if in_middle {
                live_in_middle.push(r.value.clone());
            }
            got.push(r);
        }
        assert!(
            live_in_middle.is_empty(),
            "west's live records came while the middle of east's backlog was read: {live_in_middle:?}"
        );
        // The backlog is read: east goes idle and west resumes.
        tokio::time::sleep(Duration::from_secs(1)).await;
        live.store(false, Ordering::Relaxed);
        let written = producer.join().expect("the producer thread");
        let until = Instant::now() + PATIENCE;
        while got.iter().filter(|r| r.cluster.as_ref() == "west").count() < written {
            assert!(Instant::now() < until, "west's records did not all come");
            got.push(next(&mut source).await.expect("a record"));
        }
        source.close().await;
        (got, written)
    });
    let mut seen = BTreeSet::new();
    for r in &got {
        assert!(
            seen.insert((r.cluster.to_string(), r.value.clone())),
            "{} twice",
            r.value
        );
    }
    let west: Vec<&str> = got
        .iter()
        .filter(|r| r.cluster.as_ref() == "west")
        .map(|r| r.value.as_str())
        .collect();
    let expected: Vec<String> = (0..written).map(|n| format!("live-{n}")).collect();
    assert_eq!(west, expected, "west's records, in order, each once");
    assert_eq!(got.len(), backlog as usize + written);
}

/// West is cut off (its network blackholed) while read in time order: east's records
/// wait for it no longer than its idle timeout. What west got meanwhile, older than
/// east's records, comes out once it is back: late, in west's offset order, nothing
/// dropped.
#[test]
fn a_cluster_cut_off_while_read_holds_time_order_back_only_until_idle_then_comes_late() {
    use mck_testkit::ClusterOptions;
    use mck_testkit::proxy::ProxiedCluster;
    let topic = "order-cut";
    let e = east();
    let w = ProxiedCluster::start(ClusterOptions::new("wm-cut"))
        .unwrap_or_else(|err| panic!("the proxied cluster starts: {err:?}"));
    e.create_topic(topic, 1).unwrap();
    w.cluster().create_topic(topic, 1).unwrap();
    let idle = Duration::from_secs(2);
    let s = stream(
        "s",
        vec![
            ("east", meta(e, &[topic])),
            (
                "wm-cut",
                support::meta_at(w.proxied_bootstrap_servers(), &[topic]),
            ),
        ],
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = source_over(s)
            .watermarks(WatermarkStrategy::monotonous_timestamps().with_idle_timeout(idle))
            .order(ReadOrder::Time)
            .build()
            .expect("builds")
            .open()
            .await
            .expect("opens");
        let t0 = now_ms();
        w.cluster()
            .produce(topic, &at("w-", &[t0 - 2_000]))
            .unwrap();
        e.produce(topic, &at("e-", &[t0 - 1_000])).unwrap();
        let first = [next(&mut source).await, next(&mut source).await];
        let first: Vec<String> = first.into_iter().flatten().map(|r| r.value).collect();
        assert_eq!(first, ["w-0", "e-0"]);

        // West is cut off; it gets two records older than east's next ones.
        w.set_mode(mck_testkit::proxy::Mode::Blackhole);
        w.cluster()
            .produce(
                topic,
                &[
                    TestRecord::value("w-late-0").at(t0 - 600),
                    TestRecord::value("w-late-1").at(t0 - 700),
                ],
            )
            .unwrap();
        let cut = Instant::now();
        e.produce(topic, &[TestRecord::value("e-1").at(now_ms())])
            .unwrap();
        let r = next(&mut source).await.expect("a record");
        assert_eq!(r.value, "e-1");
        let held = cut.elapsed();
        assert!(
            held < idle + Duration::from_secs(8),
            "cut-off west held east's record {held:?}, past its idle timeout {idle:?}"
        );

        // West is back: its records come out although east's newer one went first.
        w.set_mode(mck_testkit::proxy::Mode::Pass);
        let late = [next(&mut source).await, next(&mut source).await];
        let late: Vec<(String, i64)> = late
            .into_iter()
            .flatten()
            .map(|r| (r.value, r.offset))
            .collect();
        assert_eq!(
            late,
            [("w-late-0".to_string(), 1), ("w-late-1".to_string(), 2)],
            "west's records from while it was cut off, late and in offset order"
        );
        source.close().await;
    });
}
