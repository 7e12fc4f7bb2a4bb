//! The hybrid source against real Kafka: history files with timestamps up to T, two
//! clusters holding records from before and after T. The output is the file records
//! plus the Kafka records strictly after T, each once, across checkpoints taken before,
//! at and after the switch.

use crate::support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use mck_testkit::{TestCluster, TestRecord};
use multicluster_kafka::file_source::{FileSource, FileSourceBuilder};
use multicluster_kafka::hybrid::{HybridCheckpoint, HybridRecord, HybridSource, Switch};
use multicluster_kafka::prelude::*;
use support::{PATIENCE, east, east_and_west, source_over, west};

const BASE: i64 = 1_700_000_000_000;
/// The largest timestamp in the files.
const T: i64 = BASE + 99;

/// Writes 100 history records (timestamps BASE..=T) over a plain, a gzip and a zstd
/// file; returns their ids.
fn write_history(dir: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    let mut files: [(String, String); 3] = Default::default();
    for i in 0..100i64 {
        let id = format!("h-{i}");
        let f = &mut files[(i % 3) as usize].1;
        f.push_str(&format!("{{\"id\":\"{id}\",\"ts\":{}}}\n", BASE + i));
        ids.push(id);
    }
    files[0].0 = "part-0.jsonl".into();
    files[1].0 = "part-1.jsonl.gz".into();
    files[2].0 = "part-2.jsonl.zst".into();
    std::fs::write(dir.join(&files[0].0), &files[0].1).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.join(&files[1].0)).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(files[1].1.as_bytes()).unwrap();
    gz.finish().unwrap();
    std::fs::write(
        dir.join(&files[2].0),
        zstd::stream::encode_all(files[2].1.as_bytes(), 3).unwrap(),
    )
    .unwrap();
    ids
}

/// Fills `topic` (2 partitions) with records at BASE+50..BASE+149 (so half before and
/// at T, half after); returns the values after T.
fn fill_kafka(c: &dyn TestCluster, topic: &str) -> Vec<String> {
    c.create_topic(topic, 2).unwrap();
    let mut recs = Vec::new();
    let mut after = Vec::new();
    for p in 0..2 {
        for ts in BASE + 50..BASE + 150 {
            let v = format!("{}-{p}-{ts}", c.logical_id());
            recs.push(TestRecord::value(v.clone()).to_partition(p).at(ts));
            if ts > T {
                after.push(v);
            }
        }
    }
    c.produce(topic, &recs).unwrap();
    after
}

fn kafka(topic: &str) -> SourceBuilder<Utf8> {
    source_over(east_and_west("orders", topic)).stopping_offsets(StoppingOffsets::Latest)
}

fn files(dir: &Path) -> FileSourceBuilder {
    FileSource::builder(dir)
        .timestamp_field("ts")
        .parallelism(2)
}

/// The id of a history record, or the value of a Kafka record.
fn key(r: HybridRecord<String>) -> String {
    match r {
        HybridRecord::File(f) => {
            let v: serde_json::Value = serde_json::from_slice(&f.value).unwrap();
            assert!(v["ts"].as_i64().unwrap() <= T);
            v["id"].as_str().unwrap().to_string()
        }
        HybridRecord::Kafka(k) => {
            assert!(
                k.timestamp.unwrap() > T,
                "a Kafka record at or before T: {k:?}"
            );
            k.value
        }
    }
}

#[test]
fn files_then_kafka_after_the_largest_timestamp_each_record_once_across_restores() {
    let topic = "hybrid-switch";
    let dir = tempfile::tempdir().unwrap();
    let mut want = write_history(dir.path());
    want.extend(fill_kafka(east(), topic));
    want.extend(fill_kafka(west(), topic));
    want.sort();
    assert_eq!(want.len(), 100 + 2 * 2 * 50);

    mck_testkit::runtime().block_on(async {
        // One uninterrupted run: the switch is observed.
        let mut s = HybridSource::new(files(dir.path()), kafka(topic))
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(PATIENCE, async {
            while let Some(r) = s.next().await {
                got.push(key(r.unwrap()));
            }
        })
        .await
        .expect("the hybrid ends");
        assert_eq!(
            s.switch(),
            Some(&Switch {
                files_max_timestamp: Some(T),
                starting: Some(StartingOffsets::Timestamp(T + 1)),
            })
        );
        s.close().await;
        got.sort();
        assert_eq!(got, want);

        // Checkpoints before the switch, exactly at it (every file record handed out,
        // no Kafka record yet), just after it, and later on Kafka.
        for cut in [37usize, 100, 101, 160] {
            let mut s = HybridSource::new(files(dir.path()), kafka(topic))
                .open()
                .await
                .unwrap();
            let mut got = Vec::new();
            while got.len() < cut {
                got.push(key(s.next().await.unwrap().unwrap()));
            }
            let cp = s.checkpoint().unwrap();
            match (&cp, cut) {
                (HybridCheckpoint::Files { .. }, 37 | 100) => {}
                (HybridCheckpoint::Kafka { .. }, 101 | 160) => {}
                _ => panic!("checkpoint after {cut} records is on the wrong side: {cp:?}"),
            }
            s.close().await;
            // Through the regular checkpoint encoding, as a store keeps it.
            let stored = Checkpoint::decode(&cp.into_checkpoint().encode()).unwrap();
            let restored = HybridCheckpoint::from_checkpoint(stored).unwrap().unwrap();
            let mut s = HybridSource::new(files(dir.path()), kafka(topic))
                .restore_from(restored)
                .open()
                .await
                .unwrap();
            tokio::time::timeout(PATIENCE, async {
                while let Some(r) = s.next().await {
                    got.push(key(r.unwrap()));
                }
            })
            .await
            .expect("the restored hybrid ends");
            s.close().await;
            let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
            for g in &got {
                *counts.entry(g).or_default() += 1;
            }
            let dups: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
            assert!(dups.is_empty(), "cut {cut}: duplicates {dups:?}");
            got.sort();
            assert_eq!(got, want, "cut {cut}");
        }
    });
}
