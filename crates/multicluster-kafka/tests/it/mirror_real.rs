//! A stream moved onto a mirror of its cluster continues at the same record, on real
//! brokers: the mirror's copies are made by producing the same records (key, value,
//! headers, timestamp) to it, with the offsets a mirror would give them (the same for
//! an offset-preserving mirror, shifted for one that is not). MirrorMaker 2 itself is
//! in the test kit's mirror tests.
//!
//! Every check is by content: each record the source cluster held is handed out
//! exactly once across both clusters, in order per partition.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mck_testkit::{KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::error::SourceError;
use multicluster_kafka::metadata::{MirrorOf, OnMismatch, Translate};
use multicluster_kafka::prelude::*;
use support::{PATIENCE, cluster, meta, read_records, shared_source, stream};

/// The metrics of every test of this binary (one global recorder).
fn snapshotter() -> &'static metrics_util::debugging::Snapshotter {
    static SNAP: std::sync::OnceLock<metrics_util::debugging::Snapshotter> =
        std::sync::OnceLock::new();
    SNAP.get_or_init(|| {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder in this binary");
        snapshotter
    })
}

/// `mck_mirror_searching` and `mck_mirror_behind_seconds` of the mirror's splits of
/// `topic`, by partition, from one snapshot.
type ByPartition = BTreeMap<String, f64>;

fn mirror_gauges(topic: &str) -> (ByPartition, ByPartition) {
    use metrics_util::debugging::DebugValue;
    use multicluster_kafka::metrics::{MIRROR_BEHIND_SECONDS, MIRROR_SEARCHING};
    let (mut searching, mut behind) = (BTreeMap::new(), BTreeMap::new());
    for (k, _, _, v) in snapshotter().snapshot().into_vec() {
        let label = |name: &str| {
            k.key()
                .labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_string())
        };
        let (Some(p), DebugValue::Gauge(g)) = (label("partition"), v) else {
            continue;
        };
        if label("topic").as_deref() != Some(topic) {
            continue;
        }
        match k.key().name() {
            MIRROR_SEARCHING => searching.insert(p, g.into_inner()),
            MIRROR_BEHIND_SECONDS => behind.insert(p, g.into_inner()),
            _ => None,
        };
    }
    (searching, behind)
}

/// Records `from..to` over two partitions, each with a key, a header and its own
/// timestamp (one second apart, in the past).
fn records_range(prefix: &str, from: usize, to: usize) -> Vec<TestRecord> {
    let base = 1_700_000_000_000i64;
    (from..to)
        .map(|i| {
            TestRecord::value(format!("{prefix}{i}"))
                .to_partition((i % 2) as i32)
                .with_key(format!("k{i}"))
                .with_header("h", format!("{i}"))
                .at(base + i as i64 * 1_000)
        })
        .collect()
}

fn records(prefix: &str, n: usize) -> Vec<TestRecord> {
    records_range(prefix, 0, n)
}

fn mirror_meta(c: &KafkaCluster, topic: &str, translate: Translate) -> ClusterMetadata {
    let mut m = meta(c, &[topic]);
    m.mirror_of = Some(MirrorOf::new("east", translate));
    m
}

/// A source of stream `s` from `svc`, with a short partition discovery interval.
async fn open(svc: Arc<StaticMetadataService>) -> KafkaSourceStream<Utf8> {
    shared_source(svc)
        .partition_discovery_interval(Duration::from_secs(1))
        .build()
        .unwrap()
        .open()
        .await
        .unwrap()
}

/// Every produced value handed out once, in order per partition; in each partition
/// the source's records, then the mirror's, and some of the mirror's.
fn assert_continued(got: &[Record<String>], produced: &[TestRecord]) {
    let mut per_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in produced {
        per_partition
            .entry(r.partition.unwrap())
            .or_default()
            .push(String::from_utf8(r.value.clone()).unwrap());
    }
    let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut clusters: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in got {
        seen.entry(r.partition).or_default().push(r.value.clone());
        clusters
            .entry(r.partition)
            .or_default()
            .push(r.cluster.to_string());
    }
    assert_eq!(
        seen, per_partition,
        "each record exactly once, in order per partition"
    );
    for (p, cs) in clusters {
        let first_west = cs.iter().position(|c| c == "west");
        assert!(
            first_west.is_some(),
            "partition {p} continued on the mirror: {cs:?}"
        );
        assert!(
            cs[first_west.unwrap()..].iter().all(|c| c == "west"),
            "partition {p}: the source's records, then the mirror's: {cs:?}"
        );
    }
}

