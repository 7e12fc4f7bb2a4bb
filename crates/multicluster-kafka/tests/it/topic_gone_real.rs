//! A topic deleted during a bounded run: the split it was reading cannot reach its
//! stop. By default the run gets an error naming the split; with missing topics
//! allowed the split ends with a warning and the run ends.

use crate::support;

use std::time::Duration;

use mck_testkit::{TestCluster, TestRecord, shared_cluster};
use multicluster_kafka::offsets::PartitionOffset;
use multicluster_kafka::prelude::*;
use support::one_topic_source;

fn bounded(bootstrap: &str, topic: &str) -> SourceBuilder<Utf8> {
    one_topic_source(bootstrap, topic)
        // Stops at offset 10 while 3 records exist: the run waits for 7 more.
        .stopping_offsets(StoppingOffsets::Specific {
            offsets: vec![PartitionOffset {
                topic: topic.into(),
                partition: 0,
                offset: 10,
            }],
        })
}

#[test]
fn a_topic_deleted_during_a_bounded_run_ends_its_split_with_an_error_or_a_warning() {
    let c = shared_cluster("gone").unwrap();
    let bootstrap = c.bootstrap_servers();
    mck_testkit::runtime().block_on(async {
        for allow in [false, true] {
            let topic = format!("gone-{allow}");
            c.create_topic(&topic, 1).unwrap();
            let values: Vec<TestRecord> =
                (0..3).map(|i| TestRecord::value(format!("v{i}"))).collect();
            c.produce(&topic, &values).unwrap();
            let mut s = bounded(&bootstrap, &topic)
                .allow_missing_topics(allow)
                .build()
                .unwrap()
                .open()
                .await
                .unwrap();
            for i in 0..3 {
                assert_eq!(s.next().await.unwrap().unwrap().value, format!("v{i}"));
            }
            c.delete_topic(&topic).unwrap();
            let end = tokio::time::timeout(Duration::from_secs(60), s.next())
                .await
                .expect("the run does not hang on the deleted topic");
            match (allow, end) {
                (false, Some(Err(e))) => {
                    let text = e.to_string();
                    assert!(
                        matches!(e, SourceError::TopicGone { .. })
                            && text.contains(&format!("c/{topic}/0")),
                        "{text}"
                    );
                }
                (true, None) => {}
                (allow, other) => panic!("allow {allow}: {other:?}"),
            }
            s.close().await;
        }
    });
}
