//! `mck-bench tls`: read throughput over TLS, `mck consume` beside kcat, in one run.
//!
//! One secured broker from the test kit, one topic pre-filled over `PLAINTEXT`, then
//! in alternating rounds four whole processes read it to the end, each timed from
//! spawn to exit:
//!
//! - `mck consume` (the release `mck` binary) over `PLAINTEXT`, given a metadata file
//!   with one cluster and one stream (`--mck-quick`: `-b … -t …` instead),
//! - the same over the test kit's mTLS listener (`SSL` with a client certificate),
//! - `kcat -C` over the same mTLS listener with the same librdkafka properties,
//! - `kcat -C` over `PLAINTEXT`, for reference.
//!
//! Each prints one line per record (the value), which this process counts; every
//! process must read exactly the records produced. CPU time is the child's own
//! (`wait4`), the broker's is read from `/proc` around each process.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, Listener, TestCluster};

use super::{check_kcat, mck_binary, median};
use crate::cpu::{broker_pids, pids_cpu};

/// The topic every side reads.
const TOPIC: &str = "bench-tls";

/// The secured listener measured: `SSL` with client certificates (mTLS), TLS without
/// SASL, so the difference to `PLAINTEXT` is the encryption alone.
const LISTENER: Listener = Listener::Mtls;

/// Options of `mck-bench tls`.
#[derive(clap::Args, Clone, Debug)]
pub struct TlsArgs {
    /// Records pre-filled in each cluster's topic.
    #[arg(long, default_value_t = 2_000_000)]
    records: usize,
    #[command(flatten)]
    pub load: super::load::Load,
    /// Rounds run first and not counted (they warm the broker's JIT on both the
    /// plaintext and the TLS path).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// The `mck` binary (default: `mck` next to this binary; build it with
    /// `cargo build --release -p mck`).
    #[arg(long)]
    mck: Option<PathBuf>,
    /// The kcat binary.
    #[arg(long, default_value = "kcat")]
    kcat: PathBuf,
    /// Run mck in quick mode (`mck consume -b … -t … -X …`) rather than with a
    /// metadata file holding the same properties. Quick mode's metadata client does
    /// not take the `-X` properties yet, so over TLS it cannot connect.
    #[arg(long)]
    mck_quick: bool,
    /// An extra librdkafka property (`KEY=VALUE`, repeat) for both mck sides, as
    /// `-X`: for looking into a difference, e.g. `fetch.queue.backoff.ms=1000`.
    #[arg(long, value_name = "KEY=VALUE")]
    mck_property: Vec<String>,
    /// An extra librdkafka property (`KEY=VALUE`, repeat) for both kcat sides.
    #[arg(long, value_name = "KEY=VALUE")]
    kcat_property: Vec<String>,
}

/// How `mck` is pointed at the broker.
enum MckTarget {
    /// `-b … -t …` (quick mode).
    Quick,
    /// `--metadata <file> --stream s`: one file per listener.
    Files { plain: PathBuf, tls: PathBuf },
}

/// Writes a metadata file: one cluster `kafka` with `props` (`bootstrap.servers`
/// included) and one stream `s` reading [`TOPIC`] from it.
fn metadata_file(path: &Path, props: &[(String, String)]) -> PathBuf {
    let mut yaml = String::from("clusters:\n  kafka:\n    properties:\n");
    for (k, v) in props {
        yaml.push_str(&format!("      {k}: \"{v}\"\n"));
    }
    yaml.push_str(&format!(
        "streams:\n  s:\n    clusters:\n      kafka: {{ topics: [{TOPIC}] }}\n"
    ));
    std::fs::write(path, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path.to_path_buf()
}

/// One measured side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    MckPlain,
    MckTls,
    KcatTls,
    KcatPlain,
}

impl Side {
    const ALL: [Side; 4] = [Side::MckPlain, Side::MckTls, Side::KcatTls, Side::KcatPlain];

