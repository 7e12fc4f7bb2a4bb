//! `mck consume` moving a stream onto a mirror of its cluster, through the binary:
//! checkpointed runs ended by `kill -9` before, around and after the metadata edit
//! that takes the source out of the stream, while records keep being produced to the
//! source and copied to its mirror (an offset-preserving one: the same records in the
//! same order). The output ends up with every record the source held exactly once, in
//! order per partition.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, shared_cluster, write_atomically};
use support::{PATIENCE, Run, checkpointed_args, output_values};

const TOPIC: &str = "mirrored";

fn metadata(east: &KafkaCluster, west: &KafkaCluster, with_source: bool) -> String {
    let mut yaml = format!(
        "clusters:\n  east: {{bootstrapServers: \"{}\"}}\n  west: {{bootstrapServers: \"{}\"}}\nstreams:\n  s:\n    clusters:\n",
        east.bootstrap_servers(),
        west.bootstrap_servers()
    );
    if with_source {
        yaml.push_str(&format!("      east: {{topics: [{TOPIC}]}}\n"));
    }
    yaml.push_str(&format!(
        "      west:\n        topics: [{TOPIC}]\n        mirrorOf: {{cluster: east, translate: identical}}\n"
    ));
    yaml
}

/// Produces `v0`, `v1`, … in bursts to the source and then the same burst to the
/// mirror, until stopped; returns every value sent.
fn feed(
    east: &'static KafkaCluster,
    west: &'static KafkaCluster,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(i32, String)>> {
    std::thread::spawn(move || {
        let mut sent = Vec::new();
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            // A mirror keeps each record's timestamp: both copies get the same.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            let burst: Vec<TestRecord> = (n..n + 20)
                .map(|i| {
                    TestRecord::value(format!("v{i}"))
                        .to_partition((i % 2) as i32)
                        .with_key(format!("k{i}"))
                        .at(now)
                })
                .collect();
            east.produce(TOPIC, &burst).unwrap();
            west.produce(TOPIC, &burst).unwrap();
            sent.extend((n..n + 20).map(|i| ((i % 2) as i32, format!("v{i}"))));
            n += 20;
            std::thread::sleep(Duration::from_millis(50));
        }
        sent
    })
}

fn run_for(args: &[String], dir: &Path, i: usize, millis: u64) {
    let mut run = Run::start(args, dir.join(format!("stderr-{i}")));
    std::thread::sleep(Duration::from_millis(millis));
    assert!(
        run.child.try_wait().unwrap().is_none(),
        "run {i} ended early: {}",
        run.stderr()
    );
    run.child.kill().unwrap(); // SIGKILL
    run.child.wait().unwrap();
}

