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
//! - **Start:** one instance reads every partition of a topic fed at every partition
//!   (every 10 ms each); a second instance starts, then, once the two are settled, a
//!   third. For each newcomer, the time from its spawn to its first record and to
//!   balance (it printed records of its share, the partitions divided by the
//!   instances, rounded down), per protocol, and how many revocations waited out the
//!   acknowledgement timeout (the instances' warning). Round r of R starts each
//!   newcomer (r + ½)/R of a heartbeat interval after the first instance's first
//!   heartbeat, so the rounds spread it over the others' heartbeat phases. The
//!   brokers' heartbeat interval
//!   is Kafka's default (5 s, `group.consumer.heartbeat.interval.ms`); the classic
//!   members heartbeat every 3 s (librdkafka's `heartbeat.interval.ms`).

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
const STARTS: &str = "bench-group-start";

/// The warning of a revocation that waited out the program's acknowledgement.
const ACK_TIMEOUT: &str = "before the program acknowledged every record";

/// A part of `mck-bench group`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Handover after SIGTERM and SIGKILL.
    Handover,
    /// A second and a third instance joining one that reads.
    Start,
    /// 1–3 instances reading a pre-filled topic.
    Throughput,
}

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
    /// The group's heartbeat interval in ms, for every part: the brokers'
    /// `group.consumer.heartbeat.interval.ms` (and its minimum) and the classic
    /// members' `heartbeat.interval.ms` (default: Kafka's and librdkafka's, 5 s and
    /// 3 s).
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Only this part (default: every part).
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// Group start: start every newcomer this many ms into the running members'
    /// heartbeat period (default: the rounds spread over the period). Small values
    /// find how soon after a member's heartbeat a newcomer still gets its share in
    /// one interval.
    #[arg(long)]
    phase_ms: Option<u64>,
    /// Group start: the protocols to run (default: both).
    #[arg(long, value_enum)]
    protocol: Option<Protocol>,
}

/// A group protocol, for `--protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// KIP-848's consumer protocol.
    Consumer,
    /// The classic protocol, cooperative-sticky.
    Classic,
}

impl GroupArgs {
    fn runs(&self, part: Part) -> bool {
        self.only.is_none_or(|p| p == part)
    }
}

/// A running instance whose stdout lines are watched.
struct Instance {
    child: Child,
    /// When it was spawned.
    began: Instant,
    /// Its warnings that a revocation waited out the acknowledgement timeout.
    ack_timeouts: Arc<AtomicU64>,
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
    heartbeat_ms: Option<u64>,
) -> Instance {
    let mut cmd = Command::new(mck);
    cmd.args(["consume", "-b", bootstrap, "-t", topic, "--group", group])
        .args(["--scale-out", "group", "--checkpoint-interval", "1s"])
        .args(["--format", if json { "json" } else { "value" }])
        .args(["-X", "session.timeout.ms=10000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if classic {
        cmd.args(["-X", "group.protocol=classic"]);
        if let Some(ms) = heartbeat_ms {
            cmd.args(["-X", &format!("heartbeat.interval.ms={ms}")]);
        }
    }
    let began = Instant::now();
    let mut child = cmd.spawn().expect("mck starts");
    let out = child.stdout.take().expect("piped stdout");
    let err = child.stderr.take().expect("piped stderr");
    let ack_timeouts = Arc::new(AtomicU64::new(0));
    let timeouts = ack_timeouts.clone();
    let pid = child.id();
    // `MCK_BENCH_ECHO` set: the instances' stderr (with `MCK_LOG=info`, their
    // assignments) is echoed, each line after the instance's pid.
    let echo = std::env::var_os("MCK_BENCH_ECHO").is_some();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { return };
            if echo {
                eprintln!("[mck {pid}] {line}");
            }
            if line.contains(ACK_TIMEOUT) {
                timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
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
    Instance {
        child,
        began,
        ack_timeouts,
        seen,
        lines,
    }
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
    let a = start(mck, bootstrap, LIVE, group, classic, true, None);
    std::thread::sleep(Duration::from_millis(500));
    let b = start(mck, bootstrap, LIVE, group, classic, true, None);
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
        .map(|_| start(mck, bootstrap, FILLED, group, false, false, None))
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
    let each: Vec<u64> = instances
        .iter()
        .map(|i| i.lines.load(Ordering::Relaxed))
        .collect();
    eprintln!("  {n} instance(s): {secs:.2} s, records printed by each {each:?}");
    for i in instances {
        stop(i);
    }
    secs
}

/// Writes a record to every partition of `topic` every 10 ms until `stop`.
fn feed_every_partition(
    bootstrap: &str,
    topic: &'static str,
    partitions: i32,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "2")
            .create()
            .expect("the feed's producer");
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for p in 0..partitions {
                let value = format!("s-{n}");
                let _ = producer.send(
                    BaseRecord::<(), str>::to(topic)
                        .partition(p)
                        .payload(value.as_str()),
                );
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = producer.flush(Duration::from_secs(10));
    })
}