    fn name(self) -> &'static str {
        match self {
            Side::MckPlain => "mck consume, PLAINTEXT",
            Side::MckTls => "mck consume, SSL (mTLS)",
            Side::KcatTls => "kcat -C, SSL (mTLS)",
            Side::KcatPlain => "kcat -C, PLAINTEXT",
        }
    }

    fn tls(self) -> bool {
        matches!(self, Side::MckTls | Side::KcatTls)
    }
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
    /// Lines (records) the child printed.
    lines: u64,
}

/// The command line of `side`. `props` are the librdkafka properties of the TLS
/// listener (without `bootstrap.servers`).
#[expect(clippy::too_many_arguments, reason = "one call site, all plain data")]
fn command(
    side: Side,
    mck: &Path,
    target: &MckTarget,
    kcat: &Path,
    plain: &str,
    tls: &str,
    props: &[(String, String)],
    extra: &[String],
) -> Command {
    let (bootstrap, mut props): (&str, &[(String, String)]) = if side.tls() {
        (tls, props)
    } else {
        (plain, &[])
    };
    let mut cmd = match side {
        Side::MckPlain | Side::MckTls => {
            let mut c = Command::new(mck);
            c.arg("consume");
            match target {
                MckTarget::Quick => {
                    c.args(["-b", bootstrap, "-t", TOPIC]);
                }
                MckTarget::Files { plain, tls } => {
                    let file = if side.tls() { tls } else { plain };
                    c.arg("--metadata").arg(file).args(["--stream", "s"]);
                    // The file holds the properties.
                    props = &[];
                }
            }
            c.args(["-e", "--format", "value"]);
            c
        }
        Side::KcatTls | Side::KcatPlain => {
            let mut c = Command::new(kcat);
            c.args(["-C", "-b", bootstrap, "-t", TOPIC, "-e", "-q"])
                .args(["-o", "beginning", "-f", "%s\\n"]);
            c
        }
    };
    for (k, v) in props {
        cmd.arg("-X").arg(format!("{k}={v}"));
    }
    for p in extra {
        cmd.arg("-X").arg(p);
    }
    cmd
}

/// Runs one side to its exit, counting the lines it prints.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
fn run(side: Side, mut cmd: Command, broker: &[u32]) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let broker_before = pids_cpu(broker);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{} cannot start: {e}", side.name()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let counter = std::thread::spawn(move || {
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
    });
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    let broker_cpu = pids_cpu(broker) - broker_before;
    assert_eq!(r, pid, "wait4 on {}", side.name());
    let lines = counter.join().expect("the line counter");
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
    }
}

/// The `tls` command.
pub fn tls(args: &TlsArgs) {
    check_kcat(&args.kcat);
    let mck = mck_binary(args.mck.as_deref());
    eprintln!("mck: {}", mck.display());

    let t = Instant::now();
    let cluster = KafkaCluster::start(ClusterOptions::new("bench-tls").secured().jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .expect("the secured cluster starts");
    let plain = cluster.bootstrap_servers();
    let tls_props = cluster.listener_properties(LISTENER);
    let tls = tls_props
        .iter()
        .find(|(k, _)| k == "bootstrap.servers")
        .map(|(_, v)| v.clone())
        .expect("bootstrap.servers comes first");
    let props: Vec<(String, String)> = tls_props
        .into_iter()
        .filter(|(k, _)| k != "bootstrap.servers")
        .collect();
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
    let dir = std::env::temp_dir().join(format!("mck-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let target = if args.mck_quick {
        MckTarget::Quick
    } else {
        let mut tls_file = vec![("bootstrap.servers".to_string(), tls.clone())];
        tls_file.extend(props.iter().cloned());
        MckTarget::Files {
            plain: metadata_file(
                &dir.join("plain.yaml"),
                &[("bootstrap.servers".into(), plain.clone())],
            ),
            tls: metadata_file(&dir.join("tls.yaml"), &tls_file),
        }
    };

    let expected = args.records as u64;
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); Side::ALL.len()];
    let warmup = args.warmup;
    for round in 0..warmup + args.load.rounds.max(1) {
        // The order turns by one every round and is reversed every other round, so no
        // side always runs first or after the same one.
        let mut order: Vec<usize> = (0..Side::ALL.len()).collect();
        order.rotate_left(round % Side::ALL.len());
        if round % 2 == 1 {
            order.reverse();
        }
        let mut line = if round < warmup {
            format!("warm-up {}:", round + 1)
        } else {
            format!("round {}:", round + 1 - warmup)
        };
        for i in order {
            let side = Side::ALL[i];
            let extra = match side {
                Side::MckPlain | Side::MckTls => &args.mck_property,
                Side::KcatTls | Side::KcatPlain => &args.kcat_property,
            };
            let cmd = command(side, &mck, &target, &args.kcat, &plain, &tls, &props, extra);
            let r = run(side, cmd, &broker);
            assert_eq!(
                r.lines,
                expected,
                "{} read {} records, {expected} were produced",
                side.name(),
                r.lines
            );
            line += &format!(
                " {} {:.0} rec/s (cpu {:.2} s, broker {:.2} s);",
                side.name(),
                expected as f64 / r.secs,
                r.cpu,
                r.broker_cpu
            );
            if round >= warmup {
                runs[i].push(r);
            }
        }
        eprintln!("{line}");
    }

    let _ = std::fs::remove_dir_all(&dir);
    print_table(args, &runs, &mck, &props);
}

