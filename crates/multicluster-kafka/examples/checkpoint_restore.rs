//! A checkpoint/restore loop: read a while, checkpoint to a directory, "crash",
//! restore from the newest checkpoint and read on; every record is seen exactly once.
//!
//! Self-contained (in-process mock cluster):
//! `cargo run -p multicluster-kafka --example checkpoint_restore`

use std::collections::BTreeSet;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;

async fn run(
    service: StaticMetadataService,
    store: &FileCheckpointStore,
    limit: Option<usize>,
    seen: &mut BTreeSet<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = MultiClusterKafkaSource::builder()
        .metadata_service(service)
        .stream_ids(["events"])
        .deserializer(ValueOnly::<String>::utf8())
        .stopping_offsets(StoppingOffsets::Latest);
    if let Some(cp) = store.latest()? {
        println!("restoring from a checkpoint of {} splits", cp.split_count());
        builder = builder.restore_from(cp);
    }
    let mut reader = builder.build()?.open().await?;
    let mut n = 0;
    while let Some(record) = reader.next().await {
        let record = record?;
        assert!(
            seen.insert(record.value.clone()),
            "duplicate {}",
            record.value
        );
        n += 1;
        if n % 10 == 0 {
            // A checkpoint covers exactly the records handed out so far.
            store.save(&reader.checkpoint()?)?;
        }
        if Some(n) == limit {
            println!(
                "crashing after {n} records (last checkpoint at {})",
                n / 10 * 10
            );
            // Records after the last checkpoint are read again after restore; an
            // application makes its output idempotent or, like `mck consume --output`,
            // truncates it back to the checkpoint. Here we forget them.
            for v in seen.clone().iter().rev().take(n % 10) {
                seen.remove(v);
            }
            return Ok(());
        }
    }
    store.save(&reader.checkpoint()?)?;
    reader.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster = MockKafkaCluster::start("main", 1)?;
    cluster.create_topic("events", 1)?;
    let records: Vec<TestRecord> = (0..55)
        .map(|i| TestRecord::value(format!("event-{i:03}")))
        .collect();
    cluster.produce("events", &records)?;
    let service = || {
        let stream = KafkaStream::new("events").with_cluster(
            "main",
            ClusterMetadata::builder(cluster.bootstrap_servers())
                .topic("events")
                .build()
                .expect("valid"),
        );
        StaticMetadataService::new([stream]).expect("valid")
    };
    let dir = tempfile::tempdir()?;
    let store = FileCheckpointStore::open(dir.path(), 3)?;
    let mut seen = BTreeSet::new();
    run(service(), &store, Some(27), &mut seen).await?;
    run(service(), &store, None, &mut seen).await?;
    println!("read {} distinct records of {}", seen.len(), records.len());
    assert_eq!(seen.len(), records.len());
    Ok(())
}
