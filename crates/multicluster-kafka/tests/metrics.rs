//! The source reports its metrics through the `metrics` facade (mock cluster, so it
//! runs in-process; its own binary because it installs a global recorder).

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use multicluster_kafka::metrics as m;
use multicluster_kafka::prelude::*;

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

#[test]
fn records_bytes_splits_lag_and_commits_are_reported() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this binary");

    let cluster = MockKafkaCluster::start("metered", 1).unwrap();
    cluster.create_topic("t", 2).unwrap();
    let records: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("value-{i}")).to_partition(i % 2))
        .collect();
    cluster.produce("t", &records).unwrap();
    let stream = KafkaStream::new("s").with_cluster(
        "metered",
        ClusterMetadata::builder(cluster.bootstrap_servers())
            .topic("t")
            .build()
            .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
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
    let lag = value_of(&snap, m::SPLIT_LAG, Some(("topic", "t")));
    assert!(
        lag.is_some_and(|l| (0.0..=10.0).contains(&l)),
        "per-split lag reported: {lag:?}"
    );
    // Every split of the bounded read finished.
    assert_eq!(
        value_of(&snap, m::ACTIVE_SPLITS, Some(("reader", "0"))),
        Some(0.0)
    );
}
