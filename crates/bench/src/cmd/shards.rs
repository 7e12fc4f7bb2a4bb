//! `mck-bench shards`: one stream read by 1, 2 and 3 `mck consume --scale-out
//! shard:I/N` processes at once, on the same brokers.
//!
//! Two single-broker clusters from the test kit each hold the topic, pre-filled
//! (default 500 000 records of 100 B each, 12 partitions). For each N the N shard
//! processes (`-e --format value`, a group of their own per run, so every run starts
//! at the beginning) are spawned together and timed from the first spawn to the last
//! exit; their CPU comes from `wait4`. In the warm-up round their output is piped
//! into this process, which checks that the shards together printed every record
//! exactly once (by count: each shard's lines, summed); in the measured rounds it goes
//! to `/dev/null`. On a 2-core machine more processes cannot read faster: the figure
//! shows what sharding costs, not how it scales.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use mck_bench::peers;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::{mck_binary, median};
use crate::cpu::{broker_pids, pids_cpu};

/// The topic read.
const TOPIC: &str = "bench-shards";

/// Options of `mck-bench shards`.
#[derive(clap::Args, Clone, Debug)]
pub struct ShardsArgs {
    /// Records pre-filled on each of the two clusters.
    #[arg(long, default_value_t = 500_000)]
    records: usize,
    /// Value size in bytes (keys are 8 B).
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Partitions of the topic on each cluster.
    #[arg(long, default_value_t = 12)]
    partitions: i32,
    /// The numbers of shards to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    counts: Vec<u32>,
    /// Measured rounds (each runs every count once).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The `mck` binary (default: `mck` next to this binary; build it with
    /// `cargo build --release -p mck`).
    #[arg(long)]
    mck: Option<PathBuf>,
}

/// One run of N shards.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// First spawn to last exit, seconds.
    secs: f64,
    /// The shards' user + system CPU seconds, summed.
    cpu: f64,
    /// The brokers' CPU seconds meanwhile.
    broker_cpu: f64,
}

/// Starts shard `i` of `n`, output piped (`count`) or to `/dev/null`.
fn spawn(mck: &Path, md: &Path, group: &str, i: u32, n: u32, count: bool) -> Child {
    let mut cmd = Command::new(mck);
    cmd.arg("consume")
        .arg(md)
        .args(["--stream", TOPIC, "--group", group, "--scale-out"])
        .arg(format!("shard:{i}/{n}"))
        .args(["-e", "--format", "value"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(if count { Stdio::piped() } else { Stdio::null() });
    cmd.spawn()
        .unwrap_or_else(|e| panic!("mck cannot start: {e}"))
}

/// Counts the newlines of a child's stdout on a thread of its own.
fn count_lines(child: &mut Child) -> Option<std::thread::JoinHandle<u64>> {
    let mut stdout = child.stdout.take()?;
    Some(std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut lines = 0u64;
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => return lines,
                Ok(k) => lines += buf[..k].iter().filter(|b| **b == b'\n').count() as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("reading a shard's stdout: {e}"),
            }
        }
    }))
}

/// Runs N shards to their exits; with `count`, returns the lines each printed.
fn run(mck: &Path, md: &Path, group: &str, n: u32, count: bool, broker: &[u32]) -> (Run, Vec<u64>) {
    let broker_before = pids_cpu(broker);
    let start = Instant::now();
    let mut children: Vec<Child> = (0..n).map(|i| spawn(mck, md, group, i, n, count)).collect();
    let counters: Vec<_> = children.iter_mut().map(count_lines).collect();
    let errors: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let mut stderr = c.stderr.take().expect("piped stderr");
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = stderr.read_to_string(&mut s);
                s
            })
        })
        .collect();
    let mut cpu = 0.0;
    let mut failed = Vec::new();
    for (i, child) in children.iter().enumerate() {
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid, "wait4 on shard {i}/{n}");
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            failed.push((i, status));
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        cpu += tv(usage.ru_utime) + tv(usage.ru_stime);
    }
    let secs = start.elapsed().as_secs_f64();
    let broker_cpu = pids_cpu(broker) - broker_before;
    let errors: Vec<String> = errors
        .into_iter()
        .map(|e| e.join().expect("a stderr reader"))
        .collect();
    if let Some((i, status)) = failed.first() {
        panic!(
            "shard {i}/{n} failed (wait status {status}); its stderr:\n{}",
            errors[*i]
        );
    }
    let lines = counters
        .into_iter()
        .map(|c| c.map_or(0, |c| c.join().expect("a line counter")))
        .collect();
    (
        Run {
            secs,
            cpu,
            broker_cpu,
        },
        lines,
    )
}

