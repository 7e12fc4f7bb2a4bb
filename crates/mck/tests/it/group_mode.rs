//! Group mode with real processes on real brokers: `mck consume --scale-out group`.
//!
//! Clusters `east` and `west` (Kafka 4.x, KRaft) hold topic `orders` with 6
//! partitions each; Kafka's own Java producer writes to both all along. Three `mck
//! consume --group --scale-out group --output --checkpoint-dir` processes share the
//! stream, each into its own file: each cluster's group coordinator divides that
//! cluster's partitions among them. One instance is stopped with SIGTERM and started
//! again; then the metadata file is edited to add cluster `north` (with its own
//! producer) and, once `west`'s producer stopped and its records were read, to remove
//! `west`. When production ends, the three files together hold every record exactly
//! once: partitions moved between instances were committed at what the instance
//! losing them had written and checkpointed.
//!
//! A second test kills one instance with SIGKILL: nothing is lost, and the records
//! read twice are exactly the ones its file holds at or after the group's committed
//! offsets (handed out after its last commit), which the partitions' next owners read
//! again; those beyond its last checkpoint are among them.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, assert_each_once, java_produce_until_stopped};
use support::{Run, checkpointed_args, complete_lines, lines_in, newest_checkpoint, output_values};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(150);

fn start_cluster(id: &str) -> KafkaCluster {
    support::group_cluster(id, TOPIC, PARTITIONS)
}

