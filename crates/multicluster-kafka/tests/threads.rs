//! What a source costs in threads (in-process librdkafka mock clusters): one
//! librdkafka client per cluster it reads, shared by the enumerator's lookups and the
//! reader, and one thread serving the events of every client. One test in this
//! binary, so no other test's clients are counted.

use std::collections::BTreeMap;
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;

/// The process's threads by name.
fn threads() -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let comm = task.unwrap().path().join("comm");
        if let Ok(name) = std::fs::read_to_string(comm) {
            *out.entry(name.trim().to_string()).or_default() += 1;
        }
    }
    out
}

fn named(t: &BTreeMap<String, usize>, prefix: &str) -> usize {
    t.iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, c)| c)
        .sum()
}

#[test]
fn each_cluster_read_costs_one_client_and_the_events_share_a_thread() {
    let clusters: Vec<MockKafkaCluster> = (0..3)
        .map(|i| MockKafkaCluster::start(&format!("c{i}"), 1).unwrap())
        .collect();
    let mut stream = KafkaStream::new("s");
    for c in &clusters {
        c.create_topic("t", 2).unwrap();
        c.produce("t", &[TestRecord::value("v")]).unwrap();
        stream = stream.with_cluster(
            c.logical_id(),
            ClusterMetadata::builder(c.bootstrap_servers())
                .topic("t")
                .build()
                .unwrap(),
        );
    }
    let rt = mck_testkit::runtime();
    // Threads after the clusters and the runtime exist (the clusters' producers are
    // librdkafka clients too).
    let before = threads();
    let during = rt.block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for _ in 0..clusters.len() {
            let r = tokio::time::timeout(Duration::from_secs(30), s.next())
                .await
                .expect("a record within 30 s")
                .unwrap()
                .unwrap();
            assert_eq!(r.value, "v");
        }
        let during = threads();
        s.close().await;
        during
    });
    let added =
        |prefix: &str| named(&during, prefix) - named(&before, prefix).min(named(&during, prefix));
    // librdkafka starts one `rdk:main` thread per client.
    assert_eq!(
        added("rdk:main"),
        clusters.len(),
        "one client per cluster; threads before {before:?}, while reading {during:?}"
    );
    assert_eq!(
        named(&during, "mck-events"),
        1,
        "one event thread for all clients: {during:?}"
    );
    assert_eq!(
        added("mck-fetch"),
        clusters.len(),
        "a fetcher per cluster: {during:?}"
    );
}
