//! Reads one logical stream spread over two clusters.
//!
//! Self-contained: it starts two in-process librdkafka mock clusters, fills a topic on
//! each, and reads the stream `orders` to its end (bounded mode).
//!
//! `cargo run -p multicluster-kafka --example two_clusters`

use std::collections::BTreeMap;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let east = MockKafkaCluster::start("east", 1)?;
    let west = MockKafkaCluster::start("west", 1)?;
    for (cluster, region) in [(&east, "east"), (&west, "west")] {
        cluster.create_topic("orders", 2)?;
        let records: Vec<TestRecord> = (0..5)
            .map(|i| TestRecord::value(format!("order {i} from {region}")).to_partition(i % 2))
            .collect();
        cluster.produce("orders", &records)?;
    }

    // The metadata: stream `orders` = topic `orders` on both clusters.
    let stream = KafkaStream::new("orders")
        .with_cluster(
            "east",
            ClusterMetadata::builder(east.bootstrap_servers())
                .topic("orders")
                .build()?,
        )
        .with_cluster(
            "west",
            ClusterMetadata::builder(west.bootstrap_servers())
                .topic("orders")
                .build()?,
        );

    let source = MultiClusterKafkaSource::builder()
        .metadata_service(StaticMetadataService::new([stream])?)
        .stream_ids(["orders"])
        .deserializer(ValueOnly::<String>::utf8())
        .starting_offsets(StartingOffsets::Earliest)
        .stopping_offsets(StoppingOffsets::Latest)
        .build()?;

    let mut reader = source.open().await?;
    let mut per_cluster: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(record) = reader.next().await {
        let record = record?;
        println!(
            "{:>4} {}/{}@{}: {}",
            record.cluster, record.topic, record.partition, record.offset, record.value
        );
        *per_cluster.entry(record.cluster.to_string()).or_default() += 1;
    }
    println!("read {per_cluster:?}");
    reader.close().await;
    Ok(())
}
