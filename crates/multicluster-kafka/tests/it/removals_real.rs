//! Removals the readers have not seen yet, on real brokers: a topic removed and added
//! back before its reader looked resumes where it was handed out, and a removed
//! cluster's last positions reach its consumer group.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use mck_testkit::{TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use support::{PATIENCE, east, meta as on, shared_source, values, west};

async fn next_value(s: &mut KafkaSourceStream<Utf8>) -> String {
    tokio::time::timeout(PATIENCE, s.next())
        .await
        .expect("a record within the patience")
        .expect("the stream goes on")
        .expect("a record")
        .value
}

/// The group's committed offset of partition 0 of `topic`.
fn committed(c: &dyn TestCluster, group: &str, topic: &str) -> Option<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap_servers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    match got.find_partition(topic, 0).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => Some(o),
        _ => None,
    }
}

#[test]
fn a_topic_removed_and_added_back_before_its_reader_looked_resumes_where_it_was() {
    let e = east();
    e.create_topic("readd-t", 1).unwrap();
    e.create_topic("readd-u", 1).unwrap();
    e.produce("readd-t", &values("t", 20)).unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([
            KafkaStream::new("s").with_cluster("east", on(e, &["readd-t", "readd-u"]))
        ])
        .unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 0..10 {
            assert_eq!(next_value(&mut s).await, format!("t{i}"));
        }
        // The reader is not polled while the topic leaves and comes back, so it
        // learns of the removal only after the enumerator took the topic up again.
        svc.replace([KafkaStream::new("s").with_cluster("east", on(e, &["readd-u"]))])
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        svc.replace([KafkaStream::new("s").with_cluster("east", on(e, &["readd-t", "readd-u"]))])
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        for i in 10..20 {
            assert_eq!(next_value(&mut s).await, format!("t{i}"));
        }
        // Nothing handed out before comes again.
        let more = tokio::time::timeout(Duration::from_secs(3), s.next()).await;
        assert!(more.is_err(), "no record after the last: {more:?}");
        s.close().await;
    });
}

#[test]
fn a_removed_cluster_commits_its_last_positions_before_its_client_closes() {
    let (e, w) = (east(), west());
    e.create_topic("leave-t", 1).unwrap();
    w.create_topic("leave-keep", 1).unwrap();
    e.produce("leave-t", &values("t", 20)).unwrap();
    let group = "leave-group";
    let both = || {
        KafkaStream::new("s")
            .with_cluster("east", on(e, &["leave-t"]))
            .with_cluster("west", on(w, &["leave-keep"]))
    };
    let svc = Arc::new(StaticMetadataService::new([both()]).unwrap());
    mck_testkit::runtime().block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone())
            .stream_ids(["s"])
            .group_id(group)
            .deserializer(Utf8)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 0..10 {
            assert_eq!(next_value(&mut s).await, format!("t{i}"));
        }
        let cp = s.checkpoint().unwrap();
        s.commit(&cp).await.unwrap();
        assert_eq!(committed(e, group, "leave-t"), Some(10));
        for i in 10..15 {
            assert_eq!(next_value(&mut s).await, format!("t{i}"));
        }
        // `east` leaves; the reader learns of it while reading `west`.
        svc.replace([KafkaStream::new("s").with_cluster("west", on(w, &["leave-keep"]))])
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        w.produce("leave-keep", &[TestRecord::value("marker")])
            .unwrap();
        // Records of east the reader had at hand may still come before it looks.
        let mut handed_out = 15;
        loop {
            let v = next_value(&mut s).await;
            if v == "marker" {
                break;
            }
            assert_eq!(v, format!("t{handed_out}"));
            handed_out += 1;
        }
        // The next checkpoint's commit carries east's last positions (once the
        // enumerator has the reader's confirmation).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let cp = s.checkpoint().unwrap();
            s.commit(&cp).await.unwrap();
            let now = committed(e, group, "leave-t");
            if now == Some(handed_out) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "east's group offset stayed at {now:?}, not the {handed_out} records handed out"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        s.close().await;
    });
}
