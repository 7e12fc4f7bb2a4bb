//! `mck consume --output --checkpoint-dir` over two clusters while one's network
//! blackholes.
//!
//! Cluster `west` sits behind a fault proxy (its brokers advertise the proxy's
//! address, so `mck`'s clients never bypass it); cluster `east` is reached directly.
//! Records are produced to both all along, straight to the brokers. While `west`'s
//! network blackholes:
//!
//! - `east`'s records produced meanwhile reach the output file within a few seconds;
//! - SIGINT ends the run promptly, with status 0, leaving a checkpoint that covers
//!   the file;
//! - once the network heals, a run with the same arguments and `-e` completes the
//!   file: every record of both clusters in it exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_testkit::proxy::{Mode, ProxiedCluster};
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster, TestRecord};

const TOPIC: &str = "nf";
const PARTITIONS: i32 = 3;
/// How long the blackhole lasts before the SIGINT.
const HOLE: Duration = Duration::from_secs(10);
/// How long after being produced a record of the healthy cluster must be in the file
/// while the other cluster's network is down. Generous: the machine is small and
/// shared.
const MAX_HEALTHY_LAG: Duration = Duration::from_secs(5);
/// How long a run may take to end after SIGINT, whatever `west`'s network does.
const PROMPT: Duration = Duration::from_secs(10);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

fn start_clusters() -> (KafkaCluster, ProxiedCluster) {
    std::thread::scope(|s| {
        let east = s.spawn(|| KafkaCluster::start(ClusterOptions::new("nff-east")));
        let west = ProxiedCluster::start(ClusterOptions::new("nff-west"))
            .expect("cluster nff-west starts behind a proxy");
        let east = east
            .join()
            .expect("starting nff-east panicked")
            .expect("cluster nff-east starts");
        (east, west)
    })
}

/// A record a feed produced, and when its acknowledgement came.
type Sent = (String, Instant);

/// A thread producing `<prefix>-<n>` to `topic` of `cluster`, 10 records every 50 ms,
/// waiting for each batch's acknowledgement.
fn feed(
    cluster: &'static dyn TestCluster,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Sent>> {
    std::thread::spawn(move || {
        let mut sent: Vec<Sent> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<String> = (sent.len()..sent.len() + 10)
                .map(|n| format!("{prefix}-{n}"))
                .collect();
            let records: Vec<TestRecord> = batch
                .iter()
                .enumerate()
                .map(|(i, v)| TestRecord::value(v.clone()).with_key(format!("k{i}")))
                .collect();
            cluster.produce(TOPIC, &records).expect("produce");
            let at = Instant::now();
            sent.extend(batch.into_iter().map(|v| (v, at)));
            std::thread::sleep(Duration::from_millis(50));
        }
        sent
    })
}

/// A running `mck consume` whose stderr goes to a file.
struct Run {
    child: Child,
    stderr: PathBuf,
}

impl Run {
    fn start(args: &[String], stderr: PathBuf) -> Run {
        let err = std::fs::File::create(&stderr).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mck"))
            .arg("consume")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(err))
            .spawn()
            .expect("mck starts");
        Run { child, stderr }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn wait_until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + PATIENCE;
        while !done() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "mck consume exited ({status}) before {what}; stderr:\n{}",
                    self.stderr()
                );
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("no {what} within {PATIENCE:?}; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to `within` for the exit; `None` (the run killed) if it did not come.
    fn exit_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (cluster, value) of every line of the JSON-lines output, checking the
/// per-partition offset order.
fn output(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut last: BTreeMap<(String, i64), i64> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", i + 1));
        let cluster = v["cluster"].as_str().unwrap().to_string();
        let partition = v["partition"].as_i64().unwrap();
        let offset = v["offset"].as_i64().unwrap();
        if let Some(prev) = last.insert((cluster.clone(), partition), offset) {
            assert!(
                offset > prev,
                "{cluster}/{partition}: offset {offset} after {prev} at line {}",
                i + 1
            );
        }
        out.push((cluster, v["value"].as_str().unwrap().to_string()));
    }
    out
}

