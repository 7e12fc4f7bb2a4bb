//! `SingleClusterMetadataService` against librdkafka mock clusters from the test kit.

use std::collections::BTreeSet;
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster};
use multicluster_kafka::metadata::{
    KafkaMetadataService, MetadataError, SingleClusterMetadataService,
};
use multicluster_kafka::properties::ClientProperties;

/// A mock cluster with these topics. The test kit blocks, so this runs before the
/// tokio runtime of the test starts.
fn cluster_with_topics(id: &str, topics: &[&str]) -> MockKafkaCluster {
    let cluster = MockKafkaCluster::start(id, 3).expect("mock cluster");
    for topic in topics {
        cluster.create_topic(topic, 2).expect("topic");
    }
    cluster
}

fn properties_for(cluster: &MockKafkaCluster) -> ClientProperties {
    [("bootstrap.servers", cluster.bootstrap_servers())]
        .into_iter()
        .collect()
}

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_topic_of_the_cluster_is_a_stream_of_the_same_name() {
    let cluster = cluster_with_topics("east", &["orders", "payments", "__consumer_offsets"]);
    let properties = properties_for(&cluster);
    mck_testkit::runtime().block_on(async {
        let svc = SingleClusterMetadataService::new("east", properties.clone()).unwrap();
        let all = svc.all_streams().await.unwrap();
        assert_eq!(
            all.keys().map(String::as_str).collect::<Vec<_>>(),
            ["orders", "payments"]
        );
        for (id, stream) in &all {
            assert_eq!(&stream.stream_id, id);
            assert_eq!(stream.clusters.keys().collect::<Vec<_>>(), ["east"]);
            let east = &stream.clusters["east"];
            assert_eq!(east.topics, BTreeSet::from([id.clone()]));
            assert_eq!(east.properties, properties);
            assert_eq!(east.starting_offsets, None);
            assert_eq!(east.stopping_offsets, None);
        }
        svc.close().await.unwrap();
    });
}

#[test]
fn describe_returns_existing_topics_and_leaves_unknown_and_internal_ones_out() {
    let cluster = cluster_with_topics("east", &["orders", "payments", "__consumer_offsets"]);
    let properties = properties_for(&cluster);
    mck_testkit::runtime().block_on(async {
        let svc = SingleClusterMetadataService::new("east", properties).unwrap();
        let got = svc
            .describe_streams(&ids(&["orders", "missing", "__consumer_offsets"]))
            .await
            .unwrap();
        assert_eq!(
            got.keys().map(String::as_str).collect::<Vec<_>>(),
            ["orders"]
        );
        assert_eq!(
            got["orders"].clusters["east"].topics,
            BTreeSet::from(["orders".to_string()])
        );
        assert!(svc.describe_streams(&[]).await.unwrap().is_empty());
    });
}

#[test]
fn a_topic_created_later_is_found_on_the_next_call() {
    let cluster = cluster_with_topics("east", &["orders"]);
    let properties = properties_for(&cluster);
    let rt = mck_testkit::runtime();
    let svc = SingleClusterMetadataService::new("east", properties).unwrap();
    let before = rt.block_on(svc.all_streams()).unwrap();
    assert!(!before.contains_key("refunds"));

    cluster.create_topic("refunds", 1).unwrap();
    let after = rt
        .block_on(svc.describe_streams(&ids(&["refunds"])))
        .unwrap();
    assert!(after.contains_key("refunds"), "{after:?}");
}

#[test]
fn only_its_own_cluster_id_is_active() {
    let cluster = cluster_with_topics("east", &["orders"]);
    let properties = properties_for(&cluster);
    mck_testkit::runtime().block_on(async {
        let svc = SingleClusterMetadataService::new("east", properties).unwrap();
        assert!(svc.is_cluster_active("east").await.unwrap());
        assert!(!svc.is_cluster_active("west").await.unwrap());
        assert_eq!(svc.cluster_id(), "east");
    });
}

#[test]
fn an_unreachable_cluster_gives_a_cluster_error_without_secrets() {
    let mut properties: ClientProperties = [
        ("bootstrap.servers", "127.0.0.1:1"),
        ("socket.timeout.ms", "1000"),
        ("sasl.password", "hunter2"),
    ]
    .into_iter()
    .collect();
    properties.set_secret("client.id", "secret-client-id");
    mck_testkit::runtime().block_on(async {
        let svc = SingleClusterMetadataService::new("gone", properties)
            .unwrap()
            .with_metadata_timeout(Duration::from_secs(1));
        for result in [
            svc.all_streams().await,
            svc.describe_streams(&ids(&["orders"])).await,
        ] {
            let err = result.unwrap_err();
            let shown = err.to_string();
            match &err {
                MetadataError::Cluster { cluster, .. } => assert_eq!(cluster, "gone"),
                other => panic!("expected a cluster error, got {other:?}"),
            }
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(!shown.contains("secret-client-id"), "{shown}");
        }
        // Failing to reach the cluster does not make the cluster inactive.
        assert!(svc.is_cluster_active("gone").await.unwrap());
    });
}

#[test]
fn a_cluster_that_goes_away_and_comes_back_is_listed_again() {
    let cluster = cluster_with_topics("east", &["orders"]);
    let properties = properties_for(&cluster);
    let rt = mck_testkit::runtime();
    let svc = SingleClusterMetadataService::new("east", properties)
        .unwrap()
        .with_metadata_timeout(Duration::from_secs(2));
    assert!(
        rt.block_on(svc.all_streams())
            .unwrap()
            .contains_key("orders")
    );

    for broker in 0..cluster.broker_count() {
        cluster.broker_down(broker).unwrap();
    }
    let err = rt.block_on(svc.all_streams()).unwrap_err();
    assert!(matches!(err, MetadataError::Cluster { .. }), "{err:?}");

    for broker in 0..cluster.broker_count() {
        cluster.broker_up(broker).unwrap();
    }
    // librdkafka reconnects with backoff; the request waits for it.
    let svc = svc.with_metadata_timeout(Duration::from_secs(60));
    assert!(
        rt.block_on(svc.all_streams())
            .unwrap()
            .contains_key("orders")
    );
}

#[test]
fn a_closed_service_refuses_calls() {
    let cluster = cluster_with_topics("east", &["orders"]);
    let properties = properties_for(&cluster);
    mck_testkit::runtime().block_on(async {
        let svc = SingleClusterMetadataService::new("east", properties).unwrap();
        assert_eq!(svc.all_streams().await.unwrap().len(), 1);
        svc.close().await.unwrap();
        assert_eq!(svc.all_streams().await.unwrap_err(), MetadataError::Closed);
        assert_eq!(
            svc.describe_streams(&ids(&["orders"])).await.unwrap_err(),
            MetadataError::Closed
        );
    });
}
