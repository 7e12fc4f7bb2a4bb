//! Runs the Java peers of the end-to-end benchmark against two real clusters from the
//! test kit and prints their figures:
//!
//! ```sh
//! cargo run --release -p mck-bench --example peers -- [RECORDS_PER_CLUSTER] [VALUE_SIZE] [ROUNDS]
//! ```
//!
//! Defaults: 200 000 records of 100 B per cluster, 2 clusters × 8 partitions, 1 warm-up
//! and 3 measured rounds per peer. Needs Java 17+ and Maven; the first run fetches the
//! Kafka and Flink jars (minutes), later runs build offline.

use std::time::{Duration, Instant};

use mck_bench::peers::{self, Figures, PeerCluster, StreamTarget};
use mck_testkit::TestCluster;

const TOPIC: &str = "bench";
const PARTITIONS: i32 = 8;

fn row(name: &str, f: Figures) {
    println!(
        "| {name} | {:.0} | {:.1} | {:.3} |",
        f.records_per_sec(),
        f.mb_per_sec(),
        f.elapsed.as_secs_f64()
    );
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .map(|a| a.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let records = arg(1, 200_000);
    let value_size = arg(2, 100);
    let rounds = arg(3, 3);

    let t = Instant::now();
    let (a, b) = mck_bench::start_clusters();
    std::thread::scope(|s| {
        s.spawn(|| peers::prefill(&a, TOPIC, PARTITIONS, records, value_size).expect("fill a"));
        s.spawn(|| peers::prefill(&b, TOPIC, PARTITIONS, records, value_size).expect("fill b"));
    });
    eprintln!(
        "2 clusters started and filled with {records} records of {value_size} B each in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let target = StreamTarget {
        clusters: vec![PeerCluster::of(&a), PeerCluster::of(&b)],
        topic: TOPIC.into(),
        partitions: PARTITIONS,
        records_per_cluster: records as u64,
    };

    println!(
        "workload: 2 clusters x {PARTITIONS} partitions, {records} records/cluster, {value_size} B values, 8 B keys; median of {rounds} rounds after 1 warm-up round in the same JVM"
    );
    println!("| peer | records/s | MB/s | elapsed s |");
    println!("|---|---|---|---|");

    let perf = peers::consumer_perf(
        &target,
        &peers::ConsumerPerfOptions {
            rounds,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let measured = || perf.iter().filter(|r| !r.warmup);
    let cold = perf.iter().find(|r| r.warmup).map(|r| r.fetch);
    row(
        "Kafka ConsumerPerformance, 1 per cluster, concurrent (fetch, group join excluded)",
        peers::median(measured().map(|r| r.fetch)).expect("rounds"),
    );
    row(
        "Kafka ConsumerPerformance, 1 per cluster, concurrent (group join included)",
        peers::median(measured().map(|r| r.with_group_join)).expect("rounds"),
    );
    if let Some(cold) = cold {
        row(
            "Kafka ConsumerPerformance, cold JVM (warm-up round, fetch)",
            cold,
        );
    }

    for parallelism in [1, 2] {
        let flink = peers::flink_throughput(
            &target,
            &peers::FlinkOptions {
                parallelism,
                rounds,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let measured = || flink.iter().filter(|r| !r.warmup);
        row(
            &format!("Flink DynamicKafkaSource p={parallelism} (task start to end of input)"),
            peers::median(measured().map(|r| r.from_task_start)).expect("rounds"),
        );
        row(
            &format!("Flink DynamicKafkaSource p={parallelism} (first record to end of input)"),
            peers::median(measured().map(|r| r.from_first_record)).expect("rounds"),
        );
        row(
            &format!("Flink DynamicKafkaSource p={parallelism} (job submission to end of input)"),
            peers::median(measured().map(|r| r.from_submit)).expect("rounds"),
        );
        if let Some(cold) = flink.iter().find(|r| r.warmup) {
            row(
                &format!(
                    "Flink DynamicKafkaSource p={parallelism}, cold JVM (warm-up job, task start)"
                ),
                cold.from_task_start,
            );
        }
    }

    // Handover: a one-partition topic on both clusters.
    a.create_topic("h", 1).expect("topic h on a");
    b.create_topic("h", 1).expect("topic h on b");
    let options = peers::FlinkHandoverOptions {
        rounds: 5,
        ..Default::default()
    };
    let mut latencies =
        peers::flink_handover(&PeerCluster::of(&a), &PeerCluster::of(&b), "h", &options)
            .unwrap_or_else(|e| panic!("{e}"));
    let shown: Vec<String> = latencies
        .iter()
        .map(|d| format!("{:.0}", d.as_secs_f64() * 1e3))
        .collect();
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "Flink DynamicKafkaSource handover (metadata file write -> first record from the added cluster), stream-metadata-discovery-interval-ms={}, {} rounds: min {:.0} ms, median {:.0} ms, max {:.0} ms (rounds: {} ms)",
        options.discovery_interval.as_millis(),
        latencies.len(),
        ms(latencies[0]),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() - 1]),
        shown.join(", ")
    );
}