/// The group's committed offset of each partition of the topic on `cluster`.
fn committed_offsets(cluster: &KafkaCluster, group: &str) -> BTreeMap<i32, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", group)
        .create()
        .expect("a lookup consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .expect("the group's committed offsets");
    got.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            rdkafka::Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

fn write_metadata(md: &Path, clusters: &[&KafkaCluster]) {
    let clusters: Vec<(&dyn TestCluster, &[&str])> = clusters
        .iter()
        .map(|c| (*c as &dyn TestCluster, &[TOPIC][..]))
        .collect();
    // Replaced in one step, as an editor's save would.
    mck_testkit::write_atomically(md, &mck_testkit::flink_metadata(TOPIC, &clusters));
}

struct Instance {
    out: PathBuf,
    ck: PathBuf,
    args: Vec<String>,
    stderr: PathBuf,
    runs: usize,
}

impl Instance {
    fn new(dir: &Path, md: &Path, i: usize, group: &str) -> Instance {
        let out = dir.join(format!("out-{i}.jsonl"));
        let ck = dir.join(format!("ck-{i}"));
        let mut args = checkpointed_args(md, TOPIC, &out, &ck);
        args.extend(["--group", group, "--scale-out", "group"].map(String::from));
        Instance {
            out,
            ck,
            args,
            stderr: dir.join(format!("stderr-{i}")),
            runs: 0,
        }
    }

    fn start(&mut self) -> Run {
        self.runs += 1;
        Run::start(
            &self.args,
            self.stderr.with_extension(self.runs.to_string()),
        )
    }
}

fn total(instances: &[Instance]) -> usize {
    instances.iter().map(|i| lines_in(&i.out)).sum()
}

/// Waits until the files together hold at least `n` lines; every run must live.
fn await_total(instances: &[Instance], runs: &mut [Run], n: usize, what: &str) {
    let until = Instant::now() + PATIENCE;
    while total(instances) < n {
        for run in runs.iter_mut() {
            if let Some(status) = run.child.try_wait().unwrap() {
                panic!(
                    "an instance exited ({status}) before {what}:\n{}",
                    run.stderr()
                );
            }
        }
        assert!(
            Instant::now() < until,
            "{} of {n} lines before {what}",
            total(instances)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop_all(runs: &mut [Run], sig: i32) {
    for run in runs.iter() {
        run.signal(sig);
    }
    for run in runs.iter_mut() {
        let status = run
            .exit_within(PATIENCE)
            .expect("an instance exits on a signal");
        assert!(status.success(), "ended with {status}:\n{}", run.stderr());
    }
}

fn values(instances: &[Instance]) -> Vec<String> {
    instances
        .iter()
        .flat_map(|i| output_values(&i.out).into_iter().map(|(_, v)| v))
        .collect()
}

#[test]
fn three_instances_share_the_stream_through_restarts_and_metadata_edits_each_record_once() {
    let began = Instant::now();
    let (east, west, north) = std::thread::scope(|s| {
        let e = s.spawn(|| start_cluster("east"));
        let w = s.spawn(|| start_cluster("west"));
        let n = s.spawn(|| start_cluster("north"));
        (e.join().unwrap(), w.join().unwrap(), n.join().unwrap())
    });
    eprintln!("clusters ready after {:?}", began.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &[&east, &west]);

    let stop_west = Arc::new(AtomicBool::new(false));
    let stop_rest = Arc::new(AtomicBool::new(false));
    let feed = |c: &KafkaCluster, prefix: &'static str, stop: &Arc<AtomicBool>| {
        java_produce_until_stopped(
            c.java_producer(TOPIC, &[])
                .expect("the Java producer starts"),
            prefix,
            stop.clone(),
        )
    };
    let east_feed = feed(&east, "east", &stop_rest);
    let west_feed = feed(&west, "west", &stop_west);

    let mut instances: Vec<Instance> = (0..3)
        .map(|i| Instance::new(dir.path(), &md, i, "group-test"))
        .collect();
    let mut runs: Vec<Run> = instances.iter_mut().map(Instance::start).collect();
    await_total(&instances, &mut runs, 600, "the first records");
    eprintln!("reading after {:?}", began.elapsed());

    // One instance stops gracefully and comes back.
    runs[1].signal(libc::SIGTERM);
    let status = runs[1].exit_within(PATIENCE).expect("exits on SIGTERM");
    assert!(status.success(), "{status}:\n{}", runs[1].stderr());
    let n = total(&instances);
    await_total(
        &instances,
        &mut [],
        n + 300,
        "the others took its partitions",
    );
    runs[1] = instances[1].start();
    let n = total(&instances);
    await_total(
        &instances,
        &mut runs,
        n + 300,
        "the restarted instance's return",
    );
    eprintln!("restart done after {:?}", began.elapsed());

    // A third cluster joins the stream.
    let north_feed = feed(&north, "north", &stop_rest);
    write_metadata(&md, &[&east, &west, &north]);
    let until = Instant::now() + PATIENCE;
    while !values(&instances).iter().any(|v| v.starts_with("north-")) {
        assert!(Instant::now() < until, "north is never read");
        std::thread::sleep(Duration::from_millis(200));
    }
    // West stops producing, is drained, and leaves the stream.
    stop_west.store(true, Ordering::Relaxed);
    let west_sent = west_feed.join().expect("west's feed");
    let until = Instant::now() + PATIENCE;
    loop {
        let got: BTreeSet<String> = values(&instances)
            .into_iter()
            .filter(|v| v.starts_with("west-"))
            .collect();
        if west_sent.iter().all(|v| got.contains(v)) {
            break;
        }
        assert!(Instant::now() < until, "west is never drained");
        std::thread::sleep(Duration::from_millis(200));
    }
    write_metadata(&md, &[&east, &north]);
    std::thread::sleep(Duration::from_secs(3));
    eprintln!("metadata edits done after {:?}", began.elapsed());

    stop_rest.store(true, Ordering::Relaxed);
    let mut sent = west_sent;
    sent.extend(east_feed.join().expect("east's feed"));
    sent.extend(north_feed.join().expect("north's feed"));
    await_total(&instances, &mut runs, sent.len(), "every record");
    std::thread::sleep(Duration::from_secs(2));
    stop_all(&mut runs, libc::SIGINT);
    for (i, inst) in instances.iter().enumerate() {
        eprintln!("instance {i}: {} records", lines_in(&inst.out));
        // What each run warned of, shown when an assertion below fails.
        for run in 1..=inst.runs {
            let said = std::fs::read_to_string(inst.stderr.with_extension(run.to_string()))
                .unwrap_or_default();
            for line in said.lines().filter(|l| l.contains("warning")) {
                eprintln!("instance {i} run {run}: {line}");
            }
        }
    }
    assert_each_once(values(&instances), sent);
    // West's removal is committed by each member's leave; nothing else commits for a
    // cluster that left (a commit from outside the group would be refused).
    for run in &runs {
        let said = run.stderr();
        assert!(
            !said.contains("commit failed") && !said.contains("releasing partitions failed"),
            "{said}"
        );
    }
    eprintln!("done in {:?}", began.elapsed());
}

#[test]
fn a_killed_instance_costs_exactly_the_records_handed_out_after_its_last_commit() {
    let began = Instant::now();
    let east = start_cluster("k-east");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &[&east]);
    let stop = Arc::new(AtomicBool::new(false));
    let feed = java_produce_until_stopped(
        east.java_producer(TOPIC, &[])
            .expect("the Java producer starts"),
        "k-east",
        stop.clone(),
    );
    let mut instances: Vec<Instance> = (0..2)
        .map(|i| Instance::new(dir.path(), &md, i, "kill-test"))
        .collect();
    let mut runs: Vec<Run> = instances.iter_mut().map(Instance::start).collect();
    await_total(&instances, &mut runs, 800, "the first records");
    // Both read: the group divided the partitions.
    let until = Instant::now() + PATIENCE;
    while lines_in(&instances[0].out) == 0 || lines_in(&instances[1].out) == 0 {
        assert!(Instant::now() < until, "one instance never got partitions");
        std::thread::sleep(Duration::from_millis(100));
    }

    runs[0].child.kill().unwrap();
    runs[0].child.wait().unwrap();
    let killed_file = output_values(&instances[0].out);
    let (_, checkpointed_len) =
        newest_checkpoint(&instances[0].ck).expect("the killed instance checkpointed");
    // The lines beyond its last checkpoint: written, never committed.
    let text = std::fs::read_to_string(&instances[0].out).unwrap();
    let beyond: Vec<String> = complete_lines(&text[checkpointed_len as usize..])
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["value"].as_str().unwrap().to_string()
        })
        .collect();
    // The group's offsets once the broker has taken any commit in flight: for the
    // killed instance's partitions they are its last commit (their next owner gets
    // them only after the session timeout). Its lines at or after them are what the
    // next owner reads again.
    std::thread::sleep(Duration::from_millis(500));
    let committed = committed_offsets(&east, "kill-test");
    let after_commit: BTreeSet<String> = complete_lines(&text)
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let p = v["partition"].as_i64().unwrap() as i32;
            let o = v["offset"].as_i64().unwrap();
            (o >= committed.get(&p).copied().unwrap_or(0))
                .then(|| v["value"].as_str().unwrap().to_string())
        })
        .collect();
    eprintln!(
        "killed instance 0 at {} lines, {} beyond its checkpoint, {} after its last commit, after {:?}",
        killed_file.len(),
        beyond.len(),
        after_commit.len(),
        began.elapsed()
    );
    // The survivor takes its partitions after the broker's session timeout.
    let n = lines_in(&instances[1].out);
    let until = Instant::now() + PATIENCE;
    while lines_in(&instances[1].out) < n + 500 {
        assert!(Instant::now() < until, "the survivor never took over");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the feed");
    let until = Instant::now() + PATIENCE;
    loop {
        let got: BTreeSet<String> = killed_file
            .iter()
            .map(|(_, v)| v.clone())
            .chain(output_values(&instances[1].out).into_iter().map(|(_, v)| v))
            .collect();
        if sent.iter().all(|v| got.contains(v)) {
            break;
        }
        assert!(Instant::now() < until, "records missing");
        std::thread::sleep(Duration::from_millis(200));
    }
    stop_all(&mut runs[1..], libc::SIGINT);

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for v in killed_file
        .iter()
        .map(|(_, v)| v.clone())
        .chain(output_values(&instances[1].out).into_iter().map(|(_, v)| v))
    {
        *counts.entry(v).or_default() += 1;
    }
    let twice: BTreeSet<String> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(v, _)| v.clone())
        .collect();
    assert!(counts.values().all(|n| *n <= 2), "a record thrice");
    let sent: BTreeSet<String> = sent.into_iter().collect();
    assert!(sent.iter().all(|v| counts.contains_key(v)), "a record lost");
    let beyond: BTreeSet<String> = beyond.into_iter().collect();
    assert!(
        beyond.is_subset(&twice),
        "every record written after the killed instance's last checkpoint is read again"
    );
    assert_eq!(
        twice, after_commit,
        "the records read twice are exactly those the killed instance handed out after its last commit"
    );
    eprintln!(
        "done in {:?}: {} read twice, all handed out after the last commit",
        began.elapsed(),
        twice.len()
    );
}

