//! The native fetch path (`fetch.backend=native`) read through the library, against
//! real Apache Kafka brokers: every record once and in partition order, bounded runs
//! ending at their stops, batches within their size, positions outside the log,
//! transactions, and what it refuses.

mod support;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::Duration;

use mck_testkit::Seen;
use mck_testkit::{TestCluster, TestRecord, TransactionEnd, produce_transaction};
use multicluster_kafka::prelude::*;
use support::{Capture, drain, east, east_and_west, meta, source_over, west};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// What the library said, from every test of this binary.
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::under("multicluster_kafka");
        tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber");
        capture
    })
}

/// `b` with `fetch.backend=native` for every cluster.
fn native(b: SourceBuilder<Utf8>) -> SourceBuilder<Utf8> {
    capture();
    b.property("fetch.backend", "native")
}

/// Every fetcher so far took the native path: none made a librdkafka consumer.
fn assert_fetched_natively() {
    let said = capture().messages(|_, _| true);
    assert!(
        said.iter().any(|m| m == "fetching natively"),
        "no fetcher said it fetches natively"
    );
    assert!(
        !said.iter().any(|m| m == "consumer created"),
        "a reader made a librdkafka consumer"
    );
}

fn values_of(seen: &[Seen]) -> BTreeSet<String> {
    seen.iter().map(|s| s.4.clone()).collect()
}

#[test]
fn a_bounded_read_of_two_clusters_hands_out_every_record_once_in_order() {
    let topic = "np-eo";
    east().create_topic(topic, 3).unwrap();
    west().create_topic(topic, 2).unwrap();
    let mut want: BTreeSet<String> = mck_testkit::fill_values(east(), topic, 3, 700, "east")
        .into_iter()
        .collect();
    want.extend(mck_testkit::fill_values(west(), topic, 2, 700, "west"));
    mck_testkit::runtime().block_on(async {
        let mut stream = native(source_over(east_and_west("s", topic)))
            .max_batch_size(100)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        let done = tokio::time::timeout(PATIENCE, async {
            while let Some(batch) = stream.next_batch().await {
                let batch = batch.expect("a batch");
                assert!(
                    batch.len() <= 100,
                    "{} records in a batch of 100",
                    batch.len()
                );
                for r in batch.iter() {
                    seen.push((
                        r.cluster.to_string(),
                        r.topic.to_string(),
                        r.partition,
                        r.offset,
                        r.value.clone(),
                    ));
                }
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "the bounded read did not end; {} records",
            seen.len()
        );
        mck_testkit::assert_in_partition_order(
            seen.iter()
                .map(|(c, t, p, o, _)| (c.as_str(), t.as_str(), *p, *o)),
        );
        assert_eq!(seen.len(), want.len(), "records handed out");
        assert_eq!(values_of(&seen), want);
        let cp = stream.checkpoint().unwrap();
        assert_eq!(cp.split_count(), 5);
        assert!(cp.splits().all(|s| s.next_offset == 700), "{cp:?}");
        stream.close().await;
    });
    assert_fetched_natively();
}

#[test]
fn keys_headers_and_timestamps_come_through_as_written() {
    let topic = "np-fields";
    east().create_topic(topic, 1).unwrap();
    let records: Vec<TestRecord> = (0..50)
        .map(|i| {
            TestRecord::value(format!("v{i}"))
                .with_key(format!("k{i}"))
                .at(1_700_000_000_000 + i)
                .with_header("h", format!("x{i}"))
                .with_header("empty", "")
        })
        .collect();
    east().produce(topic, &records).unwrap();
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster("east", meta(east(), &[topic]));
        let mut stream = native(source_over(stream))
            .include_headers(true)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = stream.next().await {
            got.push(r.expect("a record"));
        }
        assert_eq!(got.len(), 50);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.value, format!("v{i}"));
            assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
            assert_eq!(r.timestamp, Some(1_700_000_000_000 + i as i64));
            assert_eq!(
                r.headers,
                vec![
                    ("h".to_string(), Some(format!("x{i}").into_bytes())),
                    ("empty".to_string(), Some(Vec::new())),
                ]
            );
        }
        stream.close().await;
    });
    assert_fetched_natively();
}

#[test]
fn read_committed_skips_aborted_transactions_and_their_markers() {
    let topic = "np-txn";
    east().create_topic(topic, 1).unwrap();
    let batch = |p: &str| -> Vec<TestRecord> {
        (0..20)
            .map(|i| TestRecord::value(format!("{p}{i}")).to_partition(0))
            .collect()
    };
    produce_transaction(east(), topic, &batch("a"), TransactionEnd::Commit).unwrap();
    produce_transaction(east(), topic, &batch("x"), TransactionEnd::Abort).unwrap();
    produce_transaction(east(), topic, &batch("b"), TransactionEnd::Commit).unwrap();
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster("east", meta(east(), &[topic]));
        let mut stream = native(source_over(stream))
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let seen = tokio::time::timeout(PATIENCE, drain(&mut stream))
            .await
            .expect("the bounded read ends");
        let values: Vec<&str> = seen.iter().map(|s| s.4.as_str()).collect();
        let want: Vec<String> = (0..20)
            .map(|i| format!("a{i}"))
            .chain((0..20).map(|i| format!("b{i}")))
            .collect();
        assert_eq!(values, want);
        // Three markers and twenty aborted records were stepped over, not handed out.
        let cp = stream.checkpoint().unwrap();
        assert!(cp.splits().all(|s| s.next_offset == 63), "{cp:?}");
        stream.close().await;
    });
    assert_fetched_natively();
}
