//! `mck consume` moving a stream onto a MirrorMaker 2 copy of its cluster, through the
//! binary: checkpointed runs ended by `kill -9` before, around and after the metadata
//! edit that takes the source out of the stream, while producers write to the source
//! only and a real MirrorMaker 2 (offset syncs on the target, a sync at most every 100
//! records, so the search on the copy reads forward) copies them. The output ends up
//! with every record the source held exactly once, in order per partition.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::mirror::OffsetSyncsLocation;
use mck_testkit::{
    KafkaCluster, MirrorMaker, MirrorOptions, TestCluster, read_topic, shared_cluster,
    write_atomically,
};
use support::{PATIENCE, Run, checkpointed_args};

const TOPIC: &str = "orders";
/// The source's alias in MirrorMaker: the copy is `mm2c.orders`.
const ALIAS: &str = "mm2c";
/// How long MirrorMaker may take to copy what the test waits for.
const COPY_WAIT: Duration = Duration::from_secs(60);

fn copy() -> String {
    format!("{ALIAS}.{TOPIC}")
}

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
        "      west:\n        topics: [{}]\n        mirrorOf: {{cluster: east, translate: mm2, alias: {ALIAS}}}\n",
        copy()
    ));
    yaml
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

/// (cluster, partition, value) of every line of the JSON-lines output at `path`.
fn output(path: &Path) -> Vec<(String, i64, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["cluster"].as_str().unwrap().to_string(),
                v["partition"].as_i64().unwrap(),
                v["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn kill_nines_around_a_switch_to_an_mm2_copy_leave_each_record_once_in_order() {
    let began = Instant::now();
    let (east, west) = std::thread::scope(|s| {
        let east = s.spawn(|| shared_cluster("mm2c-east").unwrap());
        let west = shared_cluster("mm2c-west").unwrap();
        (east.join().unwrap(), west)
    });
    east.create_topic(TOPIC, 2).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = mck_testkit::produce_until_stopped(east, TOPIC, "o", true, stop.clone());
    let mm = MirrorMaker::start(
        MirrorOptions::between(ALIAS, east, format!("{ALIAS}-to"), west)
            .topics(TOPIC)
            .offset_syncs_on(OffsetSyncsLocation::Target)
            .offset_lag_max(100),
    )
    .expect("MirrorMaker 2 starts");
    mm.wait_for_records(&copy(), 1, COPY_WAIT).unwrap();
    eprintln!(
        "MirrorMaker copying after {:.1}s",
        began.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_atomically(&md, &metadata(east, west, true));
    let out = dir.path().join("out.jsonl");
    let args = checkpointed_args(&md, "s", &out, &dir.path().join("ck"));

    // On the source only (the copy is a standby), killed twice.
    run_for(&args, dir.path(), 0, 3000);
    run_for(&args, dir.path(), 1, 1500);
    // The switch while a run reads, which is then killed.
    let mut run = Run::start(&args, dir.path().join("stderr-2"));
    std::thread::sleep(Duration::from_millis(1500));
    write_atomically(&md, &metadata(east, west, false));
    std::thread::sleep(Duration::from_millis(1500));
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    // After the switch, killed again.
    run_for(&args, dir.path(), 3, 2000);
    stop.store(true, Ordering::Relaxed);
    let sent = producer.join().unwrap();

    // Everything copied, a bounded run reads the rest and ends by itself.
    let held = read_topic(east, TOPIC).unwrap();
    assert_eq!(held.len(), sent.len(), "the source holds what was sent");
    mm.wait_for_records(&copy(), held.len(), COPY_WAIT).unwrap();
    // With everything copied, describe (source and copy both in the stream) tells by
    // MirrorMaker's offset syncs that the copy is not behind.
    let both = dir.path().join("both.yaml");
    write_atomically(&both, &metadata(east, west, true));
    let described = support::mck()
        .args(["describe", support::arg(&both), "--json"])
        .output()
        .unwrap();
    assert!(described.status.success(), "{described:?}");
    let v: serde_json::Value = serde_json::from_slice(&described.stdout).unwrap();
    let copy_entry = v["streams"][0]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == "west")
        .cloned()
        .unwrap();
    assert_eq!(copy_entry["mirrorOf"]["translate"], "mm2", "{v}");
    assert_eq!(copy_entry["topics"][0]["behindSource"], 0, "{v}");
    let mut bounded = args.clone();
    bounded.push("--until=latest".into());
    let mut last = Run::start(&bounded, dir.path().join("stderr-4"));
    let status = last.exit_within(PATIENCE).expect("the bounded run ends");
    assert!(status.success(), "{status}: {}", last.stderr());
    mm.stop();

    let mut want: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for r in &held {
        want.entry(i64::from(r.partition))
            .or_default()
            .push(String::from_utf8(r.value.clone()).unwrap());
    }
    let got = output(&out);
    let mut seen: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut from: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (c, p, v) in &got {
        seen.entry(*p).or_default().push(v.clone());
        from.entry(*p).or_default().push(c.as_str());
    }
    let stderr: Vec<String> = (0..5)
        .map(|i| {
            std::fs::read_to_string(dir.path().join(format!("stderr-{i}"))).unwrap_or_default()
        })
        .collect();
    assert!(!stderr.concat().contains("does not hold"), "{stderr:?}");
    for (p, values) in &want {
        let have = seen.get(p).cloned().unwrap_or_default();
        if &have != values {
            let first_wrong = have.iter().zip(values).position(|(a, b)| a != b);
            panic!(
                "partition {p}: {} handed out, {} held, first difference at {first_wrong:?}; \
                 the runs said: {stderr:?}",
                have.len(),
                values.len()
            );
        }
    }
    assert_eq!(seen.len(), want.len(), "no other partitions");
    // Per partition: the source's records, then the copy's, and some of each.
    for (p, cs) in &from {
        let first_west = cs.iter().position(|c| *c == "west");
        let first_west = first_west.unwrap_or_else(|| panic!("partition {p}: never on the copy"));
        assert!(first_west > 0, "partition {p}: nothing from the source");
        assert!(
            cs[first_west..].iter().all(|c| *c == "west"),
            "partition {p}: the source's records, then the copy's"
        );
    }
    let from_west = got.iter().filter(|(c, _, _)| c == "west").count();
    eprintln!(
        "{} records, {from_west} from the copy; took {:.1}s",
        got.len(),
        began.elapsed().as_secs_f64()
    );
}
