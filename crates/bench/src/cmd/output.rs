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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::plot::{self, Axis, Chart, Legend, Series};
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
    /// Clusters (one broker each), every one with the topic; kcat and the console
    /// consumer take part with one only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    clusters: u16,
    /// Leave out the library's own sides (`next_batch` in a child process).
    #[arg(long)]
    no_library: bool,
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
    const ALL: [Side; 11] = [
        Side::MckJson,
        Side::MckValue,
        Side::MckJsonNative,
        Side::MckValueNative,
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

/// Where a side's standard output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    /// A pipe into this process, which counts the lines.
    Count,
    /// `/dev/null`.
    Null,
    /// A pipe into this process, which keeps what was printed (a report).
    Report,
}

/// What one process did.
#[derive(Clone, Debug)]
struct Run {
    /// Spawn to exit, seconds.
    secs: f64,
    /// The child's user + system CPU seconds (its threads included).
    cpu: f64,
    /// The broker's CPU seconds while the child ran.
    broker_cpu: f64,
    /// Lines the child printed (counted only into a pipe).
    lines: Option<u64>,
    /// What the child printed, with [`Sink::Report`].
    report: Option<String>,
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
    /// Each cluster's bootstrap list.
    bootstraps: Vec<String>,
    /// The metadata file over every cluster (stream `bench`), with several.
    metadata: Option<PathBuf>,
    /// Records over every cluster.
    records: usize,
    /// Partitions of each cluster's topic.
    partitions: i32,
    /// The test kit's Kafka jars, for the console consumer.
    kafka_libs: Option<PathBuf>,
    /// The franz-go peer.
    franz: Option<PathBuf>,
    /// `queued.max.messages.kbytes` for the `mck` sides.
    budget_kb: Option<u64>,
}

