//! End-to-end benchmark against real Kafka brokers started by the test kit.
//!
//! `cargo run --release -p mck-bench -- throughput` pre-fills a logical stream of
//! 2 clusters × 8 partitions, then reads it to the end, alternating between this
//! project's source (`next_batch` by default, `--api record` for `next`) and a plain
//! rdkafka consumer per cluster (same partitions, same client settings;
//! `BaseConsumer::poll` by default, `--peer batch` for a raw
//! `rd_kafka_consume_batch_queue` loop). Both sides do the same work per record (read
//! the timestamp, copy key and value into a reused buffer). It prints records/s, MB/s
//! and client CPU per record (this process's user + system time, librdkafka's threads
//! included), and their ratios.
//!
//! `cargo run --release -p mck-bench -- compare` is the one-run comparison: every measure
//! against its peer on the same brokers, as one table (see [`cmd::compare`]).

mod cmd;
mod cpu;

use std::time::Duration;

use clap::{Parser, Subcommand};

use cmd::{
    blackhole, compare, decode, group, handover, isolation, mirror, output, scale, shards, soak,
    throughput, tls,
};

#[derive(Parser)]
#[command(about = "multicluster-kafka end-to-end benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Read throughput: this project vs a plain rdkafka consumer, same run, same data.
    Throughput(throughput::ThroughputArgs),
    /// Isolation: records/s from an unaffected cluster while another cluster's
    /// properties change every 100 ms, against the same reader's steady-state rate.
    Isolation {
        /// Records pre-filled on the unaffected cluster.
        #[arg(long, default_value_t = 30_000_000)]
        records: usize,
        /// The source's `rebuild_interval` in ms (0: every change rebuilds B at once,
        /// the behaviour before it existed).
        #[arg(long, default_value_t = multicluster_kafka::DEFAULT_REBUILD_INTERVAL.as_millis() as u64)]
        rebuild_interval_ms: u64,
    },
    /// Handover latency: from a metadata file write that adds a cluster to the first
    /// record read from that cluster (file watch, no polling interval involved), on
    /// both fetch paths and beside Flink's DynamicKafkaSource, in one run.
    Handover {
        /// Measured cluster additions, per reader.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        /// Leave Flink out (no Java).
        #[arg(long)]
        skip_java: bool,
    },
    /// Every measure in one run: throughput, handover, isolation, memory and checkpoint cost,
    /// each beside its peer (plain rdkafka, Kafka's ConsumerPerformance, Flink's
    /// DynamicKafkaSource), on the same brokers, printed as one markdown table.
    Compare(compare::CompareArgs),
    /// Reads a topic to its end with one side, for `compare`'s peak-RSS measure (run
    /// as a child process).
    #[command(hide = true)]
    RssChild(compare::RssChildArgs),
    /// Read throughput over TLS: `mck consume` against plaintext and against kcat, one broker.
    Tls(tls::TlsArgs),
    /// The CLI's output paths: `mck consume` as JSON and as bare values beside kcat
    /// (`-J` and `-f '%s\n'`) and Kafka's console consumer, one broker, one run.
    Output(output::OutputArgs),
    /// Memory over a long `mck consume` follow run: one live cluster with a trickle of
    /// records, one dead cluster, librdkafka's debug logs on; VmRSS every 10 s.
    Soak(soak::SoakArgs),
    /// Isolation from a network blackhole: cluster A's records/s while cluster B (behind
    /// a fault proxy) passes and while it is blackholed, and the shutdown times then.
    Blackhole(blackhole::BlackholeArgs),
    /// Group mode with whole `mck` processes: handover after SIGTERM and SIGKILL for
    /// both group protocols, and records/s of 1, 2 and 3 instances.
    Group(group::GroupArgs),
    /// One stream read by 1, 2 and 3 `mck consume --scale-out shard:I/N` processes at
    /// once on the same two brokers: wall time, records/s and CPU.
    Shards(shards::ShardsArgs),
    /// How cost grows: against the number of clusters (mock clusters), of splits, and
    /// the record size (against plain rdkafka); markdown tables and an SVG plot each.
    Scale(scale::ScaleArgs),
    /// Decoding record batches in place from captured Fetch responses (hand-written
    /// Fetch v4 requests, one broker) against the bare librdkafka loop on the same
    /// topic: CPU ns per record at 10 B … 10 KiB.
    Decode(decode::DecodeArgs),
    /// Moving onto a MirrorMaker 2 copy: metadata write (planned) and broker kill
    /// (failover) to the first record from the mirror, and the records repeated or
    /// skipped by this source, MirrorMaker's translateOffsets and a timestamp lookup.
    Mirror(mirror::MirrorArgs),
}

fn main() {
    // MCK_BENCH_LOG (a tracing filter such as `librdkafka=debug`) turns on logs to
    // stderr, for looking inside a slow round; off by default so they cost nothing.
    // The rebuild counter sees only the enumerator's info events.
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::Targets};
    let logs = std::env::var("MCK_BENCH_LOG").ok().map(|filter| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::EnvFilter::new(filter))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(isolation::RebuildCounter.with_filter(
            Targets::new().with_target("multicluster_kafka::enumerator", tracing::Level::INFO),
        ))
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Isolation {
            records,
            rebuild_interval_ms,
        } => isolation::isolation(records, Duration::from_millis(rebuild_interval_ms)),
        Cmd::Handover { rounds, skip_java } => handover::handover(rounds, skip_java),
        Cmd::Throughput(args) => throughput::throughput(&args),
        Cmd::Compare(args) => compare::compare(&args),
        Cmd::RssChild(args) => compare::rss_child(&args),
        Cmd::Tls(args) => tls::tls(&args),
        Cmd::Output(args) => output::output(&args),
        Cmd::Soak(args) => soak::soak(&args),
        Cmd::Blackhole(args) => blackhole::blackhole(&args),
        Cmd::Scale(args) => scale::scale(&args),
        Cmd::Shards(args) => shards::shards(&args),
        Cmd::Group(args) => group::group(&args),
        Cmd::Decode(args) => decode::decode(&args),
        Cmd::Mirror(args) => mirror::mirror(&args),
    }
}
