//! The source reports its metrics through the `metrics` facade (mock cluster, so it
//! runs in-process; each test in a process of its own, since it installs a global
//! recorder).

use crate::support;
use rusty_fork::rusty_fork_test;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use multicluster_kafka::metrics as m;
use multicluster_kafka::prelude::*;
use multicluster_kafka::{ReadOrder, WatermarkStrategy};
use support::{meta, now_ms, shared_source};

fn value_of(
    snapshot: &[(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    name: &str,
    label: Option<(&str, &str)>,
) -> Option<f64> {
    snapshot
        .iter()
        .find(|(k, _, _, _)| {
            k.key().name() == name
                && label.is_none_or(|(lk, lv)| {
                    k.key().labels().any(|l| l.key() == lk && l.value() == lv)
                })
        })
        .map(|(_, _, _, v)| match v {
            DebugValue::Counter(c) => *c as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(_) => f64::NAN,
        })
}

/// The recorder is global: every test of this binary shares it (and uses its own
/// cluster names).
fn snapshotter() -> &'static Snapshotter {
    static SNAP: OnceLock<Snapshotter> = OnceLock::new();
    SNAP.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder in this binary");
        snapshotter
    })
}

/// Snapshots drain counters, so the tests take turns (each runs in a child process).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Two mock clusters `<name>-a` and `<name>-b`, each with topic `t` holding one record,
/// read together as stream `s`. B's `client.id` is the property the tests change.
struct TwoClusters {
    a: MockKafkaCluster,
    b: MockKafkaCluster,
}

impl TwoClusters {
    fn start(name: &str) -> Self {
        let (a, b) = (
            MockKafkaCluster::start(&format!("{name}-a"), 1).unwrap(),
            MockKafkaCluster::start(&format!("{name}-b"), 1).unwrap(),
        );
        for c in [&a, &b] {
            c.create_topic("t", 1).unwrap();
            c.produce("t", &[TestRecord::value("first")]).unwrap();
        }
        Self { a, b }
    }

    /// Stream `s` over both clusters, with this `client.id` on B.
    fn streams(&self, b_client: &str) -> [KafkaStream; 1] {
        let meta = |c: &MockKafkaCluster, client_id: &str| {
            ClusterMetadata::builder(c.bootstrap_servers())
                .topic("t")
                .property("client.id", client_id)
                .build()
                .unwrap()
        };
        [KafkaStream::new("s")
            .with_cluster(self.a.logical_id(), meta(&self.a, "a"))
            .with_cluster(self.b.logical_id(), meta(&self.b, b_client))]
    }

    /// Consumers created on (A, B) since the previous snapshot (a snapshot hands out
    /// what counters gained since the one before).
    fn created_since_last_snapshot(&self) -> (f64, f64) {
        let snap = snapshotter().snapshot().into_vec();
        let of = |c: &MockKafkaCluster| {
            value_of(
                &snap,
                m::CONSUMERS_CREATED,
                Some(("cluster", c.logical_id())),
            )
            .unwrap_or(0.0)
        };
        (of(&self.a), of(&self.b))
    }
}

rusty_fork_test! {
#[test]
fn records_bytes_splits_lag_and_commits_are_reported() {
    let _serial = serial();
    let snapshotter = snapshotter();

    let cluster = MockKafkaCluster::start("metered", 1).unwrap();
    cluster.create_topic("t", 2).unwrap();
    let records: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("value-{i}")).to_partition(i % 2))
        .collect();
    cluster.produce("t", &records).unwrap();
    let stream = KafkaStream::new("s").with_cluster("metered", meta(&cluster, &["t"]));
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let source = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .group_id("metered-group")
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let mut s = source.open().await.unwrap();
        let mut n = 0;
        while let Some(r) = s.next().await {
            r.unwrap();
            n += 1;
        }
        assert_eq!(n, 10);
        let cp = s.checkpoint().unwrap();
        s.commit(&cp).await.unwrap();
        s.close().await;
    });

    let snap = snapshotter.snapshot().into_vec();
    let cluster_label = Some(("cluster", "metered"));
    assert_eq!(value_of(&snap, m::RECORDS, cluster_label), Some(10.0));
    assert_eq!(
        value_of(&snap, m::BYTES, cluster_label),
        Some((10 * "value-0".len()) as f64)
    );
    assert_eq!(
        value_of(&snap, m::COMMITS_SUCCEEDED, cluster_label),
        Some(1.0)
    );
    assert_eq!(value_of(&snap, m::COMMITS_FAILED, cluster_label), None);
    assert_eq!(value_of(&snap, m::CLUSTERS, None), Some(1.0));
    // The closed source reads its splits no more: any lag series of them (a run this
    // short may end before the first watermark comes) is marked removed (NaN). By
    // cluster: the recorder also holds the series of this binary's other tests.
    let lags: Vec<f64> = snap
        .iter()
        .filter(|(k, _, _, _)| {
            k.key().name() == m::SPLIT_LAG
                && k.key()
                    .labels()
                    .any(|l| l.key() == "cluster" && l.value() == "metered")
        })
        .map(|(_, _, _, v)| match v {
            DebugValue::Gauge(g) => g.into_inner(),
            _ => 0.0,
        })
        .collect();
    assert!(
        lags.iter().all(|l| l.is_nan()),
        "per-split lag removed on close: {lags:?}"
    );
    // Every split of the bounded read finished.
    assert_eq!(
        value_of(&snap, m::ACTIVE_SPLITS, Some(("reader", "0"))),
        Some(0.0)
    );
}
}

