//! Topics the cluster refuses to describe to the client's principal, on a real broker
//! with KRaft's authorizer: said as an authorization failure, never as a missing
//! topic, at start and when the permission goes during a bounded run. In a process
//! of its own: it installs a global tracing subscriber.

use crate::support;
use rusty_fork::rusty_fork_test;

use std::time::Duration;

use mck_testkit::tools::add_acl;
use mck_testkit::{ClusterOptions, KafkaCluster, Listener, TestCluster};
use multicluster_kafka::offsets::PartitionOffset;
use multicluster_kafka::prelude::*;
use support::{Capture, PATIENCE, values};

/// A source reading `topics` as the PLAIN user of the secured listener.
fn as_plain_user(c: &KafkaCluster, topics: &[&str]) -> SourceBuilder<Utf8> {
    let props = c.listener_properties(Listener::PlainSasl);
    let bootstrap = props[0].1.clone();
    let meta = props[1..]
        .iter()
        .fold(ClusterMetadata::builder(bootstrap), |b, (k, v)| {
            b.property(k, v)
        });
    let meta = topics
        .iter()
        .fold(meta, |b, t| b.topic(*t))
        .build()
        .unwrap();
    MultiClusterKafkaSource::builder()
        .metadata_service(
            StaticMetadataService::new([KafkaStream::new("s").with_cluster("c", meta)]).unwrap(),
        )
        .stream_ids(["s"])
        .deserializer(Utf8)
}

fn deny(c: &KafkaCluster, topic: &str) {
    let user = format!("User:{}", c.security().unwrap().plain_user);
    add_acl(
        &c.bootstrap_servers(),
        &[
            "--deny-principal",
            &user,
            "--operation",
            "All",
            "--topic",
            topic,
        ],
    )
    .unwrap();
}

rusty_fork_test! {
#[test]
fn a_topic_the_principal_may_not_describe_is_reported_as_unauthorized() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).unwrap();
    let c = KafkaCluster::start(ClusterOptions::new("authz").secured().authorizer())
        .expect("a secured cluster with an authorizer starts");
    for t in ["authz-open", "authz-denied", "authz-revoked"] {
        c.create_topic(t, 1).unwrap();
    }
    c.produce("authz-open", &values("o", 3)).unwrap();
    c.produce("authz-denied", &values("d", 3)).unwrap();
    c.produce("authz-revoked", &values("r", 3)).unwrap();
    deny(&c, "authz-denied");
    mck_testkit::runtime().block_on(async {
        // At start: the open topic is read; the denied one is said to be refused.
        let mut s = as_plain_user(&c, &["authz-open", "authz-denied"])
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 0..3 {
            let r = tokio::time::timeout(PATIENCE, s.next())
                .await
                .expect("a record")
                .unwrap()
                .unwrap();
            assert_eq!(r.value, format!("o{i}"));
        }
        s.close().await;
        let warnings: Vec<String> = capture
            .events()
            .into_iter()
            .filter(|(_, level, _)| *level == tracing::Level::WARN)
            .map(|(_, _, fields)| fields)
            .collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("authorization failed") && w.contains("authz-denied")),
            "{warnings:#?}"
        );
        assert!(
            !warnings
                .iter()
                .any(|w| w.contains("not found") && w.contains("authz-denied")),
            "the denied topic is not called missing: {warnings:#?}"
        );

        // During a bounded run: the permission goes before the split's stop.
        let mut s = as_plain_user(&c, &["authz-revoked"])
            .stopping_offsets(StoppingOffsets::Specific {
                offsets: vec![PartitionOffset {
                    topic: "authz-revoked".into(),
                    partition: 0,
                    offset: 10,
                }],
            })
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 0..3 {
            assert_eq!(s.next().await.unwrap().unwrap().value, format!("r{i}"));
        }
        deny(&c, "authz-revoked");
        let end = tokio::time::timeout(Duration::from_secs(60), s.next())
            .await
            .expect("the run does not hang on the refused topic");
        match end {
            Some(Err(e @ SourceError::TopicNotAuthorized { .. })) => {
                let text = e.to_string();
                assert!(text.contains("c/authz-revoked/0"), "{text}");
            }
            other => panic!("expected the split's authorization error, got {other:?}"),
        }
        s.close().await;
    });
}
}