/// Waits for `run` to exit successfully within [`PATIENCE`].
fn ends_well(run: &mut Run, what: &str) {
    let status = run
        .exit_within(PATIENCE)
        .unwrap_or_else(|| panic!("{what} did not end:\n{}", run.stderr()));
    assert!(
        status.success(),
        "{what} ended with {status}:\n{}",
        run.stderr()
    );
}

#[test]
fn bounded_runs_end_once_the_group_is_at_every_stop() {
    let began = Instant::now();
    // Kafka's own session timeout (45 s): the follower frozen below must keep its
    // membership (a fenced member reads on until it learns of the fence, which is
    // at least once, not what this test is about).
    let cluster = |id: &str| {
        let c = KafkaCluster::start(mck_testkit::ClusterOptions::new(id))
            .unwrap_or_else(|e| panic!("cluster {id} does not start: {e}"));
        c.create_topic(TOPIC, PARTITIONS).unwrap();
        c
    };
    let east = cluster("east");
    let west = cluster("west");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &[&east, &west]);
    let fill = |prefix: &str| {
        let mut v = mck_testkit::fill_values(&east, TOPIC, PARTITIONS, 200, &format!("e{prefix}"));
        v.extend(mck_testkit::fill_values(
            &west,
            TOPIC,
            PARTITIONS,
            200,
            &format!("w{prefix}"),
        ));
        v
    };
    let at = |n: i64| {
        (0..PARTITIONS)
            .map(|p| (p, n))
            .collect::<BTreeMap<i32, i64>>()
    };
    let mut sent = fill("1");
    let mut instances: Vec<Instance> = (0..3)
        .map(|i| Instance::new(dir.path(), &md, i, "bounded"))
        .collect();
    for i in &mut instances[..2] {
        i.args.extend(["--until", "latest"].map(String::from));
    }

    // Two bounded instances started together share the stream, and both end.
    let mut runs: Vec<Run> = instances[..2].iter_mut().map(Instance::start).collect();
    for run in &mut runs {
        ends_well(run, "a bounded group run");
    }
    assert_each_once(values(&instances), sent.clone());
    for c in [&east, &west] {
        assert_eq!(
            committed_offsets(c, "bounded"),
            at(200),
            "{}",
            c.logical_id()
        );
    }

    // Run again after more records: what is new since, once.
    sent.extend(fill("2"));
    let mut runs: Vec<Run> = instances[..2].iter_mut().map(Instance::start).collect();
    for run in &mut runs {
        ends_well(run, "a second bounded group run");
    }
    assert_each_once(values(&instances), sent.clone());

    // A follow-mode instance of the group holds every partition; frozen (SIGSTOP) with
    // records still to read, it cannot hand partitions over, and a bounded instance
    // started meanwhile keeps running: its own part is done only when the group is.
    let mut follow = instances[2].start();
    sent.extend(fill("3"));
    await_total(
        &instances,
        std::slice::from_mut(&mut follow),
        sent.len(),
        "the follower read",
    );
    // `mck describe --group` says which group protocol the members use.
    let described = support::mck()
        .args(["describe", support::arg(&md), "--group", "bounded"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&described.stdout);
    assert!(
        text.matches("group bounded  consumer group protocol (KIP-848)  state Stable  1 member(s)")
            .count()
            == 2,
        "{text}{}",
        String::from_utf8_lossy(&described.stderr)
    );
    follow.signal(libc::SIGSTOP);
    sent.extend(fill("4"));
    let mut bounded = instances[0].start();
    std::thread::sleep(Duration::from_secs(3));
    let early = bounded.child.try_wait().unwrap();
    follow.signal(libc::SIGCONT);
    assert!(
        early.is_none(),
        "the bounded run ended ({early:?}) while the group's other member held unread records:\n{}",
        bounded.stderr()
    );
    ends_well(&mut bounded, "the bounded run beside a follower");
    // It ended once the group's positions reached its stops.
    for c in [&east, &west] {
        let committed = committed_offsets(c, "bounded");
        assert!(
            committed.values().all(|o| *o >= 800) && committed.len() == PARTITIONS as usize,
            "{}: {committed:?}",
            c.logical_id()
        );
    }
    follow.signal(libc::SIGTERM);
    ends_well(&mut follow, "the follower");
    assert_each_once(values(&instances), sent);
    eprintln!("done in {:?}", began.elapsed());
}