rusty_fork_test! {
#[test]
fn a_change_to_one_cluster_leaves_the_other_clusters_consumer_alone() {
    let _serial = serial();
    snapshotter();
    let clusters = TwoClusters::start("iso");
    let b = &clusters.b;
    let streams = |b_client: &str| clusters.streams(b_client);
    let svc = Arc::new(StaticMetadataService::new(streams("one")).unwrap());
    let created = || clusters.created_since_last_snapshot();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut s = shared_source(svc.clone())
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for _ in 0..2 {
            s.next().await.unwrap().unwrap();
        }
        assert_eq!(created(), (1.0, 1.0));
        svc.replace(streams("two")).unwrap();
        b.produce("t", &[TestRecord::value("after")]).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(60), s.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((&*r.cluster, r.value.as_str()), ("iso-b", "after"));
        let (a_new, b_new) = created();
        assert_eq!(
            b_new, 1.0,
            "B's consumer was rebuilt for its new properties"
        );
        assert_eq!(a_new, 0.0, "A's consumer is the same instance");
        s.close().await;
    });
}
}

rusty_fork_test! {
#[test]
fn property_changes_in_quick_succession_cost_one_rebuild_per_interval_and_none_is_lost() {
    let _serial = serial();
    snapshotter();
    let clusters = TwoClusters::start("burst");
    let b = &clusters.b;
    let streams = |b_client: &str| clusters.streams(b_client);
    let svc = Arc::new(StaticMetadataService::new(streams("one")).unwrap());
    // Consumers made so far, per cluster.
    let mut totals = (0.0, 0.0);
    let mut created = || {
        let (a, b) = clusters.created_since_last_snapshot();
        totals.0 += a;
        totals.1 += b;
        totals
    };
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let interval = Duration::from_millis(1500);
        let mut s = shared_source(svc.clone())
            .rebuild_interval(interval)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        // Reads while waiting, so the reader applies what the enumerator sends.
        async fn wait_for(s: &mut KafkaSourceStream<Utf8>, mut done: impl FnMut() -> bool) {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while !done() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not reached in 30 s"
                );
                let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
            }
        }
        wait_for(&mut s, || created() == (1.0, 1.0)).await;
        // The first change after a quiet time is applied at once.
        svc.replace(streams("two")).unwrap();
        wait_for(&mut s, || created().1 == 2.0).await;
        // Two more within the interval: held back, then applied together.
        svc.replace(streams("three")).unwrap();
        let t = tokio::time::Instant::now();
        while t.elapsed() < Duration::from_millis(300) {
            let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        }
        svc.replace(streams("four")).unwrap();
        wait_for(&mut s, || created().1 == 3.0).await;
        // Nothing else is pending: no further rebuild.
        let t = tokio::time::Instant::now();
        while t.elapsed() < interval * 2 {
            let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        }
        assert_eq!(
            created(),
            (1.0, 3.0),
            "A untouched; B rebuilt once for `two` and once for `three` + `four`"
        );
        // B's rebuilt consumer reads.
        b.produce("t", &[TestRecord::value("after")]).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let r = s.next().await.unwrap().unwrap();
                if r.value == "after" {
                    return r;
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(&*r.cluster, "burst-b");
        s.close().await;
    });
}
}

