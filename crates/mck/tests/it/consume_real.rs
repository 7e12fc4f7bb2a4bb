//! `mck consume` as a user runs it, against two real Kafka clusters: bounded reads,
//! commits, kill -9 at random moments with exactly-once file output, and a migration
//! made by editing the metadata file while the command runs.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, assert_each_once, shared_cluster};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use support::{PATIENCE, Run, mck, newest_checkpoint, scrape};

fn a() -> &'static KafkaCluster {
    shared_cluster("a").expect("cluster a starts")
}

fn b() -> &'static KafkaCluster {
    shared_cluster("b").expect("cluster b starts")
}

/// One produced or read record: (cluster, topic, partition, value).
type Rec = (String, String, i32, String);

/// Produces `n` records to each partition; values `<prefix>-<partition>-<i>`.
fn fill(c: &dyn TestCluster, topic: &str, partitions: i32, n: usize, prefix: &str) -> Vec<Rec> {
    mck_testkit::fill_partitions(c, topic, partitions, n, prefix)
        .expect("produce")
        .into_iter()
        .map(|(p, v)| (c.logical_id().to_string(), topic.to_string(), p, v))
        .collect()
}

/// Writes a Flink-layout metadata file mapping `stream` to the given clusters' topics.
fn write_metadata(path: &Path, stream: &str, clusters: &[(&dyn TestCluster, &[&str])]) {
    mck_testkit::write_atomically(path, &mck_testkit::flink_metadata(stream, clusters));
}

/// Parses the JSON-lines output into records, checking each line's fields and the
/// per-partition offset order.
fn read_output(path: &Path) -> Vec<Rec> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    let mut last: BTreeMap<(String, String, i32), i64> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", i + 1));
        let cluster = v["cluster"].as_str().unwrap().to_string();
        let topic = v["topic"].as_str().unwrap().to_string();
        let partition = v["partition"].as_i64().unwrap() as i32;
        let offset = v["offset"].as_i64().unwrap();
        assert!(v["timestamp"].as_i64().unwrap() > 0, "{line}");
        assert!(v["key"].as_str().unwrap().starts_with('k'), "{line}");
        assert!(v["headers"].is_array(), "{line}");
        let streams = v["streams"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert!(
            !streams.is_empty()
                && streams
                    .iter()
                    .all(|s| s.as_str().is_some_and(|s| !s.is_empty())),
            "names its streams: {line}"
        );
        if let Some(prev) = last.insert((cluster.clone(), topic.clone(), partition), offset) {
            assert!(
                offset > prev,
                "offsets out of order at line {}: {line}",
                i + 1
            );
        }
        out.push((
            cluster,
            topic,
            partition,
            v["value"].as_str().unwrap().to_string(),
        ));
    }
    out
}

fn wait_for_lines(path: &Path, n: usize, run: &mut Run) {
    support::wait_for_lines(path, n, &mut run.child, Some(&run.stderr));
}

/// The lines a successful run printed (fails with its stderr otherwise).
fn stdout_lines(out: std::process::Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_bounded_read_of_two_clusters_prints_every_record_once_and_commits() {
    let topic = "bounded-read";
    a().create_topic(topic, 3).unwrap();
    b().create_topic(topic, 2).unwrap();
    let mut want = fill(a(), topic, 3, 40, "a");
    want.extend(fill(b(), topic, 2, 30, "b"));
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &[topic]), (b(), &[topic])]);
    let out = dir.path().join("out.jsonl");
    let group = "mck-bounded-group";
    let mut run = Run::start(
        &[
            s(&[
                "--metadata",
                &path_arg(&md),
                "--stream",
                "orders",
                "--until",
                "latest",
            ]),
            s(&["--group", group, "--output", &path_arg(&out)]),
        ]
        .concat(),
        dir.path().join("stderr"),
    );
    assert!(run.wait(), "bounded run failed; stderr:\n{}", run.stderr());
    assert_each_once(&read_output(&out), &want);

    // The group's committed offsets are the log ends, seen by a plain consumer.
    for (c, parts, n) in [(a(), 3, 40), (b(), 2, 30)] {
        let consumer: BaseConsumer = c.client_config().set("group.id", group).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..parts {
            tpl.add_partition(topic, p);
        }
        let committed = consumer
            .committed_offsets(tpl, Duration::from_secs(30))
            .unwrap();
        for e in committed.elements() {
            assert_eq!(
                e.offset(),
                Offset::Offset(n),
                "{} {}/{}",
                c.logical_id(),
                topic,
                e.partition()
            );
        }
    }

    // `--format value` prints just the values.
    let values = mck()
        .args([
            "consume",
            "--metadata",
            &path_arg(&md),
            "--stream",
            "orders",
        ])
        .args(["--until", "latest", "--format", "value"])
        .output()
        .unwrap();
    let got: BTreeSet<String> = stdout_lines(values).into_iter().collect();
    let expected: BTreeSet<String> = want.iter().map(|r| r.3.clone()).collect();
    assert_eq!(got, expected);
}

