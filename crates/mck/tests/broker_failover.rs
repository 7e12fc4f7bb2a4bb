//! Broker failures inside one cluster, read through `mck consume --output
//! --checkpoint-dir`.
//!
//! Cluster `three` has three brokers; its topic has 6 partitions, replication factor
//! 3 and `min.insync.replicas` 2. Kafka's own Java producer (`acks=all`, idempotent)
//! writes to it all along while `mck consume` follows it into a file. The leader of
//! some partitions is killed with SIGKILL and started again, then another leader; the
//! `mck` process itself is killed with SIGKILL once while a broker is dead, and
//! started again with the same arguments. Once production stops and the run is
//! stopped with SIGINT, the file holds every record exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

const TOPIC: &str = "failover";
const PARTITIONS: i32 = 6;
/// How long the controller waits for a dead broker's heartbeat before moving its
/// leaderships (Kafka's default is 9 s).
const BROKER_SESSION: Duration = Duration::from_secs(4);
/// How long a killed broker stays dead: past [`BROKER_SESSION`], so its partitions
/// move to other leaders meanwhile.
const OUTAGE: Duration = Duration::from_secs(10);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

fn start_three() -> KafkaCluster {
    KafkaCluster::start(
        ClusterOptions::new("bf-three")
            .brokers(3)
            .broker_config("min.insync.replicas", "2")
            .broker_config(
                "broker.session.timeout.ms",
                BROKER_SESSION.as_millis().to_string(),
            )
            .broker_config("broker.heartbeat.interval.ms", "1000"),
    )
    .expect("the 3-broker cluster starts")
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

    /// Polls `done` until it holds; fails if the run exits first or patience runs out.
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

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let until = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("mck consume did not exit; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The values in the JSON-lines output, checking per-partition offset order.
fn output_values(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut last: BTreeMap<i64, i64> = BTreeMap::new();
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", i + 1));
        let partition = v["partition"].as_i64().unwrap();
        let offset = v["offset"].as_i64().unwrap();
        if let Some(prev) = last.insert(partition, offset) {
            assert!(
                offset > prev,
                "partition {partition}: offset {offset} after {prev} at line {}",
                i + 1
            );
        }
        values.push(v["value"].as_str().unwrap().to_string());
    }
    values
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

/// The broker leading the most partitions of the topic, other than `not`.
fn busiest_leader(three: &KafkaCluster, not: Option<usize>) -> (usize, Vec<i32>) {
    let leaders = three.partition_leaders(TOPIC).expect("partition leaders");
    let mut by_broker: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
    for (p, l) in leaders.iter().enumerate() {
        if let Some(b) = l
            && Some(*b) != not
        {
            by_broker.entry(*b).or_default().push(p as i32);
        }
    }
    by_broker
        .into_iter()
        .max_by_key(|(_, ps)| ps.len())
        .unwrap_or_else(|| panic!("no leader to kill among {leaders:?}"))
}

fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn leaders_and_mck_killed_under_load_leave_each_record_in_the_file_once() {
    let began = Instant::now();
    let three = Arc::new(start_three());
    three.create_topic(TOPIC, PARTITIONS).unwrap();
    three
        .await_in_sync(TOPIC, PATIENCE)
        .expect("every replica in sync at the start");
    eprintln!("cluster ready after {:?}", began.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        format!(
            "- streamId: orders\n  clusterMetadataList:\n    - clusterId: three\n      \
             bootstrapServers: {}\n      topics: [{TOPIC}]\n",
            three.bootstrap_servers()
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

    // The Java producer writes `three-<n>` every 5 ms until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let feed = {
        let mut producer = three
            .java_producer(TOPIC, &[])
            .expect("the Java producer starts");
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut values = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let v = format!("three-{}", values.len());
                producer.send(&v).expect("the Java producer takes a record");
                values.push(v);
                std::thread::sleep(Duration::from_millis(5));
            }
            producer
                .finish()
                .expect("the Java producer had every record acknowledged");
            values
        })
    };

    let mut run = Run::start(&args, dir.path().join("stderr-0"));
    run.wait_until("200 lines in the output", || lines_in(&out) >= 200);
    eprintln!("mck writing after {:?}", began.elapsed());

    let mut killed_before = None;
    let mut runs = 1;
    for round in 0..2 {
        let (victim, led) = busiest_leader(&three, killed_before);
        three.kill_broker(victim).expect("kill -9 a leader");
        let killed_at = Instant::now();
        eprintln!("round {round}: killed broker {victim}, leader of partitions {led:?}");
        if round == 0 {
            // mck dies too, mid-way, while the broker is dead; it comes back at once.
            std::thread::sleep(Duration::from_secs(3));
            run.child.kill().unwrap(); // SIGKILL
            run.child.wait().unwrap();
            eprintln!(
                "round {round}: killed mck at {} lines; newest checkpoint {:?}",
                lines_in(&out),
                newest_checkpoint(&cps)
            );
            run = Run::start(&args, dir.path().join(format!("stderr-{runs}")));
            runs += 1;
        }
        std::thread::sleep(OUTAGE.saturating_sub(killed_at.elapsed()));
        // The run goes on writing while the broker is dead.
        let before = lines_in(&out);
        run.wait_until("more lines while a broker is dead", || {
            lines_in(&out) > before + 100
        });
        three
            .restart_broker(victim)
            .expect("the killed broker starts again");
        three
            .await_in_sync(TOPIC, PATIENCE)
            .expect("the killed broker catches up");
        eprintln!(
            "round {round}: broker {victim} back and in sync {:?} after its kill",
            killed_at.elapsed()
        );
        killed_before = Some(victim);
    }

    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the Java feed");
    eprintln!("produced {} records", sent.len());

    // Done when the file holds every record and a checkpoint covers it all.
    let before = newest_checkpoint(&cps).map_or(0, |(n, _)| n);
    run.wait_until("a checkpoint covering every record", || {
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        lines_in(&out) >= sent.len()
            && newest_checkpoint(&cps).is_some_and(|(n, l)| n > before && l == len)
    });
    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) },
        0
    );
    let status = run.wait_exit();
    assert!(
        status.success(),
        "mck consume ended with {status} after SIGINT; stderr:\n{}",
        run.stderr()
    );

    let got = output_values(&out);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &got {
        *counts.entry(v.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    let want: BTreeSet<&str> = sent.iter().map(String::as_str).collect();
    let missing: Vec<_> = want.iter().filter(|v| !counts.contains_key(*v)).collect();
    let unknown: Vec<_> = counts.keys().filter(|v| !want.contains(*v)).collect();
    assert!(
        twice.is_empty(),
        "{} records in the file more than once, e.g. {twice:?}",
        counts.values().filter(|n| **n > 1).count()
    );
    assert!(
        missing.is_empty(),
        "{} of {} records not in the file, e.g. {:?}",
        missing.len(),
        sent.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(unknown.is_empty(), "unexpected records {unknown:?}");
    assert_eq!(got.len(), sent.len());
    eprintln!("done in {:?} ({runs} runs of mck)", began.elapsed());
}
