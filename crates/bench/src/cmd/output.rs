//! `mck-bench output`: the CLI's output paths beside kcat and Kafka's console consumer,
//! in one run.
//!
//! One broker from the test kit, one topic pre-filled (default 1 000 000 records of
//! 100 B), then in alternating rounds five whole processes read it to the end, each
//! timed from spawn to exit (so start-up counts, as it does for a user):
//!
//! - `mck consume -b … -t … -e --format json`,
//! - `mck consume -b … -t … -e --format value`,
//! - `kcat -C -b … -t … -e -J` (kcat's JSON envelope),
//! - `kcat -C -b … -t … -e -f '%s\n'` (the bare values),
//! - Kafka's console consumer (`kafka-console-consumer.sh`'s class, from the test
//!   kit's Kafka jars, with the script's JVM options) with `--max-messages`.
//!
//! The warm-up rounds pipe every side's output into this process, which counts the
//! lines: every side must print exactly the records produced. The measured rounds send
//! it to `/dev/null`, so the counting costs no CPU beside the measured process. The
//! table gives medians and each side's speed relative to kcat's bare values.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::{check_kcat, mck_binary, median};
use crate::cpu::{broker_pids, pids_cpu};

/// The topic every side reads.
const TOPIC: &str = "bench-output";

/// The class `kafka-console-consumer.sh` runs.
const CONSOLE_CONSUMER_CLASS: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

/// The JVM options `kafka-console-consumer.sh` runs it with (its heap, and
/// `kafka-run-class.sh`'s default performance options).
const CONSOLE_JVM_OPTIONS: &[&str] = &[
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// Options of `mck-bench output`.
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs {
    /// Records pre-filled in each cluster's topic.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
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
    /// Leave out the franz-go peer (built with Go from the module proxy).
    #[arg(long)]
    no_franz: bool,
    /// `queued.max.messages.kbytes` for the `mck` sides (their byte budget of
    /// fetched records; librdkafka's and the native path's default is 65536).
    #[arg(long)]
    budget_kb: Option<u64>,
}

/// One measured side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    MckJson,
    MckValue,
    /// `mck consume` with `-X fetch.backend=native`.
    MckJsonNative,
    MckValueNative,
    /// franz-go (the peer program in `crates/bench/franz-go`), values to stdout.
    Franz,
    KcatJson,
    KcatValue,
    Console,
}

impl Side {
    const ALL: [Side; 8] = [
        Side::MckJson,
        Side::MckValue,
        Side::MckJsonNative,
        Side::MckValueNative,
        Side::Franz,
        Side::KcatJson,
        Side::KcatValue,
        Side::Console,
    ];

    fn name(self) -> &'static str {
        match self {
            Side::MckJson => "mck consume --format json",
            Side::MckValue => "mck consume --format value",
            Side::MckJsonNative => "mck consume --format json, native fetch",
            Side::MckValueNative => "mck consume --format value, native fetch",
            Side::Franz => "franz-go, values",
            Side::KcatJson => "kcat -C -J",
            Side::KcatValue => "kcat -C -f '%s\\n'",
            Side::Console => "kafka-console-consumer",
        }
    }
}

/// Where a side's standard output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    /// A pipe into this process, which counts the lines.
    Count,
    /// `/dev/null`.
    Null,
}

/// What one process did.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Spawn to exit, seconds.
    secs: f64,
    /// The child's user + system CPU seconds (its threads included).
    cpu: f64,
    /// The broker's CPU seconds while the child ran.
    broker_cpu: f64,
    /// Lines the child printed (counted only into a pipe).
    lines: Option<u64>,
    /// The child's peak resident set size, MiB (its `VmHWM`, read every 5 ms while
    /// it runs).
    rss_mib: f64,
}

/// `java` of `JAVA_HOME`, else the one on the path.
fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// What the sides need to build their command lines.
struct Setup {
    mck: PathBuf,
    kcat: PathBuf,
    bootstrap: String,
    records: usize,
    /// The test kit's Kafka jars, for the console consumer.
    kafka_libs: Option<PathBuf>,
    /// The franz-go peer.
    franz: Option<PathBuf>,
    /// `queued.max.messages.kbytes` for the `mck` sides.
    budget_kb: Option<u64>,
}