#[test]
fn bad_arguments_and_unknown_streams_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &["anything"])]);
    let out = mck()
        .args([
            "consume",
            "--metadata",
            &path_arg(&md),
            "--stream",
            "nope",
            "--until",
            "latest",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown stream id(s): nope"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let out = mck()
        .args([
            "consume",
            "--metadata",
            &path_arg(&md),
            "--stream",
            "orders",
            "--from",
            "yesterday",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("yesterday"));

    // Brokers where the file goes, as kcat takes them, are named back with -b.
    let out = mck()
        .args(["consume", "127.0.0.1:9092", "-t", "orders"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean -b 127.0.0.1:9092?"), "{err}");

    // The library's builder setting is said as the flag.
    let out = mck()
        .args([
            "consume",
            &path_arg(&md),
            "--stream",
            "orders",
            "-o",
            "committed",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mck: error: --group: starting from committed offsets needs a group id\n"
    );
}

/// A small deterministic generator for the kill moments (the seed is printed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn twenty_kill_nines_at_random_moments_leave_each_record_in_the_file_once() {
    let topic = "kill-loop";
    a().create_topic(topic, 3).unwrap();
    b().create_topic(topic, 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &[topic]), (b(), &[topic])]);
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("checkpoints");
    let args = [
        s(&[
            "--metadata",
            &path_arg(&md),
            "--stream",
            "orders",
            "--group",
            "mck-kill-loop",
        ]),
        s(&[
            "--output",
            &path_arg(&out),
            "--checkpoint-dir",
            &path_arg(&cps),
        ]),
        s(&["--checkpoint-interval", "50ms"]),
    ]
    .concat();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill-loop seed {seed}");
    let mut rng = Lcg(seed);
    let mut want = Vec::new();
    let mut grew = 0;
    let mut last_len = 0;
    for round in 0..20 {
        // Producers keep adding records between (and so during) the runs.
        want.extend(fill(a(), topic, 3, 60, &format!("a{round}")));
        want.extend(fill(b(), topic, 3, 60, &format!("b{round}")));
        let mut run = Run::start(&args, dir.path().join(format!("stderr-{round}")));
        std::thread::sleep(Duration::from_millis(100 + rng.below(1900)));
        let exited = run.child.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "run {round} exited early: {exited:?}\n{}",
            run.stderr()
        );
        run.child.kill().unwrap(); // SIGKILL
        run.child.wait().unwrap();
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        if len > last_len {
            grew += 1;
        }
        last_len = len;
    }
    assert!(grew > 0, "no run got far enough to write anything");
    // A last run reads the rest and stops cleanly on SIGTERM.
    let before = newest_checkpoint(&cps).map_or(0, |(n, _)| n);
    let mut run = Run::start(&args, dir.path().join("stderr-final"));
    // Done when the file holds every record and a checkpoint of this run covers it
    // (a killed run may have left lines past its last checkpoint: those are cut).
    run.wait_until("a checkpoint covering every record", PATIENCE, || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        text.lines().count() == want.len()
            && newest_checkpoint(&cps)
                .is_some_and(|(n, len)| n > before && len == text.len() as u64)
    });
    run.signal(libc::SIGTERM);
    assert!(run.wait(), "final run failed; stderr:\n{}", run.stderr());
    assert_each_once(&read_output(&out), &want);
}

