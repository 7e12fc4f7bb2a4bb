//! `mck-bench scale splits`: cost against the number of splits, on the library's pure
//! functions (no cluster): checkpoint snapshot + encode, decode, a durable write
//! through [`FileCheckpointStore`], split assignment and the metadata diff.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use multicluster_kafka::AssignmentStrategy;
use multicluster_kafka::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore};
use multicluster_kafka::metadata::{ClusterMetadata, KafkaStream};
use multicluster_kafka::split::{KafkaSplit, SplitId};
use multicluster_kafka::unstable::assign;
use multicluster_kafka::unstable::plan::{clusters_of_streams, plan};

use super::{PlotArgs, command_line, header, rss_mib, verdict};
use crate::cmd::median;
use crate::cmd::plot::{self, Axis, Chart, Legend, Series};

/// Options of `scale splits`.
#[derive(clap::Args, Debug)]
pub struct SplitsArgs {
    /// Split counts, one row each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,100,1000,10000,100000"
    )]
    counts: Vec<usize>,
    /// Logical clusters the splits are spread over.
    #[arg(long, default_value_t = 4)]
    clusters: usize,
    /// Partitions per topic (topics = splits / this).
    #[arg(long, default_value_t = 10)]
    partitions: usize,
    /// Readers splits are assigned to.
    #[arg(long, default_value_t = 8)]
    readers: usize,
    /// Time spent on each measure at each count, in ms (at least 5 iterations).
    #[arg(long, default_value_t = 1000)]
    budget_ms: u64,
    /// The checkpoint size the target is about.
    #[arg(long, default_value_t = 100_000)]
    target_splits: usize,
    #[command(flatten)]
    plots: PlotArgs,
}

/// The topic of split `i`: `partitions` partitions per topic, topics dealt over the
/// clusters in turn.
fn layout(i: usize, clusters: usize, partitions: usize) -> (String, String, i32) {
    let topic = i / partitions;
    (
        format!("cluster-{}", topic % clusters),
        format!("topic-{topic:06}"),
        (i % partitions) as i32,
    )
}

fn make_splits(n: usize, clusters: usize, partitions: usize) -> Vec<KafkaSplit> {
    (0..n)
        .map(|i| {
            let (c, t, p) = layout(i, clusters, partitions);
            KafkaSplit {
                id: SplitId::new(c, t, p),
                next_offset: 1_000_000_000 + i as i64,
                stop_offset: None,
                last: None,
            }
        })
        .collect()
}

/// The stream holding these splits' topics, plus `extra` on the first cluster.
fn stream_of(n: usize, clusters: usize, partitions: usize, extra: Option<&str>) -> KafkaStream {
    let mut topics: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in (0..n).step_by(partitions) {
        let (c, t, _) = layout(i, clusters, partitions);
        topics.entry(c).or_default().push(t);
    }
    if let Some(extra) = extra {
        topics
            .entry("cluster-0".into())
            .or_default()
            .push(extra.into());
    }
    let mut s = KafkaStream::new("s");
    for (c, ts) in topics {
        let mut b = ClusterMetadata::builder(format!("{c}:9092"));
        for t in ts {
            b = b.topic(t);
        }
        s = s.with_cluster(c, b.build().expect("metadata"));
    }
    s
}

/// The median time of `f` in ms, over as many runs as fit in `budget` (5 to 1000).
fn time_ms<T>(budget: Duration, mut f: impl FnMut() -> T) -> f64 {
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 1000) {
        let t = Instant::now();
        std::hint::black_box(f());
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    median(times)
}

/// One row of the table.
struct Row {
    splits: usize,
    snapshot_encode_ms: f64,
    bytes: usize,
    decode_ms: f64,
    save_ms: f64,
    assign_ms: f64,
    assign_more_ms: f64,
    plan_ms: f64,
    rss_mib: f64,
}

