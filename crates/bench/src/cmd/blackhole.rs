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

use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_bench::peers;
use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};
use multicluster_kafka::prelude::*;

use super::mck_binary;
use super::median;

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

/// What one library round measured.
#[derive(Clone, Copy, Debug)]
struct Round {
    /// A's records/s from the clock's start to its last record.
    rate: f64,
    /// Seconds the measured part took.
    secs: f64,
    /// `close()`, in seconds.
    close: f64,
    /// Dropping the runtime after `close()`, in seconds.
    runtime_drop: f64,
    /// Bytes B's proxy forwarded to the client while the clock ran.
    b_bytes_down: u64,
}

/// One library round; `blackhole`: switch B's proxy to a blackhole at the clock's
/// start. The proxy is back to passing when it returns.
fn round(a: &KafkaCluster, b: &ProxiedCluster, args: &BlackholeArgs, blackhole: bool) -> Round {
    let meta = |bootstrap: String, client_id: &str| {
        ClusterMetadata::builder(bootstrap)
            .topic(TOPIC)
            .property("client.id", client_id)
            .build()
            .unwrap()
    };
    let stream = KafkaStream::new("s")
        .with_cluster("a", meta(a.bootstrap_servers(), "bench-a"))
        .with_cluster("b", meta(b.proxied_bootstrap_servers(), "bench-b"));
    let svc = Arc::new(StaticMetadataService::new([stream]).unwrap());
    let rt = mck_testkit::runtime();
    let proxy = b.proxy();
    let warmup = (args.records / 10).min(100_000);
    let (rate, secs, close, b_bytes_down) = rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone() as Arc<dyn KafkaMetadataService>)
            .stream_ids(["s"])
            .deserializer(RawValue)
            .include_headers(false)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let (mut seen_a, mut seen_b) = (0usize, 0usize);
        let mut sink = 0usize;
        // Up to the clock's start: every B record and A's warm-up.
        while seen_b < args.b_records || seen_a < warmup {
            let batch = next(&mut source).await;
            for r in batch.iter() {
                sink += r.value.len();
            }
            if &**batch.cluster() == "a" {
                seen_a += batch.len();
            } else {
                seen_b += batch.len();
            }
        }
        if blackhole {
            proxy.blackhole();
        }
        let bytes_before = proxy.stats().bytes_down;
        let from_a = seen_a;
        let start = Instant::now();
        let mut end = start;
        while seen_a < args.records {
            let batch = next(&mut source).await;
            for r in batch.iter() {
                sink += r.value.len();
            }
            if &**batch.cluster() == "a" {
                seen_a += batch.len();
                end = Instant::now();
            } else {
                seen_b += batch.len();
            }
        }
        black_box(sink);
        assert_eq!(seen_a, args.records, "A's records read");
        assert_eq!(seen_b, args.b_records, "B's records read");
        let b_bytes_down = proxy.stats().bytes_down - bytes_before;
        let secs = (end - start).as_secs_f64();
        let t = Instant::now();
        tokio::time::timeout(PATIENCE, source.close())
            .await
            .expect("close() within the patience");
        let close = t.elapsed().as_secs_f64();
        (
            (args.records - from_a) as f64 / secs.max(1e-9),
            secs,
            close,
            b_bytes_down,
        )
    });
    let t = Instant::now();
    drop(rt);
    let runtime_drop = t.elapsed().as_secs_f64();
    proxy.pass();
    Round {
        rate,
        secs,
        close,
        runtime_drop,
        b_bytes_down,
    }
}

/// The next batch, within [`PATIENCE`].
async fn next(source: &mut KafkaSourceStream<RawValue>) -> RecordBatch<Bytes> {
    tokio::time::timeout(PATIENCE, source.next_batch())
        .await
        .expect("a batch within the patience")
        .expect("the stream goes on")
        .expect("a batch")
}

/// A `mck consume` child whose stdout lines are counted.
struct Mck {
    child: Child,
    lines: Arc<AtomicU64>,
    counter: std::thread::JoinHandle<()>,
    stderr: std::thread::JoinHandle<String>,
}

