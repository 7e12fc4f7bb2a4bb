//! `mck-bench output`: the CLI's output paths beside kcat and Kafka's console consumer,
//! in one run.
//!
//! One broker from the test kit per cluster (`--clusters`, default 1), one topic
//! pre-filled on each (default 1 000 000 records of 100 B), then in alternating
//! rounds whole processes read it to the end, each timed from spawn to exit (so
//! start-up counts, as it does for a user):
//!
//! - `mck consume -b … -t … -e --format json` and `--format value`, on each fetch
//!   path (with several clusters, `mck consume FILE -s bench` over a metadata file);
//! - with `--time-order`, the same on the native path with `--order time`, each format
//!   compared with itself in fetch order;
//! - the library itself, `next_batch` of one reader to the end, on each fetch path
//!   (this binary's `rss-child`, which checks the count);
//! - franz-go (one client per cluster), values to stdout;
//! - with one cluster: `kcat -C -b … -t … -e -J` (kcat's JSON envelope),
//!   `kcat -C -b … -t … -e -f '%s\n'` (the bare values), and Kafka's console consumer
//!   (`kafka-console-consumer.sh`'s class, from the test kit's Kafka jars, with the
//!   script's JVM options) with `--max-messages`, and Kafka's `ConsumerPerformance`
//!   (`kafka-consumer-perf-test.sh`'s class, with `--messages`; its own count is
//!   checked every round).
//!
//! The warm-up rounds pipe every side's output into this process, which counts the
//! lines: every side must print exactly the records produced. The measured rounds send
//! it to `/dev/null`, so the counting costs no CPU beside the measured process. The
//! table gives medians and each side's speed relative to kcat's bare values (with
//! several clusters, which kcat cannot read at once, to franz-go's).

use std::path::PathBuf;
use std::time::Instant;

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::{check_kcat, mck_binary};
use crate::cpu::broker_pids;

mod command;
mod process;
mod table;

use command::{Setup, command};
use process::{Run, Sink, run};
use table::print_table;

/// The topic every side reads.
const TOPIC: &str = "bench-output";

/// Options of `mck-bench output`.
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs {
    /// Records pre-filled in each cluster's topic.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
    /// Clusters (one broker each), every one with the topic; kcat and the console
    /// consumer take part with one only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    clusters: u16,
    /// Leave out the library's own sides (`next_batch` in a child process).
    #[arg(long)]
    no_library: bool,
    /// Also `mck consume --order time` (native fetch), in each format, compared with
    /// the same command in fetch order.
    #[arg(long)]
    time_order: bool,
    /// Fill the clusters at the same time, so that their records' timestamps
    /// interleave (one stream's clusters written together), instead of one after
    /// another (each cluster's records newer than the previous one's, as a
    /// migration from cluster to cluster leaves them). Time order reads the latter
    /// one cluster at a time.
    #[arg(long)]
    fill_together: bool,
    #[command(flatten)]
    pub load: super::load::Load,
    /// Rounds run first and not counted; they count every side's lines (at least one
    /// is always run, for that check).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// The `mck` binary (default: `mck` next to this binary; build it with
    /// `cargo build --release -p mck`).
    #[arg(long)]
    mck: Option<PathBuf>,
    /// The kcat binary.
    #[arg(long, default_value = "kcat")]
    kcat: PathBuf,
    /// Leave out Kafka's console consumer (the slowest side by far).
    #[arg(long)]
    no_console: bool,
    /// Leave out Kafka's ConsumerPerformance.
    #[arg(long)]
    no_consumer_perf: bool,
    /// Leave out the franz-go peer (built with Go from the module proxy).
    #[arg(long)]
    no_franz: bool,
    /// `queued.max.messages.kbytes` for the `mck` sides (their byte budget of
    /// fetched records; librdkafka's and the native path's default is 65536).
    #[arg(long)]
    budget_kb: Option<u64>,
    /// Also draw the sides against franz-go (records/s over CPU per record, both
    /// as ratios, with the targets) into this SVG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// One measured side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    MckJson,
    MckValue,
    /// `mck consume` with `-X fetch.backend=native`.
    MckJsonNative,
    MckValueNative,
    /// `mck consume --order time` with `-X fetch.backend=native`.
    MckJsonTime,
    MckValueTime,
    /// The library's `next_batch`, one reader, values read in place (`InBatch`), in
    /// a child process (`rss-child --side ours --api in-batch`), with
    /// `MCK_FETCH_BACKEND=native` / `librdkafka`.
    LibNative,
    LibLibrdkafka,
    /// franz-go (the peer program in `crates/bench/franz-go`), values to stdout.
    Franz,
    KcatJson,
    KcatValue,
    Console,
    /// Kafka's `ConsumerPerformance` (`kafka-consumer-perf-test.sh`).
    ConsumerPerf,
}