#[test]
fn a_migration_made_by_editing_the_metadata_file_is_followed_exactly_once() {
    let topic = "migrate-by-file";
    a().create_topic(topic, 2).unwrap();
    b().create_topic(topic, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &[topic])]);
    let out = dir.path().join("out.jsonl");
    let port = mck_testkit::free_ports(1).unwrap()[0];
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut run = Run::start(
        &[
            s(&["--metadata", &path_arg(&md), "--stream", "orders"]),
            s(&[
                "--output",
                &path_arg(&out),
                "--checkpoint-dir",
                &path_arg(&dir.path().join("cp")),
            ]),
            s(&["--metrics-addr", &metrics_addr]),
        ]
        .concat(),
        dir.path().join("stderr"),
    );
    let mut want = fill(a(), topic, 2, 100, "a-before");
    wait_for_lines(&out, want.len(), &mut run);

    // A and B: producers move to B.
    write_metadata(&md, "orders", &[(a(), &[topic]), (b(), &[topic])]);
    want.extend(fill(a(), topic, 2, 20, "a-last"));
    want.extend(fill(b(), topic, 2, 100, "b-during"));
    wait_for_lines(&out, want.len(), &mut run);

    // A broken edit is reported and reading goes on with the last good metadata.
    std::fs::write(&md, "- streamId: [unclosed\n").unwrap();
    let stderr = run.stderr.clone();
    run.wait_until("a warning about the metadata file", PATIENCE, || {
        std::fs::read_to_string(&stderr)
            .unwrap_or_default()
            .contains("warning: metadata file")
    });
    want.extend(fill(b(), topic, 2, 10, "b-broken"));
    wait_for_lines(&out, want.len(), &mut run);

    // B only.
    write_metadata(&md, "orders", &[(b(), &[topic])]);
    want.extend(fill(b(), topic, 2, 100, "b-after"));
    wait_for_lines(&out, want.len(), &mut run);

    let metrics = scrape(&metrics_addr);
    assert!(metrics.contains("mck_records_total"), "{metrics}");
    assert!(metrics.contains("cluster=\"b\""), "{metrics}");
    // The lag figure: everything read, so B's splits are at 0, and A's series left
    // with A (a removed split's series goes within a few seconds).
    let lags = |m: &str| -> Vec<(String, String)> {
        m.lines()
            .filter_map(|l| l.strip_prefix("mck_split_lag{"))
            .filter_map(|l| l.split_once("} "))
            .map(|(labels, v)| (labels.to_string(), v.to_string()))
            .collect()
    };
    run.wait_until("B's lag at 0 and A's lag series gone", PATIENCE, || {
        let last = lags(&scrape(&metrics_addr));
        last.len() == 2
            && last
                .iter()
                .all(|(l, v)| l.starts_with("cluster=\"b\"") && v == "0")
    });

    run.signal(libc::SIGINT);
    assert!(run.wait(), "stderr:\n{}", run.stderr());
    assert_each_once(&read_output(&out), &want);
}

const BASE: i64 = 1_700_000_000_000;

/// History: `n` lines with timestamps BASE..BASE+n-1 in two files; returns the ids.
fn write_history(dir: &Path, n: i64) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let mut ids = Vec::new();
    let mut texts = [String::new(), String::new()];
    for i in 0..n {
        texts[(i % 2) as usize].push_str(&format!("{{\"id\":\"h-{i}\",\"ts\":{}}}\n", BASE + i));
        ids.push(format!("h-{i}"));
    }
    std::fs::write(dir.join("part-0.jsonl"), &texts[0]).unwrap();
    std::fs::write(dir.join("part-1.jsonl"), &texts[1]).unwrap();
    ids
}