fn both(topic: &str, translate: Translate) -> KafkaStream {
    stream(
        "s",
        vec![
            ("east", meta(cluster("east"), &[topic])),
            ("west", mirror_meta(cluster("west"), topic, translate)),
        ],
    )
}

/// The stream with only the mirror.
fn moved(topic: &str, translate: Translate) -> KafkaStream {
    stream(
        "s",
        vec![("west", mirror_meta(cluster("west"), topic, translate))],
    )
}

/// Produces `records` to both clusters, as producers writing to the source and a
/// mirror copying them do.
async fn produce_to_both(topic: &'static str, records: Vec<TestRecord>) {
    tokio::task::spawn_blocking(move || {
        cluster("east").produce(topic, &records).unwrap();
        cluster("west").produce(topic, &records).unwrap();
    })
    .await
    .unwrap();
}

#[test]
fn a_live_switch_to_an_identical_mirror_continues_at_the_next_record() {
    let topic = "mirror-identical";
    cluster("east").create_topic(topic, 2).unwrap();
    cluster("west").create_topic(topic, 2).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, Translate::Identical)]).unwrap());
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("r", 40)).await;
        let mut source = open(svc.clone()).await;
        let mut got = Vec::new();
        read_records(&mut source, 15, &mut got).await;
        assert!(
            got.iter().all(|r| &*r.cluster == "east"),
            "the mirror is a standby"
        );
        // The switch comes while records of the source are buffered and more are
        // produced: they are copied to the mirror as well.
        svc.replace([moved(topic, Translate::Identical)]).unwrap();
        produce_to_both(topic, records_range("r", 40, 60)).await;
        read_records(&mut source, 45, &mut got).await;
        assert_continued(&got, &records("r", 60));
        source.close().await;
    });
}

#[test]
fn a_switch_by_timestamp_finds_the_record_on_a_mirror_with_other_offsets() {
    let topic = "mirror-by-time";
    cluster("east").create_topic(topic, 2).unwrap();
    cluster("west").create_topic(topic, 2).unwrap();
    // Records already on the mirror's topic, with the same timestamps: its offsets
    // are shifted by them, and a timestamp alone does not find the record.
    cluster("west").produce(topic, &records("old", 6)).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, Translate::Timestamp)]).unwrap());
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("r", 20)).await;
        let mut source = open(svc.clone()).await;
        let mut got = Vec::new();
        read_records(&mut source, 20, &mut got).await;
        svc.replace([moved(topic, Translate::Timestamp)]).unwrap();
        produce_to_both(topic, records_range("r", 20, 40)).await;
        read_records(&mut source, 20, &mut got).await;
        assert_continued(&got, &records("r", 40));
        let first = got.iter().find(|r| &*r.cluster == "west").unwrap();
        assert!(
            first.offset >= 13,
            "{} at {}: offsets differ",
            first.value,
            first.offset
        );
        source.close().await;
    });
}

#[test]
fn a_restart_from_a_checkpoint_taken_before_the_switch_continues_on_the_mirror() {
    let topic = "mirror-restart";
    cluster("east").create_topic(topic, 2).unwrap();
    cluster("west").create_topic(topic, 2).unwrap();
    cluster("west").produce(topic, &records("old", 4)).unwrap();
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("r", 12)).await;
        let svc =
            Arc::new(StaticMetadataService::new([both(topic, Translate::Timestamp)]).unwrap());
        let mut source = open(svc).await;
        let mut got = Vec::new();
        read_records(&mut source, 12, &mut got).await;
        let checkpoint = Checkpoint::decode(&source.checkpoint().unwrap().encode()).unwrap();
        source.close().await;
        let lasts = checkpoint.clusters["east"]
            .splits
            .iter()
            .filter(|s| s.last.is_some())
            .count();
        assert_eq!(lasts, 2, "each split's last record is in the checkpoint");
        produce_to_both(topic, records_range("r", 12, 30)).await;

        let svc =
            Arc::new(StaticMetadataService::new([moved(topic, Translate::Timestamp)]).unwrap());
        let mut source = shared_source(svc)
            .restore_from(checkpoint)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        read_records(&mut source, 18, &mut got).await;
        assert_continued(&got, &records("r", 30));
        // A checkpoint after the switch holds the mirror's own last records.
        let after = source.checkpoint().unwrap();
        assert!(
            after.clusters["west"]
                .splits
                .iter()
                .all(|s| s.last.as_ref().is_some_and(|l| l.search.is_none()))
        );
        source.close().await;
    });
}