fn spawn_mck(mck: &Path, metadata: &Path) -> Mck {
    let mut child = Command::new(mck)
        .arg("consume")
        .arg("--metadata")
        .arg(metadata)
        .args(["--stream", "s", "--format", "value"])
        .env_remove("MCK_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mck starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let lines = Arc::new(AtomicU64::new(0));
    let l = lines.clone();
    let counter = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    let c = buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                    l.fetch_add(c, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("reading mck's stdout: {e}"),
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    Mck {
        child,
        lines,
        counter,
        stderr,
    }
}

/// One `mck consume` round: read everything, blackhole B (or not), wait `hold`, then
/// SIGINT; returns seconds from the signal to the exit.
fn mck_round(
    mck: &Path,
    metadata: &Path,
    b: &ProxiedCluster,
    expected: u64,
    blackhole: bool,
    hold: Duration,
) -> f64 {
    let mut m = spawn_mck(mck, metadata);
    let t = Instant::now();
    while m.lines.load(Ordering::Relaxed) < expected {
        if let Some(status) = m.child.try_wait().expect("try_wait") {
            panic!(
                "mck exited early ({status}); its stderr:\n{}",
                m.stderr.join().unwrap_or_default()
            );
        }
        assert!(
            t.elapsed() < PATIENCE,
            "mck read {} of {expected} records in {PATIENCE:?}",
            m.lines.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if blackhole {
        b.proxy().blackhole();
    }
    std::thread::sleep(hold);
    let pid = m.child.id() as libc::pid_t;
    let t = Instant::now();
    // SAFETY: `pid` is our child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = loop {
        if let Some(s) = m.child.try_wait().expect("try_wait") {
            break s;
        }
        if t.elapsed() > PATIENCE {
            let _ = m.child.kill();
            panic!("mck did not exit within {PATIENCE:?} of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let exit = t.elapsed().as_secs_f64();
    b.proxy().pass();
    m.counter.join().expect("the line counter");
    let stderr = m.stderr.join().expect("the stderr reader");
    assert!(
        status.success(),
        "mck exited with {status} after SIGINT; its stderr:\n{stderr}"
    );
    let lines = m.lines.load(Ordering::Relaxed);
    assert_eq!(lines, expected, "mck's records");
    exit
}

/// The `blackhole` command.
pub fn blackhole(args: &BlackholeArgs) {
    let mck = (args.mck_rounds > 0).then(|| mck_binary(args.mck.as_deref()));
    let opts = |id: &str| {
        ClusterOptions::new(id).jvm_options([
            "-Xms1g",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
        ])
    };
    let t = Instant::now();
    let (a, b) = std::thread::scope(|s| {
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
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            peers::prefill(&a, TOPIC, 4, args.records, args.value_size).expect("pre-fill a")
        });
        s.spawn(|| {
            peers::prefill(b.cluster(), TOPIC, 1, args.b_records, args.value_size)
                .expect("pre-fill b")
        });
    });
    eprintln!(
        "clusters started and filled ({} + {} records of {} B) in {:.1} s",
        args.records,
        args.b_records,
        args.value_size,
        t.elapsed().as_secs_f64()
    );

    // Library rounds: pass, blackhole, then blackhole, pass, and so on.
    let (mut pass, mut hole) = (Vec::new(), Vec::new());
    for i in 0..args.rounds.max(1) {
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for blackholed in order {
            let r = round(&a, &b, args, blackholed);
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

    // mck consume rounds.
    let (mut mck_pass, mut mck_hole) = (Vec::new(), Vec::new());
    if let Some(mck) = &mck {
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
                let secs = mck_round(mck, &metadata, &b, expected, blackholed, hold);
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
    }

    print_tables(args, &pass, &hole, &mck_pass, &mck_hole);
}

/// Prints the markdown tables.
fn print_tables(
    args: &BlackholeArgs,
    pass: &[Round],
    hole: &[Round],
    mck_pass: &[f64],
    mck_hole: &[f64],
) {
    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "blackhole, {date}, {cores} cores, load average at the end {load}; A: {} records of {} B \
         in 4 partitions, B (behind the proxy): {} records in 1 partition; {} rounds of each kind, alternating",
        args.records,
        args.value_size,
        args.b_records,
        pass.len()
    );
    println!();
    let all = |v: &[Round], f: fn(&Round) -> f64, scale: f64, digits: usize| {
        v.iter()
            .map(|r| format!("{:.*}", digits, f(r) * scale))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let med = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    let best =
        |v: &[Round], f: fn(&Round) -> f64| v.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    let worst =
        |v: &[Round], f: fn(&Round) -> f64| v.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    let rate = |r: &Round| r.rate;
    let close = |r: &Round| r.close;
    let rtd = |r: &Round| r.runtime_drop;
    println!("| A's records/s | median | best | rounds |");
    println!("|---|---|---|---|");
    println!(
        "| (a) B passes | {:.0} | {:.0} | {} |",
        med(pass, rate),
        best(pass, rate),
        all(pass, rate, 1.0, 0)
    );
    println!(
        "| (b) B blackholed | {:.0} | {:.0} | {} |",
        med(hole, rate),
        best(hole, rate),
        all(hole, rate, 1.0, 0)
    );
    println!(
        "| **(b) / (a)** (target ≥ 0.95) | **{:.3}** | {:.3} | |",
        med(hole, rate) / med(pass, rate),
        best(hole, rate) / best(pass, rate)
    );
    // Each blackhole round against the pass round run beside it: the load on the shared
    // cores drifts more between round pairs than within one.
    let pairs: Vec<f64> = hole
        .iter()
        .zip(pass)
        .map(|(h, p)| h.rate / p.rate)
        .collect();
    println!(
        "| (b) / (a), round by round | {:.3} | {:.3} | {} |",
        median(pairs.clone()),
        pairs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        pairs
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("| shutdown | median | worst | rounds |");
    println!("|---|---|---|---|");
    let ms = |label: &str, v: &[Round], f: fn(&Round) -> f64| {
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {} |",
            med(v, f) * 1e3,
            worst(v, f) * 1e3,
            all(v, f, 1e3, 0)
        );
    };
    ms("library, B blackholed: close()", hole, close);
    ms(
        "library, B blackholed: runtime drop after close()",
        hole,
        rtd,
    );
    ms("library, B passes: close()", pass, close);
    ms("library, B passes: runtime drop after close()", pass, rtd);
    let secs_row = |label: &str, v: &[f64]| {
        if v.is_empty() {
            return;
        }
        let list = v
            .iter()
            .map(|s| format!("{:.0}", s * 1e3))
            .collect::<Vec<_>>()
            .join(", ");
        let worst = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {list} |",
            median(v.to_vec()) * 1e3,
            worst * 1e3
        );
    };
    secs_row(
        &format!(
            "mck consume, B blackholed {} ms before: SIGINT to exit",
            args.mck_hold_ms
        ),
        mck_hole,
    );
    secs_row("mck consume, B passes: SIGINT to exit", mck_pass);
}
