//! `mck-bench group`: group mode (`mck consume --scale-out group`) on one broker of
//! the test kit, with whole `mck` processes.
//!
//! - **Handover:** two instances read a topic of 12 partitions while a producer writes
//!   to every partition; one is stopped with SIGTERM or killed with SIGKILL, and the
//!   time from the signal until the other prints a record of a partition the first
//!   held is measured, for Kafka's consumer group protocol (KIP-848) and the classic
//!   one (cooperative-sticky). The session timeout is 10 s on both (brokers'
//!   `group.consumer.session.timeout.ms`, clients' `session.timeout.ms`), so a kill
//!   costs about that; the default is 45 s.
//! - **Throughput:** a pre-filled topic read by 1, 2 and 3 instances at once (a fresh
//!   group each run, `--format value`), timed from the first spawn until their
//!   outputs together hold every record. On a 2-core machine more processes cannot
//!   read faster: the figure shows the cost of sharing, not scaling.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::{mck_binary, median};

const LIVE: &str = "bench-group-live";
const FILLED: &str = "bench-group-filled";

/// Options of `mck-bench group`.
#[derive(clap::Args, Clone, Debug)]
pub struct GroupArgs {
    /// Handover rounds per protocol and signal.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Records pre-filled for the throughput runs.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
    /// Partitions of both topics.
    #[arg(long, default_value_t = 12)]
    partitions: i32,
    /// The `mck` binary (default: `mck` next to this binary).
    #[arg(long)]
    mck: Option<PathBuf>,
}

/// A running instance whose stdout lines are watched.
struct Instance {
    child: Child,
    /// (when, partition) of every JSON line (JSON format only).
    seen: Arc<Mutex<Vec<(Instant, i64)>>>,
    lines: Arc<AtomicU64>,
}

fn start(
    mck: &Path,
    bootstrap: &str,
    topic: &str,
    group: &str,
    classic: bool,
    json: bool,
) -> Instance {
    let mut cmd = Command::new(mck);
    cmd.args(["consume", "-b", bootstrap, "-t", topic, "--group", group])
        .args(["--scale-out", "group", "--checkpoint-interval", "1s"])
        .args(["--format", if json { "json" } else { "value" }])
        .args(["-X", "session.timeout.ms=10000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if classic {
        cmd.args(["-X", "group.protocol=classic"]);
    }
    let mut child = cmd.spawn().expect("mck starts");
    let out = child.stdout.take().expect("piped stdout");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::new(AtomicU64::new(0));
    let (s, l) = (seen.clone(), lines.clone());
    std::thread::spawn(move || {
        if json {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                l.fetch_add(1, Ordering::Relaxed);
                if let Some(p) = line
                    .split("\"partition\":")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                    .and_then(|p| p.trim().parse().ok())
                {
                    s.lock().unwrap().push((Instant::now(), p));
                }
            }
        } else {
            let mut out = out;
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    return;
                }
                l.fetch_add(
                    buf[..n].iter().filter(|b| **b == b'\n').count() as u64,
                    Ordering::Relaxed,
                );
            }
        }
    });
    Instance { child, seen, lines }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn stop(mut i: Instance) {
    signal(&i.child, libc::SIGINT);
    let _ = i.child.wait();
}

/// Partitions `i` printed records of since `since`.
fn partitions_since(i: &Instance, since: Instant) -> BTreeSet<i64> {
    i.seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t >= since)
        .map(|(_, p)| *p)
        .collect()
}

/// One handover: ms from `sig` to `a` until `b` prints a record of a partition `a`
/// held, and until `a` exited.
fn handover(mck: &Path, bootstrap: &str, group: &str, classic: bool, sig: i32) -> (f64, f64) {
    let a = start(mck, bootstrap, LIVE, group, classic, true);
    std::thread::sleep(Duration::from_millis(500));
    let b = start(mck, bootstrap, LIVE, group, classic, true);
    // Both read, and the assignment has settled for 3 s.
    let until = Instant::now() + Duration::from_secs(120);
    let settled = loop {
        assert!(Instant::now() < until, "the two instances never settled");
        std::thread::sleep(Duration::from_millis(500));
        let since = Instant::now() - Duration::from_secs(3);
        let (pa, pb) = (partitions_since(&a, since), partitions_since(&b, since));
        if !pa.is_empty() && !pb.is_empty() && pa.is_disjoint(&pb) {
            let t = Instant::now() - Duration::from_secs(2);
            if partitions_since(&a, t) == pa && partitions_since(&b, t) == pb {
                break pa;
            }
        }
    };
    let t0 = Instant::now();
    signal(&a.child, sig);
    let mut a = a;
    let exit = std::thread::spawn(move || {
        let _ = a.child.wait();
        t0.elapsed()
    });
    let until = t0 + Duration::from_secs(120);
    let took = loop {
        let hit = b
            .seen
            .lock()
            .unwrap()
            .iter()
            .find(|(t, p)| *t >= t0 && settled.contains(p))
            .map(|(t, _)| *t);
        if let Some(t) = hit {
            break t.duration_since(t0);
        }
        assert!(Instant::now() < until, "the other instance never took over");
        std::thread::sleep(Duration::from_millis(5));
    };
    let exited = exit.join().expect("the exit watcher");
    stop(b);
    (took.as_secs_f64() * 1000.0, exited.as_secs_f64() * 1000.0)
}

