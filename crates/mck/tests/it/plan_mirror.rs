//! `mck plan` of a switch onto a mirror, through the binary against real brokers: a
//! checkpoint written by a `mck consume` run of the old file, then the plan of the
//! edit that takes the source out, with each partition's translated lower bound on
//! the mirror, how it was found and what would hold it up.
//!
//! The "mirror" is written by the test: the same records, with the same timestamps,
//! produced to `west` after a few records of its own (so its offsets differ from
//! `east`'s), and without the newest records of one partition (so it lags there).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, read_topic, shared_cluster};
use serde_json::Value;
use support::{PATIENCE, Run, arg, checkpoint_files};

fn east() -> &'static KafkaCluster {
    shared_cluster("plan-east").expect("the east broker starts")
}

fn west() -> &'static KafkaCluster {
    shared_cluster("plan-west").expect("the west broker starts")
}

/// A topic name no other test (or earlier run) uses.
fn unique(name: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{name}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A minute ago, in ms: record timestamps well inside the brokers' retention.
fn base_time() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000
}

/// `prefix0`, `prefix1`, … to partition `p`, the i-th at `ts(i)`.
fn records(prefix: &str, p: i32, n: usize, ts: impl Fn(i64) -> i64) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            TestRecord::value(format!("{prefix}{i}"))
                .to_partition(p)
                .with_key(format!("k{i}"))
                .at(ts(i as i64))
        })
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A metadata file with `east` reading `east_topics` (when given) and `west` reading
/// `west_topics` as a mirror of east.
fn metadata(
    east_topics: Option<&[&str]>,
    west_topics: &[&str],
    mirror_of: &str,
    west_bootstrap: &str,
) -> String {
    let mut yaml = format!(
        "clusters:\n  east: {{bootstrapServers: \"{}\"}}\n  west: {{bootstrapServers: \"{west_bootstrap}\"}}\nstreams:\n  s:\n    clusters:\n",
        east().bootstrap_servers(),
    );
    if let Some(topics) = east_topics {
        yaml.push_str(&format!(
            "      east: {{topics: [{}]}}\n",
            topics.join(", ")
        ));
    }
    yaml.push_str(&format!(
        "      west:\n        topics: [{}]\n        mirrorOf: {mirror_of}\n",
        west_topics.join(", ")
    ));
    yaml
}