/// Waits up to `within` for `done`; panics with `what` after.
fn wait_for<T>(within: Duration, what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + within;
    loop {
        if let Some(t) = done() {
            return t;
        }
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether the instances' partitions over the last 2 s are disjoint, cover `all` and
/// are each their share (the count divided by the instances, rounded down or up).
fn settled(instances: &[Instance], all: &BTreeSet<i64>) -> Option<Vec<BTreeSet<i64>>> {
    let since = Instant::now() - Duration::from_secs(2);
    let sets: Vec<BTreeSet<i64>> = instances
        .iter()
        .map(|i| partitions_since(i, since))
        .collect();
    let n = instances.len();
    let (lo, hi) = (all.len() / n, all.len().div_ceil(n));
    let union: BTreeSet<i64> = sets.iter().flatten().copied().collect();
    let sizes: usize = sets.iter().map(BTreeSet::len).sum();
    let fair = sets.iter().all(|s| (lo..=hi).contains(&s.len()));
    (fair && sizes == all.len() && union == *all).then_some(sets)
}

/// One group start: a first instance reads every partition, then a second joins and,
/// once the two are settled, a third. For the second and the third: ms from its spawn
/// to its first record and to balance (records of its share of the partitions
/// printed), and the revocations its join brought that waited out the
/// acknowledgement timeout. Each starts `phase` into a heartbeat `period` counted
/// from the first instance's first record (about its first heartbeat's answer): how
/// long a newcomer waits depends on where it joins between the others' heartbeats,
/// so the rounds spread it over the period.
#[allow(clippy::too_many_arguments)]
fn group_start(
    mck: &Path,
    bootstrap: &str,
    group: &str,
    classic: bool,
    partitions: i32,
    heartbeat_ms: Option<u64>,
    period: Duration,
    phase: Duration,
) -> Vec<(f64, f64, u64)> {
    let all: BTreeSet<i64> = (0..i64::from(partitions)).collect();
    let first = start(mck, bootstrap, STARTS, group, classic, true, heartbeat_ms);
    wait_for(
        Duration::from_secs(120),
        "the first instance never read every partition",
        || (partitions_since(&first, first.began) == all).then_some(()),
    );
    let beat = first.seen.lock().unwrap()[0].0;
    let mut instances = vec![first];
    let mut times = Vec::new();
    let mut timeouts_before = 0;
    for n in 2..=3 {
        let share = all.len() / n;
        let mut at = beat + phase;
        while at < Instant::now() {
            at += period;
        }
        std::thread::sleep(at - Instant::now());
        let new = start(mck, bootstrap, STARTS, group, classic, true, heartbeat_ms);
        let t0 = new.began;
        let (first_record, balanced) = wait_for(
            Duration::from_secs(120),
            "a new instance never read its share",
            || {
                let seen = new.seen.lock().unwrap();
                let mut held = BTreeSet::new();
                for (t, p) in seen.iter() {
                    held.insert(*p);
                    if held.len() >= share {
                        return Some((seen[0].0, *t));
                    }
                }
                None
            },
        );
        instances.push(new);
        let sets = wait_for(
            Duration::from_secs(60),
            "the instances never settled on their shares",
            || settled(&instances, &all),
        );
        let timeouts: u64 = instances
            .iter()
            .map(|i| i.ack_timeouts.load(Ordering::Relaxed))
            .sum();
        let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
        eprintln!(
            "  instance {n}: first record {:.0} ms, its share {:.0} ms, acknowledgement timeouts {}; settled on {sets:?}",
            ms(first_record),
            ms(balanced),
            timeouts - timeouts_before
        );
        times.push((ms(first_record), ms(balanced), timeouts - timeouts_before));
        timeouts_before = timeouts;
    }
    for i in instances {
        stop(i);
    }
    times
}

/// The `group` command.
pub fn group(args: &GroupArgs) {
    let mck = mck_binary(args.mck.as_deref());
    let mut options = ClusterOptions::new("bench-group")
        .jvm_options([
            "-Xms1g",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
        ])
        .broker_config("group.consumer.min.session.timeout.ms", "10000")
        .broker_config("group.consumer.session.timeout.ms", "10000");
    if let Some(ms) = args.heartbeat_ms {
        options = options
            .broker_config("group.consumer.min.heartbeat.interval.ms", ms.to_string())
            .broker_config("group.consumer.heartbeat.interval.ms", ms.to_string());
    }
    let cluster: &'static KafkaCluster = Box::leak(Box::new(
        KafkaCluster::start(options).expect("the cluster starts"),
    ));
    let bootstrap = cluster.bootstrap_servers();
    let rounds = args.rounds.max(1);
    const PROTOCOLS: [(&str, bool); 2] = [
        ("consumer (KIP-848)", false),
        ("classic, cooperative-sticky", true),
    ];
    let date = super::utc_minute();

    let mut rows = Vec::new();
    if args.runs(Part::Handover) {
        cluster.create_topic(LIVE, args.partitions).unwrap();
        let stop_feed = Arc::new(AtomicBool::new(false));
        let feed = mck_testkit::produce_until_stopped(cluster, LIVE, "g", true, stop_feed.clone());
        for (proto, classic) in PROTOCOLS {
            for (what, sig) in [("SIGTERM", libc::SIGTERM), ("SIGKILL", libc::SIGKILL)] {
                let (ms, exits): (Vec<f64>, Vec<f64>) = (0..rounds)
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
    }

    let mut starts = Vec::new();
    if args.runs(Part::Start) {
        cluster.create_topic(STARTS, args.partitions).unwrap();
        let stop_feed = Arc::new(AtomicBool::new(false));
        let feed = feed_every_partition(&bootstrap, STARTS, args.partitions, stop_feed.clone());
        for (proto, classic) in PROTOCOLS {
            if args
                .protocol
                .is_some_and(|p| (p == Protocol::Classic) != classic)
            {
                continue;
            }
            let mut per_n: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
            let mut timeouts = [0u64; 2];
            let period = Duration::from_millis(args.heartbeat_ms.unwrap_or(if classic {
                3000
            } else {
                5000
            }));
            for r in 0..rounds {
                eprintln!("{proto}, group start, round {}:", r + 1);
                let group = format!("bench-group-start-{}-{r}", if classic { "c" } else { "k" });
                let times = group_start(
                    &mck,
                    &bootstrap,
                    &group,
                    classic,
                    args.partitions,
                    args.heartbeat_ms,
                    period,
                    args.phase_ms.map_or_else(
                        || period.mul_f64((r as f64 + 0.5) / rounds as f64),
                        Duration::from_millis,
                    ),
                );
                for (k, (first, share, t)) in times.into_iter().enumerate() {
                    per_n[k].push((first, share));
                    timeouts[k] += t;
                }
            }
            for (k, times) in per_n.into_iter().enumerate() {
                let (first, share): (Vec<f64>, Vec<f64>) = times.into_iter().unzip();
                let lo = share.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = share.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                starts.push(format!(
                    "| {proto} | {} | {:.0} | {:.0} | {lo:.0}–{hi:.0} | {} |",
                    ["2nd", "3rd"][k],
                    median(first),
                    median(share),
                    timeouts[k],
                ));
            }
        }
        stop_feed.store(true, Ordering::Relaxed);
        let _ = feed.join();
    }

    let total = args.records as u64;
    let mut tput = Vec::new();
    if args.runs(Part::Throughput) {
        peers::prefill(cluster, FILLED, args.partitions, args.records, 100).expect("pre-fill");
        for n in 1..=3 {
            let secs: Vec<f64> = (0..rounds)
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
    }
    let load = super::load_average();
    println!(
        "Group mode, {date}, load average at the end {load}; one broker, {} partitions, session timeout 10 s, heartbeats {}; {rounds} rounds, medians; mck: {}",
        args.partitions,
        args.heartbeat_ms.map_or(
            "Kafka's default (5 s KIP-848, 3 s classic)".to_string(),
            |ms| format!("every {ms} ms")
        ),
        mck.display()
    );
    if !rows.is_empty() {
        println!();
        println!(
            "| protocol | the leaving instance gets | handover ms (median) | range | its exit ms (median) |"
        );
        println!("|---|---|---|---|---|");
        for r in rows {
            println!("{r}");
        }
    }
    if !starts.is_empty() {
        println!();
        println!(
            "| protocol | instance started | first record ms (median) | its share ms (median) | range | acknowledgement timeouts |"
        );
        println!("|---|---|---|---|---|---|");
        for r in starts {
            println!("{r}");
        }
    }
    if let Some(&(_, base)) = tput.first() {
        println!();
        println!(
            "| instances | s to read {} records of 100 B | records/s | vs 1 instance |",
            args.records
        );
        println!("|---|---|---|---|");
        for (n, s) in tput {
            println!(
                "| {n} | {s:.2} | {:.0} | {:.2}× |",
                total as f64 / s,
                base / s
            );
        }
    }
}
