//! Read throughput: this project's source against a plain rdkafka consumer per
//! cluster, alternating in the same run over the same data.

mod sides;

pub use sides::{Reading, ours, plain};

use std::time::Instant;

use mck_bench::peers::{self, PeerCluster};

use super::{TOPIC, median};
use crate::cpu::{ThreadsCpu, broker_pids, pids_compile_cpu, pids_cpu, process_cpu, threads_cpu};

/// Options of the throughput benchmark.
#[derive(clap::Args, Clone, Copy)]
pub struct ThroughputArgs {
    /// Records pre-filled in each cluster's topic.
    #[arg(long, default_value_t = 400_000)]
    records: usize,
    /// Clusters read together (one broker each).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=26))]
    clusters: u16,
    #[command(flatten)]
    pub load: super::load::Load,
    /// Parallel readers of this project's source.
    #[arg(long, default_value_t = 1)]
    readers: usize,
    /// Run only one side (to profile it): `ours` or `plain`. No ratio is printed.
    #[arg(long)]
    only: Option<Side>,
    /// How this project's side takes records: `batch` (`next_batch`), `in-batch`
    /// (`next_batch` reading the bytes in place) or `record` (`next`).
    #[arg(long, value_enum, default_value_t = Api::Batch)]
    api: Api,
    /// How the plain consumer takes records: `poll` (`BaseConsumer::poll`, one
    /// message per call, the usual rust-rdkafka loop) or `batch`
    /// (`rd_kafka_consume_batch_queue` through the raw bindings, as the library
    /// does).
    #[arg(long, value_enum, default_value_t = Peer::Poll)]
    peer: Peer,
    /// The source's `max_batch_size` (records per batch); the library's default
    /// unless set.
    #[arg(long)]
    max_batch: Option<usize>,
    /// Also read with event-time watermarks on (`SourceBuilder::watermarks`), as a
    /// third side in the same rounds, compared with the library without them.
    #[arg(long)]
    watermarks: bool,
    /// Also read with watermarks, with watermarks aligned (1 s of drift), and in
    /// time order (`ReadOrder::Time`): three more sides in the same rounds, each
    /// compared with the library without event time.
    #[arg(long, conflicts_with = "watermarks")]
    event_time: bool,
}

impl ThroughputArgs {
    /// The sides of this run, in the order of its even rounds.
    fn sides(&self) -> Vec<Side> {
        match (self.only, self.watermarks, self.event_time) {
            (Some(side), ..) => vec![side],
            (None, false, false) => vec![Side::Plain, Side::Ours],
            (None, true, _) => vec![Side::Plain, Side::Ours, Side::Watermarked],
            (None, false, true) => vec![
                Side::Plain,
                Side::Ours,
                Side::Watermarked,
                Side::Aligned,
                Side::TimeOrdered,
            ],
        }
    }
}

/// One side of the throughput comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Side {
    /// This project's source.
    Ours,
    /// The plain rdkafka consumer.
    Plain,
    /// This project's source with event-time watermarks (with `--watermarks`).
    Watermarked,
    /// With watermarks aligned across splits, 1 s of drift (with `--event-time`).
    Aligned,
    /// With records in time order (with `--event-time`).
    TimeOrdered,
}

impl Side {
    /// The library's event time on this side (none for the plain consumer).
    pub(crate) fn event_time(self) -> Option<sides::EventTime> {
        match self {
            Side::Plain => None,
            Side::Ours => Some(sides::EventTime::Off),
            Side::Watermarked => Some(sides::EventTime::Watermarks),
            Side::Aligned => Some(sides::EventTime::Aligned),
            Side::TimeOrdered => Some(sides::EventTime::TimeOrder),
        }
    }

    /// The row of its table.
    fn row(self) -> &'static str {
        match self {
            Side::Plain | Side::Ours => "",
            Side::Watermarked => "with watermarks",
            Side::Aligned => "with watermarks aligned (1 s drift)",
            Side::TimeOrdered => "in time order",
        }
    }
}

/// How the library side takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `SourceReader::next_batch`, values as shared `Bytes` (`RawValue`).
    Batch,
    /// `SourceReader::next_batch` with no value per record (`InBatch`): the bytes
    /// read in place with `raw_value`, as `mck consume` reads them.
    InBatch,
    /// `SourceReader::next`.
    Record,
}

/// How the plain consumer takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// `BaseConsumer::poll`.
    Poll,
    /// `rd_kafka_consume_batch_queue`.
    Batch,
}

/// What the benchmark's application does with each record, the same on both sides:
/// reads its timestamp and copies its key and value into one reused buffer (so
/// without an allocation per record). Returns the key + value size.
#[inline]
pub(crate) fn touch(
    scratch: &mut Vec<u8>,
    key: Option<&[u8]>,
    value: &[u8],
    timestamp: Option<i64>,
) -> u64 {
    scratch.clear();
    scratch.extend_from_slice(key.unwrap_or_default());
    scratch.extend_from_slice(value);
    std::hint::black_box(timestamp);
    std::hint::black_box(&*scratch).len() as u64
}