#[test]
fn a_member_fenced_after_a_stall_reads_on_without_reading_twice() {
    let east = start_cluster("east");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &[&east]);
    let mut instances = vec![Instance::new(dir.path(), &md, 0, "stall")];
    // Commits far apart: what is read before the stall is not committed yet.
    let at = instances[0]
        .args
        .iter()
        .position(|a| a == "--checkpoint-interval")
        .unwrap();
    instances[0].args[at + 1] = "60s".into();
    let mut run = instances[0].start();
    let mut sent = mck_testkit::fill_values(&east, TOPIC, PARTITIONS, 100, "before");
    await_total(
        &instances,
        std::slice::from_mut(&mut run),
        sent.len(),
        "the first records",
    );
    // A stall longer than the session timeout (6 s): the coordinator fences the
    // member and takes its partitions; they come back to it when it joins again.
    run.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(9));
    run.signal(libc::SIGCONT);
    sent.extend(mck_testkit::fill_values(
        &east, TOPIC, PARTITIONS, 100, "after",
    ));
    await_total(
        &instances,
        std::slice::from_mut(&mut run),
        sent.len(),
        "the records after the stall",
    );
    std::thread::sleep(Duration::from_secs(2));
    // Said as what it is: fenced, nothing committed (the coordinator would refuse).
    let said = run.stderr();
    assert!(said.contains("fenced this instance"), "{said}");
    assert!(!said.contains("commit failed"), "{said}");
    run.signal(libc::SIGTERM);
    ends_well(&mut run, "the stalled member");
    assert_each_once(values(&instances), sent);
}
