//! The batch API (`next_batch`) against real Apache Kafka brokers (two shared
//! clusters): exactly once, per-partition order, and checkpoints taken between batches.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mck_testkit::{KafkaCluster, TestCluster};
use multicluster_kafka::prelude::*;
use multicluster_kafka::record::RecordBatch;
use support::{east, east_and_west, source_over, west};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// Creates `topic` with `partitions` partitions and produces `n` records to each,
/// values `<prefix>-<partition>-<i>` with keys `k<i>`. Returns the values.
fn fill(c: &KafkaCluster, topic: &str, partitions: i32, n: usize, prefix: &str) -> Vec<String> {
    c.create_topic(topic, partitions).unwrap();
    mck_testkit::fill_values(c, topic, partitions, n, prefix)
}

/// A bounded source of UTF-8 values over `topic` on both clusters.
fn source(topic: &str, max_batch: usize, restore: Option<Checkpoint>) -> SourceBuilder<Utf8> {
    let mut b = source_over(east_and_west("s", topic))
        .max_batch_size(max_batch)
        .stopping_offsets(StoppingOffsets::Latest);
    if let Some(cp) = restore {
        b = b.restore_from(cp);
    }
    b
}

/// cluster, topic, partition, offset, key, value
type Seen = (String, String, i32, i64, String, String);

/// Checks a batch's own promises and returns its records.
fn seen_in(batch: &RecordBatch<String>, max: usize) -> Vec<Seen> {
    assert!(!batch.is_empty(), "an empty batch was handed out");
    assert!(
        batch.len() <= max,
        "{} records in a batch of at most {max}",
        batch.len()
    );
    assert_eq!(batch.iter().len(), batch.len());
    batch
        .iter()
        .map(|r| {
            assert_eq!(r.cluster, batch.cluster(), "a batch holds one cluster");
            let key = String::from_utf8(r.key.expect("keyed").to_vec()).unwrap();
            assert_eq!(r.key_bytes().as_deref(), r.key);
            (
                r.cluster.to_string(),
                r.topic.to_string(),
                r.partition,
                r.offset,
                key,
                r.value.clone(),
            )
        })
        .collect()
}

fn assert_exactly_once_in_order(seen: &[Seen]) {
    for (_, _, p, _, k, v) in seen {
        // Keys and values belong together: `k<i>` with `<prefix>-<p>-<i>`.
        assert!(v.ends_with(&format!("-{p}-{}", &k[1..])), "{k} with {v}");
    }
    mck_testkit::assert_in_partition_order(
        seen.iter()
            .map(|(c, t, p, o, _, _)| (c.as_str(), t.as_str(), *p, *o)),
    );
}

/// The position after the last record handed out, per split.
fn positions_after(seen: &[Seen]) -> BTreeMap<(String, i32), i64> {
    let mut out = BTreeMap::new();
    for (c, _, p, o, _, _) in seen {
        out.insert((c.clone(), *p), o + 1);
    }
    out
}

#[test]
fn batches_hand_out_every_record_of_two_clusters_exactly_once_in_partition_order() {
    let mut want: BTreeSet<String> = fill(east(), "b-eo", 3, 300, "east").into_iter().collect();
    want.extend(fill(west(), "b-eo", 2, 300, "west"));
    mck_testkit::runtime().block_on(async {
        let mut stream = source("b-eo", 64, None)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        let mut batches = 0;
        let done = tokio::time::timeout(PATIENCE, async {
            while let Some(batch) = stream.next_batch().await {
                seen.extend(seen_in(&batch.expect("batch"), 64));
                batches += 1;
            }
        })
        .await;
        assert!(done.is_ok(), "bounded read did not end; got {}", seen.len());
        assert!(
            batches >= 1500 / 64,
            "{batches} batches of at most 64 for 1500 records"
        );
        assert_exactly_once_in_order(&seen);
        let values: BTreeSet<String> = seen.iter().map(|s| s.5.clone()).collect();
        assert_eq!(values, want);
        // Every split ends at its stop.
        let cp = stream.checkpoint().unwrap();
        assert_eq!(cp.split_count(), 5);
        assert!(cp.splits().all(|s| s.next_offset == 300));
        stream.close().await;
    });
}