/// The command line of `side`.
fn command(side: Side, s: &Setup) -> Command {
    let b = s.bootstraps[0].as_str();
    match side {
        Side::MckJson | Side::MckValue | Side::MckJsonNative | Side::MckValueNative => {
            let mut c = Command::new(&s.mck);
            match &s.metadata {
                Some(file) => c.arg("consume").arg(file).args(["-s", "bench"]),
                None => c.args(["consume", "-b", b, "-t", TOPIC]),
            };
            c.args(["-e", "--format"]);
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
        Side::LibNative | Side::LibLibrdkafka => {
            let mut c = Command::new(std::env::current_exe().expect("the bench binary"));
            c.args([
                "rss-child",
                "--side",
                "ours",
                "--api",
                "in-batch",
                "--topic",
                TOPIC,
            ])
            .args(["--partitions", &s.partitions.to_string()])
            .args(["--expected", &s.records.to_string()]);
            for (i, b) in s.bootstraps.iter().enumerate() {
                c.arg("--cluster").arg(format!("c{i}={b}"));
            }
            let backend = if side == Side::LibNative {
                "native"
            } else {
                "librdkafka"
            };
            c.env("MCK_FETCH_BACKEND", backend);
            c
        }
        Side::Franz => {
            let mut c = Command::new(s.franz.as_ref().expect("the franz-go peer"));
            c.arg("-b")
                .arg(s.bootstraps.join(";"))
                .args(["-t", TOPIC, "-n"])
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
            let mut c = kafka_tool(s, CONSOLE_CONSUMER_CLASS);
            c.args([
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
        Side::ConsumerPerf => {
            let mut c = kafka_tool(s, peers::CONSUMER_PERF_CLASS);
            c.args(["--bootstrap-server", b, "--topic", TOPIC, "--hide-header"])
                .args(["--timeout", "60000", "--messages"])
                .arg(s.records.to_string());
            c
        }
    }
}

/// `java` running one of Kafka's tools from the test kit's jars, with the JVM options
/// its script gets from `kafka-run-class.sh` (and `-Xmx512M`, the heap both the
/// console consumer's and `kafka-consumer-perf-test.sh` set).
fn kafka_tool(s: &Setup, class: &str) -> Command {
    let libs = s.kafka_libs.as_ref().expect("the Kafka jars");
    let mut c = Command::new(java());
    c.args(CONSOLE_JVM_OPTIONS)
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg(class);
    c
}

/// The records `ConsumerPerformance` says it read: the fifth field
/// (`data.consumed.in.nMsg`) of its one line of figures.
fn consumer_perf_records(report: &str) -> Option<u64> {
    let line = report.lines().rev().find(|l| l.split(',').count() == 10)?;
    line.split(',').nth(4)?.trim().parse().ok()
}

/// Runs one side to its exit.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
fn run(side: Side, mut cmd: Command, sink: Sink, broker: &[u32]) -> Run {
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    match sink {
        Sink::Count | Sink::Report => cmd.stdout(Stdio::piped()),
        Sink::Null => cmd.stdout(Stdio::null()),
    };
    let broker_before = pids_cpu(broker);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{} cannot start: {e}", side.name()));
    let keep = sink == Sink::Report;
    let counter = child.stdout.take().map(|mut stdout| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let (mut lines, mut kept) = (0u64, Vec::new());
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) => return (lines, keep.then(|| String::from_utf8_lossy(&kept).into())),
                    Ok(n) => {
                        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                        if keep {
                            kept.extend_from_slice(&buf[..n]);
                        }
                    }
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
    let (lines, report) = counter
        .map(|c| c.join().expect("the line counter"))
        .map_or((None, None), |(lines, report)| (Some(lines), report));
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
        report,
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
    let several = args.clusters > 1;
    let sides: Vec<Side> = Side::ALL
        .into_iter()
        .filter(|s| *s != Side::Console || !(args.no_console || several))
        .filter(|s| *s != Side::ConsumerPerf || !(args.no_consumer_perf || several))
        .filter(|s| !matches!(s, Side::KcatJson | Side::KcatValue) || !several)
        .filter(|s| *s != Side::Franz || !args.no_franz)
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
    for cluster in &clusters {
        peers::prefill(
            cluster,
            TOPIC,
            args.load.partitions,
            args.records,
            args.load.value_size,
        )
        .expect("pre-fill");
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

/// Prints the markdown table of medians and the ratios to kcat's bare values (with
/// several clusters, franz-go's), then issue 32's targets against franz-go.
fn print_table(args: &OutputArgs, sides: &[Side], runs: &[Vec<Run>], mck: &Path) {
    let n = (args.records * usize::from(args.clusters)) as f64;
    let med = |i: usize, f: fn(&Run) -> f64| median(runs[i].iter().map(f).collect());
    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "CLI output paths, {date}, {cores} cores, load average at the end {load}; \
         {} records of {} B (8 B keys) in {} partitions on each of {} cluster(s), one broker \
         each; whole processes, spawn to exit, output to /dev/null; {} rounds after {} \
         warm-up, medians; mck: {}{}",
        args.records,
        args.load.value_size,
        args.load.partitions,
        args.clusters,
        runs[0].len(),
        args.warmup.max(1),
        mck.display(),
        args.budget_kb
            .map(|kb| format!(", mck with queued.max.messages.kbytes={kb}"))
            .unwrap_or_default(),
    );
    println!();
    let idx = |s: Side| sides.iter().position(|x| *x == s);
    let base = idx(Side::KcatValue).or(idx(Side::Franz)).unwrap_or(0);
    // Speed relative to the base: its time over the side's time, per round.
    let ratios = |i: usize| -> Vec<f64> {
        runs[i]
            .iter()
            .zip(&runs[base])
            .map(|(x, k)| k.secs / x.secs)
            .collect()
    };
    println!(
        "| side | wall s (median) | wall s (best) | records/s | client CPU s | CPU ns/record | broker CPU s | peak RSS MiB | speed vs {} | single rounds |",
        sides[base].name()
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (i, side) in sides.iter().enumerate() {
        let secs = med(i, |r| r.secs);
        let best = runs[i].iter().map(|r| r.secs).fold(f64::INFINITY, f64::min);
        let r = ratios(i);
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cpu = med(i, |r| r.cpu);
        println!(
            "| {} | {secs:.2} | {best:.2} | {:.0} | {cpu:.2} | {:.0} | {:.2} | {:.0} | **{:.2}×** | {lo:.2}–{hi:.2} |",
            side.name(),
            n / secs,
            cpu * 1e9 / n,
            med(i, |r| r.broker_cpu),
            med(i, |r| r.rss_mib),
            median(r.clone()),
        );
    }
    if let (Some(mj), Some(kj)) = (idx(Side::MckJson), idx(Side::KcatJson)) {
        println!();
        println!(
            "mck JSON / kcat JSON (records/s): **{:.2}×**",
            med(kj, |r| r.secs) / med(mj, |r| r.secs)
        );
    }
    let Some(f) = idx(Side::Franz) else {
        return;
    };
    // Issue 32: ≥ 1.5× franz-go's records/s at ≤ 0.5× its CPU per record at 100 B;
    // ≥ 1.2× at 1 KiB; not below at 10 KiB (no CPU target there).
    let speed_target = match args.load.value_size {
        0..=512 => 1.5,
        513..=4096 => 1.2,
        _ => 1.0,
    };
    let cpu_target = (args.load.value_size <= 512).then_some(0.5);
    println!();
    println!(
        "| against franz-go, same run ({} B, {} cluster(s)) | records/s | target | CPU per record | target | met? |",
        args.load.value_size, args.clusters
    );
    println!("|---|---|---|---|---|---|");
    let mut points = Vec::new();
    for side in [
        Side::LibNative,
        Side::MckValueNative,
        Side::MckJsonNative,
        Side::LibLibrdkafka,
        Side::MckValue,
        Side::MckJson,
    ] {
        let Some(i) = idx(side) else { continue };
        let speed = med(f, |r| r.secs) / med(i, |r| r.secs);
        let cpu = med(i, |r| r.cpu) / med(f, |r| r.cpu);
        points.push(Series::new(side.name(), vec![(cpu, speed)]));
        let native = matches!(
            side,
            Side::LibNative | Side::MckValueNative | Side::MckJsonNative
        );
        let met = speed >= speed_target && cpu_target.is_none_or(|t| cpu <= t);
        println!(
            "| {} | {speed:.2}× | {} | {cpu:.2}× | {} | {} |",
            side.name(),
            if native {
                format!("≥ {speed_target}×")
            } else {
                "-".into()
            },
            match (native, cpu_target) {
                (true, Some(t)) => format!("≤ {t}×"),
                _ => "-".into(),
            },
            if !native {
                "-"
            } else if met {
                "yes"
            } else {
                "no"
            },
        );
    }
    if let Some(path) = &args.plot {
        plot_targets(path, args, points, speed_target, cpu_target);
    }
}

/// Draws each side as a point (CPU per record, records/s, both over franz-go's) with
/// the targets as lines: a native side meets them above the one and left of the other.
fn plot_targets(
    path: &Path,
    args: &OutputArgs,
    mut points: Vec<Series>,
    speed_target: f64,
    cpu_target: Option<f64>,
) {
    let widest = points
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    points.push(Series::new(
        format!("target: records/s ≥ {speed_target}× franz-go"),
        vec![(0.0, speed_target), (widest, speed_target)],
    ));
    if let Some(t) = cpu_target {
        let fastest = points
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        points.push(Series::new(
            format!("target: CPU per record ≤ {t}× franz-go"),
            vec![(t, 0.0), (t, fastest)],
        ));
    }
    let title = format!(
        "Against franz-go, same run: {} B, {} cluster(s)",
        args.load.value_size, args.clusters
    );
    let chart = Chart {
        title: &title,
        x_label: "CPU per record ÷ franz-go's",
        y_label: "records/s ÷ franz-go's",
        x: Axis::Linear,
        y: Axis::Linear,
        // The native sides sit upper left, the librdkafka ones lower right.
        legend: Legend::UpperRight,
    };
    plot::write(path, &chart, &points);
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