/// Seconds until `n` instances together printed `total` records.
fn throughput(mck: &Path, bootstrap: &str, group: &str, n: usize, total: u64) -> f64 {
    let began = Instant::now();
    let instances: Vec<Instance> = (0..n)
        .map(|_| start(mck, bootstrap, FILLED, group, false, false))
        .collect();
    let until = began + Duration::from_secs(600);
    while instances
        .iter()
        .map(|i| i.lines.load(Ordering::Relaxed))
        .sum::<u64>()
        < total
    {
        assert!(
            Instant::now() < until,
            "{n} instance(s) never read everything"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let secs = began.elapsed().as_secs_f64();
    for i in instances {
        stop(i);
    }
    secs
}

/// The `group` command.
pub fn group(args: &GroupArgs) {
    let mck = mck_binary(args.mck.as_deref());
    let cluster: &'static KafkaCluster = Box::leak(Box::new(
        KafkaCluster::start(
            ClusterOptions::new("bench-group")
                .jvm_options([
                    "-Xms1g",
                    "-Xmx1g",
                    "-XX:+UseG1GC",
                    "-Djava.awt.headless=true",
                ])
                .broker_config("group.consumer.min.session.timeout.ms", "10000")
                .broker_config("group.consumer.session.timeout.ms", "10000"),
        )
        .expect("the cluster starts"),
    ));
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(LIVE, args.partitions).unwrap();
    peers::prefill(cluster, FILLED, args.partitions, args.records, 100).expect("pre-fill");
    let stop_feed = Arc::new(AtomicBool::new(false));
    let feed = mck_testkit::produce_until_stopped(cluster, LIVE, "g", true, stop_feed.clone());

    let date = super::utc_minute();
    let mut rows = Vec::new();
    for (proto, classic) in [
        ("consumer (KIP-848)", false),
        ("classic, cooperative-sticky", true),
    ] {
        for (what, sig) in [("SIGTERM", libc::SIGTERM), ("SIGKILL", libc::SIGKILL)] {
            let (ms, exits): (Vec<f64>, Vec<f64>) = (0..args.rounds.max(1))
                .map(|r| {
                    let group =
                        format!("bench-group-{}-{what}-{r}", if classic { "c" } else { "k" });
                    let (ms, exit) = handover(&mck, &bootstrap, &group, classic, sig);
                    eprintln!(
                        "{proto}, {what}, round {}: {ms:.0} ms (exit after {exit:.0} ms)",
                        r + 1
                    );
                    (ms, exit)
                })
                .unzip();
            let lo = ms.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            rows.push(format!(
                "| {proto} | {what} | {:.0} | {lo:.0}–{hi:.0} | {:.0} |",
                median(ms),
                median(exits)
            ));
        }
    }
    stop_feed.store(true, Ordering::Relaxed);
    let _ = feed.join();

    let total = args.records as u64;
    let mut tput = Vec::new();
    for n in 1..=3 {
        let secs: Vec<f64> = (0..args.rounds.max(1))
            .map(|r| {
                throughput(
                    &mck,
                    &bootstrap,
                    &format!("bench-group-fill-{n}-{r}"),
                    n,
                    total,
                )
            })
            .collect();
        let s = median(secs);
        eprintln!("{n} instance(s): {s:.2} s");
        tput.push((n, s));
    }
    let load = super::load_average();
    println!(
        "Group mode, {date}, load average at the end {load}; one broker, {} partitions, session timeout 10 s; {} rounds, medians; mck: {}",
        args.partitions,
        args.rounds.max(1),
        mck.display()
    );
    println!();
    println!(
        "| protocol | the leaving instance gets | handover ms (median) | range | its exit ms (median) |"
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!();
    println!(
        "| instances | s to read {} records of 100 B | records/s | vs 1 instance |",
        args.records
    );
    println!("|---|---|---|---|");
    let base = tput[0].1;
    for (n, s) in tput {
        println!(
            "| {n} | {s:.2} | {:.0} | {:.2}× |",
            total as f64 / s,
            base / s
        );
    }
}
