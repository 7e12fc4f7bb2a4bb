//! A position outside the log (records deleted below a checkpoint with Kafka's own
//! `kafka-delete-records`) is never silent: by default the split fails with its
//! position and the log's range; the policy can reset it to the log's start or end.

use crate::support;

use std::time::Duration;

use mck_testkit::{TestCluster, TestRecord, shared_cluster, tools};
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::prelude::*;
use support::one_topic_source;

async fn next(s: &mut KafkaSourceStream<Utf8>) -> Result<String, SourceError> {
    tokio::time::timeout(Duration::from_secs(30), s.next())
        .await
        .expect("an answer within 30 s")
        .expect("the stream goes on")
        .map(|r| r.value)
}

#[test]
fn records_deleted_below_a_checkpoint_fail_the_split_or_reset_as_chosen() {
    let c = shared_cluster("oor").unwrap();
    let topic = "deleted-below";
    c.create_topic(topic, 1).unwrap();
    let values: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("v{i}")))
        .collect();
    c.produce(topic, &values).unwrap();
    let bootstrap = c.bootstrap_servers();
    mck_testkit::runtime().block_on(async {
        // Read 3 records (position 3), checkpoint, stop.
        let mut s = one_topic_source(&bootstrap, topic)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 0..3 {
            assert_eq!(next(&mut s).await.unwrap(), format!("v{i}"));
        }
        let cp: Checkpoint = s.checkpoint().unwrap();
        s.close().await;

        // An operator deletes the records below offset 6.
        tools::delete_records(&bootstrap, topic, 0, 6).unwrap();

        // Default: the split fails, naming its position and the log's range.
        let mut s = one_topic_source(&bootstrap, topic)
            .restore_from(cp.clone())
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let err = next(&mut s).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(
                err,
                SourceError::OffsetOutOfRange {
                    offset: 3,
                    log_start: Some(6),
                    log_end: Some(10),
                    ..
                }
            ),
            "{text}"
        );
        assert!(
            text.starts_with(&format!(
                "c/{topic}/0: position 3 is outside the log (offsets 6 to 10)"
            )),
            "{text}"
        );
        assert!(!text.contains('\n'));
        s.close().await;

        // earliest: reads from the new log start, nothing before it.
        let mut s = one_topic_source(&bootstrap, topic)
            .restore_from(cp.clone())
            .on_offset_out_of_range(OffsetReset::Earliest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for i in 6..10 {
            assert_eq!(next(&mut s).await.unwrap(), format!("v{i}"));
        }
        s.close().await;

        // latest: only what is produced after the reset.
        let mut s = one_topic_source(&bootstrap, topic)
            .restore_from(cp)
            .on_offset_out_of_range(OffsetReset::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(3), s.next())
                .await
                .is_err(),
            "nothing comes before a new record"
        );
        c.produce(topic, &[TestRecord::value("new")]).unwrap();
        assert_eq!(next(&mut s).await.unwrap(), "new");
        s.close().await;
    });
}