fn start_cluster(id: &str) -> KafkaCluster {
    KafkaCluster::start(ClusterOptions::new(id).jvm_options([
        "-Xms512m",
        "-Xmx512m",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .unwrap_or_else(|e| panic!("cluster {id} does not start: {e}"))
}

/// The `shards` command.
pub fn shards(args: &ShardsArgs) {
    let mck = mck_binary(args.mck.as_deref());
    eprintln!("mck: {}", mck.display());
    let t = Instant::now();
    let clusters = [start_cluster("east"), start_cluster("west")];
    for c in &clusters {
        peers::prefill(c, TOPIC, args.partitions, args.records, args.value_size).expect("pre-fill");
    }
    eprintln!(
        "2 brokers started and {} records of {} B in {} partitions on each filled in {:.1} s",
        args.records,
        args.value_size,
        args.partitions,
        t.elapsed().as_secs_f64()
    );
    let broker: Vec<u32> = clusters.iter().flat_map(broker_pids).collect();
    let dir = std::env::temp_dir().join(format!("mck-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let md = dir.join("streams.yaml");
    let mut yaml = format!("- streamId: {TOPIC}\n  clusterMetadataList:\n");
    for c in &clusters {
        yaml += &format!(
            "    - clusterId: {}\n      bootstrapServers: {}\n      topics: [{TOPIC}]\n",
            c.logical_id(),
            c.bootstrap_servers()
        );
    }
    std::fs::write(&md, yaml).expect("write the metadata file");

    let total = (args.records * clusters.len()) as u64;
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); args.counts.len()];
    for round in 0..=args.rounds.max(1) {
        let warmup = round == 0;
        let mut order: Vec<usize> = (0..args.counts.len()).collect();
        order.rotate_left(round % args.counts.len());
        let mut line = if warmup {
            "warm-up:".to_string()
        } else {
            format!("round {round}:")
        };
        for i in order {
            let n = args.counts[i];
            let group = format!("bench-shards-{round}-{n}");
            let (r, lines) = run(&mck, &md, &group, n, warmup, &broker);
            if warmup {
                let sum: u64 = lines.iter().sum();
                assert_eq!(
                    sum, total,
                    "{n} shards printed {lines:?} lines, {total} records were produced"
                );
            } else {
                runs[i].push(r);
            }
            line += &format!(
                " {n} shard(s) {:.2} s (cpu {:.2} s, brokers {:.2} s);",
                r.secs, r.cpu, r.broker_cpu
            );
        }
        eprintln!("{line}");
    }
    print_table(args, &runs, total, &mck);
    let _ = std::fs::remove_dir_all(&dir);
}

fn print_table(args: &ShardsArgs, runs: &[Vec<Run>], total: u64, mck: &Path) {
    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "Shards, {date}, {cores} cores, load average at the end {load}; 2 clusters × {} partitions × {} records of {} B; \
         whole processes (-e --format value), first spawn to last exit, output to /dev/null; \
         {} rounds after a warm-up that checked the counts, medians; mck: {}",
        args.partitions,
        args.records,
        args.value_size,
        args.rounds.max(1),
        mck.display()
    );
    println!();
    println!(
        "| shards | wall s (median) | records/s | vs 1 shard | client CPU s (all shards) | CPU vs 1 shard | broker CPU s |"
    );
    println!("|---|---|---|---|---|---|---|");
    let med = |i: usize, f: fn(&Run) -> f64| median(runs[i].iter().map(f).collect());
    let base = args.counts.iter().position(|n| *n == 1);
    for (i, n) in args.counts.iter().enumerate() {
        let secs = med(i, |r| r.secs);
        let cpu = med(i, |r| r.cpu);
        let (speed, cost) = match base {
            Some(b) => (
                format!("{:.2}×", med(b, |r| r.secs) / secs),
                format!("{:.2}×", cpu / med(b, |r| r.cpu)),
            ),
            None => ("–".into(), "–".into()),
        };
        println!(
            "| {n} | {secs:.2} | {:.0} | {speed} | {cpu:.2} | {cost} | {:.2} |",
            total as f64 / secs,
            med(i, |r| r.broker_cpu)
        );
    }
}