/// Kafka records at BASE+n/2 .. BASE+n+n/2 per partition; returns the values strictly
/// after the history's largest timestamp (BASE+n-1).
fn fill_timed(c: &dyn TestCluster, topic: &str, n: i64) -> Vec<String> {
    c.create_topic(topic, 2).unwrap();
    let mut recs = Vec::new();
    let mut after = Vec::new();
    for p in 0..2 {
        for ts in BASE + n / 2..BASE + n + n / 2 {
            let v = format!("{}-{p}-{ts}", c.logical_id());
            recs.push(
                TestRecord::value(v.clone())
                    .to_partition(p)
                    .at(ts)
                    .with_key("k"),
            );
            if ts > BASE + n - 1 {
                after.push(v);
            }
        }
    }
    c.produce(topic, &recs).unwrap();
    after
}

/// Ids of history lines and values of Kafka records in a JSON-lines output.
fn hybrid_output(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v.get("file").is_some() {
                let inner: serde_json::Value =
                    serde_json::from_str(v["value"].as_str().unwrap()).unwrap();
                inner["id"].as_str().unwrap().to_string()
            } else {
                v["value"].as_str().unwrap().to_string()
            }
        })
        .collect()
}

#[test]
fn backfill_reads_history_then_kafka_after_it_once_across_kill_nines() {
    let topic = "backfill";
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let mut want = write_history(&history, 400);
    want.extend(fill_timed(a(), topic, 400));
    want.extend(fill_timed(b(), topic, 400));
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &[topic]), (b(), &[topic])]);
    let base = [
        s(&[
            "--metadata",
            &path_arg(&md),
            "--stream",
            "orders",
            "--until",
            "latest",
        ]),
        s(&[
            "--backfill",
            &path_arg(&history),
            "--backfill-timestamp-field",
            "ts",
        ]),
    ]
    .concat();

    // One run.
    let out = dir.path().join("once.jsonl");
    let mut run = Run::start(
        &[base.clone(), s(&["--output", &path_arg(&out)])].concat(),
        dir.path().join("stderr-once"),
    );
    assert!(run.wait(), "stderr:\n{}", run.stderr());
    assert_each_once(hybrid_output(&out), want.clone());

    // Kill -9 at random moments around the switch, then run to the end.
    let out = dir.path().join("killed.jsonl");
    let args = [
        base,
        s(&[
            "--output",
            &path_arg(&out),
            "--checkpoint-dir",
            &path_arg(&dir.path().join("cp")),
        ]),
        s(&["--checkpoint-interval", "20ms"]),
    ]
    .concat();
    let mut rng = Lcg(std::process::id() as u64);
    for round in 0..6 {
        let mut run = Run::start(&args, dir.path().join(format!("stderr-{round}")));
        std::thread::sleep(Duration::from_millis(50 + rng.below(1000)));
        if run.child.try_wait().unwrap().is_some() {
            break; // it finished: nothing left to interrupt
        }
        run.child.kill().unwrap();
        run.child.wait().unwrap();
    }
    let mut run = Run::start(&args, dir.path().join("stderr-final"));
    assert!(run.wait(), "stderr:\n{}", run.stderr());
    assert_each_once(hybrid_output(&out), want);
}