rusty_fork_test! {
#[test]
fn properties_librdkafka_refuses_leave_the_old_client_counted_once_until_they_change() {
    let _serial = serial();
    snapshotter();
    let clusters = TwoClusters::start("refused");
    let b = &clusters.b;
    // B with a CA file that does not exist: librdkafka refuses to make the client.
    let refused = |ca: &str| {
        let [s] = clusters.streams("b");
        let meta = ClusterMetadata::builder(b.bootstrap_servers())
            .topic("t")
            .property("client.id", "b")
            .property("security.protocol", "ssl")
            .property("ssl.ca.location", ca)
            .build()
            .unwrap();
        [s.with_cluster(b.logical_id(), meta)]
    };
    let svc = Arc::new(StaticMetadataService::new(clusters.streams("b")).unwrap());
    let errors = || {
        let snap = snapshotter().snapshot().into_vec();
        let errors = value_of(&snap, m::CLUSTER_ERRORS, Some(("cluster", b.logical_id())));
        let created = value_of(
            &snap,
            m::CONSUMERS_CREATED,
            Some(("cluster", b.logical_id())),
        );
        (errors.unwrap_or(0.0), created.unwrap_or(0.0))
    };
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .metadata_discovery_interval(Duration::from_millis(100))
            .rebuild_interval(Duration::ZERO)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for _ in 0..2 {
            assert_eq!(s.next().await.unwrap().unwrap().value, "first");
        }
        let _ = errors();
        // Many metadata reads with the refused properties: one attempt, one error,
        // no consumer made, and B still read with its old client.
        svc.replace(refused("/nonexistent/ca.pem")).unwrap();
        let t = tokio::time::Instant::now();
        while t.elapsed() < Duration::from_millis(1500) {
            let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        }
        b.produce("t", &[TestRecord::value("after")]).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("B is still read with its old properties")
            .unwrap()
            .unwrap();
        assert_eq!((r.value.as_str(), &*r.cluster), ("after", "refused-b"));
        assert_eq!(errors(), (1.0, 0.0), "one error, no consumer rebuilt");
        // Changed again (still refused): tried again, once.
        svc.replace(refused("/nonexistent/other.pem")).unwrap();
        let t = tokio::time::Instant::now();
        while t.elapsed() < Duration::from_millis(1000) {
            let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        }
        assert_eq!(errors(), (1.0, 0.0), "the new properties were tried once");
        s.close().await;
    });
}
}

