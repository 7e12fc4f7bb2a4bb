//! `mck-bench compare`: every measure in one run. Two clusters from the test kit,
//! pre-filled once, then each measure on those brokers, side by side with its peer:
//! throughput (this project, the plain rdkafka consumer, Kafka's `ConsumerPerformance`,
//! Flink's `DynamicKafkaSource`), handover latency (this project, Flink), isolation,
//! peak RSS (this project and the plain consumer, each in a child process of this
//! binary), and checkpoint cost. Prints one markdown table with ratios and targets.

mod machine;
mod rounds;
mod rss;
mod table;

pub use machine::{loadavg, machine};
pub use rss::{RssChildArgs, rss_child};

use std::time::{Duration, Instant};

use mck_bench::peers::{self, PeerCluster};
use mck_testkit::{KafkaCluster, TestCluster};
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::split::{KafkaSplit, SplitId};

use super::handover::{PATHS, handover_latencies};
use super::isolation::isolation_run;
use super::median;
use machine::command_line;
use rounds::throughput_rows;
use rss::peak_rss_mib;
use table::{Row, Target};

/// Options of `mck-bench compare`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct CompareArgs {
    /// Records per cluster with 100 B values (default 2 000 000; 20 000 with --quick).
    #[arg(long)]
    records: Option<usize>,
    /// Records per cluster with 1 KiB values (default 500 000; 5 000 with --quick).
    #[arg(long)]
    records_1k: Option<usize>,
    /// Measured rounds per throughput figure and RSS child (default 5; 1 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Handover rounds, for this project and for Flink (default 10; 2 with --quick).
    #[arg(long)]
    handover_rounds: Option<usize>,
    /// Tiny sizes and one round: checks the harness, not the targets (CI).
    #[arg(long)]
    quick: bool,
    /// Leave out the Java peers (ConsumerPerformance, Flink); the table says so.
    #[arg(long)]
    skip_java: bool,
}

const PARTITIONS: i32 = 8;
/// What `--skip-java` puts in the place of a Java peer's figure.
const JAVA_NOTE: &str = "skipped (--skip-java)";
const TOPIC_100: &str = "bench-100b";
const TOPIC_1K: &str = "bench-1k";
const ISOLATION_TOPIC: &str = "isolation";
const FLINK_HANDOVER_TOPIC: &str = "handover-flink";

/// The resolved sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    records_100: usize,
    records_1k: usize,
    rounds: usize,
    handover_rounds: usize,
    isolation_records: usize,
    checkpoint_budget: Duration,
}

impl CompareArgs {
    fn sizes(&self) -> Sizes {
        let q = |quick: usize, full: usize| if self.quick { quick } else { full };
        Sizes {
            records_100: self.records.unwrap_or(q(20_000, 2_000_000)),
            records_1k: self.records_1k.unwrap_or(q(5_000, 500_000)),
            rounds: self.rounds.unwrap_or(q(1, 5)).max(1),
            handover_rounds: self.handover_rounds.unwrap_or(q(2, 10)).max(1),
            isolation_records: q(1_500_000, 30_000_000),
            checkpoint_budget: Duration::from_millis(q(200, 2_000) as u64),
        }
    }
}