impl Side {
    const ALL: [Side; 13] = [
        Side::MckJson,
        Side::MckValue,
        Side::MckJsonNative,
        Side::MckValueNative,
        Side::MckJsonTime,
        Side::MckValueTime,
        Side::LibNative,
        Side::LibLibrdkafka,
        Side::Franz,
        Side::KcatJson,
        Side::KcatValue,
        Side::Console,
        Side::ConsumerPerf,
    ];

    /// The library's own side (no output; it checks its count itself).
    fn is_library(self) -> bool {
        matches!(self, Side::LibNative | Side::LibLibrdkafka)
    }

    fn name(self) -> &'static str {
        match self {
            Side::MckJson => "mck consume --format json",
            Side::MckValue => "mck consume --format value",
            Side::MckJsonNative => "mck consume --format json, native fetch",
            Side::MckValueNative => "mck consume --format value, native fetch",
            Side::MckJsonTime => "mck consume --format json --order time, native fetch",
            Side::MckValueTime => "mck consume --format value --order time, native fetch",
            Side::LibNative => "library next_batch (InBatch), native fetch",
            Side::LibLibrdkafka => "library next_batch (InBatch), librdkafka",
            Side::Franz => "franz-go, values",
            Side::KcatJson => "kcat -C -J",
            Side::KcatValue => "kcat -C -f '%s\\n'",
            Side::Console => "kafka-console-consumer",
            Side::ConsumerPerf => "Kafka ConsumerPerformance",
        }
    }
}

/// The records `ConsumerPerformance` says it read: the fifth field
/// (`data.consumed.in.nMsg`) of its one line of figures.
fn consumer_perf_records(report: &str) -> Option<u64> {
    let line = report.lines().rev().find(|l| l.split(',').count() == 10)?;
    line.split(',').nth(4)?.trim().parse().ok()
}