#[test]
fn a_mirror_that_lags_is_waited_for_and_never_skipped() {
    let topic = "mirror-lag";
    let (east, west) = (cluster("east"), cluster("west"));
    east.create_topic(topic, 2).unwrap();
    west.create_topic(topic, 2).unwrap();
    let all = records("r", 30);
    east.produce(topic, &all).unwrap();
    // The mirror has copied only the first 8 records so far.
    west.produce(topic, &all[..8]).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, Translate::Identical)]).unwrap());
    snapshotter();
    mck_testkit::runtime().block_on(async {
        let mut source = open(svc.clone()).await;
        let mut got = Vec::new();
        read_records(&mut source, 30, &mut got).await;
        svc.replace([moved(topic, Translate::Identical)]).unwrap();
        // The rest comes to the mirror, then new records to both.
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Meanwhile the mirror's splits wait, and say so. (One snapshot only: the
        // debugging recorder resets every gauge it reports.)
        for _ in 0..10 {
            let next = tokio::time::timeout(Duration::from_millis(200), source.next()).await;
            assert!(
                next.is_err(),
                "nothing comes from a lagging mirror: {next:?}"
            );
        }
        let (waiting, behind) = mirror_gauges(topic);
        assert_eq!(waiting.values().sum::<f64>(), 2.0, "{waiting:?}");
        // The mirror's newest records are 22 s older than the ones looked for.
        assert_eq!(
            behind.values().copied().collect::<Vec<_>>(),
            [22.0, 22.0],
            "{behind:?}"
        );
        let rest = all[8..].to_vec();
        tokio::task::spawn_blocking(move || west.produce(topic, &rest).unwrap())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        produce_to_both(topic, records_range("r", 30, 40)).await;
        read_records(&mut source, 10, &mut got).await;
        assert_continued(&got, &records("r", 40));
        // Nothing more: the mirror's copies of what was handed out are not.
        let more = tokio::time::timeout(Duration::from_secs(2), source.next()).await;
        assert!(more.is_err(), "{more:?}");
        source.close().await;
    });
}

#[test]
fn a_diverged_mirror_ends_the_partition_with_a_located_error_or_continues_at_the_lower_bound() {
    let (east, west) = (cluster("east"), cluster("west"));
    for (topic, on_mismatch) in [
        ("mirror-diverged", OnMismatch::Fail),
        ("mirror-lower", OnMismatch::LowerBound),
    ] {
        east.create_topic(topic, 1).unwrap();
        west.create_topic(topic, 1).unwrap();
        let all: Vec<TestRecord> = records("r", 20)
            .into_iter()
            .map(|r| r.to_partition(0))
            .collect();
        east.produce(topic, &all).unwrap();
        // The mirror holds other records at the same offsets.
        let other: Vec<TestRecord> = records("x", 20)
            .into_iter()
            .map(|r| r.to_partition(0))
            .collect();
        west.produce(topic, &other).unwrap();
        let mut mirror = mirror_meta(west, topic, Translate::Identical);
        mirror.mirror_of.as_mut().unwrap().on_mismatch = on_mismatch;
        let svc = Arc::new(
            StaticMetadataService::new([stream(
                "s",
                vec![("east", meta(east, &[topic])), ("west", mirror.clone())],
            )])
            .unwrap(),
        );
        mck_testkit::runtime().block_on(async {
            let mut source = open(svc.clone()).await;
            let mut got = Vec::new();
            read_records(&mut source, 20, &mut got).await;
            svc.replace([stream("s", vec![("west", mirror)])]).unwrap();
            let next = tokio::time::timeout(PATIENCE, source.next())
                .await
                .expect("an answer")
                .expect("the stream continues");
            match on_mismatch {
                OnMismatch::Fail => {
                    let err = next.expect_err("a diverged mirror is an error");
                    assert!(matches!(err, SourceError::MirrorDiverged(_)), "{err}");
                    let text = err.to_string();
                    for part in [
                        &format!("west/{topic}/0"),
                        &format!("east/{topic}/0"),
                        "offset 19",
                        "lower bound by identical",
                    ] {
                        assert!(text.contains(part), "{part} in: {text}");
                    }
                    assert!(!text.contains('\n'));
                    // The partition ended: nothing more comes.
                    let more = tokio::time::timeout(Duration::from_secs(2), source.next()).await;
                    assert!(more.is_err(), "{more:?}");
                }
                OnMismatch::LowerBound => {
                    let r = next.expect("a record at the lower bound");
                    assert_eq!(
                        (&*r.cluster, r.offset, r.value.as_str()),
                        ("west", 19, "x19")
                    );
                }
            }
            source.close().await;
        });
    }
}

