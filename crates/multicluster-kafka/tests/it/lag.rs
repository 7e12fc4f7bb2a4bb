//! `mck_split_lag` tells how far behind the handed-out records are: it falls to 0
//! once everything is read, and a split that leaves the source has its series marked
//! removed (NaN). Mock clusters, in-process; in a process of its own because it
//! installs a global recorder.

use crate::support;
use rusty_fork::rusty_fork_test;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use metrics::{Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use multicluster_kafka::metrics as m;
use multicluster_kafka::prelude::*;
use support::{meta, shared_source};

/// A gauge's last value (the debugging recorder of metrics-util resets gauges at
/// every snapshot, which would hide a value that stopped changing).
#[derive(Default)]
struct Cell(AtomicU64);

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        self.set(f64::from_bits(self.0.load(Ordering::Relaxed)) + value);
    }
    fn decrement(&self, value: f64) {
        self.increment(-value);
    }
    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// (cluster, partition)
type SplitKey = (String, String);

/// Keeps `mck_split_lag` per split; everything else is dropped.
#[derive(Clone, Default)]
struct LagRecorder(Arc<Mutex<BTreeMap<SplitKey, Arc<Cell>>>>);

impl metrics::Recorder for LagRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        if key.name() != m::SPLIT_LAG {
            return Gauge::noop();
        }
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_string())
                .unwrap_or_default()
        };
        let cell = self
            .0
            .lock()
            .unwrap()
            .entry((label("cluster"), label("partition")))
            .or_default()
            .clone();
        Gauge::from_arc(cell)
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

impl LagRecorder {
    fn lags(&self) -> BTreeMap<SplitKey, f64> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(k, c)| (k.clone(), f64::from_bits(c.0.load(Ordering::Relaxed))))
            .collect()
    }
}

/// Reads (so the reader takes what its fetchers answer) until `done` holds, for at
/// most 30 s.
async fn read_until(
    s: &mut KafkaSourceStream<Utf8>,
    recorder: &LagRecorder,
    what: &str,
    done: impl Fn(&BTreeMap<SplitKey, f64>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let lags = recorder.lags();
        if done(&lags) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not in 30 s: {lags:?}"
        );
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), s.next()).await {
            panic!("no record expected, got {:?}", r.map(|r| r.value));
        }
    }
}

rusty_fork_test! {
#[test]
fn lag_falls_to_zero_once_everything_is_read_and_a_removed_clusters_series_go() {
    let recorder = LagRecorder::default();
    metrics::set_global_recorder(recorder.clone()).expect("the only recorder in this binary");

    let a = MockKafkaCluster::start("lag-a", 1).unwrap();
    let b = MockKafkaCluster::start("lag-b", 1).unwrap();
    for c in [&a, &b] {
        c.create_topic("t", 2).unwrap();
        let records: Vec<TestRecord> = (0..50)
            .map(|i| TestRecord::value(format!("v{i}")).to_partition(i % 2))
            .collect();
        c.produce("t", &records).unwrap();
    }
    let both = KafkaStream::new("s")
        .with_cluster(a.logical_id(), meta(&a, &["t"]))
        .with_cluster(b.logical_id(), meta(&b, &["t"]));
    let only_a = KafkaStream::new("s").with_cluster(a.logical_id(), meta(&a, &["t"]));
    let svc = Arc::new(StaticMetadataService::new([both]).unwrap());
    let key = |c: &str, p: &str| (c.to_string(), p.to_string());
    let all = [
        key("lag-a", "0"),
        key("lag-a", "1"),
        key("lag-b", "0"),
        key("lag-b", "1"),
    ];
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut s = shared_source(svc.clone())
            // Several batches per split.
            .max_batch_size(8)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for _ in 0..100 {
            tokio::time::timeout(Duration::from_secs(30), s.next())
                .await
                .expect("all 100 records within 30 s")
                .unwrap()
                .unwrap();
            // Never more than what is left to read.
            let left: f64 = recorder.lags().values().sum();
            assert!(left <= 100.0, "{:?}", recorder.lags());
        }
        read_until(&mut s, &recorder, "every split caught up", |lags| {
            all.iter().all(|k| lags.get(k) == Some(&0.0))
        })
        .await;

        // A record produced now: read, and the lag is 0 again.
        a.produce("t", &[TestRecord::value("late").to_partition(0)])
            .unwrap();
        let r = tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(r.value, "late");
        read_until(&mut s, &recorder, "caught up again", |lags| {
            all.iter().all(|k| lags.get(k) == Some(&0.0))
        })
        .await;

        // Cluster B leaves the metadata: its series are marked removed, A's stay.
        svc.replace([only_a]).unwrap();
        read_until(&mut s, &recorder, "B's series removed", |lags| {
            all[2..].iter().all(|k| lags[k].is_nan())
        })
        .await;
        let lags = recorder.lags();
        assert_eq!((lags[&all[0]], lags[&all[1]]), (0.0, 0.0), "{lags:?}");
        s.close().await;
    });
    // A closed source reads nothing: every series is marked removed.
    assert!(
        recorder.lags().values().all(|l| l.is_nan()),
        "{:?}",
        recorder.lags()
    );
}
}
