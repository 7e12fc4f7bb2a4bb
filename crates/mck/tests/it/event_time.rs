//! Event time through the `mck` binary on real Kafka clusters (`time-a`, `time-b`,
//! `time-c`): the watermark each checkpoint holds never goes back across `kill -9`
//! restarts while records with out-of-order timestamps keep coming, and every record
//! is written exactly once; with `--order time`, three clusters written to in turns
//! come out with timestamps that never go back, each record once, across `kill -9`
//! restarts and while a cluster joins the stream and another leaves it.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, assert_each_once, shared_cluster};
use support::{PATIENCE, checkpointed_args, mck, output_values, tail};

const TOPIC: &str = "events";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64
}

/// Every checkpoint file's watermark, by its sequence number.
fn watermarks(dir: &Path, seen: &mut BTreeMap<u64, Option<i64>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(n) = name
            .strip_prefix("checkpoint-")
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if seen.contains_key(&n) {
            continue;
        }
        // A file pruned between the listing and the read is skipped.
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|err| panic!("checkpoint {name} is not JSON: {err}"));
        seen.insert(n, v["checkpoint"]["watermarkMs"].as_i64());
    }
}

/// Produces to both clusters until `stop`: records whose timestamps run forward
/// 100 ms apart with some up to 800 ms late; returns (value, timestamp) of each.
fn produce(
    clusters: [&'static KafkaCluster; 2],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, i64)>> {
    std::thread::spawn(move || {
        let base = now_ms() - 3_600_000;
        let mut sent = Vec::new();
        let mut i = 0i64;
        while !stop.load(Ordering::Relaxed) {
            for (k, c) in clusters.iter().enumerate() {
                let mut batch = Vec::new();
                for _ in 0..10 {
                    i += 1;
                    let late = if i % 7 == 0 { 800 } else { 0 };
                    let ts = base + i * 100 - late;
                    let v = format!("{k}-{i}");
                    batch.push(TestRecord::value(v.clone()).at(ts));
                    sent.push((v, ts));
                }
                c.produce(TOPIC, &batch).expect("the records are produced");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        sent
    })
}

/// `mck consume` with `args`, its records nowhere (they go to `--output`) and its
/// stderr into the file `stderr`.
fn consume(args: &[String], stderr: &Path) -> Child {
    mck()
        .arg("consume")
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .expect("mck starts")
}

/// `consume` with the enumerator's and the reader's debug lines on stderr (which
/// splits came when), for a failure to show.
fn consume_logged(args: &[String], stderr: &Path) -> Child {
    mck()
        .arg("consume")
        .args(args)
        .env(
            "MCK_LOG",
            "warn,librdkafka=off,rdkafka=off,multicluster_kafka::enumerator=debug,multicluster_kafka::reader=debug",
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .expect("mck starts")
}

fn kill9(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_watermark_never_goes_back_across_kill_9_restarts() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| shared_cluster("time-a").expect("cluster time-a starts"));
        let b = shared_cluster("time-b").expect("cluster time-b starts");
        (a.join().expect("the thread starting time-a"), b)
    });
    a.create_topic(TOPIC, 2).unwrap();
    b.create_topic(TOPIC, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    let clusters: Vec<(&dyn TestCluster, &[&str])> = vec![(a, &[TOPIC]), (b, &[TOPIC])];
    std::fs::write(&md, mck_testkit::flink_metadata(TOPIC, &clusters)).unwrap();
    let out = dir.path().join("out.jsonl");
    let ck = dir.path().join("ck");
    let mut args = checkpointed_args(&md, TOPIC, &out, &ck);
    // Checkpoints every 200 ms rather than every second.
    let every = args
        .iter()
        .position(|a| a == "--checkpoint-interval")
        .expect("an interval is set");
    args[every + 1] = "200ms".into();
    args.extend(["--max-out-of-orderness", "1s", "--idle-timeout", "3s"].map(String::from));
    let stop = Arc::new(AtomicBool::new(false));
    let feed = produce([a, b], stop.clone());

    let mut seen = BTreeMap::new();
    let stderr = dir.path().join("stderr");
    for run in 0..4 {
        let mut child = consume(&args, &stderr);
        let until = Instant::now() + Duration::from_millis(1_500 + 400 * run);
        while Instant::now() < until {
            watermarks(&ck, &mut seen);
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "run {run} ended ({status}):\n{}",
                    tail(&std::fs::read_to_string(&stderr).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        kill9(&mut child);
        watermarks(&ck, &mut seen);
    }
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the producer thread");

    // A last run reads everything and stops on SIGTERM.
    let mut child = consume(&args, &stderr);
    let until = Instant::now() + PATIENCE;
    while output_values(&out).len() < sent.len() {
        assert!(
            Instant::now() < until,
            "{} of {} records:\n{}",
            output_values(&out).len(),
            sent.len(),
            tail(&std::fs::read_to_string(&stderr).unwrap_or_default())
        );
        watermarks(&ck, &mut seen);
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    watermarks(&ck, &mut seen);

    assert_each_once(
        output_values(&out)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<String>>(),
        sent.iter().map(|(v, _)| v.clone()).collect::<Vec<String>>(),
    );
    let marks: Vec<(u64, i64)> = seen
        .iter()
        .filter_map(|(n, w)| w.map(|w| (*n, w)))
        .collect();
    assert!(
        marks.len() >= 5,
        "too few checkpoints with a watermark: {seen:?}"
    );
    for pair in marks.windows(2) {
        assert!(
            pair[0].1 <= pair[1].1,
            "checkpoint {} has watermark {} after checkpoint {} had {}",
            pair[1].0,
            pair[1].1,
            pair[0].0,
            pair[0].1
        );
    }
    // The last watermark is behind the newest record (less the out-of-orderness),
    // and no further behind than the lowest partition's newest record.
    let last = marks.last().unwrap().1;
    let newest = sent.iter().map(|(_, ts)| *ts).max().unwrap();
    assert!(
        last <= newest - 1_001,
        "{last} is ahead of {newest} less 1 s"
    );
    let oldest_first = sent.iter().map(|(_, ts)| *ts).min().unwrap();
    assert!(
        last > oldest_first,
        "{last} never moved past the first records"
    );
}

/// The three clusters, started side by side.
fn clusters() -> [&'static KafkaCluster; 3] {
    std::thread::scope(|s| {
        let a = s.spawn(|| shared_cluster("time-a").expect("cluster time-a starts"));
        let b = s.spawn(|| shared_cluster("time-b").expect("cluster time-b starts"));
        let c = shared_cluster("time-c").expect("cluster time-c starts");
        [
            a.join().expect("the thread starting time-a"),
            b.join().expect("the thread starting time-b"),
            c,
        ]
    })
}

/// Writes to the clusters `targets` names (indices, read at each round) in turns
/// until `stop`: ten records per cluster per round, timestamps 10 ms apart and
/// interleaved across clusters, the topic's two partitions alternating. Returns
/// (cluster index, value) of each record written.
fn produce_in_turns(
    clusters: [&'static KafkaCluster; 3],
    topic: &'static str,
    targets: Arc<Mutex<Vec<usize>>>,
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<(usize, String)>> {
    std::thread::spawn(move || {
        let mut sent = Vec::new();
        let mut i = 0i64;
        // Ten minutes back: 300 ms of timestamps a round run ahead of the clock when
        // a round takes less, and the merge takes a record stamped in the future as
        // of the moment it is fetched (reader/time_order/), not in its timestamp's order.
        let base = now_ms() - 600_000;
        while !stop.load(Ordering::Relaxed) {
            let now = targets.lock().unwrap().clone();
            let mut batches: Vec<Vec<TestRecord>> = vec![Vec::new(); 3];
            for _ in 0..10 {
                for &k in &now {
                    i += 1;
                    let v = format!("{k}-{i}");
                    let partition = (batches[k].len() % 2) as i32;
                    batches[k].push(
                        TestRecord::value(v.clone())
                            .to_partition(partition)
                            .at(base + i * 10),
                    );
                    sent.push((k, v));
                }
            }
            // Side by side: each cluster gets its records at about the same time.
            std::thread::scope(|s| {
                for &k in &now {
                    let batch = &batches[k];
                    s.spawn(move || {
                        clusters[k]
                            .produce(topic, batch)
                            .expect("the records are produced")
                    });
                }
            });
            rounds.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(30));
        }
        sent
    })
}

/// (cluster, value, timestamp) of each line of the JSON-lines output.
fn output(path: &Path) -> Vec<(String, String, i64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            (
                v["cluster"].as_str().unwrap().to_string(),
                v["value"].as_str().unwrap().to_string(),
                v["timestamp"].as_i64().expect("a timestamp"),
            )
        })
        .collect()
}

/// Asserts the output's timestamps never go back and no record came twice. A
/// failure shows the lines up to the one out of order and, when given, the start of
/// the run's stderr.
fn assert_ordered_once(out: &[(String, String, i64)], stderr: Option<&Path>) {
    let mut seen = BTreeSet::new();
    for (i, pair) in out.windows(2).enumerate() {
        if pair[0].2 <= pair[1].2 {
            continue;
        }
        let before: Vec<String> = out[i.saturating_sub(20)..=i + 1]
            .iter()
            .map(|(c, v, ts)| format!("{c}/{v} @{ts}"))
            .collect();
        let log = stderr
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| t.lines().take(60).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        panic!(
            "line {} ({}/{} @{}) is older than the line before it ({}/{} @{}); the lines up to it:\n{}\nstderr:\n{log}",
            i + 2,
            pair[1].0,
            pair[1].1,
            pair[1].2,
            pair[0].0,
            pair[0].1,
            pair[0].2,
            before.join("\n")
        );
    }
    for (c, v, _) in out {
        assert!(seen.insert((c, v)), "{c}/{v} was written twice");
    }
}

/// The output and stderr files of a run in `dir` (checkpoints in `dir/ck`), and its
/// arguments: `--order time` over `stream` of the metadata file `md`.
fn time_order_run(dir: &Path, md: &Path, stream: &str) -> (PathBuf, PathBuf, Vec<String>) {
    let (out, ck, stderr) = (dir.join("out.jsonl"), dir.join("ck"), dir.join("stderr"));
    let mut args = checkpointed_args(md, stream, &out, &ck);
    // A cluster quiet for longer than the idle timeout stops holding the others
    // back (its next records may then come late): here none is quiet for long.
    args.extend(["--order", "time", "--idle-timeout", "30s"].map(String::from));
    (out, stderr, args)
}

fn stderr_of(path: &Path) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Waits until the output holds every record of `want` (cluster ids and values).
fn wait_for(out: &Path, want: &BTreeSet<(String, String)>, child: &mut Child, stderr: &Path) {
    let until = Instant::now() + PATIENCE;
    loop {
        let got: BTreeSet<(String, String)> =
            output(out).into_iter().map(|(c, v, _)| (c, v)).collect();
        if want.is_subset(&got) {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("mck ended ({status}):\n{}", stderr_of(stderr));
        }
        assert!(
            Instant::now() < until,
            "{} of {} records within {PATIENCE:?}:\n{}",
            want.intersection(&got).count(),
            want.len(),
            stderr_of(stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sigterm(child: &mut Child, stderr: &Path) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", stderr_of(stderr));
}

#[test]
fn three_clusters_in_time_order_through_kill_9_restarts_each_record_once() {
    const TOPIC: &str = "regions";
    let cs = clusters();
    for c in cs {
        c.create_topic(TOPIC, 2).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("regions.yaml");
    let listed: Vec<(&dyn TestCluster, &[&str])> = cs
        .iter()
        .map(|c| (*c as &dyn TestCluster, &[TOPIC][..]))
        .collect();
    std::fs::write(&md, mck_testkit::flink_metadata(TOPIC, &listed)).unwrap();
    let (out, stderr, args) = time_order_run(dir.path(), &md, TOPIC);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let feed = produce_in_turns(
        cs,
        TOPIC,
        Arc::new(Mutex::new(vec![0, 1, 2])),
        stop.clone(),
        rounds.clone(),
    );
    for run in 0..3 {
        let mut child = consume(&args, &stderr);
        std::thread::sleep(Duration::from_millis(2_500 + 700 * run));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run {run} ended ({status}):\n{}", stderr_of(&stderr));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the producer thread");
    assert!(
        rounds.load(Ordering::Relaxed) > 10,
        "too little was written"
    );
    let ids: Vec<String> = cs.iter().map(|c| c.logical_id().to_string()).collect();
    let want: BTreeSet<(String, String)> = sent
        .iter()
        .map(|(k, v)| (ids[*k].clone(), v.clone()))
        .collect();
    let mut child = consume(&args, &stderr);
    wait_for(&out, &want, &mut child, &stderr);
    sigterm(&mut child, &stderr);
    let got = output(&out);
    assert_ordered_once(&got, None);
    assert_eq!(got.len(), want.len(), "exactly the records written");
}

#[test]
fn time_order_holds_while_a_cluster_joins_and_another_leaves() {
    const TOPIC: &str = "regions-live";
    let cs = clusters();
    for c in cs {
        c.create_topic(TOPIC, 2).unwrap();
    }
    let ids: Vec<String> = cs.iter().map(|c| c.logical_id().to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("regions.yaml");
    let write_md = |which: &[usize]| {
        let listed: Vec<(&dyn TestCluster, &[&str])> = which
            .iter()
            .map(|k| (cs[*k] as &dyn TestCluster, &[TOPIC][..]))
            .collect();
        mck_testkit::write_atomically(&md, &mck_testkit::flink_metadata(TOPIC, &listed));
    };
    write_md(&[0, 1]);
    let (out, stderr, args) = time_order_run(dir.path(), &md, TOPIC);
    let targets = Arc::new(Mutex::new(vec![0, 1]));
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let feed = produce_in_turns(cs, TOPIC, targets.clone(), stop.clone(), rounds.clone());
    let mut child = consume_logged(&args, &stderr);
    let seen_of = |k: usize| output(&out).iter().filter(|(c, ..)| *c == ids[k]).count();
    let wait = |what: &str, child: &mut Child, done: &dyn Fn() -> bool| {
        let until = Instant::now() + PATIENCE;
        while !done() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "mck ended ({status}) waiting for {what}:\n{}",
                    stderr_of(&stderr)
                );
            }
            assert!(Instant::now() < until, "no {what}:\n{}", stderr_of(&stderr));
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("records of a and b", &mut child, &|| {
        seen_of(0) > 50 && seen_of(1) > 50
    });
    // c joins the stream, then gets records (from now on: none of them is late).
    write_md(&[0, 1, 2]);
    std::thread::sleep(Duration::from_secs(2));
    targets.lock().unwrap().push(2);
    wait("records of c", &mut child, &|| seen_of(2) > 50);
    // a leaves the stream (and is no longer written to).
    targets.lock().unwrap().retain(|k| *k != 0);
    std::thread::sleep(Duration::from_millis(500));
    write_md(&[1, 2]);
    let b_then = seen_of(1);
    wait("more records of b and c", &mut child, &|| {
        seen_of(1) > b_then + 100
    });
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the producer thread");
    // Everything written to b and c comes; a's records are a prefix of what it got.
    let want: BTreeSet<(String, String)> = sent
        .iter()
        .filter(|(k, _)| *k != 0)
        .map(|(k, v)| (ids[*k].clone(), v.clone()))
        .collect();
    wait_for(&out, &want, &mut child, &stderr);
    sigterm(&mut child, &stderr);
    let got = output(&out);
    assert_ordered_once(&got, Some(&stderr));
    let a_sent: BTreeSet<&String> = sent
        .iter()
        .filter(|(k, _)| *k == 0)
        .map(|(_, v)| v)
        .collect();
    let a_got: Vec<&String> = got
        .iter()
        .filter(|(c, ..)| *c == ids[0])
        .map(|(_, v, _)| v)
        .collect();
    assert!(a_got.len() > 50, "only {} records of a", a_got.len());
    assert!(
        a_got.iter().all(|v| a_sent.contains(v)),
        "a record of a that was not written"
    );
    assert_eq!(got.len() - a_got.len(), want.len());
}
