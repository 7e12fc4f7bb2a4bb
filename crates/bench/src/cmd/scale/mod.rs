//! `mck-bench scale`: how cost grows, one curve per command.
//!
//! - `scale clusters`: 1 … 64 librdkafka mock clusters at the same total record rate:
//!   threads, RSS, CPU per record, time to open, handover and reconciliation of one
//!   changed cluster. Every point runs in a fresh process of this binary (`scale
//!   point`), and the mock clusters with their producers in another (`scale mock`), so
//!   the measured process holds only the source.
//! - `scale splits`: 10 … 10 000 splits (and one checkpoint of 100 000): checkpoint
//!   time and size, assignment time, metadata diff time, memory of those structures.
//! - `scale sizes`: 10 B … 10 KiB records on two real brokers: records/s and MB/s of the
//!   source against plain rdkafka (`BaseConsumer::poll`) and the bare
//!   `rd_kafka_consume_batch_queue` loop, in the same run.
//!
//! Each prints markdown tables to stdout and writes an SVG plot into `--plots`.

use std::path::PathBuf;

pub mod clusters;
pub mod mock;
mod point;
pub mod sizes;
pub mod splits;

/// Options of `mck-bench scale`.
#[derive(clap::Args, Debug)]
pub struct ScaleArgs {
    #[command(subcommand)]
    curve: Curve,
}

/// One curve.
#[derive(clap::Subcommand, Debug)]
enum Curve {
    /// Cost against the number of clusters (librdkafka mock clusters, no Kafka needed).
    Clusters(clusters::ClustersArgs),
    /// Cost against the number of splits (pure library code, no cluster).
    Splits(splits::SplitsArgs),
    /// Throughput against the record size, against plain rdkafka (two real brokers).
    Sizes(sizes::SizesArgs),
    /// One point of the clusters curve, measured in a process of its own.
    #[command(hide = true)]
    Point(clusters::PointArgs),
    /// The mock clusters and producers of the clusters curve (a child process).
    #[command(hide = true)]
    Mock(mock::MockArgs),
}

/// Where the plots go.
#[derive(clap::Args, Clone, Debug)]
pub struct PlotArgs {
    /// Directory for the SVG plot (created if missing; relative to the working
    /// directory).
    #[arg(long, default_value = "bench/plots")]
    plots: PathBuf,
}

pub fn scale(args: &ScaleArgs) {
    match &args.curve {
        Curve::Clusters(a) => clusters::clusters(a),
        Curve::Splits(a) => splits::splits(a),
        Curve::Sizes(a) => sizes::sizes(a),
        Curve::Point(a) => clusters::point(a),
        Curve::Mock(a) => mock::mock(a),
    }
}

/// Number of threads of this process (`/proc/self/task`).
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// This process's threads, counted by group (see [`crate::cpu::thread_group`]).
pub fn thread_groups() -> std::collections::BTreeMap<String, usize> {
    let mut groups = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return groups;
    };
    for task in tasks.flatten() {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("stat"))
            && let Some((name, _)) = crate::cpu::stat_cpu(&stat)
        {
            *groups
                .entry(crate::cpu::thread_group(name).to_string())
                .or_default() += 1;
        }
    }
    groups
}

/// CPU seconds and times run (scheduled in) of this process's live threads by group,
/// from `/proc/self/task/*/schedstat` (nanoseconds on the CPU, exact, where `stat`'s
/// utime + stime count in ticks and miss threads that run in short bursts).
pub fn threads_sched() -> std::collections::BTreeMap<String, (f64, u64)> {
    let mut groups = std::collections::BTreeMap::<String, (f64, u64)>::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return groups;
    };
    for task in tasks.flatten() {
        let (Ok(stat), Ok(sched)) = (
            std::fs::read_to_string(task.path().join("stat")),
            std::fs::read_to_string(task.path().join("schedstat")),
        ) else {
            continue;
        };
        // `<ns on the CPU> <ns waiting> <times run>`
        let f: Vec<u64> = sched
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if let (Some((name, _)), [ns, _, runs, ..]) = (crate::cpu::stat_cpu(&stat), &f[..]) {
            let g = groups
                .entry(crate::cpu::thread_group(name).to_string())
                .or_default();
            g.0 += *ns as f64 / 1e9;
            g.1 += runs;
        }
    }
    groups
}

/// This process's `VmRSS` in MiB.
pub fn rss_mib() -> f64 {
    super::soak::rss_kib(std::process::id()).unwrap_or(0) as f64 / 1024.0
}

/// The header every scale table starts with: command, machine, load, versions.
pub fn header(command: &str) {
    println!("command: `{command}`");
    println!("- machine: {}", super::compare::machine());
    println!(
        "- load average before: {} (2 cores shared with other work)",
        super::compare::loadavg()
    );
    let (_, rdkafka) = rdkafka::util::get_rdkafka_version();
    println!(
        "- mck-bench {}, librdkafka {rdkafka}",
        env!("CARGO_PKG_VERSION")
    );
}

/// The command line this process was started with (program name shortened).
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("mck-bench {}", args.join(" "))
}

/// "met" or "NOT met".
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}