/// The `output` command.
pub fn output(args: &OutputArgs) {
    check_kcat(&args.kcat);
    let mck = mck_binary(args.mck.as_deref());
    eprintln!("mck: {}", mck.display());
    let several = args.clusters > 1;
    let sides: Vec<Side> = Side::ALL
        .into_iter()
        .filter(|s| *s != Side::Console || !(args.no_console || several))
        .filter(|s| *s != Side::ConsumerPerf || !(args.no_consumer_perf || several))
        .filter(|s| !matches!(s, Side::KcatJson | Side::KcatValue) || !several)
        .filter(|s| *s != Side::Franz || !args.no_franz)
        .filter(|s| !matches!(s, Side::MckJsonTime | Side::MckValueTime) || args.time_order)
        .filter(|s| !matches!(s, Side::LibNative | Side::LibLibrdkafka) || !args.no_library)
        .collect();
    let franz = (!args.no_franz).then(super::franz_peer);
    let java_sides = sides.contains(&Side::Console) || sides.contains(&Side::ConsumerPerf);
    let kafka_libs = java_sides.then(|| {
        mck_testkit::kafka_libs().unwrap_or_else(|e| {
            panic!(
                "Kafka's console consumer and ConsumerPerformance need the test kit's Kafka jars: \
                 {e}; or pass --no-console --no-consumer-perf"
            )
        })
    });

    let t = Instant::now();
    let clusters: Vec<KafkaCluster> = (0..args.clusters)
        .map(|i| {
            KafkaCluster::start(
                ClusterOptions::new(format!("bench-output-{i}")).jvm_options([
                    "-Xms1g",
                    "-Xmx1g",
                    "-XX:+UseG1GC",
                    "-Djava.awt.headless=true",
                ]),
            )
            .expect("the cluster starts")
        })
        .collect();
    let fill = |cluster: &KafkaCluster| {
        peers::prefill(
            cluster,
            TOPIC,
            args.load.partitions,
            args.records,
            args.load.value_size,
        )
        .expect("pre-fill")
    };
    if args.fill_together {
        std::thread::scope(|s| {
            for cluster in &clusters {
                s.spawn(move || fill(cluster));
            }
        });
    } else {
        clusters.iter().for_each(fill);
    }
    eprintln!(
        "{} broker(s) started and {} records of {} B in {} partitions filled on each in {:.1} s",
        clusters.len(),
        args.records,
        args.load.value_size,
        args.load.partitions,
        t.elapsed().as_secs_f64()
    );
    let broker: Vec<u32> = clusters.iter().flat_map(broker_pids).collect();
    let bootstraps: Vec<String> = clusters.iter().map(|c| c.bootstrap_servers()).collect();
    let metadata = several.then(|| {
        let dir = std::env::temp_dir().join(format!("mck-bench-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("streams.yaml");
        let mut yaml = String::from("- streamId: bench\n  clusterMetadataList:\n");
        for (i, b) in bootstraps.iter().enumerate() {
            yaml += &format!(
                "    - clusterId: c{i}\n      bootstrapServers: {b}\n      topics: [{TOPIC}]\n"
            );
        }
        std::fs::write(&path, yaml).expect("the metadata file is written");
        path
    });
    let setup = Setup {
        mck: mck.clone(),
        kcat: args.kcat.clone(),
        bootstraps,
        metadata,
        records: args.records * clusters.len(),
        partitions: args.load.partitions,
        kafka_libs,
        franz,
        budget_kb: args.budget_kb,
    };

    let expected = setup.records as u64;
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); sides.len()];
    let warmup = args.warmup.max(1);
    for round in 0..warmup + args.load.rounds.max(1) {
        // The order turns by one every round and is reversed every other round, so no
        // side always runs first or after the same one.
        let mut order: Vec<usize> = (0..sides.len()).collect();
        order.rotate_left(round % sides.len());
        if round % 2 == 1 {
            order.reverse();
        }
        let (mut line, sink) = if round < warmup {
            (format!("warm-up {}:", round + 1), Sink::Count)
        } else {
            (format!("round {}:", round + 1 - warmup), Sink::Null)
        };
        for i in order {
            let side = sides[i];
            // ConsumerPerformance prints its figures, not the records: its count is
            // read from them, every round.
            let sink = if side == Side::ConsumerPerf {
                Sink::Report
            } else {
                sink
            };
            let r = run(side, command(side, &setup), sink, &broker);
            if let Some(report) = &r.report {
                assert_eq!(
                    consumer_perf_records(report),
                    Some(expected),
                    "{} read another count than the {expected} records produced; it printed:\n{report}",
                    side.name()
                );
            }
            // The library's child prints nothing: it checks its count itself.
            if let Some(lines) = r.lines.filter(|_| !side.is_library() && r.report.is_none()) {
                assert_eq!(
                    lines,
                    expected,
                    "{} printed {lines} lines, {expected} records were produced",
                    side.name()
                );
            }
            line += &format!(
                " {} {:.2} s (cpu {:.2} s, broker {:.2} s);",
                side.name(),
                r.secs,
                r.cpu,
                r.broker_cpu
            );
            if round >= warmup {
                runs[i].push(r);
            }
        }
        eprintln!("{line}");
    }
    if let Some(dir) = setup.metadata.as_ref().and_then(|p| p.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
    print_table(args, &sides, &runs, &mck);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_performance_says_how_many_records_it_read() {
        let report = "WARNING: something\n\
            2026-12-05 11:50:01:123, 2026-12-05 11:50:04:456, 476.8372, 143.07, 5000000, 1500150.02, 3012, 321, 1485.47, 15576323.99\n";
        assert_eq!(consumer_perf_records(report), Some(5_000_000));
        assert_eq!(consumer_perf_records("no figures\n"), None);
        assert_eq!(
            consumer_perf_records("a, b, c, d, many, f, g, h, i, j\n"),
            None,
            "a count that is not a number"
        );
    }
}