/// What one side read in one pass over the data.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    pub records: u64,
    /// Key + value bytes.
    pub bytes: u64,
    /// When the first record of the pass arrived (the earliest over the consumers or
    /// readers): the clock a tool starts once it has joined its group.
    pub first: Instant,
    /// When the last record arrived.
    pub end: Instant,
}

impl Pass {
    /// Folds the passes of concurrent consumers or readers into one.
    pub fn combine(parts: impl IntoIterator<Item = Pass>) -> Pass {
        parts
            .into_iter()
            .reduce(|a, b| Pass {
                records: a.records + b.records,
                bytes: a.bytes + b.bytes,
                first: a.first.min(b.first),
                end: a.end.max(b.end),
            })
            .expect("at least one consumer")
    }

    /// (records/s, MB/s) over the window from `start` to the last record.
    pub fn rate_since(&self, start: Instant) -> (f64, f64) {
        let secs = (self.end - start).as_secs_f64().max(1e-9);
        (self.records as f64 / secs, self.bytes as f64 / secs / 1e6)
    }

    /// (records/s, MB/s) from the first record to the last.
    pub fn reading_rate(&self) -> (f64, f64) {
        self.rate_since(self.first)
    }
}

/// One side's figures over the rounds.
#[derive(Default)]
struct Figures {
    /// From the side's start (client creation) to its last record.
    rps: Vec<f64>,
    mbps: Vec<f64>,
    /// From its first record to its last.
    rps_reading: Vec<f64>,
    cpu_ns: Vec<f64>,
    /// CPU ns per record of each thread group (ours only; see [`threads_cpu`]).
    threads_cpu_ns: std::collections::BTreeMap<String, Vec<f64>>,
    /// The brokers' CPU ns per record over the pass (their JVMs' idle work
    /// included).
    broker_ns: Vec<f64>,
    /// Of that, their JIT compiler threads'.
    compile_ns: Vec<f64>,
    /// The brokers' CPU ns per record less what they take idle over as long as
    /// the pass took: what reading made them do.
    broker_work_ns: Vec<f64>,
}

impl Figures {
    fn push(&mut self, pass: &Pass, started: Instant, cpu_secs: f64) {
        let (rps, mbps) = pass.rate_since(started);
        self.rps.push(rps);
        self.mbps.push(mbps);
        self.rps_reading.push(pass.reading_rate().0);
        self.cpu_ns.push(cpu_secs / pass.records as f64 * 1e9);
    }

    fn last(&self) -> String {
        match (self.rps.last(), self.rps_reading.last(), self.cpu_ns.last()) {
            (Some(r), Some(f), Some(c)) => {
                format!("{r:.0} rec/s ({f:.0} from the first record) {c:.0} ns CPU/rec")
            }
            _ => "-".into(),
        }
    }

    /// Medians of records/s, MB/s, records/s from the first record, and CPU
    /// ns/record.
    fn medians(&self) -> (f64, f64, f64, f64) {
        (
            median(self.rps.clone()),
            median(self.mbps.clone()),
            median(self.rps_reading.clone()),
            median(self.cpu_ns.clone()),
        )
    }
}

/// Runs the throughput benchmark and prints its table.
pub fn throughput(args: &ThroughputArgs) {
    let kafkas = mck_bench::start_many(usize::from(args.clusters));
    let started = Instant::now();
    let ThroughputArgs {
        load:
            super::load::Load {
                value_size,
                partitions,
                ..
            },
        records,
        ..
    } = *args;
    std::thread::scope(|s| {
        for k in &kafkas {
            s.spawn(move || {
                peers::prefill(k, TOPIC, partitions, records, value_size).expect("prefill")
            });
        }
    });
    eprintln!(
        "prefilled {} × {records} records of {value_size} B in {:.1} s",
        kafkas.len(),
        started.elapsed().as_secs_f64()
    );
    let rt = mck_testkit::runtime();
    let clusters: Vec<PeerCluster> = kafkas.iter().map(PeerCluster::of).collect();
    let brokers: Vec<u32> = kafkas.iter().flat_map(broker_pids).collect();
    let mut figures = measure(args, &rt, &clusters, &brokers);
    let ours_f = figures.remove(&Side::Ours).unwrap_or_default();
    let plain_f = figures.remove(&Side::Plain).unwrap_or_default();
    print_figures(args, &ours_f, &plain_f);
    for (side, f) in &figures {
        let (w, mb, wf, wc) = f.medians();
        let row = side.row();
        println!(
            "| multicluster-kafka {row} (library, {} reader(s)) | {w:.0} | {mb:.1} | {wf:.0} | {wc:.0} |",
            args.readers
        );
        print_threads(row, f);
        print_brokers(&format!("multicluster-kafka {row}"), f);
        // With `--only` a side runs alone: nothing to compare it with.
        if !ours_f.rps.is_empty() {
            let (o, _, _, oc) = ours_f.medians();
            println!(
                "ratio {row} / without event time: throughput {:.2}, CPU per record {:.2}",
                w / o,
                wc / oc
            );
        }
    }
}