/// Runs every measure and prints the table.
pub fn compare(args: &CompareArgs) {
    let sizes = args.sizes();
    let load_before = loadavg();
    let started = Instant::now();
    let (a, b) = mck_bench::start_clusters();
    let clusters = [PeerCluster::of(&a), PeerCluster::of(&b)];
    fill(&a, &b, &sizes);
    eprintln!(
        "clusters started and filled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rt = mck_testkit::runtime();
    let mut rows = Vec::new();
    for size in [
        (TOPIC_100, 100usize, sizes.records_100),
        (TOPIC_1K, 1024, sizes.records_1k),
    ] {
        rows.extend(throughput_rows(args, &sizes, &rt, &clusters, size));
    }
    rows.push(rss_row(&sizes, &clusters));
    rows.extend(handover_rows(args, &sizes, (&a, &b), &clusters));
    rows.extend(isolation_rows(&sizes, &a, &b));
    rows.extend(checkpoint_rows(&sizes));
    rt.shutdown_timeout(Duration::from_secs(5));
    drop((a, b));
    print_table(&rows, args, &sizes, &load_before, started);
}

/// Fills both clusters' topics of 100 B and 1 KiB values, the clusters at once.
fn fill(a: &KafkaCluster, b: &KafkaCluster, sizes: &Sizes) {
    std::thread::scope(|s| {
        for c in [a, b] {
            s.spawn(move || {
                peers::prefill(c, TOPIC_100, PARTITIONS, sizes.records_100, 100)
                    .expect("fill 100 B");
                peers::prefill(c, TOPIC_1K, PARTITIONS, sizes.records_1k, 1024)
                    .expect("fill 1 KiB");
            });
        }
    });
}

/// Memory: the 1 KiB topic is the larger backlog.
fn rss_row(sizes: &Sizes, clusters: &[PeerCluster; 2]) -> Row {
    let expected_1k = 2 * sizes.records_1k as u64;
    let rss = |side: &str| {
        let v: Vec<f64> = (0..sizes.rounds)
            .map(|_| peak_rss_mib(side, clusters, TOPIC_1K, expected_1k))
            .collect();
        median(v)
    };
    let (rss_ours, rss_plain) = (rss("ours"), rss("plain"));
    Row::new(
        format!(
            "peak RSS reading a backlog of 2 × {} records of 1 KiB (child process, librdkafka default queue limits on both)",
            sizes.records_1k
        ),
        (rss_ours, Some(rss_plain)),
        "MiB",
        Target::RatioAtMost(1.2),
        "",
    )
}

/// Handover latency, this project's on each fetch path and Flink's.
fn handover_rows(
    args: &CompareArgs,
    sizes: &Sizes,
    (a, b): (&KafkaCluster, &KafkaCluster),
    clusters: &[PeerCluster; 2],
) -> Vec<Row> {
    let ours: Vec<(&str, f64)> = PATHS
        .iter()
        .map(|path| {
            let l = handover_latencies(a, b, sizes.handover_rounds, path);
            (*path, median(l))
        })
        .collect();
    let flink_handover = if args.skip_java {
        None
    } else {
        a.create_topic(FLINK_HANDOVER_TOPIC, 1).expect("topic on a");
        b.create_topic(FLINK_HANDOVER_TOPIC, 1).expect("topic on b");
        let l = peers::flink_handover(
            &clusters[0],
            &clusters[1],
            FLINK_HANDOVER_TOPIC,
            &peers::FlinkHandoverOptions {
                rounds: sizes.handover_rounds,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("Java peer failed: {e}"));
        Some(median(l.iter().map(|d| d.as_secs_f64() * 1e3).collect()))
    };
    ours.into_iter()
        .map(|(path, ms)| {
            Row::new(
                format!(
                    "handover, {path} fetch path: metadata change to first record of the added cluster, median of {} (peer: Flink DynamicKafkaSource, 1 ms discovery interval)",
                    sizes.handover_rounds
                ),
                (ms, flink_handover),
                "ms",
                Target::OursAtMost(50.0),
                JAVA_NOTE,
            )
        })
        .collect()
}

/// Isolation: cluster A's rate and CPU per record while B's properties change.
fn isolation_rows(sizes: &Sizes, a: &KafkaCluster, b: &KafkaCluster) -> [Row; 2] {
    let iso = isolation_run(
        a,
        b,
        ISOLATION_TOPIC,
        sizes.isolation_records,
        multicluster_kafka::DEFAULT_REBUILD_INTERVAL,
    );
    [
        Row::new(format!(
            "isolation: cluster A's records/s while B's properties change every 100 ms ({} changes, {} rebuilds of B's clients) (peer: the same reader, steady)",
            iso.changes, iso.rebuilds
        ), (iso.changing, Some(iso.steady)), "rec/s", Target::RatioAtLeast(0.95), ""),
        Row::new(
            "context: isolation, this process's CPU per record of A while B's properties change (peer: while steady)".to_string(),
            (iso.cpu_ns[1], Some(iso.cpu_ns[0])),
            "ns",
            Target::None,
            "",
        ),
    ]
}

/// Checkpoint cost: time and size for 10, 1 000 and 10 000 splits.
fn checkpoint_rows(sizes: &Sizes) -> Vec<Row> {
    let mut rows = Vec::new();
    for n in [10, 1_000, 10_000] {
        let (ms, bytes) = checkpoint_cost(n, sizes.checkpoint_budget);
        rows.push(Row::new(
            format!("checkpoint of {n} splits: from splits + encode, median time"),
            (ms, None),
            "ms",
            if n == 10_000 {
                Target::OursAtMost(10.0)
            } else {
                Target::None
            },
            "-",
        ));
        rows.push(Row::new(
            format!("checkpoint of {n} splits: encoded size"),
            (bytes as f64, None),
            "B",
            Target::None,
            "-",
        ));
    }
    rows
}

/// The table, then the machine, the load, the versions and the settings.
fn print_table(
    rows: &[Row],
    args: &CompareArgs,
    sizes: &Sizes,
    load_before: &str,
    started: Instant,
) {
    println!("## mck-bench compare\n");
    println!("| measure | ours | peer | ratio (ours/peer) | target | met? |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!("{}", r.render());
    }
    println!();
    println!("- machine: {}", machine());
    println!(
        "- load average before / after: {load_before} / {} (other runs may share this machine)",
        loadavg()
    );
    println!(
        "- versions: Kafka {} (KRaft, test kit), Flink {} with flink-connector-kafka {}, Java {}, {}",
        mck_testkit::KAFKA_VERSION,
        peers::FLINK_VERSION,
        peers::FLINK_KAFKA_CONNECTOR_VERSION,
        command_line("java", &["-version"]),
        command_line("rustc", &["--version"]),
    );
    println!(
        "- settings: 2 clusters × {PARTITIONS} partitions, {} records/cluster of 100 B and {} of 1 KiB (8 B keys), {} measured round(s) per figure (median), brokers `-Xms1g -Xmx1g -XX:+UseG1GC`; ours = `next_batch`, plain = `BaseConsumer::poll`, librdkafka batch loop = `rd_kafka_consume_batch_queue`, one consumer per cluster; ConsumerPerformance in every round, in turn with the other sides (a JVM per round, 1 warm-up pass first); Flink after 1 warm-up round in the same JVM; windows: beside plain rdkafka and ConsumerPerformance, every side from its first record to its last (ConsumerPerformance: from group joined, its `fetch` window), beside Flink, ours from building the source and Flink from task start, both to the end of input{}",
        sizes.records_100,
        sizes.records_1k,
        sizes.rounds,
        if args.skip_java {
            "; **Java peers skipped (--skip-java)**"
        } else {
            ""
        }
    );
    println!("- total time: {:.0} s", started.elapsed().as_secs_f64());
}

/// Median time (ms) of `Checkpoint::from_splits` + `encode` for `n` splits (over 2
/// clusters, 64 partitions per topic), over as many iterations as fit in `budget`
/// (at least 11), and the encoded size in bytes.
fn checkpoint_cost(n: usize, budget: Duration) -> (f64, usize) {
    let splits: Vec<KafkaSplit> = (0..n)
        .map(|i| KafkaSplit {
            id: SplitId::new(
                format!("cluster-{}", i % 2),
                format!("topic-{:04}", i / 128),
                (i / 2 % 64) as i32,
            ),
            next_offset: 1_000_000_000 + i as i64,
            stop_offset: None,
            last: None,
        })
        .collect();
    let mut times = Vec::new();
    let mut bytes = 0;
    let start = Instant::now();
    while times.len() < 11 || (start.elapsed() < budget && times.len() < 100_000) {
        let t = Instant::now();
        let encoded = Checkpoint::from_splits(splits.iter().cloned()).encode();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = std::hint::black_box(encoded).len();
    }
    (median(times), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_of_ten_splits_encodes_to_some_bytes() {
        let (ms, bytes) = checkpoint_cost(10, Duration::from_millis(1));
        assert!(ms >= 0.0);
        assert!(bytes > 0);
    }
}