/// The source's broker is killed: once it has been unreachable for `failoverAfter`,
/// the stream continues on the mirror by itself, and stays there when the source
/// comes back.
fn failover_to_a_mirror(source: &str, mirror: &str, translate: Translate) {
    let (east, west) = (cluster(source), cluster(mirror));
    let topic = "failover";
    east.create_topic(topic, 2).unwrap();
    west.create_topic(topic, 2).unwrap();
    if translate == Translate::Timestamp {
        west.produce(topic, &records("old", 4)).unwrap();
    }
    let mirror_entry = |c: &KafkaCluster| {
        let mut m = meta(c, &[topic]);
        let mut of = MirrorOf::new(source, translate);
        of.failover_after = Some(Duration::from_secs(3));
        m.mirror_of = Some(of);
        m
    };
    let pair = stream(
        "s",
        vec![(source, meta(east, &[topic])), (mirror, mirror_entry(west))],
    );
    let svc = Arc::new(StaticMetadataService::new([pair]).unwrap());
    let first = records("r", 20);
    east.produce(topic, &first).unwrap();
    west.produce(topic, &first).unwrap();
    mck_testkit::runtime().block_on(async {
        let mut source_stream = shared_source(svc)
            .partition_discovery_interval(Duration::from_secs(1))
            .client_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        read_records(&mut source_stream, 20, &mut got).await;
        assert!(got.iter().all(|r| &*r.cluster == source));
        // The source dies; what it held was copied; the mirror gets more.
        let began = std::time::Instant::now();
        tokio::task::spawn_blocking(move || {
            east.kill_broker(0).unwrap();
            west.produce(topic, &records_range("r", 20, 30)).unwrap();
        })
        .await
        .unwrap();
        read_records(&mut source_stream, 10, &mut got).await;
        assert!(
            began.elapsed() >= Duration::from_secs(3),
            "failed over {:?} after the kill: before failoverAfter",
            began.elapsed()
        );
        // The source comes back: the stream stays on the mirror.
        tokio::task::spawn_blocking(move || {
            east.restart_broker(0).unwrap();
            east.produce(topic, &records_range("r", 30, 40)).unwrap();
            west.produce(topic, &records_range("r", 30, 40)).unwrap();
        })
        .await
        .unwrap();
        read_records(&mut source_stream, 10, &mut got).await;
        let mut renamed = got.clone();
        for r in &mut renamed {
            r.cluster = if &*r.cluster == source {
                "east".into()
            } else {
                "west".into()
            };
        }
        assert_continued(&renamed, &records("r", 40));
        let more = tokio::time::timeout(Duration::from_secs(3), source_stream.next()).await;
        assert!(more.is_err(), "nothing more, from either cluster: {more:?}");
        source_stream.close().await;
    });
}

#[test]
fn a_dead_source_fails_over_to_an_identical_mirror_and_stays_there() {
    failover_to_a_mirror("fo-east", "fo-west", Translate::Identical);
}

#[test]
fn a_dead_source_fails_over_by_timestamp_and_stays_there() {
    failover_to_a_mirror("fot-east", "fot-west", Translate::Timestamp);
}