/// The CPU per record of each thread group of a library side, if measured.
fn print_threads(row: &str, f: &Figures) {
    if f.threads_cpu_ns.is_empty() {
        return;
    }
    let groups: Vec<String> = f
        .threads_cpu_ns
        .iter()
        .map(|(group, ns)| format!("{group} {:.0}", median(ns.clone())))
        .collect();
    println!(
        "multicluster-kafka {row}, CPU ns per record by thread (medians; mck-fetch: the fetcher threads, tokio-r: the readers' tasks and the bench's loop, rdk:*: librdkafka's; threads that ended before the pass did are not counted): {}",
        groups.join(", ")
    );
}

/// The brokers' CPU per record beside `reader`: what its way of fetching costs on
/// the other end (where the brokers share the client's cores, records/s it does not
/// get).
fn print_brokers(reader: &str, f: &Figures) {
    if !f.broker_ns.is_empty() {
        println!(
            "brokers' CPU ns per record beside {reader} (median; all broker JVMs over each pass, their idle work included): {:.0}, of which their JIT compilers' {:.0}; less their idle CPU over as long as the pass took: {:.0}",
            median(f.broker_ns.clone()),
            median(f.compile_ns.clone()),
            median(f.broker_work_ns.clone())
        );
    }
}

/// Every round of each side; each side's figures. `brokers` are the brokers'
/// process ids, whose CPU is counted over each pass.
fn measure(
    args: &ThroughputArgs,
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    brokers: &[u32],
) -> std::collections::BTreeMap<Side, Figures> {
    let expected = (clusters.len() * args.records) as u64;
    let mut all: std::collections::BTreeMap<Side, Figures> = std::collections::BTreeMap::new();
    let sides = args.sides();
    warm(args, rt, clusters, brokers, &sides);
    let idle_cores = idle(brokers);
    eprintln!("measuring (pid {})", std::process::id());
    for round in 0..args.load.rounds {
        // Alternate which reader goes first, so neither always gets the warmer broker.
        let order: Vec<Side> = if round % 2 == 0 {
            sides.clone()
        } else {
            sides.iter().rev().copied().collect()
        };
        for side in order {
            let t = Instant::now();
            let cpu0 = process_cpu();
            let brokers0 = pids_cpu(brokers);
            let compile0 = pids_compile_cpu(brokers);
            let threads0 = threads_cpu();
            let (pass, threads) = pass(args, rt, clusters, side);
            let took = t.elapsed().as_secs_f64();
            let figures = all.entry(side).or_default();
            assert_eq!(pass.records, expected, "{side:?} read everything");
            figures.push(&pass, t, process_cpu() - cpu0);
            let per_record = |secs: f64| secs / pass.records as f64 * 1e9;
            let brokers_cpu = pids_cpu(brokers) - brokers0;
            figures.broker_ns.push(per_record(brokers_cpu));
            figures
                .broker_work_ns
                .push(per_record(brokers_cpu - idle_cores * took));
            figures
                .compile_ns
                .push(per_record(pids_compile_cpu(brokers) - compile0));
            if side != Side::Plain {
                for (group, secs) in threads {
                    // Threads that lived before the pass (the runtime's, the main thread)
                    // count from where they were.
                    let before = threads0.get(&group).copied().unwrap_or(0.0);
                    figures
                        .threads_cpu_ns
                        .entry(group)
                        .or_default()
                        .push((secs - before) / pass.records as f64 * 1e9);
                }
            }
        }
        let said: Vec<String> = all
            .iter()
            .map(|(side, f)| format!("{side:?} {}", f.last()))
            .collect();
        eprintln!("round {round}: {}", said.join(", "));
    }
    all
}

/// Warm cycles at most (each a pass of every side) before measuring, whether or not
/// the brokers' compilers went quiet.
const WARM_CYCLES: usize = 3;

/// The brokers are warm once their JIT compilers took less than this share of their
/// CPU over a warm cycle.
const WARM_COMPILING: f64 = 0.1;

