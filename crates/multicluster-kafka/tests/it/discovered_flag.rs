//! A cluster counts as discovered in checkpoints only once its splits were handed
//! out: a checkpoint taken after an added cluster answered but before its partitions
//! were listed must not make a restore treat those partitions as new (they would
//! start at the new-partition position instead of the cluster's starting offsets).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use support::{meta, shared_source};

#[test]
fn an_added_cluster_is_not_discovered_in_checkpoints_until_its_splits_are_out() {
    let a = MockKafkaCluster::start("flag-a", 1).unwrap();
    let b = MockKafkaCluster::start("flag-b", 1).unwrap();
    for c in [&a, &b] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value(c.logical_id())])
            .unwrap();
    }
    // B's offset lookups fail for a while: it answers, but cannot be discovered.
    b.request_errors(
        RDKafkaApiKey::ListOffsets,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN; 2000],
    )
    .unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([KafkaStream::new("s").with_cluster("a", meta(&a, &["t"]))])
            .unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .partition_discovery_interval(Duration::from_millis(200))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "flag-a");
        svc.replace([KafkaStream::new("s")
            .with_cluster("a", meta(&a, &["t"]))
            .with_cluster("b", meta(&b, &["t"]))])
            .unwrap();
        // Wait until the readers know B (its cluster.id is in the checkpoint).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let cp = loop {
            let _ = tokio::time::timeout(Duration::from_millis(100), s.next()).await;
            let cp = s.checkpoint().unwrap();
            if cp
                .clusters
                .get("b")
                .is_some_and(|c| c.kafka_cluster_id.is_some())
            {
                break cp;
            }
            assert!(tokio::time::Instant::now() < deadline, "B never answered");
        };
        let known = &cp.clusters["b"];
        assert!(
            known.splits.is_empty(),
            "B cannot be discovered yet: {known:?}"
        );
        assert!(
            !known.initial_discovery_done,
            "B's partitions were never listed, yet the checkpoint says it was discovered"
        );
        // B can be discovered now: its record comes, and then the flag is set.
        b.clear_request_errors(RDKafkaApiKey::ListOffsets).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .expect("B is read once it can be discovered")
            .unwrap()
            .unwrap();
        assert_eq!(r.value, "flag-b");
        let cp = s.checkpoint().unwrap();
        assert!(cp.clusters["b"].initial_discovery_done, "{cp:?}");
        assert_eq!(cp.clusters["b"].splits.len(), 1);
        s.close().await;
    });
}