/// The command line of `side`.
fn command(side: Side, s: &Setup) -> Command {
    let b = s.bootstrap.as_str();
    match side {
        Side::MckJson | Side::MckValue | Side::MckJsonNative | Side::MckValueNative => {
            let mut c = Command::new(&s.mck);
            c.args(["consume", "-b", b, "-t", TOPIC, "-e", "--format"]);
            c.arg(if matches!(side, Side::MckJson | Side::MckJsonNative) {
                "json"
            } else {
                "value"
            });
            let backend = if matches!(side, Side::MckJsonNative | Side::MckValueNative) {
                "fetch.backend=native"
            } else {
                "fetch.backend=librdkafka"
            };
            c.args(["-X", backend]);
            if let Some(kb) = s.budget_kb {
                c.arg("-X").arg(format!("queued.max.messages.kbytes={kb}"));
            }
            c
        }
        Side::Franz => {
            let mut c = Command::new(s.franz.as_ref().expect("the franz-go peer"));
            c.args(["-b", b, "-t", TOPIC, "-n"])
                .arg(s.records.to_string());
            c
        }
        Side::KcatJson | Side::KcatValue => {
            let mut c = Command::new(&s.kcat);
            c.args(["-C", "-b", b, "-t", TOPIC, "-e", "-q", "-o", "beginning"]);
            if side == Side::KcatJson {
                c.arg("-J");
            } else {
                c.args(["-f", "%s\\n"]);
            }
            c
        }
        Side::Console => {
            let libs = s.kafka_libs.as_ref().expect("the Kafka jars");
            let mut c = Command::new(java());
            c.args(CONSOLE_JVM_OPTIONS)
                .arg("-cp")
                .arg(format!("{}/*", libs.display()))
                .arg(CONSOLE_CONSUMER_CLASS)
                .args([
                    "--bootstrap-server",
                    b,
                    "--topic",
                    TOPIC,
                    "--from-beginning",
                ])
                .arg("--max-messages")
                .arg(s.records.to_string());
            c
        }
    }
}

/// Runs one side to its exit.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
fn run(side: Side, mut cmd: Command, sink: Sink, broker: &[u32]) -> Run {
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    match sink {
        Sink::Count => cmd.stdout(Stdio::piped()),
        Sink::Null => cmd.stdout(Stdio::null()),
    };
    let broker_before = pids_cpu(broker);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{} cannot start: {e}", side.name()));
    let counter = child.stdout.take().map(|mut stdout| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut lines = 0u64;
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) => return lines,
                    Ok(n) => lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => panic!("reading the child's stdout: {e}"),
                }
            }
        })
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    // The peak RSS from the child's own /proc entry while it runs: wait4's
    // ru_maxrss also counts the memory of this process it was spawned from.
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || {
            let mut peak_kb = 0u64;
            while watching.load(Ordering::Relaxed) {
                if let Some(kb) = vm_hwm_kb(pid) {
                    peak_kb = peak_kb.max(kb);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak_kb
        })
    };
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    let broker_cpu = pids_cpu(broker) - broker_before;
    watching.store(false, Ordering::Relaxed);
    let peak_kb = watcher.join().expect("the RSS watcher");
    assert_eq!(r, pid, "wait4 on {}", side.name());
    let lines = counter.map(|c| c.join().expect("the line counter"));
    let errors = errors.join().expect("the stderr reader");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} failed (wait status {status}); its stderr:\n{errors}",
        side.name()
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        secs,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        broker_cpu,
        lines,
        rss_mib: peak_kb as f64 / 1024.0,
    }
}

