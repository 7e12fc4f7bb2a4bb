//! `mck-bench scale sizes`: read throughput against the record size, on the
//! benchmark's two real single-broker clusters, for this project's source and the two
//! plain rdkafka loops of the `throughput` command (same functions, same data, same
//! run, sides alternating).

use std::time::Instant;

use mck_bench::peers::{self, PeerCluster};

use super::{PlotArgs, command_line, header};
use crate::cmd::median;
use crate::cmd::plot::{self, Axis, Chart, Legend, Series};
use crate::cmd::throughput::{Pass, Peer, Reading, ours, plain};
use crate::cpu::process_cpu;

/// Options of `scale sizes`.
#[derive(clap::Args, Debug)]
pub struct SizesArgs {
    /// Value sizes in bytes, one row group each.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1024,10240")]
    sizes: Vec<usize>,
    /// Value bytes per cluster at each size (records = this / size, within the bounds
    /// below).
    #[arg(long, default_value_t = 200_000_000)]
    bytes: usize,
    /// Most records per cluster at a size.
    #[arg(long, default_value_t = 400_000)]
    max_records: usize,
    /// Fewest records per cluster at a size.
    #[arg(long, default_value_t = 20_000)]
    min_records: usize,
    /// Partitions per cluster.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Rounds (each reads everything once with each side).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[command(flatten)]
    plots: PlotArgs,
}

/// The three readers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Poll,
    Batch,
}

impl Side {
    const ALL: [Side; 3] = [Side::Ours, Side::Poll, Side::Batch];

    fn name(self) -> &'static str {
        match self {
            Side::Ours => "multicluster-kafka (next_batch, 1 reader)",
            Side::Poll => "plain rdkafka BaseConsumer::poll",
            Side::Batch => "bare rd_kafka_consume_batch_queue loop",
        }
    }
}

/// Medians over the rounds of one side at one size.
#[derive(Default)]
struct Figures {
    rps: Vec<f64>,
    mbps: Vec<f64>,
    cpu_ns: Vec<f64>,
}

pub fn sizes(args: &SizesArgs) {
    let (a, b) = mck_bench::start_clusters();
    let clusters = [PeerCluster::of(&a), PeerCluster::of(&b)];
    let rt = mck_testkit::runtime();
    let mut results: Vec<(usize, usize, [Figures; 3])> = Vec::new();
    for &size in &args.sizes {
        let records = (args.bytes / size.max(1)).clamp(args.min_records, args.max_records);
        let topic = format!("scale-{size}");
        let t = Instant::now();
        std::thread::scope(|s| {
            for c in [&a, &b] {
                let topic = &topic;
                s.spawn(move || {
                    peers::prefill(c, topic, args.partitions, records, size).expect("prefill")
                });
            }
        });
        eprintln!(
            "{size} B: prefilled 2 × {records} records in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // Warm the brokers' page cache once.
        plain(&clusters, &topic, args.partitions, Peer::Batch);
        let mut figs: [Figures; 3] = Default::default();
        for round in 0..args.rounds {
            for k in 0..3 {
                let side = Side::ALL[(k + round) % 3];
                let cpu0 = process_cpu();
                let pass: Pass = match side {
                    Side::Ours => ours(&rt, &clusters, &topic, Reading::batches(1)).0,
                    Side::Poll => plain(&clusters, &topic, args.partitions, Peer::Poll),
                    Side::Batch => plain(&clusters, &topic, args.partitions, Peer::Batch),
                };
                let cpu = process_cpu() - cpu0;
                assert_eq!(pass.records, 2 * records as u64, "{} read all", side.name());
                let (rps, mbps) = pass.reading_rate();
                let f = &mut figs[side as usize];
                f.rps.push(rps);
                f.mbps.push(mbps);
                f.cpu_ns.push(cpu / pass.records as f64 * 1e9);
            }
            eprintln!(
                "{size} B round {round}: ours {:.0}, poll {:.0}, batch {:.0} records/s",
                figs[0].rps[round], figs[1].rps[round], figs[2].rps[round]
            );
        }
        results.push((size, records, figs));
    }
    drop((a, b));

    header(&command_line());
    println!(
        "- workload: 2 real single-broker clusters (Kafka from the test kit, JVM -Xms1g -Xmx1g), \
         {} partitions each, pre-filled with 8 B keys and values of each size; each round reads \
         everything once with each side, the order rotating; medians of {} rounds; records/s and MB/s \
         (key + value) from each side's first record to its last; CPU = this process's user + system \
         time per record (librdkafka's threads included, the brokers not)",
        args.partitions, args.rounds
    );
    println!();
    println!(
        "| value size | records (2 clusters) | reader | records/s | MB/s | CPU ns/record | records/s ÷ plain poll | ÷ bare batch loop |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let med = |v: &Vec<f64>| median(v.clone());
    for (size, records, figs) in &results {
        for side in Side::ALL {
            let f = &figs[side as usize];
            let rps = med(&f.rps);
            println!(
                "| {size} B | {} | {} | {rps:.0} | {:.1} | {:.0} | {:.2} | {:.2} |",
                2 * records,
                side.name(),
                med(&f.mbps),
                med(&f.cpu_ns),
                rps / med(&figs[Side::Poll as usize].rps),
                rps / med(&figs[Side::Batch as usize].rps),
            );
        }
    }
    let series: Vec<Series> = Side::ALL
        .iter()
        .map(|&side| {
            Series::new(
                side.name(),
                results
                    .iter()
                    .map(|(size, _, figs)| (*size as f64, med(&figs[side as usize].mbps)))
                    .collect(),
            )
        })
        .collect();
    plot::write(
        &args.plots.plots.join("scale-sizes.svg"),
        &Chart {
            title: "Read throughput against record size (2 real brokers, same run)",
            x_label: "value size (bytes)",
            y_label: "MB/s (key + value, median)",
            x: Axis::Log,
            y: Axis::Linear,
            legend: Legend::UpperLeft,
        },
        &series,
    );
}