#[test]
fn a_checkpoint_after_a_batch_restores_to_exactly_the_record_after_it() {
    let mut want: BTreeSet<String> = fill(east(), "b-cp", 3, 200, "east").into_iter().collect();
    want.extend(fill(west(), "b-cp", 2, 200, "west"));
    mck_testkit::runtime().block_on(async {
        let mut first = source("b-cp", 50, None)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut before = Vec::new();
        tokio::time::timeout(PATIENCE, async {
            while before.len() < 400 {
                let batch = first
                    .next_batch()
                    .await
                    .expect("more batches")
                    .expect("batch");
                before.extend(seen_in(&batch, 50));
            }
        })
        .await
        .expect("400 records");
        let cp = first.checkpoint().unwrap();
        // Checked split by split: each resumes right after the last record handed
        // out, and splits not read yet at their start.
        let handed = positions_after(&before);
        for s in cp.splits() {
            let want = handed
                .get(&(s.id.cluster.to_string(), s.id.partition))
                .copied()
                .unwrap_or(0);
            assert_eq!(s.next_offset, want, "{}", s.id);
        }
        // Batches fetched after the checkpoint are lost with a crash.
        let _lost = first.next_batch().await;
        drop(first);
        let restored = Checkpoint::decode(&cp.encode()).unwrap();
        let mut second = source("b-cp", 50, Some(restored))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut after = Vec::new();
        tokio::time::timeout(PATIENCE, async {
            while let Some(batch) = second.next_batch().await {
                after.extend(seen_in(&batch.expect("batch"), 50));
            }
        })
        .await
        .expect("the restored read ends");
        // The first record of each split after the restore is exactly the next one.
        let mut firsts: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for (c, _, p, o, _, _) in &after {
            firsts.entry((c.clone(), *p)).or_insert(*o);
        }
        for (split, first_offset) in firsts {
            assert_eq!(
                first_offset,
                handed.get(&split).copied().unwrap_or(0),
                "{split:?}"
            );
        }
        let mut all = before;
        all.extend(after);
        assert_exactly_once_in_order(&all);
        let values: BTreeSet<String> = all.iter().map(|s| s.5.clone()).collect();
        assert_eq!(values, want);
        second.close().await;
    });
}

#[test]
fn next_and_next_batch_can_be_mixed_and_checkpoints_stay_exact() {
    let mut want: BTreeSet<String> = fill(east(), "b-mix", 2, 150, "east").into_iter().collect();
    want.extend(fill(west(), "b-mix", 2, 150, "west"));
    mck_testkit::runtime().block_on(async {
        let mut stream = source("b-mix", 40, None)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen: Vec<Seen> = Vec::new();
        let mut round = 0usize;
        let done = tokio::time::timeout(PATIENCE, async {
            loop {
                // Alternate: a few single records (leaving part of a polled batch
                // buffered), then a batch (which starts with what is left).
                if round.is_multiple_of(2) {
                    let mut ended = false;
                    for _ in 0..7 {
                        match stream.next().await {
                            Some(r) => {
                                let r = r.expect("record");
                                let key =
                                    String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
                                seen.push((
                                    r.cluster.to_string(),
                                    r.topic.to_string(),
                                    r.partition,
                                    r.offset,
                                    key,
                                    r.value,
                                ));
                            }
                            None => {
                                ended = true;
                                break;
                            }
                        }
                    }
                    if ended {
                        break;
                    }
                } else {
                    match stream.next_batch().await {
                        Some(batch) => seen.extend(seen_in(&batch.expect("batch"), 40)),
                        None => break,
                    }
                }
                round += 1;
                let cp = stream.checkpoint().unwrap();
                let handed = positions_after(&seen);
                for s in cp.splits() {
                    let want = handed
                        .get(&(s.id.cluster.to_string(), s.id.partition))
                        .copied()
                        .unwrap_or(0);
                    assert_eq!(s.next_offset, want, "round {round}: {}", s.id);
                }
            }
        })
        .await;
        assert!(done.is_ok(), "bounded read did not end; got {}", seen.len());
        assert_exactly_once_in_order(&seen);
        let values: BTreeSet<String> = seen.iter().map(|s| s.5.clone()).collect();
        assert_eq!(values, want);
        stream.close().await;
    });
}

#[test]
fn parallel_readers_hand_out_batches_exactly_once() {
    let mut want: BTreeSet<String> = fill(east(), "b-par", 4, 100, "east").into_iter().collect();
    want.extend(fill(west(), "b-par", 4, 100, "west"));
    mck_testkit::runtime().block_on(async {
        let (coordinator, readers) = source("b-par", 32, None)
            .parallelism(3)
            .build()
            .unwrap()
            .open_parallel()
            .await
            .unwrap();
        let tasks: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    while let Some(batch) = reader.next_batch().await {
                        seen.extend(seen_in(&batch.expect("batch"), 32));
                    }
                    reader.close().await;
                    seen
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(
                tokio::time::timeout(PATIENCE, t)
                    .await
                    .expect("reader ends")
                    .unwrap(),
            );
        }
        assert_exactly_once_in_order(&all);
        let values: BTreeSet<String> = all.iter().map(|s| s.5.clone()).collect();
        assert_eq!(values, want);
        coordinator.close().await;
    });
}