/// Prints the markdown table of medians and the ratios.
fn print_table(args: &TlsArgs, runs: &[Vec<Run>], mck: &Path, props: &[(String, String)]) {
    let n = args.records as f64;
    let bytes = (args.load.value_size + 8) as f64 * n;
    let med = |i: usize, f: fn(&Run) -> f64| median(runs[i].iter().map(f).collect());
    let rate = |i: usize| median(runs[i].iter().map(|r| n / r.secs).collect());
    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "TLS read throughput, {date}, {cores} cores, load average at the end {load}; \
         {} records of {} B (8 B keys) in {} partitions, {} rounds after {} warm-up, medians; mck: {} ({})",
        args.records,
        args.load.value_size,
        args.load.partitions,
        runs[0].len(),
        args.warmup,
        mck.display(),
        if args.mck_quick {
            "-b/-t/-X"
        } else {
            "metadata file"
        }
    );
    println!(
        "TLS properties (both clients): {}",
        props
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (who, extra) in [("mck", &args.mck_property), ("kcat", &args.kcat_property)] {
        if !extra.is_empty() {
            println!("Extra {who} properties: {}", extra.join(", "));
        }
    }
    println!();
    println!(
        "| side | records/s | MB/s (key + value) | wall s | client CPU s | CPU ns/rec | broker CPU s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, side) in Side::ALL.iter().enumerate() {
        let secs = med(i, |r| r.secs);
        println!(
            "| {} | {:.0} | {:.1} | {:.2} | {:.2} | {:.0} | {:.2} |",
            side.name(),
            rate(i),
            bytes / secs / 1e6,
            secs,
            med(i, |r| r.cpu),
            med(i, |r| r.cpu) / n * 1e9,
            med(i, |r| r.broker_cpu),
        );
    }
    let idx = |s: Side| Side::ALL.iter().position(|x| *x == s).expect("a side");
    let ratio = |a: Side, b: Side| rate(idx(a)) / rate(idx(b));
    let round_ratios = |a: Side, b: Side| {
        let r: Vec<f64> = runs[idx(a)]
            .iter()
            .zip(&runs[idx(b)])
            .map(|(x, y)| y.secs / x.secs)
            .collect();
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.2}–{hi:.2}")
    };
    println!();
    println!("| ratio (records/s) | median | single rounds |");
    println!("|---|---|---|");
    for (label, a, b) in [
        (
            "mck TLS / kcat TLS (target ≥ 1.0)",
            Side::MckTls,
            Side::KcatTls,
        ),
        ("mck TLS / mck plaintext", Side::MckTls, Side::MckPlain),
        ("kcat TLS / kcat plaintext", Side::KcatTls, Side::KcatPlain),
        (
            "mck plaintext / kcat plaintext",
            Side::MckPlain,
            Side::KcatPlain,
        ),
    ] {
        println!(
            "| {label} | **{:.2}** | {} |",
            ratio(a, b),
            round_ratios(a, b)
        );
    }
}