/// `VmHWM` (peak resident set size, KiB) of a running process.
fn vm_hwm_kb(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The `output` command.
pub fn output(args: &OutputArgs) {
    check_kcat(&args.kcat);
    let mck = mck_binary(args.mck.as_deref());
    eprintln!("mck: {}", mck.display());
    let kafka_libs = (!args.no_console).then(|| {
        mck_testkit::kafka_libs().unwrap_or_else(|e| {
            panic!(
                "the console consumer needs the test kit's Kafka jars: {e}; or pass --no-console"
            )
        })
    });
    let sides: Vec<Side> = Side::ALL
        .into_iter()
        .filter(|s| *s != Side::Console || !args.no_console)
        .filter(|s| *s != Side::Franz || !args.no_franz)
        .collect();
    let franz = (!args.no_franz).then(super::franz_peer);

    let t = Instant::now();
    let cluster = KafkaCluster::start(ClusterOptions::new("bench-output").jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .expect("the cluster starts");
    peers::prefill(
        &cluster,
        TOPIC,
        args.load.partitions,
        args.records,
        args.load.value_size,
    )
    .expect("pre-fill");
    eprintln!(
        "broker started and {} records of {} B in {} partitions filled in {:.1} s",
        args.records,
        args.load.value_size,
        args.load.partitions,
        t.elapsed().as_secs_f64()
    );
    let broker = broker_pids(&cluster);
    let setup = Setup {
        mck: mck.clone(),
        kcat: args.kcat.clone(),
        bootstrap: cluster.bootstrap_servers(),
        records: args.records,
        kafka_libs,
        franz,
        budget_kb: args.budget_kb,
    };

    let expected = args.records as u64;
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
            let r = run(side, command(side, &setup), sink, &broker);
            if let Some(lines) = r.lines {
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
    print_table(args, &sides, &runs, &mck);
}

/// Prints the markdown table of medians and the ratios to kcat's bare values.
fn print_table(args: &OutputArgs, sides: &[Side], runs: &[Vec<Run>], mck: &Path) {
    let n = args.records as f64;
    let med = |i: usize, f: fn(&Run) -> f64| median(runs[i].iter().map(f).collect());
    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "CLI output paths, {date}, {cores} cores, load average at the end {load}; \
         {} records of {} B (8 B keys) in {} partitions, one broker; whole processes, \
         spawn to exit, output to /dev/null; {} rounds after {} warm-up, medians; mck: {}{}",
        args.records,
        args.load.value_size,
        args.load.partitions,
        runs[0].len(),
        args.warmup.max(1),
        mck.display(),
        args.budget_kb
            .map(|kb| format!(", with queued.max.messages.kbytes={kb}"))
            .unwrap_or_default(),
    );
    println!();
    let base = sides
        .iter()
        .position(|s| *s == Side::KcatValue)
        .expect("kcat's bare values are always measured");
    // Speed relative to kcat's bare values: its time over the side's time, per round.
    let ratios = |i: usize| -> Vec<f64> {
        runs[i]
            .iter()
            .zip(&runs[base])
            .map(|(x, k)| k.secs / x.secs)
            .collect()
    };
    println!(
        "| side | wall s (median) | wall s (best) | records/s | client CPU s | broker CPU s | peak RSS MiB | speed vs kcat bare values | single rounds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, side) in sides.iter().enumerate() {
        let secs = med(i, |r| r.secs);
        let best = runs[i].iter().map(|r| r.secs).fold(f64::INFINITY, f64::min);
        let r = ratios(i);
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "| {} | {secs:.2} | {best:.2} | {:.0} | {:.2} | {:.2} | {:.0} | **{:.2}×** | {lo:.2}–{hi:.2} |",
            side.name(),
            n / secs,
            med(i, |r| r.cpu),
            med(i, |r| r.broker_cpu),
            med(i, |r| r.rss_mib),
            median(r.clone()),
        );
    }
    let idx = |s: Side| sides.iter().position(|x| *x == s);
    if let (Some(mj), Some(kj)) = (idx(Side::MckJson), idx(Side::KcatJson)) {
        println!();
        println!(
            "mck JSON / kcat JSON (records/s): **{:.2}×**",
            med(kj, |r| r.secs) / med(mj, |r| r.secs)
        );
    }
    if let Some(f) = idx(Side::Franz) {
        println!();
        for side in [
            Side::MckValueNative,
            Side::MckJsonNative,
            Side::MckValue,
            Side::MckJson,
        ] {
            if let Some(i) = idx(side) {
                println!(
                    "{} / franz-go: records/s **{:.2}×**, CPU per record **{:.2}×**",
                    side.name(),
                    med(f, |r| r.secs) / med(i, |r| r.secs),
                    med(i, |r| r.cpu) / med(f, |r| r.cpu),
                );
            }
        }
    }
    println!("Targets: mck JSON ≥ 1.0× kcat's bare values, mck value ≥ 2.0× kcat's bare values.");
    println!(
        "Issue 32's targets: native fetch, value and JSON, ≥ 1.5× franz-go's records/s at \
         ≤ 0.5× its CPU per record."
    );
}