/// Every value of histogram `name` with label `phase` = `phase` since the previous
/// snapshot.
fn phase_values(
    snap: &[(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    phase: &str,
) -> Vec<f64> {
    snap.iter()
        .filter(|(k, _, _, _)| {
            k.key().name() == m::RECONCILIATION_PHASE_SECONDS
                && k.key()
                    .labels()
                    .any(|l| l.key() == "phase" && l.value() == phase)
        })
        .flat_map(|(_, _, _, v)| match v {
            DebugValue::Histogram(values) => values.iter().map(|x| x.into_inner()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

rusty_fork_test! {
#[test]
fn a_topic_added_to_a_read_cluster_reports_each_phase_of_the_change_once() {
    let _serial = serial();
    snapshotter();
    let cluster = MockKafkaCluster::start("phased", 1).unwrap();
    for topic in ["t", "u"] {
        cluster.create_topic(topic, 1).unwrap();
        cluster.produce(topic, &[TestRecord::value(topic)]).unwrap();
    }
    let streams =
        |topics: &[&str]| [KafkaStream::new("s").with_cluster("phased", meta(&cluster, topics))];
    let svc = Arc::new(StaticMetadataService::new(streams(&["t"])).unwrap());
    // What the tests before left.
    let _ = snapshotter().snapshot();
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "t");
        let before = snapshotter().snapshot().into_vec();
        assert_eq!(
            phase_values(&before, "assign").len(),
            1,
            "the first assignment is timed too"
        );
        let changed = std::time::Instant::now();
        svc.replace(streams(&["t", "u"])).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .expect("the added topic's record")
            .unwrap()
            .unwrap();
        assert_eq!(r.value, "u");
        // The record can come before the enumerator records `discover` (the splits
        // are handed out before the discovery call returns): snapshots (which drain
        // the histograms) are gathered until every phase has been seen, then a moment
        // longer, so a phase recorded twice would show.
        const PHASES: [&str; 5] = ["read", "plan", "apply", "discover", "assign"];
        let mut seen: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while seen.iter().any(Vec::is_empty) && std::time::Instant::now() < deadline {
            let snap = snapshotter().snapshot().into_vec();
            for (values, phase) in seen.iter_mut().zip(PHASES) {
                values.extend(phase_values(&snap, phase));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let snap = snapshotter().snapshot().into_vec();
        let took = changed.elapsed().as_secs_f64();
        for (values, phase) in seen.iter_mut().zip(PHASES) {
            values.extend(phase_values(&snap, phase));
            assert_eq!(values.len(), 1, "phase {phase}: {values:?}");
            assert!(
                values[0] >= 0.0 && values[0] <= took,
                "phase {phase} took {} s, the whole change {took} s",
                values[0]
            );
        }
        s.close().await;
    });
}
}

rusty_fork_test! {
#[test]
fn late_records_in_time_order_go_out_in_offset_order_and_are_counted() {
    // West speaks once, then is quiet past its idle timeout while east's newer
    // records go out; then it comes back with records older than those: they are
    // handed out (not dropped), in west's offset order, and counted as late.
    let _serial = serial();
    let snapshotter = snapshotter();
    let (e, w) = (
        MockKafkaCluster::start("late-e", 1).unwrap(),
        MockKafkaCluster::start("late-w", 1).unwrap(),
    );
    for c in [&e, &w] {
        c.create_topic("t", 1).unwrap();
    }
    let now = now_ms();
    w.produce("t", &[TestRecord::value("w-0").at(now - 10_000)]).unwrap();
    let stream = KafkaStream::new("s")
        .with_cluster("late-e", meta(&e, &["t"]))
        .with_cluster("late-w", meta(&w, &["t"]));
    let rt = mck_testkit::runtime();
    let got = rt.block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .watermarks(
                WatermarkStrategy::monotonous_timestamps()
                    .with_idle_timeout(Duration::from_millis(500)),
            )
            .order(ReadOrder::Time)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        let take = async |s: &mut KafkaSourceStream<Utf8>, n: usize, got: &mut Vec<String>| {
            for _ in 0..n {
                let r = tokio::time::timeout(Duration::from_secs(30), s.next())
                    .await
                    .expect("a record within 30 s")
                    .expect("the stream goes on")
                    .expect("a record");
                got.push(r.value);
            }
        };
        take(&mut s, 1, &mut got).await;
        let east: Vec<TestRecord> = (0..5)
            .map(|i| TestRecord::value(format!("e-{i}")).at(now + i))
            .collect();
        e.produce("t", &east).unwrap();
        take(&mut s, 5, &mut got).await;
        w.produce(
            "t",
            &[
                TestRecord::value("w-1").at(now - 5_000),
                TestRecord::value("w-2").at(now - 6_000),
                TestRecord::value("w-3").at(now - 4_000),
            ],
        )
        .unwrap();
        take(&mut s, 3, &mut got).await;
        s.close().await;
        got
    });
    assert_eq!(
        got,
        ["w-0", "e-0", "e-1", "e-2", "e-3", "e-4", "w-1", "w-2", "w-3"],
        "west's older records after east's, in west's offset order"
    );
    let snap = snapshotter.snapshot().into_vec();
    assert_eq!(
        value_of(&snap, m::LATE_RECORDS, Some(("cluster", "late-w"))),
        Some(3.0)
    );
    assert_eq!(value_of(&snap, m::LATE_RECORDS, Some(("cluster", "late-e"))), None);
}
}

rusty_fork_test! {
#[test]
fn in_time_order_a_reader_slower_than_its_fetches_holds_a_bounded_number_of_records() {
    // Partition 0 holds a backlog older than partition 1's one record, so the merge
    // waits for partition 0 while the reader hands its records out. The reader holds
    // no more than a split's share of them (64 batches), not the whole partition.
    let _serial = serial();
    let snapshotter = snapshotter();
    let c = MockKafkaCluster::start("held", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    let base = now_ms() - 3_600_000;
    // In batches of 100, fetched one at a time (`max.partition.fetch.bytes`), so
    // that a pause stops what would come next.
    let backlog: Vec<TestRecord> = (0..20_000)
        .map(|i| {
            TestRecord::value(format!("p0-{i}"))
                .at(base + i)
                .to_partition(0)
        })
        .collect();
    c.produce_with("t", &backlog, &[("batch.num.messages", "100")])
        .unwrap();
    c.produce(
        "t",
        &[TestRecord::value("p1-0")
            .at(base + 10_000_000)
            .to_partition(1)],
    )
    .unwrap();
    let small_fetches = ClusterMetadata::builder(c.bootstrap_servers())
        .topics(["t"])
        .property("max.partition.fetch.bytes", "2048")
        // A fetch of the other partition alone does not wait long for it.
        .property("fetch.wait.max.ms", "10")
        .build()
        .unwrap();
    let stream = KafkaStream::new("s").with_cluster("held", small_fetches);
    let rt = mck_testkit::runtime();
    let (got, most) = rt.block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .watermarks(WatermarkStrategy::monotonous_timestamps())
            .order(ReadOrder::Time)
            // A split may hold 64 batches: 512 records.
            .max_batch_size(8)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut most = 0.0f64;
        while got.len() < 20_001 {
            let r = tokio::time::timeout(Duration::from_secs(30), s.next())
                .await
                .expect("a record within 30 s")
                .expect("the stream goes on")
                .expect("a record");
            got.push(r.value);
            let snap = snapshotter.snapshot().into_vec();
            most = most.max(value_of(&snap, m::HELD_RECORDS, None).unwrap_or(0.0));
        }
        s.close().await;
        (got, most)
    });
    // Its share, and what the fetcher brought before the pause reached it.
    assert!(
        (100.0..=2560.0).contains(&most),
        "held at most {most} records; a split's share is 512"
    );
    let expected: Vec<String> = (0..20_000)
        .map(|i| format!("p0-{i}"))
        .chain(["p1-0".to_string()])
        .collect();
    assert_eq!(got, expected, "every record once, in time order");
}
}
