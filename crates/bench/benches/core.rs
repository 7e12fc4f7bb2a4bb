//! Micro-benchmarks of the pure core: checkpoint encoding and split assignment.
//! `cargo bench -p mck-bench --bench core`

use std::collections::BTreeMap;

use criterion::{Criterion, criterion_group, criterion_main};
use multicluster_kafka::AssignmentStrategy;
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::split::{KafkaSplit, SplitId};
use multicluster_kafka::unstable::assign;

fn splits(n: usize) -> Vec<KafkaSplit> {
    (0..n)
        .map(|i| KafkaSplit {
            id: SplitId::new(
                format!("cluster-{}", i % 4),
                format!("topic-{}", i / 400),
                (i % 100) as i32,
            ),
            next_offset: i as i64 * 1000,
            stop_offset: None,
            last: None,
        })
        .collect()
}

fn checkpoint(c: &mut Criterion) {
    for n in [10, 1_000, 10_000] {
        let all = splits(n);
        c.bench_function(&format!("checkpoint_snapshot_{n}"), |b| {
            b.iter(|| Checkpoint::from_splits(all.iter().cloned()))
        });
        let cp = Checkpoint::from_splits(all.clone());
        let bytes = cp.encode();
        println!("checkpoint of {n} splits: {} bytes", bytes.len());
        c.bench_function(&format!("checkpoint_encode_{n}"), |b| {
            b.iter(|| cp.encode())
        });
        c.bench_function(&format!("checkpoint_decode_{n}"), |b| {
            b.iter(|| Checkpoint::decode(&bytes).unwrap())
        });
    }
}

fn assignment(c: &mut Criterion) {
    let ids: Vec<SplitId> = splits(10_000).into_iter().map(|s| s.id).collect();
    let alive: Vec<usize> = (0..8).collect();
    c.bench_function("assign_global_10000_splits_8_readers", |b| {
        b.iter(|| assign(&BTreeMap::new(), &ids, &alive, AssignmentStrategy::Global))
    });
}

criterion_group!(benches, checkpoint, assignment);
criterion_main!(benches);
