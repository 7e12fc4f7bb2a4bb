//! `mck consume -g GROUP --output --checkpoint-dir` while one cluster's coordinator
//! cannot be reached: the group commit is off the path of the records.
//!
//! Cluster `west` sits behind a fault proxy, `east` is reached directly; both are fed
//! all along. While `west` is blackholed, a commit to it waits for its client timeout
//! (30 s). Checkpoints every 200 ms must go on being written (a run that waited up to
//! 2 s for each commit wrote one every 2.2 s at best), `east`'s records keep reaching
//! the file, the failing commit is not said at every checkpoint, and SIGINT ends the
//! run promptly with a checkpoint covering the file. Healed, a `-e` run completes the
//! file exactly once and its last commit leaves the group at the log ends.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, assert_each_once};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use support::{Run, newest_checkpoint, output_values};

const TOPIC: &str = "cop";
const PARTITIONS: i32 = 2;
const GROUP: &str = "cop-group";
/// How long west stays blackholed before the SIGINT.
const HOLE: Duration = Duration::from_secs(8);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// Values produced so far, with when each was acknowledged.
type Sent = Arc<Mutex<Vec<(String, Instant)>>>;

/// Produces `<prefix>-<n>` to `cluster`, 5 records every 50 ms, until `stop`, noting
/// each acknowledged value in `sent`.
fn feed(
    cluster: &'static dyn TestCluster,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    sent: Sent,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let values: Vec<String> = (n..n + 5).map(|i| format!("{prefix}-{i}")).collect();
            n += 5;
            let records: Vec<TestRecord> = values
                .iter()
                .map(|v| TestRecord::value(v.clone()).with_key(v.clone()))
                .collect();
            cluster.produce(TOPIC, &records).expect("produce");
            let at = Instant::now();
            sent.lock()
                .unwrap()
                .extend(values.into_iter().map(|v| (v, at)));
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

fn lines_of(out: &Path, cluster: &str) -> usize {
    output_values(out)
        .iter()
        .filter(|(c, _)| c == cluster)
        .count()
}

/// The group's committed offset of every partition of `TOPIC` on `cluster`.
fn committed(cluster: &KafkaCluster) -> Vec<Offset> {
    let consumer: BaseConsumer = cluster
        .client_config()
        .set("group.id", GROUP)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .unwrap();
    got.elements().iter().map(|e| e.offset()).collect()
}

#[test]
fn a_blackholed_coordinator_delays_neither_checkpoints_nor_records() {
    let (east, west) = support::east_and_proxied_west("cop");
    east.create_topic(TOPIC, PARTITIONS).unwrap();
    west.cluster().create_topic(TOPIC, PARTITIONS).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at(
            "orders",
            &[
                ("east", &east.bootstrap_servers(), &[TOPIC]),
                ("west", &west.proxied_bootstrap_servers(), &[TOPIC]),
            ],
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("ck");
    let p = |p: &Path| p.display().to_string();
    let args: Vec<String> = vec![
        p(&md),
        "--stream".into(),
        "orders".into(),
        "--output".into(),
        p(&out),
        "--checkpoint-dir".into(),
        p(&cps),
        "--checkpoint-interval".into(),
        "200ms".into(),
        "-g".into(),
        GROUP.into(),
    ];

    let stop = Arc::new(AtomicBool::new(false));
    let (east_sent, west_sent): (Sent, Sent) = Default::default();
    let east_feed = feed(east, "east", stop.clone(), east_sent.clone());
    let west_feed = feed(west.cluster(), "west", stop.clone(), west_sent.clone());

    let mut run = Run::start(&args, dir.path().join("stderr-1"));
    run.wait_until("records of both clusters in the file", PATIENCE, || {
        lines_of(&out, "east") >= 20 && lines_of(&out, "west") >= 20
    });

    let proxy = west.proxy();
    proxy.blackhole();
    let hole_start = Instant::now();
    let (n0, _) = newest_checkpoint(&cps).expect("a checkpoint before the blackhole");
    while hole_start.elapsed() < HOLE {
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!(
                "mck exited ({status}) during the blackhole:\n{}",
                run.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (n1, _) = newest_checkpoint(&cps).expect("checkpoints during the blackhole");
    let in_file: BTreeSet<String> = output_values(&out)
        .into_iter()
        .filter(|(c, _)| c == "east")
        .map(|(_, v)| v)
        .collect();
    // What east acknowledged during the blackhole, until 2 s before looking.
    let due: Vec<String> = east_sent
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, at)| *at > hole_start && at.elapsed() > Duration::from_secs(2))
        .map(|(v, _)| v.clone())
        .collect();
    let late: Vec<&String> = due.iter().filter(|v| !in_file.contains(*v)).collect();
    eprintln!(
        "during {HOLE:?} of blackhole: {} checkpoints; {} east records due, {} not in the file",
        n1 - n0,
        due.len(),
        late.len()
    );
    assert!(
        n1 - n0 >= 12,
        "only {} checkpoints in {HOLE:?} at a 200ms interval: commits hold the loop; stderr:\n{}",
        n1 - n0,
        run.stderr()
    );
    assert!(
        !due.is_empty(),
        "east acknowledged nothing during the blackhole"
    );
    assert!(
        late.is_empty(),
        "east records acknowledged over 2 s ago are not in the file: {late:?}; stderr:\n{}",
        run.stderr()
    );

    let signalled = Instant::now();
    run.signal(libc::SIGINT);
    let status = run.exit_within(PATIENCE);
    let took = signalled.elapsed();
    let stderr1 = run.stderr();
    proxy.pass();
    eprintln!("after SIGINT: {status:?} in {took:?}; stderr:\n{stderr1}");
    let status = status.unwrap_or_else(|| panic!("no exit after SIGINT:\n{stderr1}"));
    assert_eq!(status.code(), Some(0), "{stderr1}");
    assert!(took < Duration::from_secs(10), "took {took:?}:\n{stderr1}");
    let commit_lines = stderr1.matches("offset commit").count();
    assert!(
        (1..=3).contains(&commit_lines),
        "{commit_lines} lines about offset commits (want them said once per change, and \
         the abandoned last one):\n{stderr1}"
    );
    assert!(stderr1.contains("offset commit abandoned"), "{stderr1}");
    let (_, covered) = newest_checkpoint(&cps).unwrap();
    assert_eq!(covered, std::fs::metadata(&out).unwrap().len(), "{stderr1}");

    // Healed: the rest, exactly once, and the last commit waited for.
    stop.store(true, Ordering::Relaxed);
    east_feed.join().unwrap();
    west_feed.join().unwrap();
    let values = |sent: &Sent| -> Vec<String> {
        sent.lock()
            .unwrap()
            .iter()
            .map(|(v, _)| v.clone())
            .collect()
    };
    let (east_sent, west_sent) = (values(&east_sent), values(&west_sent));
    let mut bounded = args.clone();
    bounded.push("-e".into());
    let mut run = Run::start(&bounded, dir.path().join("stderr-2"));
    let status = run.exit_within(PATIENCE);
    let stderr2 = run.stderr();
    assert!(
        status.is_some_and(|s| s.success()),
        "the -e run: {status:?}:\n{stderr2}"
    );
    let got = output_values(&out);
    for (cluster, sent) in [("east", &east_sent), ("west", &west_sent)] {
        assert_each_once(
            got.iter()
                .filter(|(c, _)| c == cluster)
                .map(|(_, v)| v.as_str()),
            sent.iter().map(String::as_str),
        );
    }
    for (name, cluster, sent) in [
        ("east", east, &east_sent),
        ("west", west.cluster(), &west_sent),
    ] {
        let total: i64 = committed(cluster)
            .iter()
            .map(|o| match o {
                Offset::Offset(n) => *n,
                other => panic!("{name}: committed {other:?}; stderr:\n{stderr2}"),
            })
            .sum();
        assert_eq!(total, sent.len() as i64, "{name}: stderr:\n{stderr2}");
    }
}
