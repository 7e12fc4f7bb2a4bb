//! Shard mode's membership on a real broker (Kafka 4.x, consumer group protocol): a
//! second live instance of a shard is refused, another shard is not, and a shard
//! stopped gracefully is free for its next instance at once.

use crate::support;

use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, shared_cluster};
use multicluster_kafka::error::SourceError;
use multicluster_kafka::prelude::*;
use multicluster_kafka::{ScaleOut, Shard};
use support::{meta, source_over};

fn source(cluster: &KafkaCluster, shard: &str, wait: Duration) -> MultiClusterKafkaSource<Utf8> {
    source_over(KafkaStream::new("s").with_cluster("only", meta(cluster, &["lock-t"])))
        .group_id("lock-g")
        .scale_out(ScaleOut::Shard(shard.parse::<Shard>().unwrap()))
        .shard_lock_wait(wait)
        .build()
        .unwrap()
}

#[test]
fn a_second_live_instance_of_a_shard_is_refused_and_a_stopped_one_frees_it() {
    let cluster = shared_cluster("lock").expect("Kafka starts");
    cluster.create_topic("lock-t", 4).unwrap();
    // Two records in each partition: shard 0 of 2 owns two of them.
    mck_testkit::fill_partitions(cluster, "lock-t", 4, 2, "v").expect("produce");
    mck_testkit::runtime().block_on(async {
        let mut first = source(cluster, "0/2", Duration::from_secs(30))
            .open()
            .await
            .expect("the first instance of shard 0 holds it");
        // It reads only its shard's partitions.
        let mut partitions = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let r = tokio::time::timeout(Duration::from_secs(60), first.next())
                .await
                .expect("shard 0 reads its partitions' records")
                .unwrap()
                .unwrap();
            partitions.insert(r.partition);
        }
        assert_eq!(partitions.len(), 2, "shard 0 reads two of the four partitions");
        for p in &partitions {
            assert_eq!(
                Shard::owner_of(&multicluster_kafka::split::SplitId::new("only", "lock-t", *p), 2),
                0,
                "partition {p} is not shard 0's"
            );
        }

        let began = Instant::now();
        let twin = source(cluster, "0/2", Duration::from_secs(3)).open().await;
        let e = twin.expect_err("a second live instance of shard 0 is refused");
        assert!(
            matches!(&e, SourceError::ShardTaken { shard, instance, .. } if shard == "0/2" && instance == "lock-g-shard-0"),
            "{e}"
        );
        assert!(e.to_string().contains("held by a live member"), "{e}");
        eprintln!("refused after {:?}: {e}", began.elapsed());

        let other = source(cluster, "1/2", Duration::from_secs(30))
            .open()
            .await
            .expect("shard 1 is free");
        other.close().await;

        first.close().await;
        let began = Instant::now();
        let next = source(cluster, "0/2", Duration::from_secs(30))
            .open()
            .await
            .expect("a shard stopped gracefully is free for its next instance");
        let took = began.elapsed();
        next.close().await;
        assert!(
            took < Duration::from_secs(20),
            "the next instance waited {took:?}: the stopped one did not leave the group"
        );
    });
}
