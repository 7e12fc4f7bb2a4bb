//! A slow commit on one cluster holds neither the records nor the metadata changes of
//! the others (in-process librdkafka mock clusters; a round-trip delay on one cluster's
//! broker makes its commit slow).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use support::meta;

#[test]
fn a_slow_commit_does_not_hold_a_metadata_change_of_another_cluster() {
    let fast = MockKafkaCluster::start("fast", 1).unwrap();
    let slow = MockKafkaCluster::start("slow", 1).unwrap();
    for c in [&fast, &slow] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value(c.logical_id())])
            .unwrap();
    }
    fast.create_topic("u", 1).unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([KafkaStream::new("s")
            .with_cluster("fast", meta(&fast, &["t"]))
            .with_cluster("slow", meta(&slow, &["t"]))])
        .unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let (coordinator, mut readers) = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone())
            .stream_ids(["s"])
            .group_id("commit-isolation")
            .deserializer(Utf8)
            .build()
            .unwrap()
            .open_parallel()
            .await
            .unwrap();
        let mut reader = readers.pop().unwrap();
        let mut first = Vec::new();
        for _ in 0..2 {
            first.push(reader.next().await.unwrap().unwrap().value);
        }
        first.sort();
        assert_eq!(first, ["fast", "slow"]);
        let cp = reader.checkpoint().unwrap();

        slow.set_round_trip_delay(0, Duration::from_secs(3))
            .unwrap();
        let commit = tokio::spawn(async move {
            let result = coordinator.commit(&cp).await;
            (coordinator, result)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // While the slow cluster's commit waits: a topic added on the fast cluster is
        // taken up and read.
        svc.replace([KafkaStream::new("s")
            .with_cluster("fast", meta(&fast, &["t", "u"]))
            .with_cluster("slow", meta(&slow, &["t"]))])
            .unwrap();
        fast.produce("u", &[TestRecord::value("on-u")]).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(2), reader.next())
            .await
            .expect("the added topic is read while the commit waits")
            .unwrap()
            .unwrap();
        assert_eq!(r.value, "on-u");
        assert!(
            !commit.is_finished(),
            "the record came while the commit still waited on the slow cluster"
        );

        slow.set_round_trip_delay(0, Duration::ZERO).unwrap();
        let (coordinator, result) = commit.await.unwrap();
        result.expect("the slow commit succeeds in the end");
        drop(reader);
        coordinator.close().await;
    });
}