/// The sequence number of the newest checkpoint in `dir` and the output length it
/// records.
fn newest_checkpoint(dir: &Path) -> Option<(u64, u64)> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let n: u64 = name
                .strip_prefix("checkpoint-")?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((n, dir.join(name)))
        })
        .max()?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(newest.1).ok()?).ok()?;
    let len = v["checkpoint"]["userData"]["output-length"]
        .as_str()?
        .parse()
        .ok()?;
    Some((newest.0, len))
}

fn count_of(path: &Path, cluster: &str) -> usize {
    output(path).iter().filter(|(c, _)| c == cluster).count()
}

/// Every value of `sent` is in `got` for `cluster` exactly once, and nothing else.
fn assert_exactly_once(cluster: &str, sent: &[Sent], got: &[(String, String)]) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, v) in got.iter().filter(|(c, _)| c == cluster) {
        *counts.entry(v.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    let want: BTreeSet<&str> = sent.iter().map(|(v, _)| v.as_str()).collect();
    let missing: Vec<_> = want.iter().filter(|v| !counts.contains_key(*v)).collect();
    let unknown: Vec<_> = counts.keys().filter(|v| !want.contains(*v)).collect();
    assert!(
        twice.is_empty(),
        "{cluster}: {} records in the file more than once, e.g. {twice:?}",
        counts.values().filter(|n| **n > 1).count()
    );
    assert!(
        missing.is_empty(),
        "{cluster}: {} of {} records not in the file, e.g. {:?}",
        missing.len(),
        sent.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(unknown.is_empty(), "{cluster}: unexpected {unknown:?}");
}

#[test]
fn a_blackholed_cluster_neither_stalls_the_file_nor_holds_a_sigint() {
    let began = Instant::now();
    let (east, west) = start_clusters();
    let east: &'static KafkaCluster = Box::leak(Box::new(east));
    let west: &'static ProxiedCluster = Box::leak(Box::new(west));
    east.create_topic(TOPIC, PARTITIONS).unwrap();
    west.cluster().create_topic(TOPIC, PARTITIONS).unwrap();
    eprintln!("clusters ready after {:?}", began.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        format!(
            "- streamId: orders\n  clusterMetadataList:\n    - clusterId: east\n      \
             bootstrapServers: {}\n      topics: [{TOPIC}]\n    - clusterId: west\n      \
             bootstrapServers: {}\n      topics: [{TOPIC}]\n",
            east.bootstrap_servers(),
            west.proxied_bootstrap_servers()
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("ck");
    let p = |p: &Path| p.display().to_string();
    let args: Vec<String> = [
        p(&md),
        "--stream".into(),
        "orders".into(),
        "--output".into(),
        p(&out),
        "--checkpoint-dir".into(),
        p(&cps),
        "--checkpoint-interval".into(),
        "1s".into(),
    ]
    .into();

    let stop = Arc::new(AtomicBool::new(false));
    let east_feed = feed(east, "east", stop.clone());
    let west_feed = feed(west.cluster(), "west", stop.clone());

    let mut run = Run::start(&args, dir.path().join("stderr-1"));
    run.wait_until("records of both clusters in the file", || {
        count_of(&out, "east") >= 20 && count_of(&out, "west") >= 20
    });
    eprintln!("both clusters in the file after {:?}", began.elapsed());

    // Blackhole west and watch the file: when each line first shows up.
    let proxy = west.proxy();
    let hole_start = Instant::now();
    proxy.blackhole();
    let seen: Arc<Mutex<BTreeMap<(String, String), Instant>>> = Arc::default();
    while hole_start.elapsed() < HOLE {
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        for line in output(&out) {
            seen.entry(line).or_insert(now);
        }
        drop(seen);
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!(
                "mck consume exited ({status}) during the blackhole; stderr:\n{}",
                run.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // SIGINT while west is still blackholed.
    let signalled = Instant::now();
    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) },
        0
    );
    let status = run.exit_within(PATIENCE);
    let took = signalled.elapsed();
    let stderr1 = run.stderr();
    eprintln!("after SIGINT, mck ended in {took:?} with {status:?}");
    assert_eq!(proxy.mode(), Mode::Blackhole);
    proxy.pass();
    let status = status.unwrap_or_else(|| panic!("no exit {PATIENCE:?} after SIGINT:\n{stderr1}"));
    assert!(
        took < PROMPT,
        "mck took {took:?} to end after SIGINT while west was blackholed; stderr:\n{stderr1}"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "mck ended with {status} after one SIGINT; stderr:\n{stderr1}"
    );
    let file_len = std::fs::metadata(&out).unwrap().len();
    let (n, covered) = newest_checkpoint(&cps)
        .unwrap_or_else(|| panic!("no checkpoint left after SIGINT; stderr:\n{stderr1}"));
    eprintln!("checkpoint {n} covers {covered} of {file_len} bytes");
    assert_eq!(
        covered, file_len,
        "the checkpoint left after SIGINT does not cover the file; stderr:\n{stderr1}"
    );

    // East kept flowing into the file during the blackhole; west did not (the proxy is
    // in the path).
    let hole_end = hole_start + HOLE;
    let seen = seen.lock().unwrap().clone();
    stop.store(true, Ordering::Relaxed);
    let east_sent = east_feed.join().expect("east feed");
    let west_sent = west_feed.join().expect("west feed");
    let window: Vec<&Sent> = east_sent
        .iter()
        .filter(|(_, at)| *at >= hole_start && *at < hole_end - MAX_HEALTHY_LAG)
        .collect();
    assert!(
        window.len() > 20,
        "too few east records in the window: {}",
        window.len()
    );
    let late: Vec<String> = window
        .iter()
        .filter(|(v, at)| {
            seen.get(&("east".to_string(), v.clone()))
                .is_none_or(|s| *s - *at > MAX_HEALTHY_LAG)
        })
        .map(|(v, at)| {
            format!(
                "{v} (produced {:?} into the blackhole, {})",
                *at - hole_start,
                match seen.get(&("east".to_string(), v.clone())) {
                    Some(s) => format!("in the file {:?} later", *s - *at),
                    None => "not in the file before the SIGINT".to_string(),
                }
            )
        })
        .collect();
    eprintln!(
        "east during the blackhole: {} records, {} late",
        window.len(),
        late.len()
    );
    assert!(
        late.is_empty(),
        "east stalled while west was blackholed: {} of {} records not in the file within \
         {MAX_HEALTHY_LAG:?}, e.g. {:#?}\nstderr:\n{stderr1}",
        late.len(),
        window.len(),
        &late[..late.len().min(5)]
    );
    let west_in_hole = west_sent
        .iter()
        .filter(|(v, at)| {
            *at > hole_start + Duration::from_secs(1)
                && seen.contains_key(&("west".to_string(), v.clone()))
        })
        .count();
    assert_eq!(
        west_in_hole, 0,
        "west records produced during its blackhole reached the file: the proxy is not in \
         the path"
    );

    // Healed: the same arguments with -e read the rest and end.
    let mut args2 = args.clone();
    args2.push("-e".into());
    let mut run = Run::start(&args2, dir.path().join("stderr-2"));
    let status = run.exit_within(PATIENCE);
    let stderr2 = run.stderr();
    let status = status.unwrap_or_else(|| panic!("the -e run did not end:\n{stderr2}"));
    assert!(
        status.success(),
        "the -e run ended with {status}:\n{stderr2}"
    );
    let got = output(&out);
    assert_exactly_once("east", &east_sent, &got);
    assert_exactly_once("west", &west_sent, &got);
    eprintln!(
        "{} east and {} west records in the file once; done in {:?}",
        east_sent.len(),
        west_sent.len(),
        began.elapsed()
    );
}
