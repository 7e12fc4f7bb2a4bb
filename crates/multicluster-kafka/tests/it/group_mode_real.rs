//! Group mode on a real broker (Kafka 4.x, consumer group protocol): two sources in
//! one group share a topic's partitions; the second joining takes some from the
//! first, which commits what it acknowledged before letting them go; together they
//! read every record exactly once when each acknowledges (commits) what it read.

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mck_testkit::{TestCluster, TestRecord, shared_cluster};
use multicluster_kafka::inspect::GroupProtocol;
use multicluster_kafka::prelude::*;
use multicluster_kafka::{KafkaSourceStream, ScaleOut};
use support::{meta_at, source_over};

fn source(bootstrap: &str) -> MultiClusterKafkaSource<Utf8> {
    source_over(KafkaStream::new("s").with_cluster("only", meta_at(bootstrap, &["group-t"])))
        .group_id("group-mode-g")
        .scale_out(ScaleOut::KafkaGroup)
        .build()
        .unwrap()
}

/// What the cluster's coordinator says of the group, as `mck describe --group` shows
/// it.
fn described(bootstrap: &str) -> multicluster_kafka::inspect::GroupReport {
    use multicluster_kafka::inspect::{InspectOptions, inspect_cluster};
    let mut props = multicluster_kafka::properties::ClientProperties::new();
    props.set("bootstrap.servers", bootstrap);
    let options = InspectOptions::new(Duration::from_secs(10)).group("group-mode-g");
    let report = inspect_cluster(
        "only",
        &props,
        &BTreeSet::from(["group-t".to_string()]),
        &options,
    )
    .expect("the cluster is described");
    report
        .group
        .expect("a group was asked")
        .expect("the group is described")
}

/// Reads for `within` (or until `until` holds), acknowledging after every batch and
/// whenever the source asks; returns the values.
async fn read(
    s: &mut KafkaSourceStream<Utf8>,
    seen: &mut Vec<String>,
    within: Duration,
    until: impl Fn(&[String]) -> bool,
) {
    let end = Instant::now() + within;
    while Instant::now() < end && !until(seen) {
        match tokio::time::timeout(Duration::from_millis(200), s.next_batch()).await {
            Ok(Some(Ok(batch))) => {
                for r in batch.iter() {
                    seen.push(r.value.clone());
                }
                let cp = s.checkpoint().unwrap();
                s.commit(&cp).await.unwrap();
            }
            Ok(Some(Err(e))) => panic!("{e}"),
            Ok(None) => break,
            Err(_) => {
                let cp = s.checkpoint().unwrap();
                let _ = s.commit(&cp).await;
            }
        }
    }
}

#[test]
fn two_instances_share_a_topic_and_read_each_record_once() {
    let cluster = shared_cluster("group-mode").expect("Kafka starts");
    cluster.create_topic("group-t", 6).unwrap();
    let batch = |from: usize| -> Vec<TestRecord> {
        (from..from + 300)
            .map(|i| TestRecord::value(format!("v{i}")).with_key(format!("k{i}")))
            .collect()
    };
    cluster.produce("group-t", &batch(0)).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    mck_testkit::runtime().block_on(async {
        let mut a = source(&bootstrap).open().await.expect("instance a opens");
        let mut seen_a = Vec::new();
        read(&mut a, &mut seen_a, Duration::from_secs(60), |s| {
            s.len() >= 300
        })
        .await;
        assert_eq!(seen_a.len(), 300, "alone, a reads every partition");

        let mut b = source(&bootstrap).open().await.expect("instance b opens");
        let mut seen_b = Vec::new();
        // b joins: the coordinator moves some partitions from a to b. Both go on
        // reading (a must answer its revocation) while more records come, until b
        // read some and the two together read everything.
        let mut produced = 300;
        let mut last = Instant::now();
        let end = Instant::now() + Duration::from_secs(90);
        while !(seen_b.len() >= 50 && seen_a.len() + seen_b.len() >= produced) {
            assert!(
                Instant::now() < end,
                "b read {} records, a {} of {produced}",
                seen_b.len(),
                seen_a.len()
            );
            if seen_b.len() < 50 && last.elapsed() > Duration::from_secs(1) {
                let records = batch(produced);
                tokio::task::spawn_blocking(move || cluster.produce("group-t", &records).unwrap())
                    .await
                    .unwrap();
                produced += 300;
                last = Instant::now();
            }
            read(&mut a, &mut seen_a, Duration::from_millis(300), |_| false).await;
            read(&mut b, &mut seen_b, Duration::from_millis(300), |_| false).await;
        }
        let all: Vec<&String> = seen_a.iter().chain(&seen_b).collect();
        let unique: BTreeSet<&String> = all.iter().copied().collect();
        assert_eq!(unique.len(), produced, "every record read");
        assert_eq!(all.len(), produced, "none read twice");
        let group = tokio::task::spawn_blocking(move || described(&bootstrap))
            .await
            .unwrap();
        assert_eq!(group.protocol, GroupProtocol::Consumer, "{group:?}");
        assert_eq!(group.members, 2, "{group:?}");
        b.close().await;
        a.close().await;
    });
}

#[test]
fn brokers_without_the_consumer_group_protocol_are_joined_with_the_classic_one() {
    // Kafka 4.x with KIP-848 turned off, as an older cluster would be.
    let cluster = mck_testkit::KafkaCluster::start(
        mck_testkit::ClusterOptions::new("classic-only")
            .broker_config("group.coordinator.rebalance.protocols", "classic"),
    )
    .expect("Kafka starts");
    cluster.create_topic("group-t", 4).unwrap();
    let records: Vec<TestRecord> = (0..200)
        .map(|i| TestRecord::value(format!("c{i}")))
        .collect();
    cluster.produce("group-t", &records).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let before = described(&bootstrap);
    assert_eq!(before.protocol, GroupProtocol::Unknown, "{before:?}");
    assert_eq!(before.members, 0, "{before:?}");
    mck_testkit::runtime().block_on(async {
        let mut s = source(&bootstrap).open().await.expect("the instance opens");
        let mut seen = Vec::new();
        read(&mut s, &mut seen, Duration::from_secs(90), |s| {
            s.len() >= 200
        })
        .await;
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!((unique.len(), seen.len()), (200, 200), "every record once");
        let b = bootstrap.clone();
        let group = tokio::task::spawn_blocking(move || described(&b))
            .await
            .unwrap();
        assert_eq!(group.protocol, GroupProtocol::Classic, "{group:?}");
        assert_eq!(
            (group.state.as_str(), group.members),
            ("Stable", 1),
            "{group:?}"
        );
        s.close().await;
    });
}