fn measure(args: &SplitsArgs, n: usize, dir: &std::path::Path) -> Row {
    let budget = Duration::from_millis(args.budget_ms);
    let (c, p) = (args.clusters.max(1), args.partitions.max(1));
    let rss0 = rss_mib();
    let splits = make_splits(n, c, p);
    let ids: Vec<SplitId> = splits.iter().map(|s| s.id.clone()).collect();
    let alive: Vec<usize> = (0..args.readers.max(1)).collect();
    let snapshot_encode_ms = time_ms(budget, || {
        Checkpoint::from_splits(splits.iter().cloned()).encode()
    });
    let cp = Checkpoint::from_splits(splits.iter().cloned());
    let encoded = cp.encode();
    let decode_ms = time_ms(budget, || Checkpoint::decode(&encoded).expect("decodes"));
    let store = FileCheckpointStore::open(dir.join(n.to_string()), 2).expect("a store");
    let save_ms = time_ms(budget, || store.save(&cp).expect("saved"));
    let assign_ms = time_ms(budget, || {
        assign(&BTreeMap::new(), &ids, &alive, AssignmentStrategy::Global)
    });
    let assigned: BTreeMap<SplitId, usize> =
        assign(&BTreeMap::new(), &ids, &alive, AssignmentStrategy::Global)
            .into_iter()
            .collect();
    // Ten new partitions found by discovery, beside everything already assigned.
    let more: Vec<SplitId> = (0..10)
        .map(|k| SplitId::new("cluster-0", "new", k))
        .collect();
    let assign_more_ms = time_ms(budget, || {
        assign(&assigned, &more, &alive, AssignmentStrategy::Global)
    });
    let old = clusters_of_streams([&stream_of(n, c, p, None)]);
    let changed = stream_of(n, c, p, Some("topic-added"));
    let plan_ms = time_ms(budget, || {
        let new = clusters_of_streams([&changed]);
        plan(&old, &new)
    });
    let rss_mib = rss_mib() - rss0;
    drop((splits, ids, cp, encoded, assigned, old, changed));
    Row {
        splits: n,
        snapshot_encode_ms,
        bytes: Checkpoint::from_splits(make_splits(n, c, p)).encode().len(),
        decode_ms,
        save_ms,
        assign_ms,
        assign_more_ms,
        plan_ms,
        rss_mib,
    }
}

pub fn splits(args: &SplitsArgs) {
    let dir = std::env::temp_dir().join(format!("mck-scale-splits-{}", std::process::id()));
    let mut counts = args.counts.clone();
    counts.sort_unstable();
    counts.dedup();
    let mut rows = Vec::new();
    for &n in &counts {
        let row = measure(args, n, &dir);
        eprintln!(
            "{n} splits: snapshot+encode {:.3} ms, assign {:.3} ms, plan {:.3} ms",
            row.snapshot_encode_ms, row.assign_ms, row.plan_ms
        );
        rows.push(row);
    }
    let target = if counts.contains(&args.target_splits) {
        rows.iter()
            .find(|r| r.splits == args.target_splits)
            .map(|r| r.snapshot_encode_ms)
    } else {
        let splits = make_splits(
            args.target_splits,
            args.clusters.max(1),
            args.partitions.max(1),
        );
        Some(time_ms(Duration::from_millis(args.budget_ms), || {
            Checkpoint::from_splits(splits.iter().cloned()).encode()
        }))
    };
    let _ = std::fs::remove_dir_all(&dir);

    header(&command_line());
    println!(
        "- workload: splits over {} logical clusters, {} partitions per topic (topics = splits / {}), \
         assignment over {} readers (`Global`); each figure is the median over up to {} ms of repetitions",
        args.clusters, args.partitions, args.partitions, args.readers, args.budget_ms
    );
    println!(
        "- snapshot + encode = `Checkpoint::from_splits` + `encode`; save = `FileCheckpointStore::save` \
         (temp file, fsync, rename, fsync of the directory) into {}; plan = `clusters_of_streams` of the \
         changed metadata + `plan` against the old view, one topic added on one cluster; memory = VmRSS \
         growth while the splits, checkpoint, encoding, assignment and views are held",
        std::env::temp_dir().display()
    );
    println!();
    println!(
        "| splits | snapshot + encode ms | checkpoint bytes | bytes/split | decode ms | save ms | assign all ms | assign 10 new ms | plan ms | memory MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.3} | {} | {:.1} | {:.3} | {:.2} | {:.3} | {:.3} | {:.3} | {:.1} |",
            r.splits,
            r.snapshot_encode_ms,
            r.bytes,
            r.bytes as f64 / r.splits as f64,
            r.decode_ms,
            r.save_ms,
            r.assign_ms,
            r.assign_more_ms,
            r.plan_ms,
            r.rss_mib
        );
    }
    if let Some(ms) = target {
        println!();
        println!(
            "target: snapshot + encode of {} splits ≤ 100 ms: {ms:.1} ms, {}",
            args.target_splits,
            verdict(ms <= 100.0)
        );
    }
    let line = |name: &str, f: &dyn Fn(&Row) -> f64| {
        Series::new(name, rows.iter().map(|r| (r.splits as f64, f(r))).collect())
    };
    plot::write(
        &args.plots.plots.join("scale-splits.svg"),
        &Chart {
            title: "Cost against splits (pure library code)",
            x_label: "splits",
            y_label: "ms (median)",
            x: Axis::Log,
            y: Axis::Log,
            legend: Legend::UpperLeft,
        },
        &[
            line("checkpoint snapshot + encode", &|r| r.snapshot_encode_ms),
            line("checkpoint decode", &|r| r.decode_ms),
            line("checkpoint save (fsync)", &|r| r.save_ms),
            line("assign all splits", &|r| r.assign_ms),
            line("assign 10 new splits", &|r| r.assign_more_ms),
            line("metadata diff (plan)", &|r| r.plan_ms),
        ],
    );
}