#[test]
fn after_a_switch_the_group_is_committed_on_the_mirror_at_the_translated_positions() {
    let topic = "mirror-commits";
    let (east, west) = (cluster("east"), cluster("west"));
    east.create_topic(topic, 2).unwrap();
    west.create_topic(topic, 2).unwrap();
    // The mirror's offsets are 3 later per partition than the source's.
    west.produce(topic, &records("old", 6)).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, Translate::Timestamp)]).unwrap());
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("r", 20)).await;
        let mut source = shared_source(svc.clone())
            .group_id("mirror-commits")
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        read_records(&mut source, 20, &mut got).await;
        svc.replace([moved(topic, Translate::Timestamp)]).unwrap();
        produce_to_both(topic, records_range("r", 20, 30)).await;
        read_records(&mut source, 10, &mut got).await;
        let checkpoint = source.checkpoint().unwrap();
        source.commit(&checkpoint).await.unwrap();
        source.close().await;
        // 15 records per partition on the source; 3 + 15 on the mirror.
        for p in 0..2 {
            let committed = tokio::task::spawn_blocking(move || {
                mck_testkit::committed_group_offset(west, "mirror-commits", topic, p).unwrap()
            })
            .await
            .unwrap();
            assert_eq!(committed, Some(18), "partition {p} on the mirror");
        }
    });
}

#[test]
fn a_switch_back_onto_the_original_cluster_as_a_mirror_of_the_mirror_is_exact_too() {
    let topic = "mirror-back";
    let (east, west) = (cluster("east"), cluster("west"));
    east.create_topic(topic, 2).unwrap();
    west.create_topic(topic, 2).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, Translate::Identical)]).unwrap());
    // East mirrored from west: the way back.
    let back = || {
        let mut m = meta(east, &[topic]);
        m.mirror_of = Some(MirrorOf::new("west", Translate::Identical));
        stream("s", vec![("east", m)])
    };
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("r", 20)).await;
        let mut source = open(svc.clone()).await;
        let mut got = Vec::new();
        read_records(&mut source, 20, &mut got).await;
        svc.replace([moved(topic, Translate::Identical)]).unwrap();
        produce_to_both(topic, records_range("r", 20, 40)).await;
        read_records(&mut source, 20, &mut got).await;
        assert!(got[20..].iter().all(|r| &*r.cluster == "west"));
        // Back onto east, which copies west now.
        svc.replace([back()]).unwrap();
        produce_to_both(topic, records_range("r", 40, 60)).await;
        read_records(&mut source, 20, &mut got).await;
        assert!(
            got[40..].iter().all(|r| &*r.cluster == "east"),
            "back on east"
        );
        let values: Vec<&str> = got.iter().map(|r| r.value.as_str()).collect();
        let mut sorted: Vec<String> = got.iter().map(|r| r.value.clone()).collect();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 60, "each record once: {values:?}");
        let more = tokio::time::timeout(Duration::from_secs(2), source.next()).await;
        assert!(more.is_err(), "{more:?}");
        source.close().await;
    });
}

#[test]
fn a_switch_between_fetch_paths_without_headers_handed_out_still_finds_the_record() {
    // The source is fetched natively and its mirror by librdkafka, and the program
    // takes no headers: both paths must still fingerprint the records with theirs.
    let topic = "mirror-cross-path";
    cluster("east").create_topic(topic, 2).unwrap();
    cluster("west").create_topic(topic, 2).unwrap();
    let on = |mut m: ClusterMetadata, backend: &str| {
        m.properties.set("fetch.backend", backend);
        m
    };
    let east = on(meta(cluster("east"), &[topic]), "native");
    let west = on(
        mirror_meta(cluster("west"), topic, Translate::Identical),
        "librdkafka",
    );
    let svc = Arc::new(
        StaticMetadataService::new([stream("s", vec![("east", east), ("west", west.clone())])])
            .unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        produce_to_both(topic, records("x", 40)).await;
        let mut source = shared_source(svc.clone())
            .include_headers(false)
            .partition_discovery_interval(Duration::from_secs(1))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        read_records(&mut source, 15, &mut got).await;
        svc.replace([stream("s", vec![("west", west)])]).unwrap();
        produce_to_both(topic, records_range("x", 40, 60)).await;
        read_records(&mut source, 45, &mut got).await;
        assert_continued(&got, &records("x", 60));
        assert!(
            got.iter().all(|r| r.headers.is_empty()),
            "no headers handed out"
        );
        source.close().await;
    });
}
