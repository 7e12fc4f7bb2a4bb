//! The source as a `futures` stream: the same records as `next`, and the end of a
//! bounded input ends the stream (in-process mock clusters).

use crate::support;

use futures_util::StreamExt;
use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use support::one_topic_source;

/// Reads topic `t` of `c` to its latest offsets.
fn bounded(c: &MockKafkaCluster) -> SourceBuilder<Utf8> {
    one_topic_source(&c.bootstrap_servers(), "t").stopping_offsets(StoppingOffsets::Latest)
}

#[test]
fn a_bounded_source_as_a_stream_of_records_and_of_batches() {
    let c = MockKafkaCluster::start("streams", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    let values: Vec<TestRecord> = (0..50)
        .map(|i| TestRecord::value(format!("v{i}")).to_partition(i % 2))
        .collect();
    c.produce("t", &values).unwrap();
    mck_testkit::runtime().block_on(async {
        let s = bounded(&c).build().unwrap().open().await.unwrap();
        let mut got: Vec<String> = s.into_stream().map(|r| r.unwrap().value).collect().await;
        got.sort_by_key(|v| v[1..].parse::<u32>().unwrap());
        let want: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
        assert_eq!(got, want);

        let s = bounded(&c).build().unwrap().open().await.unwrap();
        let batches: Vec<RecordBatch<String>> =
            s.into_batch_stream().map(|b| b.unwrap()).collect().await;
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 50);
    });
}
