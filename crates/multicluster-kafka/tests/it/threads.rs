//! What a source costs in threads (in-process librdkafka mock clusters): on the
//! native path none per cluster (its lookups and fetches are tasks on the program's
//! runtime), on librdkafka's one client per cluster it reads, shared by the
//! enumerator's lookups and the reader, and one thread serving the events of every
//! client; on both a reader's fetch threads (at most one per core). Each test runs in
//! a process of its own, so no other test's clients are counted.

use crate::support;
use rusty_fork::rusty_fork_test;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use support::shared_source;

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

/// Held by each test while it counts.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Waits (a guard against hangs, not a timing assertion) until `done`.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let patience = Instant::now();
    while !done() {
        assert!(
            patience.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}: {:?}",
            threads()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

rusty_fork_test! {
#[test]
fn natively_no_cluster_costs_a_thread() {
    let (before, during) = read_three_clusters("native");
    assert_eq!(
        added(&before, &during, "rdk:"),
        0,
        "no librdkafka client; threads before {before:?}, while reading {during:?}"
    );
    assert_eq!(added(&before, &during, "mck-events"), 0, "{during:?}");
}
}

rusty_fork_test! {
#[test]
fn with_librdkafka_each_cluster_read_costs_one_client_and_the_events_share_a_thread() {
    let (before, during) = read_three_clusters("librdkafka");
    // librdkafka starts one `rdk:main` thread per client.
    assert_eq!(
        added(&before, &during, "rdk:main"),
        CLUSTERS,
        "one client per cluster; threads before {before:?}, while reading {during:?}"
    );
    assert_eq!(
        named(&during, "mck-events"),
        1,
        "one event thread for all clients: {during:?}"
    );
}
}

/// The clusters [`read_three_clusters`] reads.
const CLUSTERS: usize = 3;

/// How many more threads named `prefix…` `during` has than `before`.
fn added(
    before: &BTreeMap<String, usize>,
    during: &BTreeMap<String, usize>,
    prefix: &str,
) -> usize {
    named(during, prefix).saturating_sub(named(before, prefix))
}

/// Reads a record from each of three mock clusters with `fetch.backend` set to
/// `backend`: the threads before the source opened and while it read, which added
/// a fetch thread per cluster, up to one per core. Returns once the source's
/// librdkafka clients are gone again (the event thread they share stays).
fn read_three_clusters(backend: &str) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let clusters: Vec<MockKafkaCluster> = (0..CLUSTERS)
        .map(|i| MockKafkaCluster::start(&format!("c{i}"), 1).unwrap())
        .collect();
    let mut stream = KafkaStream::new("s");
    for c in &clusters {
        c.create_topic("t", 2).unwrap();
        c.produce("t", &[TestRecord::value("v")]).unwrap();
        let cluster = ClusterMetadata::builder(c.bootstrap_servers())
            .topic("t")
            .property("fetch.backend", backend)
            .build()
            .unwrap();
        stream = stream.with_cluster(c.logical_id(), cluster);
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
        // The enumerator's clients close on threads of their own after `close`: the
        // next test counts from a process without them.
        until("the source's clients closed", || {
            let now = threads();
            named(&now, "rdk:main") <= named(&before, "rdk:main")
        })
        .await;
        during
    });
    assert_eq!(
        added(&before, &during, "mck-fetch"),
        CLUSTERS.min(cores()),
        "a fetch thread per cluster, up to one per core: {during:?}"
    );
    (before, during)
}

rusty_fork_test! {
#[test]
fn a_cluster_that_leaves_is_let_go_and_closing_ends_the_fetch_threads() {
    // On librdkafka's path, where a cluster's client has threads to count.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let meta = |c: &MockKafkaCluster, topics: &[&str]| {
        ClusterMetadata::builder(c.bootstrap_servers())
            .topics(topics.iter().copied())
            .property("fetch.backend", "librdkafka")
            .build()
            .unwrap()
    };
    let (a, b) = (
        MockKafkaCluster::start("fta", 1).unwrap(),
        MockKafkaCluster::start("ftb", 1).unwrap(),
    );
    for c in [&a, &b] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value(c.logical_id())])
            .unwrap();
    }
    let both = KafkaStream::new("s")
        .with_cluster("fta", meta(&a, &["t"]))
        .with_cluster("ftb", meta(&b, &["t"]));
    let svc = std::sync::Arc::new(StaticMetadataService::new([both]).unwrap());
    let rt = mck_testkit::runtime();
    let before = threads();
    let clients = move || named(&threads(), "rdk:main") - named(&before, "rdk:main");
    rt.block_on(async {
        let mut s = shared_source(svc.clone())
            .parallelism(1)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = vec![
            s.next().await.unwrap().unwrap().value,
            s.next().await.unwrap().unwrap().value,
        ];
        seen.sort();
        assert_eq!(seen, ["fta", "ftb"]);
        assert_eq!(clients(), 2, "{:?}", threads());
        assert_eq!(named(&threads(), "mck-fetch"), 2.min(cores()));

        // B leaves the metadata: the reader lets its consumer go and the enumerator
        // its lookups, so B's one client is closed; A is still read.
        svc.replace([KafkaStream::new("s").with_cluster("fta", meta(&a, &["t"]))])
            .unwrap();
        let patience = Instant::now();
        while clients() != 1 {
            assert!(
                patience.elapsed() < Duration::from_secs(60),
                "B's client is still open: {:?}",
                threads()
            );
            let _ = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        }
        a.produce("t", &[TestRecord::value("after")]).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(60), s.next())
            .await
            .expect("A is still read")
            .unwrap()
            .unwrap();
        assert_eq!(r.value, "after");
        // Closing waits for the fetch threads.
        s.close().await;
        assert_eq!(named(&threads(), "mck-fetch"), 0, "{:?}", threads());
        until("every client of the source closed", || clients() == 0).await;
    });
}
}