#[test]
fn kill_nines_around_a_switch_to_a_mirror_leave_each_record_once_in_order() {
    let east = shared_cluster("mirror-east").unwrap();
    let west = shared_cluster("mirror-west").unwrap();
    east.create_topic(TOPIC, 2).unwrap();
    west.create_topic(TOPIC, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_atomically(&md, &metadata(east, west, true));
    let out = dir.path().join("out.jsonl");
    let args = checkpointed_args(&md, "s", &out, &dir.path().join("ck"));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = feed(east, west, stop.clone());

    // On the source only (the mirror is a standby), killed twice.
    run_for(&args, dir.path(), 0, 3000);
    run_for(&args, dir.path(), 1, 1500);
    // The switch while a run reads, which is then killed.
    let mut run = Run::start(&args, dir.path().join("stderr-2"));
    std::thread::sleep(Duration::from_millis(1500));
    write_atomically(&md, &metadata(east, west, false));
    std::thread::sleep(Duration::from_millis(1000));
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    // After the switch, killed again.
    run_for(&args, dir.path(), 3, 2000);
    stop.store(true, Ordering::Relaxed);
    let sent = producer.join().unwrap();

    // A bounded run reads the rest and ends by itself.
    let mut bounded = args.clone();
    bounded.push("--until=latest".into());
    let mut last = Run::start(&bounded, dir.path().join("stderr-4"));
    let status = last.exit_within(PATIENCE).expect("the bounded run ends");
    assert!(status.success(), "{status}: {}", last.stderr());

    let got = output_values(&out);
    let mut want: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for (p, v) in &sent {
        want.entry(*p).or_default().push(v.clone());
    }
    let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for (_, v) in &got {
        let n: usize = v[1..].parse().unwrap();
        seen.entry((n % 2) as i32).or_default().push(v.clone());
    }
    let stderr: Vec<String> = (0..5)
        .map(|i| {
            std::fs::read_to_string(dir.path().join(format!("stderr-{i}"))).unwrap_or_default()
        })
        .collect();
    assert_eq!(
        seen.values().map(Vec::len).sum::<usize>(),
        sent.len(),
        "each record once; got {got:?}; the runs said: {stderr:?}"
    );
    assert!(!stderr.concat().contains("does not hold"), "{stderr:?}");
    assert_eq!(
        seen, want,
        "each record exactly once, in order per partition"
    );
    let from_east = got.iter().filter(|(c, _)| c == "east").count();
    let from_west = got.iter().filter(|(c, _)| c == "west").count();
    assert!(
        from_east > 0 && from_west > 0,
        "east {from_east}, west {from_west}"
    );
    // Per partition: the source's records, then the mirror's.
    for p in 0..2 {
        let clusters: Vec<&str> = got
            .iter()
            .filter(|(_, v)| v[1..].parse::<usize>().unwrap() % 2 == p)
            .map(|(c, _)| c.as_str())
            .collect();
        let first_west = clusters
            .iter()
            .position(|c| *c == "west")
            .unwrap_or(clusters.len());
        assert!(
            clusters[first_west..].iter().all(|c| *c == "west"),
            "partition {p}: {clusters:?}"
        );
    }

    // The metadata names the source again while the checkpoint reads the mirror (as
    // after a failover): describe tells the mirror is read, not a standby.
    write_atomically(&md, &metadata(east, west, true));
    let out = support::mck()
        .args(["describe", support::arg(&md), "--json", "--checkpoint-dir"])
        .arg(dir.path().join("ck"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let clusters = v["streams"][0]["clusters"].as_array().unwrap();
    let west_entry = clusters.iter().find(|c| c["cluster"] == "west").unwrap();
    assert_eq!(west_entry["mirrorOf"]["standby"], true, "{west_entry}");
    assert_eq!(
        west_entry["mirrorOf"]["readInCheckpoint"], true,
        "{west_entry}"
    );
    let text = support::mck()
        .args(["describe", support::arg(&md), "--checkpoint-dir"])
        .arg(dir.path().join("ck"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("read: failed over"), "{text}");
    assert!(text.contains("the source reads west"), "{text}");
}

#[test]
fn a_bounded_run_onto_a_diverged_mirror_says_which_partition_ended_and_fails() {
    const DIVERGED: &str = "mirror-diverged";
    let east = shared_cluster("mirror-east").unwrap();
    let west = shared_cluster("mirror-west").unwrap();
    east.create_topic(DIVERGED, 1).unwrap();
    west.create_topic(DIVERGED, 1).unwrap();
    let records = |prefix: &str| -> Vec<TestRecord> {
        (0..10)
            .map(|i| {
                TestRecord::value(format!("{prefix}{i}"))
                    .to_partition(0)
                    .at(1_700_000_000_000 + i)
            })
            .collect()
    };
    east.produce(DIVERGED, &records("r")).unwrap();
    // The "mirror" holds other records at the same offsets.
    west.produce(DIVERGED, &records("x")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    let yaml = |with_source: bool| metadata(east, west, with_source).replace(TOPIC, DIVERGED);
    write_atomically(&md, &yaml(true));
    let out = dir.path().join("out.jsonl");
    let mut args = checkpointed_args(&md, "s", &out, &dir.path().join("ck"));
    args.push("--until=latest".into());
    let mut first = Run::start(&args, dir.path().join("stderr-0"));
    let status = first.exit_within(PATIENCE).expect("the bounded run ends");
    assert!(status.success(), "{status}: {}", first.stderr());
    assert_eq!(output_values(&out).len(), 10);

    write_atomically(&md, &yaml(false));
    let mut second = Run::start(&args, dir.path().join("stderr-1"));
    let status = second.exit_within(PATIENCE).expect("the bounded run ends");
    let stderr = second.stderr();
    assert!(
        !status.success(),
        "a diverged mirror fails the run: {stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("does not hold the last record"))
        .unwrap_or_else(|| panic!("no line about the mirror: {stderr}"));
    for part in [
        "mck: error: split `west/mirror-diverged/0`",
        "`east/mirror-diverged/0`",
        "offset 9",
        "identical",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(stderr.contains("1 partition(s) ended"), "{stderr}");
    // Nothing of the mirror was written.
    assert_eq!(output_values(&out).len(), 10);
}

#[test]
fn describe_shows_a_standby_mirror_and_how_far_behind_its_source_it_is() {
    const LAGGING: &str = "mirror-describe";
    let east = shared_cluster("mirror-east").unwrap();
    let west = shared_cluster("mirror-west").unwrap();
    east.create_topic(LAGGING, 1).unwrap();
    west.create_topic(LAGGING, 1).unwrap();
    let records: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("d{i}")).to_partition(0))
        .collect();
    east.produce(LAGGING, &records).unwrap();
    // The mirror has copied 6 of the 10.
    west.produce(LAGGING, &records[..6]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_atomically(&md, &metadata(east, west, true).replace(TOPIC, LAGGING));
    let out = support::mck()
        .args(["describe", support::arg(&md), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let clusters = v["streams"][0]["clusters"].as_array().unwrap();
    let west_entry = clusters.iter().find(|c| c["cluster"] == "west").unwrap();
    assert_eq!(west_entry["state"], "connected", "{west_entry}");
    assert_eq!(west_entry["mirrorOf"]["cluster"], "east");
    assert_eq!(west_entry["mirrorOf"]["standby"], true);
    assert_eq!(west_entry["topics"][0]["behindSource"], 4, "{west_entry}");
    let text = support::mck()
        .args(["describe", support::arg(&md)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("mirror of east  translate identical  standby"),
        "{text}"
    );
    assert!(text.contains("4 record(s) behind its source"), "{text}");

    // The same copy translated by timestamps: offsets tell nothing, the newest
    // records' times do (the mirror's newest is d5, 4 s older than the source's d9).
    const BY_TIME: &str = "mirror-describe-time";
    east.create_topic(BY_TIME, 1).unwrap();
    west.create_topic(BY_TIME, 1).unwrap();
    let timed: Vec<TestRecord> = (0..10)
        .map(|i| {
            TestRecord::value(format!("t{i}"))
                .to_partition(0)
                .at(1_700_000_000_000 + i * 1_000)
        })
        .collect();
    east.produce(BY_TIME, &timed).unwrap();
    west.produce(BY_TIME, &timed[..6]).unwrap();
    write_atomically(
        &md,
        &metadata(east, west, true)
            .replace(TOPIC, BY_TIME)
            .replace("translate: identical", "translate: timestamp"),
    );
    let out = support::mck()
        .args(["describe", support::arg(&md), "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let clusters = v["streams"][0]["clusters"].as_array().unwrap();
    let west_entry = clusters.iter().find(|c| c["cluster"] == "west").unwrap();
    assert_eq!(
        west_entry["topics"][0]["behindSource"],
        serde_json::Value::Null
    );
    assert_eq!(
        west_entry["topics"][0]["behindSourceSeconds"], 4.0,
        "{west_entry}"
    );
    let text = support::mck()
        .args(["describe", support::arg(&md)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("4.0s behind its source"), "{text}");
}