/// Warms the brokers' page cache and JIT before measuring: every side in turn until
/// the brokers' JIT compilers go quiet. Each side
/// fetches its own way (time order pauses and resumes partitions, which changes the
/// brokers' fetch sessions), and the brokers' JIT compiles each way's code as it
/// first meets it. Eight fresh brokers on two cores compile for minutes: after one
/// cycle their compilers took 44 % of the brokers' CPU, after 20 (three minutes) still
/// 8–29 %, never quiet, while time order against plain reading stayed within 0.63–0.73×.
/// So a few cycles, and each side's figures say how much of the brokers' CPU beside
/// it was their compiling.
fn warm(
    args: &ThroughputArgs,
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    brokers: &[u32],
    sides: &[Side],
) {
    let started = Instant::now();
    for cycle in 1..=WARM_CYCLES {
        let (cpu0, compile0) = (pids_cpu(brokers), pids_compile_cpu(brokers));
        for &side in sides {
            pass(args, rt, clusters, side);
        }
        let (cpu, compile) = (
            pids_cpu(brokers) - cpu0,
            pids_compile_cpu(brokers) - compile0,
        );
        let share = if cpu > 0.0 { compile / cpu } else { 0.0 };
        eprintln!(
            "warm-up cycle {cycle}: the brokers' JIT compilers took {:.0} % of their CPU",
            share * 100.0
        );
        if share < WARM_COMPILING {
            break;
        }
    }
    println!(
        "warm-up: {:.0} s, until the brokers' JIT compilers took under {:.0} % of their CPU over a pass of every side, or {WARM_CYCLES} such passes",
        started.elapsed().as_secs_f64(),
        WARM_COMPILING * 100.0
    );
}

/// Prints the brokers' CPU over a few seconds with nothing reading, and returns it
/// (cores): the background their per-record figures include. A side that reads
/// slower has more of it in its figure (the brokers' idle work spread over fewer
/// records a second), so each side's figure is also given less it.
fn idle(brokers: &[u32]) -> f64 {
    if brokers.is_empty() {
        return 0.0;
    }
    let secs = 5.0;
    let (cpu0, compile0) = (pids_cpu(brokers), pids_compile_cpu(brokers));
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let cores = (pids_cpu(brokers) - cpu0) / secs;
    println!(
        "brokers idle (nothing reading, {secs:.0} s): {cores:.2} of a core, of which their JIT compilers' {:.2}",
        (pids_compile_cpu(brokers) - compile0) / secs
    );
    cores
}

/// One pass of `side` over the data, and its threads' CPU (ours only).
fn pass(
    args: &ThroughputArgs,
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    side: Side,
) -> (Pass, ThreadsCpu) {
    match side.event_time() {
        None => (
            plain(clusters, TOPIC, args.load.partitions, args.peer),
            ThreadsCpu::new(),
        ),
        Some(event_time) => ours(
            rt,
            clusters,
            TOPIC,
            sides::Reading {
                readers: args.readers,
                api: args.api,
                max_batch: args.max_batch,
                event_time,
            },
        ),
    }
}

/// The workload, the table of both sides, ours by thread group, and the ratio.
fn print_figures(args: &ThroughputArgs, ours_f: &Figures, plain_f: &Figures) {
    let ThroughputArgs {
        load:
            super::load::Load {
                value_size,
                partitions,
                rounds,
                ..
            },
        records,
        clusters,
        readers,
        only,
        api,
        peer,
        ..
    } = *args;
    println!(
        "workload: {clusters} clusters x {partitions} partitions, {records} records/cluster, {value_size} B values, {readers} reader(s), library API {api:?}, plain consumer {peer:?}"
    );
    println!(
        "| reader | records/s (median of {rounds}) | MB/s | records/s from the first record | client CPU ns/record |"
    );
    println!("|---|---|---|---|---|");
    if !ours_f.rps.is_empty() {
        let (o, mb, of, oc) = ours_f.medians();
        println!(
            "| multicluster-kafka (library, {readers} reader(s)) | {o:.0} | {mb:.1} | {of:.0} | {oc:.0} |"
        );
    }
    if !plain_f.rps.is_empty() {
        let (p, mb, pf, pc) = plain_f.medians();
        let how = match peer {
            Peer::Poll => "BaseConsumer::poll",
            Peer::Batch => "rd_kafka_consume_batch_queue",
        };
        println!(
            "| plain rdkafka, {how} (1 consumer per cluster) | {p:.0} | {mb:.1} | {pf:.0} | {pc:.0} |"
        );
    }
    print_threads("", ours_f);
    print_brokers("multicluster-kafka", ours_f);
    print_brokers("plain rdkafka", plain_f);
    if only.is_none() {
        let (o, _, of, oc) = ours_f.medians();
        let (p, _, pf, pc) = plain_f.medians();
        println!(
            "ratio multicluster-kafka / plain rdkafka: throughput {:.2} ({:.2} from the first record), CPU per record {:.2}",
            o / p,
            of / pf,
            oc / pc
        );
    }
}
