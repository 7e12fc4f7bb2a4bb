//! `mck-bench blackhole`: the healthy cluster's records/s while its neighbour's network
//! is a blackhole, and how long shutting down takes then.
//!
//! Two real clusters: A reached directly, B behind a fault proxy (its broker advertises
//! the proxy, so the source's clients never bypass it). A's topic is pre-filled with
//! `--records` records (4 partitions), B's with `--b-records` (1 partition). One source
//! (`MultiClusterKafkaSource`, `RawValue`, `next_batch`) reads the stream of both, in
//! rounds that alternate between two kinds:
//!
//! - **pass**: B's proxy forwards everything;
//! - **blackhole**: once every B record has come out, B's proxy is switched to a
//!   blackhole (connections held open, nothing forwarded either way).
//!
//! Both kinds start the clock at the same point: every B record read and A's warm-up
//! (a tenth of its records, at most 100 000) past. The blackhole is switched on there,
//! not before the source opens, because that is the harder case for isolation: B's
//! consumers are then live, their partitions assigned and a fetch in flight that will
//! never be answered, in the middle of the reader's work, and every later request to B
//! hangs until librdkafka's timeouts. A blackhole from the start would rather measure
//! whether start-up waits for B (B's splits would never be assigned, so the reader
//! would have nothing of B's to wait on). The rate is A's records from the clock's
//! start to A's last record.
//!
//! At the end of each round, with B still blackholed in the blackhole rounds, the source
//! is closed (`close()` timed) and then the runtime that ran it is dropped (timed).
//!
//! Then `mck consume` (follow mode, the same two clusters from a metadata file) reads
//! everything; once every record is out, B is blackholed (or left alone), and after
//! `--mck-hold-ms` the process gets SIGINT: the time from the signal to its exit is
//! measured, alternating again.

mod library;
mod mck;
mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mck_bench::peers;
use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{KafkaCluster, TestCluster};

use super::mck_binary;
use library::{Round, round};
use mck::mck_round;
use table::print_tables;

/// The topic on both clusters.
const TOPIC: &str = "bench-blackhole";

/// How long any one step may take before the round fails (a hang guard).
const PATIENCE: Duration = Duration::from_secs(300);

/// Options of `mck-bench blackhole`.
#[derive(clap::Args, Clone, Debug)]
pub struct BlackholeArgs {
    /// Records pre-filled on the healthy cluster A (4 partitions).
    #[arg(long, default_value_t = 2_000_000)]
    records: usize,
    /// Records pre-filled on cluster B (1 partition), read before B is blackholed.
    #[arg(long, default_value_t = 1_000)]
    b_records: usize,
    /// Value size in bytes (both clusters).
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Rounds of each kind, alternating.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Rounds of each kind of `mck consume` shut down by SIGINT (0: skip).
    #[arg(long, default_value_t = 3)]
    mck_rounds: usize,
    /// How long `mck consume` runs with B blackholed (or passing) before SIGINT.
    #[arg(long, default_value_t = 3_000)]
    mck_hold_ms: u64,
    /// The `mck` binary (default: `mck` next to this binary; build it with
    /// `cargo build --release -p mck`).
    #[arg(long)]
    mck: Option<PathBuf>,
}

/// The `blackhole` command.
pub fn blackhole(args: &BlackholeArgs) {
    let mck = (args.mck_rounds > 0).then(|| mck_binary(args.mck.as_deref()));
    let t = Instant::now();
    let (a, b) = start_clusters();
    fill(&a, &b, args);
    eprintln!(
        "clusters started and filled ({} + {} records of {} B) in {:.1} s",
        args.records,
        args.b_records,
        args.value_size,
        t.elapsed().as_secs_f64()
    );
    let (pass, hole) = library_rounds(&a, &b, args);
    let (mck_pass, mck_hole) = match &mck {
        Some(mck) => mck_rounds(mck, &a, &b, args),
        None => (Vec::new(), Vec::new()),
    };
    print_tables(args, &pass, &hole, &mck_pass, &mck_hole);
}

