//! A cluster's bootstrap list changed to another physical cluster: refused (the old
//! client reads on) unless the metadata marks the cluster as replaced, by naming the
//! old Kafka cluster.id in `replaces` or by setting its starting offsets, which starts
//! it fresh there; the same at a restart from a checkpoint of the old cluster
//! (in-process mock clusters, each with its own Kafka cluster.id).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use support::shared_source;

fn east_on(c: &MockKafkaCluster, start: Option<StartingOffsets>) -> [KafkaStream; 1] {
    east_replacing(c, start, None)
}

fn east_replacing(
    c: &MockKafkaCluster,
    start: Option<StartingOffsets>,
    replaces: Option<&str>,
) -> [KafkaStream; 1] {
    let mut b = ClusterMetadata::builder(c.bootstrap_servers()).topic("t");
    if let Some(s) = start {
        b = b.starting_offsets(s);
    }
    if let Some(id) = replaces {
        b = b.replaces(id);
    }
    [KafkaStream::new("s").with_cluster("east", b.build().unwrap())]
}

fn filled(id: &str, n: usize) -> MockKafkaCluster {
    let c = MockKafkaCluster::start(id, 1).unwrap();
    c.create_topic("t", 1).unwrap();
    let values: Vec<TestRecord> = (0..n)
        .map(|i| TestRecord::value(format!("{id}-{i}")))
        .collect();
    c.produce("t", &values).unwrap();
    c
}

fn source(svc: &Arc<StaticMetadataService>) -> SourceBuilder<Utf8> {
    shared_source(svc.clone()).rebuild_interval(Duration::ZERO)
}

async fn read_for(s: &mut KafkaSourceStream<Utf8>, d: Duration) -> Vec<String> {
    let mut got = Vec::new();
    let until = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < until {
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), s.next()).await {
            got.push(r.unwrap().value);
        }
    }
    got
}

#[test]
fn a_bootstrap_list_leading_to_another_cluster_is_refused_unless_marked_replaced() {
    let old = MockKafkaCluster::start("switch-old", 1).unwrap();
    let new = MockKafkaCluster::start("switch-new", 1).unwrap();
    for (c, n) in [(&old, 2), (&new, 3)] {
        c.create_topic("t", 1).unwrap();
        let values: Vec<TestRecord> = (0..n)
            .map(|i| TestRecord::value(format!("{}-{i}", c.logical_id())))
            .collect();
        c.produce("t", &values).unwrap();
    }
    let svc = Arc::new(StaticMetadataService::new(east_on(&old, None)).unwrap());
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .rebuild_interval(Duration::ZERO)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(2)).await,
            ["switch-old-0", "switch-old-1"]
        );
        // The bootstrap list now leads to another cluster: refused, the old one is
        // still read (its positions would mean nothing on the new one).
        svc.replace(east_on(&new, None)).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        old.produce("t", &[TestRecord::value("switch-old-2")])
            .unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(3)).await,
            ["switch-old-2"],
            "still on the old cluster, nothing of the new one"
        );
        let cp = s.checkpoint().unwrap();
        assert_eq!(cp.clusters["east"].splits[0].next_offset, 3);

        // Marked replaced (its own starting offsets): read fresh from the new one.
        svc.replace(east_on(&new, Some(StartingOffsets::Earliest)))
            .unwrap();
        let got = read_for(&mut s, Duration::from_secs(5)).await;
        assert_eq!(got, ["switch-new-0", "switch-new-1", "switch-new-2"]);
        let cp = s.checkpoint().unwrap();
        let east = &cp.clusters["east"];
        assert_eq!(east.splits.len(), 1);
        assert_eq!(
            east.splits[0].next_offset, 3,
            "positions on the new cluster"
        );
        assert_ne!(
            east.kafka_cluster_id, None,
            "the checkpoint names the new cluster.id"
        );
        s.close().await;
    });
}

#[test]
fn replaces_names_the_old_cluster_id_live_and_at_a_restart() {
    let old = filled("repl-old", 2);
    let new = filled("repl-new", 3);
    let svc = Arc::new(StaticMetadataService::new(east_on(&old, None)).unwrap());
    mck_testkit::runtime().block_on(async {
        let mut s = source(&svc).build().unwrap().open().await.unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(2)).await,
            ["repl-old-0", "repl-old-1"]
        );
        let before = s.checkpoint().unwrap();
        let old_id = before.clusters["east"].kafka_cluster_id.clone().unwrap();
        // `replaces` naming some other cluster.id is no permission: refused.
        svc.replace(east_replacing(&new, None, Some("not-the-old-one")))
            .unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(2)).await,
            Vec::<String>::new()
        );
        assert_eq!(
            s.checkpoint().unwrap().clusters["east"].kafka_cluster_id,
            Some(old_id.clone())
        );
        // Naming the old cluster.id: read fresh from the new one.
        svc.replace(east_replacing(&new, None, Some(&old_id)))
            .unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(5)).await,
            ["repl-new-0", "repl-new-1", "repl-new-2"]
        );
        s.close().await;

        // A restart from the old cluster's checkpoint onto the new one: refused as an
        // identity mismatch without `replaces`, started fresh with it.
        let svc = Arc::new(StaticMetadataService::new(east_on(&new, None)).unwrap());
        let opened = source(&svc)
            .restore_from(before.clone())
            .build()
            .unwrap()
            .open()
            .await;
        let Err(err) = opened else {
            panic!("another cluster behind the same id is refused");
        };
        assert!(matches!(err, SourceError::ClusterIdentity { .. }), "{err}");
        let svc = Arc::new(
            StaticMetadataService::new(east_replacing(&new, None, Some(&old_id))).unwrap(),
        );
        let mut s = source(&svc)
            .restore_from(before)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert_eq!(
            read_for(&mut s, Duration::from_secs(5)).await,
            ["repl-new-0", "repl-new-1", "repl-new-2"]
        );
        s.close().await;
    });
}
