//! Event time through the `mck` binary on real Kafka clusters (`time-a`, `time-b`):
//! the watermark each checkpoint holds never goes back across `kill -9` restarts
//! while records with out-of-order timestamps keep coming, and every record is written
//! exactly once.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