/// A reached directly and B behind its proxy, started at once.
fn start_clusters() -> (KafkaCluster, ProxiedCluster) {
    let opts = mck_bench::cluster_options;
    std::thread::scope(|s| {
        let a = s.spawn(|| KafkaCluster::start(opts("bench-a")));
        let b = s.spawn(|| ProxiedCluster::start(opts("bench-b")));
        (
            a.join()
                .expect("start thread")
                .expect("cluster bench-a starts"),
            b.join()
                .expect("start thread")
                .expect("cluster bench-b starts behind a proxy"),
        )
    })
}

/// Pre-fills A's topic (4 partitions) and B's (1), at once.
fn fill(a: &KafkaCluster, b: &ProxiedCluster, args: &BlackholeArgs) {
    std::thread::scope(|s| {
        s.spawn(|| peers::prefill(a, TOPIC, 4, args.records, args.value_size).expect("pre-fill a"));
        s.spawn(|| {
            peers::prefill(b.cluster(), TOPIC, 1, args.b_records, args.value_size)
                .expect("pre-fill b")
        });
    });
}

/// Library rounds: pass, blackhole, then blackhole, pass, and so on. Returns the pass
/// rounds and the blackhole rounds.
fn library_rounds(
    a: &KafkaCluster,
    b: &ProxiedCluster,
    args: &BlackholeArgs,
) -> (Vec<Round>, Vec<Round>) {
    let (mut pass, mut hole) = (Vec::new(), Vec::new());
    for i in 0..args.rounds.max(1) {
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for blackholed in order {
            let r = round(a, b, args, blackholed);
            eprintln!(
                "round {} {}: A {:.0} rec/s over {:.2} s; close() {:.0} ms, runtime drop {:.0} ms; {} B from B's proxy while measured",
                i + 1,
                if blackholed { "blackhole" } else { "pass" },
                r.rate,
                r.secs,
                r.close * 1e3,
                r.runtime_drop * 1e3,
                r.b_bytes_down
            );
            if blackholed { &mut hole } else { &mut pass }.push(r);
        }
    }
    (pass, hole)
}

/// `mck consume` rounds on a metadata file naming both clusters, alternating as the
/// library rounds do. Returns the seconds from SIGINT to exit, B passing and B
/// blackholed.
fn mck_rounds(
    mck: &Path,
    a: &KafkaCluster,
    b: &ProxiedCluster,
    args: &BlackholeArgs,
) -> (Vec<f64>, Vec<f64>) {
    let (mut mck_pass, mut mck_hole) = (Vec::new(), Vec::new());
    let dir = std::env::temp_dir().join(format!("mck-bench-blackhole-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let metadata = dir.join("metadata.yaml");
    std::fs::write(
        &metadata,
        format!(
            "clusters:\n  a:\n    properties:\n      bootstrap.servers: \"{}\"\n  \
             b:\n    properties:\n      bootstrap.servers: \"{}\"\n\
             streams:\n  s:\n    clusters:\n      a: {{ topics: [{TOPIC}] }}\n      \
             b: {{ topics: [{TOPIC}] }}\n",
            a.bootstrap_servers(),
            b.proxied_bootstrap_servers()
        ),
    )
    .expect("writing the metadata file");
    let expected = (args.records + args.b_records) as u64;
    let hold = Duration::from_millis(args.mck_hold_ms);
    for i in 0..args.mck_rounds {
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for blackholed in order {
            let secs = mck_round(mck, &metadata, b, expected, blackholed, hold);
            eprintln!(
                "mck round {} {}: SIGINT to exit {:.0} ms",
                i + 1,
                if blackholed { "blackhole" } else { "pass" },
                secs * 1e3
            );
            if blackholed {
                &mut mck_hole
            } else {
                &mut mck_pass
            }
            .push(secs);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    (mck_pass, mck_hole)
}