#[test]
fn a_malformed_history_line_fails_with_its_place_or_is_skipped_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    std::fs::create_dir_all(&history).unwrap();
    std::fs::write(
        history.join("h.jsonl"),
        format!(
            "{{\"id\":\"x\",\"ts\":{BASE}}}\n{{\"id\":\"y\"}}\n{{\"id\":\"z\",\"ts\":{}}}\n",
            BASE + 1
        ),
    )
    .unwrap();
    let topic = "backfill-malformed";
    a().create_topic(topic, 1).unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "orders", &[(a(), &[topic])]);
    let run = |extra: &[&str]| {
        mck()
            .args([
                "consume",
                "--metadata",
                &path_arg(&md),
                "--stream",
                "orders",
                "--until",
                "latest",
            ])
            .args([
                "--backfill",
                &path_arg(&history),
                "--backfill-timestamp-field",
                "ts",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let failed = run(&[]);
    assert_eq!(failed.status.code(), Some(1));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(err.contains("h.jsonl:2: no timestamp field `ts`"), "{err}");
    let skipped = run(&["--backfill-skip-malformed", "--format", "value"]);
    let lines = stdout_lines(skipped);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("\"x\"") || lines[1].contains("\"x\""));
}

/// `-c` beyond a batch: runs of `-c 2500`, `-c 2500` and `-c 7` on one checkpoint
/// directory, then `-e`, write each record once and exactly as many as asked each
/// time (whole batches are read while the count allows, single records after).
#[test]
fn counts_larger_than_a_batch_are_exact_across_runs_on_one_checkpoint() {
    let topic = "counted";
    a().create_topic(topic, 3).unwrap();
    let produced = fill(a(), topic, 3, 2000, "n");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, "counted", &[(a(), &[topic])]);
    let cps = dir.path().join("ck");
    let mut got = Vec::new();
    for count in [Some("2500"), Some("2500"), Some("7"), None] {
        let mut args = s(&["consume"]);
        args.push(path_arg(&md));
        args.extend(s(&["--stream", "counted", "--checkpoint-dir"]));
        args.push(path_arg(&cps));
        match count {
            Some(n) => args.extend(s(&["-c", n])),
            None => args.push("-e".into()),
        }
        let out = mck().args(&args).output().unwrap();
        let lines = stdout_lines(out);
        if let Some(n) = count {
            assert_eq!(lines.len(), n.parse::<usize>().unwrap(), "-c {n}");
        }
        for line in lines {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            got.push(v["value"].as_str().unwrap().to_string());
        }
    }
    assert_each_once(got, produced.into_iter().map(|r| r.3));
}

/// Quick mode (`-b HOST:PORT -t TOPIC`) waits for its cluster as a metadata file's run
/// waits for its clusters: a bounded run with `--startup-timeout 2s` fails at about
/// 2 s (not the 30 s of one metadata request) with the located line; a follow run
/// keeps waiting and reads once the cluster answers. The cluster "comes up" when a
/// proxy that held every connection is given its broker.
#[test]
fn quick_mode_waits_for_its_cluster_within_the_startup_timeout_or_follows_it_up() {
    use mck_testkit::proxy::FaultProxy;
    let topic = "quick-wait";
    a().create_topic(topic, 2).unwrap();
    let sent = fill(a(), topic, 2, 25, "qw");

    let held = FaultProxy::bind().unwrap();
    let began = Instant::now();
    let out = mck()
        .args(["consume", "-b", &held.addr().to_string(), "-t", topic, "-e"])
        .args(["--startup-timeout", "2s"])
        .output()
        .unwrap();
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        took < Duration::from_secs(10),
        "a 2 s start-up timeout ended after {took:?}: {stderr}"
    );
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "mck: error: cluster `kafka`: did not answer within the start-up timeout of 2s (bootstrap {})",
            held.addr()
        )),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.jsonl");
    let proxy = FaultProxy::bind().unwrap();
    let args = s(&[
        "-b",
        &proxy.addr().to_string(),
        "-t",
        topic,
        "--output",
        &path_arg(&file),
    ]);
    let mut run = Run::start(&args, dir.path().join("stderr"));
    // Longer than one metadata request's first patience (5 s) and than a start-up
    // timeout would be; the follow run has none.
    std::thread::sleep(Duration::from_secs(8));
    assert!(
        run.child.try_wait().unwrap().is_none(),
        "the follow run ended while its cluster did not answer: {}",
        run.stderr()
    );
    assert!(!run.stderr().contains("mck: error"), "{}", run.stderr());
    assert_eq!(support::lines_in(&file), 0);
    let broker: std::net::SocketAddr = a().bootstrap_servers().parse().unwrap();
    proxy.set_upstream(broker);
    wait_for_lines(&file, sent.len(), &mut run);
    run.signal(libc::SIGINT);
    assert!(run.wait(), "{}", run.stderr());
    let mut got = read_output(&file);
    let mut want = sent;
    got.sort();
    want.sort();
    // Quick mode's cluster is `kafka`, the test kit's is `a`.
    let want: Vec<Rec> = want
        .into_iter()
        .map(|(_, t, p, v)| ("kafka".to_string(), t, p, v))
        .collect();
    assert_eq!(got, want, "each record once");
}