fn mck(args: &[&str]) -> Output {
    support::mck().args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(out)
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&text(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Runs `mck consume old --stream s --output … --checkpoint-dir dir --until=latest`
/// to its end, as a user would before the switch.
fn consume(old: &Path, dir: &Path) -> PathBuf {
    let checkpoints = dir.join("ck");
    let p = |p: &Path| p.display().to_string();
    let args = [
        p(old),
        "--stream".into(),
        "s".into(),
        "--output".into(),
        p(&dir.join("out.jsonl")),
        "--checkpoint-dir".into(),
        p(&checkpoints),
        "--until=latest".into(),
    ];
    let mut run = Run::start(&args, dir.join("consume.stderr"));
    let status = run.exit_within(PATIENCE).expect("the bounded run ends");
    assert!(status.success(), "{status}: {}", run.stderr());
    checkpoints
}

/// The switch's partitions as (topic, partition, sourceOffset, lowerBound, foundBy,
/// flags).
type Row = (
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Vec<String>,
);

fn rows(switch: &Value) -> Vec<Row> {
    switch["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("no partitions: {switch}"))
        .iter()
        .map(|p| {
            (
                p["topic"].as_str().unwrap().to_string(),
                p["partition"].as_i64(),
                p["sourceOffset"].as_i64(),
                p["lowerBound"].as_i64(),
                p["foundBy"].as_str().map(str::to_string),
                p["flags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

fn row(topic: &str, p: Option<i64>, source: Option<i64>, lower: Option<i64>) -> Row {
    (topic.to_string(), p, source, lower, None, Vec::new())
}

fn only_switch(v: &Value) -> &Value {
    let switches = v["switches"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(switches.len(), 1, "{v}");
    &switches[0]
}

#[test]
fn a_switch_by_timestamp_shows_each_partitions_lower_bound_and_flags_what_lags() {
    let (t, t2) = (unique("orders"), unique("refunds"));
    east().create_topic(&t, 2).unwrap();
    east().create_topic(&t2, 1).unwrap();
    west().create_topic(&t, 3).unwrap();
    let base = base_time();
    // Partition 0: two records per timestamp, so the first record at the last one's
    // timestamp is the one before it. Partition 1: one timestamp each.
    let p0 = records("a", 0, 10, |i| base + i / 2);
    let p1 = records("b", 1, 6, |i| base + 100 + i);
    east().produce(&t, &p0).unwrap();
    east().produce(&t, &p1).unwrap();
    east()
        .produce(&t2, &records("c", 0, 2, |i| base + i))
        .unwrap();
    // West: records of its own first, then the copies; partition 1 lacks the newest
    // two, partition 2 has no counterpart on east.
    west()
        .produce(&t, &records("x", 0, 3, |i| base - 1_000 + i))
        .unwrap();
    west().produce(&t, &p0).unwrap();
    west()
        .produce(&t, &records("y", 1, 2, |i| base - 1_000 + i))
        .unwrap();
    west().produce(&t, &p1[..4]).unwrap();
    west()
        .produce(&t, &records("z", 2, 1, |i| base + i))
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mirror_of = "{cluster: east, translate: timestamp}";
    let west_bootstrap = west().bootstrap_servers();
    let old = write(
        dir.path(),
        "old.yaml",
        &metadata(Some(&[&t, &t2]), &[&t], mirror_of, &west_bootstrap),
    );
    let new = write(
        dir.path(),
        "new.yaml",
        &metadata(None, &[&t, &t2], mirror_of, &west_bootstrap),
    );
    let ck = consume(&old, dir.path());

    let v = json(&mck(&[
        "plan",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&ck),
        "--json",
    ]));
    let s = only_switch(&v);
    assert_eq!(
        (&s["stream"], &s["source"], &s["mirror"], &s["translate"]),
        (
            &Value::from("s"),
            &Value::from("east"),
            &Value::from("west"),
            &Value::from("timestamp")
        ),
        "{s}"
    );
    assert_eq!(s["status"], "known", "{s}");
    let newest = checkpoint_files(&ck).pop().unwrap();
    assert_eq!(s["checkpoint"], arg(&newest), "{s}");
    let ts = |r: Row| -> Row { (r.0, r.1, r.2, r.3, Some("timestamp".into()), r.5) };
    let flag = |mut r: Row, f: &str| -> Row {
        r.5.push(f.into());
        r
    };
    assert_eq!(
        rows(s),
        [
            // a9 (east offset 9, at base+4) is at 3 + 9 on west; the first record at
            // base+4 there is a8, one before it.
            ts(row(&t, Some(0), Some(9), Some(11))),
            // b5 is not on west: nothing that late, so its end, 2 + 4.
            flag(ts(row(&t, Some(1), Some(5), Some(6))), "lags"),
            flag(row(&t, Some(2), None, None), "no position"),
            flag(row(&t2, Some(0), Some(1), None), "topic missing"),
        ],
        "{s}"
    );
    let p0 = &s["partitions"][0];
    assert_eq!(
        (
            &p0["sourceTopic"],
            &p0["sourceNextOffset"],
            &p0["mirrorEnd"]
        ),
        (&Value::from(t.as_str()), &Value::from(10), &Value::from(13)),
        "{p0}"
    );
    // The lower bound is at or before the copy of the last record, at its timestamp.
    let copy = read_topic(west(), &t).unwrap();
    let at = |o: i64| {
        copy.iter()
            .find(|r| r.partition == 0 && r.offset == o)
            .unwrap()
    };
    assert_eq!(at(11).value, b"a8");
    assert_eq!(at(12).value, b"a9");
    assert_eq!(at(11).timestamp, at(12).timestamp);

    let out = text(&mck(&[
        "plan",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&ck),
    ]));
    for line in [
        "switch in stream s: east -> west (translate timestamp)\n".to_string(),
        format!("  positions: checkpoint {}\n", newest.display()),
        format!("  {t}/0 continues east {t}/0 after offset 9: lower bound 11 (timestamp)\n"),
        format!("  {t}/1 continues east {t}/1 after offset 5: lower bound 6 (timestamp)  [lags]\n"),
        format!("  {t}/2 continues east {t}/2  [no position]\n"),
        format!("  {t2}/0 continues east {t2}/0 after offset 1  [topic missing]\n"),
    ] {
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }

    // The same from the checkpoint file itself.
    let from_file = json(&mck(&[
        "plan",
        arg(&old),
        arg(&new),
        "--checkpoint",
        arg(&newest),
        "--json",
    ]));
    assert_eq!(rows(only_switch(&from_file)), rows(s));

    // Without a checkpoint: the pairing and what the mirror lacks, no offsets.
    let out = text(&mck(&["plan", arg(&old), arg(&new)]));
    assert!(
        out.contains("  translated offsets need a checkpoint (--checkpoint-dir DIR or --checkpoint FILE): pairing only\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("  {t}/0 continues east {t}/0\n")),
        "{out}"
    );
    assert!(
        out.contains(&format!("  {t2} continues east {t2}  [topic missing]\n")),
        "{out}"
    );
    let v = json(&mck(&["plan", arg(&old), arg(&new), "--json"]));
    let s = only_switch(&v);
    assert_eq!(s["checkpoint"], Value::Null, "{s}");
    assert_eq!(
        rows(s),
        [
            row(&t, Some(0), None, None),
            row(&t, Some(1), None, None),
            row(&t, Some(2), None, None),
            flag(row(&t2, None, None, None), "topic missing"),
        ],
        "{s}"
    );

    // Offline: the checkpoint's positions, nothing asked.
    let out = text(&mck(&[
        "plan",
        "--offline",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&ck),
    ]));
    assert!(
        out.contains("  mirror partitions and translated offsets: not looked up (--offline)\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("  {t}/0 continues east {t}/0 after offset 9\n")),
        "{out}"
    );
    assert!(out.contains("cluster west: added"), "{out}");
    let v = json(&mck(&[
        "plan",
        "--offline",
        "--json",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&ck),
    ]));
    let s = only_switch(&v);
    assert_eq!(s["status"], "offline", "{s}");
    assert_eq!(
        rows(s),
        [
            row(&t, Some(0), Some(9), None),
            row(&t, Some(1), Some(5), None),
            row(&t2, Some(0), Some(1), None),
        ],
        "{s}"
    );
}

#[test]
fn identical_and_mm2_mirrors_translate_by_offset_sync_checkpoint_and_timestamp() {
    let t = unique("ledger");
    let copy = format!("east.{t}");
    east().create_topic(&t, 2).unwrap();
    west().create_topic(&t, 2).unwrap();
    west().create_topic(&copy, 2).unwrap();
    let base = base_time();
    let p0 = records("a", 0, 5, |i| base + i);
    let p1 = records("b", 1, 4, |i| base + 10 + i);
    east().produce(&t, &p0).unwrap();
    east().produce(&t, &p1).unwrap();
    // An offset-preserving copy lacking the newest record of partition 1.
    west().produce(&t, &p0).unwrap();
    west().produce(&t, &p1[..3]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let west_bootstrap = west().bootstrap_servers();
    let identical = "{cluster: east, translate: identical}";
    let old = write(
        dir.path(),
        "old.yaml",
        &metadata(Some(&[&t]), &[&t], identical, &west_bootstrap),
    );
    let new = write(
        dir.path(),
        "new.yaml",
        &metadata(None, &[&t], identical, &west_bootstrap),
    );
    let ck = consume(&old, dir.path());
    let v = json(&mck(&[
        "plan",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&ck),
        "--json",
    ]));
    let by = |r: Row, how: &str, flags: &[&str]| -> Row {
        (
            r.0,
            r.1,
            r.2,
            r.3,
            Some(how.into()),
            flags.iter().map(|f| f.to_string()).collect(),
        )
    };
    assert_eq!(
        rows(only_switch(&v)),
        [
            by(row(&t, Some(0), Some(4), Some(4)), "identical", &[]),
            by(row(&t, Some(1), Some(3), Some(3)), "identical", &["lags"]),
        ],
        "{v}"
    );

    // MirrorMaker's naming, with its offset syncs and checkpoints on the mirror. The
    // copy of partition 0 starts with two records of its own.
    west()
        .produce(&copy, &records("x", 0, 2, |i| base - 1_000 + i))
        .unwrap();
    west().produce(&copy, &p0).unwrap();
    west().produce(&copy, &p1).unwrap();
    let mm2 = write(
        dir.path(),
        "mm2.yaml",
        &metadata(
            None,
            &[&copy],
            "{cluster: east, translate: mm2}",
            &west_bootstrap,
        ),
    );
    let plan_mm2 = |group: Option<&str>| {
        let mut args = vec![
            "plan",
            arg(&old),
            arg(&mm2),
            "--checkpoint-dir",
            arg(&ck),
            "--json",
        ];
        if let Some(g) = group {
            args.extend(["--group", g]);
        }
        let v = json(&mck(&args));
        let s = only_switch(&v).clone();
        assert_eq!(s["topics"][0]["sourceTopic"], t.as_str(), "{s}");
        assert_eq!(s["syncWarning"], Value::Null, "{s}");
        rows(&s)
    };
    // No offset syncs yet: by timestamp.
    assert_eq!(
        plan_mm2(None),
        [
            by(row(&copy, Some(0), Some(4), Some(6)), "timestamp", &[]),
            by(row(&copy, Some(1), Some(3), Some(3)), "timestamp", &[]),
        ]
    );
    // a2 (east offset 2) is at 4 on the copy; a sync past the last record (a4 at
    // east offset 4) is no use. The group's checkpoint: east offset 1 of partition 1
    // is at 1.
    let syncs = "mm2-offset-syncs.east.internal";
    west().create_topic(syncs, 1).unwrap();
    west()
        .produce(
            syncs,
            &[
                offset_sync(&t, 0, 2, 4),
                offset_sync(&t, 0, 9, 11),
                offset_sync(&unique("other"), 1, 0, 0),
            ],
        )
        .unwrap();
    let checkpoints = "east.checkpoints.internal";
    west().create_topic(checkpoints, 1).unwrap();
    west()
        .produce(
            checkpoints,
            &[
                group_checkpoint("g", &copy, 1, 1, 1),
                group_checkpoint("other-group", &copy, 1, 3, 3),
            ],
        )
        .unwrap();
    assert_eq!(
        plan_mm2(None),
        [
            by(row(&copy, Some(0), Some(4), Some(4)), "sync", &[]),
            by(row(&copy, Some(1), Some(3), Some(3)), "timestamp", &[]),
        ]
    );
    assert_eq!(
        plan_mm2(Some("g")),
        [
            by(row(&copy, Some(0), Some(4), Some(4)), "sync", &[]),
            by(row(&copy, Some(1), Some(3), Some(1)), "checkpoint", &[]),
        ]
    );
}

/// A string as MirrorMaker 2's records hold it: an `INT16` length, then UTF-8.
fn mm2_string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as i16).to_be_bytes().to_vec();
    out.extend(s.as_bytes());
    out
}

/// MirrorMaker 2's offset sync: `topic`/`p` at `upstream` on the source is at
/// `downstream` on the copy.
fn offset_sync(topic: &str, p: i32, upstream: i64, downstream: i64) -> TestRecord {
    let mut key = mm2_string(topic);
    key.extend(p.to_be_bytes());
    let mut value = upstream.to_be_bytes().to_vec();
    value.extend(downstream.to_be_bytes());
    TestRecord::value(value).with_key(key).to_partition(0)
}

/// MirrorMaker 2's checkpoint of `group` on the copy's `topic`/`p`.
fn group_checkpoint(
    group: &str,
    topic: &str,
    p: i32,
    upstream: i64,
    downstream: i64,
) -> TestRecord {
    let mut key = mm2_string(group);
    key.extend(mm2_string(topic));
    key.extend(p.to_be_bytes());
    let mut value = 0i16.to_be_bytes().to_vec();
    value.extend(upstream.to_be_bytes());
    value.extend(downstream.to_be_bytes());
    value.extend(mm2_string(""));
    TestRecord::value(value).with_key(key).to_partition(0)
}

#[test]
fn a_mirror_that_does_not_answer_is_reported_and_a_bad_checkpoint_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("127.0.0.1:{}", listener.local_addr().unwrap().port())
    };
    let mirror_of = "{cluster: east, translate: timestamp}";
    let old = write(
        dir.path(),
        "old.yaml",
        &metadata(Some(&["t"]), &["t"], mirror_of, &closed),
    );
    let new = write(
        dir.path(),
        "new.yaml",
        &metadata(None, &["t"], mirror_of, &closed),
    );
    let checkpoint = write(
        dir.path(),
        "checkpoint.json",
        r#"{"format":"multicluster-kafka/checkpoint","version":3,"checkpoint":{"clusters":{"east":{"splits":[{"topic":"t","partition":0,"nextOffset":7}]}}}}"#,
    );
    let v = json(&mck(&[
        "plan",
        "--timeout",
        "2s",
        arg(&old),
        arg(&new),
        "--checkpoint",
        arg(&checkpoint),
        "--json",
    ]));
    let s = only_switch(&v);
    assert_eq!(s["status"], "unreachable", "{s}");
    assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()), "{s}");
    // What the checkpoint says is still shown.
    assert_eq!(s["partitions"][0]["sourceNextOffset"], 7, "{s}");
    let out = text(&mck(&[
        "plan",
        "--timeout",
        "2s",
        arg(&old),
        arg(&new),
        "--checkpoint",
        arg(&checkpoint),
    ]));
    assert!(
        out.contains("  WARNING: the mirror west does not answer: "),
        "{out}"
    );
    assert!(
        out.contains("  t/0 continues east t/0 at offset 7 (nothing handed out)\n"),
        "{out}"
    );

    let bad = write(dir.path(), "bad.json", "{\"format\":\"x\"}");
    let out = mck(&[
        "plan",
        "--offline",
        arg(&old),
        arg(&new),
        "--checkpoint",
        arg(&bad),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("mck: error: --checkpoint {}: ", bad.display()))
            && err.lines().count() == 1,
        "{err}"
    );
    let empty = dir.path().join("none");
    std::fs::create_dir(&empty).unwrap();
    let out = mck(&[
        "plan",
        "--offline",
        arg(&old),
        arg(&new),
        "--checkpoint-dir",
        arg(&empty),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no checkpoint there"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
