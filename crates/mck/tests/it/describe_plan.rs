//! `mck describe` and `mck plan` as a user runs them, against a real Kafka broker from
//! the test kit. Every test uses its own topics and groups, so they share one broker.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, shared_cluster};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use support::arg;

fn kafka() -> &'static KafkaCluster {
    shared_cluster("describe-plan").expect("the test broker starts")
}

/// A topic or group name no other test (or earlier run) uses.
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

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn topic_with(partitions: i32, counts: &[(i32, usize)]) -> String {
    let topic = unique("t");
    kafka().create_topic(&topic, partitions).unwrap();
    for &(p, n) in counts {
        let records: Vec<TestRecord> = (0..n)
            .map(|i| TestRecord::value(format!("r{i}")).to_partition(p))
            .collect();
        kafka().produce(&topic, &records).unwrap();
    }
    topic
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn mck(args: &[&str]) -> Output {
    support::mck().args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}{}", stdout(out), stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Finds the element of a JSON array whose `key` is `value`.
fn find<'a>(array: &'a Value, key: &str, value: &str) -> &'a Value {
    array
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {array}"))
        .iter()
        .find(|v| v[key] == value)
        .unwrap_or_else(|| panic!("no {key}={value} in {array}"))
}

fn partitions_of(topic: &Value) -> Vec<(i64, i64, i64)> {
    topic["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_i64().unwrap(),
                p["earliest"].as_i64().unwrap(),
                p["latest"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Deletes the records of `topic`/`partition` before `offset`, moving its earliest
/// offset there.
fn delete_before(topic: &str, partition: i32, offset: i64) {
    let admin: AdminClient<DefaultClientContext> = kafka().client_config().create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let done = block_on(admin.delete_records(&tpl, &opts)).unwrap();
    for e in done.elements() {
        assert!(e.error().is_ok(), "delete records: {:?}", e.error());
    }
}

/// Commits `offsets` for `group` with a plain consumer that never joins the group.
fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let consumer: BaseConsumer = kafka()
        .client_config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for &(p, o) in offsets {
        tpl.add_partition_offset(topic, p, Offset::Offset(o))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

#[test]
fn describe_shows_earliest_and_latest_offsets_of_every_partition_and_marks_missing_topics() {
    let topic = topic_with(3, &[(0, 5), (1, 2)]);
    delete_before(&topic, 0, 3);
    let missing = unique("never-created");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "m.yaml",
        &format!(
            "clusters:\n  east: {{ bootstrapServers: \"{}\" }}\nstreams:\n  orders:\n    clusters:\n      east: {{ topics: [{topic}, {missing}] }}\n",
            kafka().bootstrap_servers()
        ),
    );

    let v = json(&mck(&["describe", "--metadata", arg(&file), "--json"]));
    let stream = find(&v["streams"], "stream", "orders");
    let east = find(&stream["clusters"], "cluster", "east");
    assert_eq!(east["reachable"], true, "{east}");
    assert_eq!(east["kafkaClusterId"], kafka().kafka_cluster_id(), "{east}");
    let t = find(&east["topics"], "topic", &topic);
    assert_eq!(t["missing"], false);
    assert_eq!(partitions_of(t), [(0, 3, 5), (1, 0, 2), (2, 0, 0)], "{t}");
    assert_eq!(find(&east["topics"], "topic", &missing)["missing"], true);

    let out = mck(&["describe", "--metadata", arg(&file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("stream orders"), "{text}");
    assert!(
        text.contains(&format!("topic {topic}  3 partition(s)")),
        "{text}"
    );
    assert!(
        text.contains("partition  earliest  latest\n"),
        "no group, no lag columns: {text}"
    );
    assert!(
        text.contains("        0         3       5\n"),
        "partition 0 starts at 3 after the deletion: {text}"
    );
    assert!(
        text.contains(&format!("topic {missing}  missing on this cluster")),
        "{text}"
    );
}

#[test]
fn describe_shows_a_groups_committed_offsets_and_lag() {
    let topic = topic_with(3, &[(0, 10), (1, 4), (2, 6)]);
    let group = unique("g");
    commit(&group, &topic, &[(0, 7), (1, 4)]);
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "m.yaml",
        &format!(
            "clusters:\n  east: {{ bootstrapServers: \"{}\" }}\nstreams:\n  s:\n    clusters:\n      east: {{ topics: [{topic}] }}\n",
            kafka().bootstrap_servers()
        ),
    );

    let v = json(&mck(&[
        "describe",
        "--metadata",
        arg(&file),
        "--group",
        &group,
        "--json",
    ]));
    assert_eq!(v["group"], group.as_str());
    let t = &v["streams"][0]["clusters"][0]["topics"][0];
    let parts = t["partitions"].as_array().unwrap();
    assert_eq!(
        (&parts[0]["committed"], &parts[0]["lag"]),
        (&7.into(), &3.into()),
        "{t}"
    );
    assert_eq!(
        (&parts[1]["committed"], &parts[1]["lag"]),
        (&4.into(), &0.into()),
        "{t}"
    );
    assert_eq!(
        (&parts[2]["committed"], &parts[2]["lag"]),
        (&Value::Null, &Value::Null),
        "{t}"
    );
    assert_eq!(t["lag"], 3, "{t}");

    let out = mck(&["describe", "--metadata", arg(&file), "--group", &group]);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("topic {topic}  3 partition(s)  lag 3")),
        "{text}"
    );
    assert!(
        text.contains("partition  earliest  latest  committed  lag"),
        "{text}"
    );
    assert!(
        text.contains("        0         0      10          7    3"),
        "{text}"
    );
    assert!(
        text.contains("        2         0       6          -    -"),
        "{text}"
    );
}

#[test]
fn describe_marks_an_unreachable_cluster_shows_the_others_and_prints_no_secret() {
    let topic = topic_with(1, &[(0, 3)]);
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "m.yaml",
        &format!(
            "clusters:\n  east:\n    bootstrapServers: \"{}\"\n    properties: {{ sasl.password: east-pw-1b2c3d }}\n  dead:\n    bootstrapServers: \"{dead}\"\n    properties: {{ sasl.password: dead-pw-9z8y7x }}\nstreams:\n  s:\n    clusters:\n      east: {{ topics: [{topic}] }}\n      dead: {{ topics: [{topic}] }}\n",
            kafka().bootstrap_servers()
        ),
    );

    for extra in [&["--json"][..], &[][..]] {
        let mut args = vec!["describe", "--metadata", arg(&file), "--timeout", "2s"];
        args.extend_from_slice(extra);
        let out = mck(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let (text, err) = (stdout(&out), stderr(&out));
        for secret in ["east-pw-1b2c3d", "dead-pw-9z8y7x"] {
            assert!(
                !text.contains(secret) && !err.contains(secret),
                "{text}{err}"
            );
        }
        if extra.is_empty() {
            assert!(
                text.contains(&format!("cluster dead  bootstrap {dead}  unreachable: ")),
                "{text}"
            );
            assert!(text.contains("cluster east  bootstrap"), "{text}");
            assert!(text.contains("        0         0       3\n"), "{text}");
        } else {
            let v: Value = serde_json::from_str(&text).unwrap();
            let clusters = &v["streams"][0]["clusters"];
            let d = find(clusters, "cluster", "dead");
            assert_eq!(d["reachable"], false, "{d}");
            assert!(d["error"].as_str().is_some_and(|e| !e.is_empty()), "{d}");
            let e = find(clusters, "cluster", "east");
            assert_eq!(e["reachable"], true, "{e}");
            assert_eq!(partitions_of(&e["topics"][0]), [(0, 0, 3)], "{e}");
        }
    }
}

#[test]
fn describe_refuses_a_bad_file_and_an_unknown_stream() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.yaml",
        "streams:\n  s:\n    clusters:\n      c: {topics: [t]}\n",
    );
    let out = mck(&["describe", "--metadata", arg(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.yaml:"), "{err}");

    let good = write(
        dir.path(),
        "good.yaml",
        "clusters:\n  c: { bootstrapServers: \"127.0.0.1:1\" }\nstreams:\n  s:\n    clusters:\n      c: { topics: [t] }\n",
    );
    let out = mck(&["describe", "--metadata", arg(&good), "--stream", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown stream id(s): nope"), "{err}");
}

/// The old and new metadata of a migration on one broker seen under three logical ids:
/// on `east`, topic `ta` is replaced by `tc` and properties change; `retired` goes
/// away; `fresh` (starting at latest) and `dead` (unreachable) come in.
struct Migration {
    _dir: tempfile::TempDir,
    old: PathBuf,
    new: PathBuf,
    ta: String,
    tc: String,
    tr: String,
    tf: String,
}

fn migration() -> Migration {
    let ta = topic_with(2, &[(0, 4)]);
    let tb = topic_with(1, &[]);
    let tc = topic_with(4, &[(0, 3)]);
    let tr = topic_with(3, &[]);
    let tf = topic_with(2, &[(1, 5)]);
    let b = kafka().bootstrap_servers();
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let old = write(
        dir.path(),
        "old.yaml",
        &format!(
            "clusters:
  east:
    bootstrapServers: \"{b}\"
    properties: {{ client.id: reader-one, sasl.password: old-pw-4f5e6d }}
  retired: {{ bootstrapServers: \"{b}\" }}
streams:
  s:
    clusters:
      east: {{ topics: [{ta}, {tb}] }}
      retired: {{ topics: [{tr}] }}
"
        ),
    );
    let new = write(
        dir.path(),
        "new.yaml",
        &format!(
            "clusters:
  east:
    bootstrapServers: \"{b}\"
    properties: {{ client.id: reader-two, sasl.password: new-pw-7a8b9c }}
  fresh:
    bootstrapServers: \"{b}\"
    startingOffsets: latest
  dead: {{ bootstrapServers: \"{dead}\" }}
streams:
  s:
    clusters:
      east: {{ topics: [{tb}, {tc}] }}
      fresh: {{ topics: [{tf}] }}
      dead: {{ topics: [{tf}] }}
"
        ),
    );
    Migration {
        _dir: dir,
        old,
        new,
        ta,
        tc,
        tr,
        tf,
    }
}

fn splits(v: &Value, which: &str) -> Vec<(String, i64, Option<i64>)> {
    let mut out: Vec<_> = v["splits"][which]
        .as_array()
        .unwrap_or_else(|| panic!("no splits.{which} in {v}"))
        .iter()
        .map(|s| {
            (
                s["topic"].as_str().unwrap().to_string(),
                s["partition"].as_i64().unwrap(),
                s["startOffset"].as_i64(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn plan_shows_clusters_topics_properties_and_splits_with_their_start_offsets() {
    let m = migration();
    let out = mck(&[
        "plan",
        "--timeout",
        "2s",
        "--json",
        arg(&m.old),
        arg(&m.new),
    ]);
    let err = stderr(&out);
    let v = json(&out);
    assert_eq!(v["changed"], true);
    let clusters = &v["clusters"];

    let east = find(clusters, "cluster", "east");
    assert_eq!(east["change"], "changed");
    assert_eq!(east["topicsAdded"], serde_json::json!([m.tc]));
    assert_eq!(east["topicsRemoved"], serde_json::json!([m.ta]));
    let client_id = find(&east["propertiesChanged"], "key", "client.id");
    assert_eq!(
        (&client_id["old"], &client_id["new"]),
        (&"reader-one".into(), &"reader-two".into())
    );
    let pw = find(&east["propertiesChanged"], "key", "sasl.password");
    assert_eq!(pw["secret"], true);
    assert!(pw.get("old").is_none() && pw.get("new").is_none(), "{pw}");
    let tc = &m.tc;
    assert_eq!(
        splits(east, "added"),
        [
            (tc.clone(), 0, Some(0)),
            (tc.clone(), 1, Some(0)),
            (tc.clone(), 2, Some(0)),
            (tc.clone(), 3, Some(0))
        ],
        "a topic added to a cluster being read starts at earliest"
    );
    assert_eq!(
        splits(east, "removed"),
        [(m.ta.clone(), 0, None), (m.ta.clone(), 1, None)]
    );

    let fresh = find(clusters, "cluster", "fresh");
    assert_eq!(fresh["change"], "added");
    assert_eq!(fresh["start"]["offsets"], "latest");
    assert_eq!(
        splits(fresh, "added"),
        [(m.tf.clone(), 0, Some(0)), (m.tf.clone(), 1, Some(5))],
        "latest resolves to each partition's end"
    );

    let retired = find(clusters, "cluster", "retired");
    assert_eq!(retired["change"], "removed");
    let tr = &m.tr;
    assert_eq!(
        splits(retired, "removed"),
        [
            (tr.clone(), 0, None),
            (tr.clone(), 1, None),
            (tr.clone(), 2, None)
        ]
    );

    let dead = find(clusters, "cluster", "dead");
    assert_eq!(dead["change"], "added");
    assert_eq!(dead["splits"]["status"], "unreachable", "{dead}");

    let text = v.to_string() + &err;
    for secret in ["old-pw-4f5e6d", "new-pw-7a8b9c"] {
        assert!(!text.contains(secret), "{text}");
    }

    let out = mck(&["plan", "--timeout", "2s", arg(&m.old), arg(&m.new)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("cluster east: changed"), "{text}");
    assert!(
        text.contains(&format!(
            "  topics added: {tc}\n  topics removed: {}\n",
            m.ta
        )),
        "{text}"
    );
    assert!(
        text.contains("  property client.id changed: reader-one -> reader-two\n"),
        "{text}"
    );
    assert!(
        text.contains("  property sasl.password changed: (secret, value not shown)\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("    + {tc}/3 from offset 0\n")),
        "{text}"
    );
    assert!(text.contains(&format!("    - {}/1\n", m.ta)), "{text}");
    assert!(
        text.contains(&format!("    + {}/1 from offset 5\n", m.tf)),
        "{text}"
    );
    assert!(
        text.contains("new splits start at: latest (the cluster's startingOffsets)"),
        "{text}"
    );
    assert!(text.contains("cluster dead: added"), "{text}");
    assert!(text.contains("  splits: unknown, unreachable: "), "{text}");
    assert!(
        !text.contains("old-pw-4f5e6d") && !text.contains("new-pw-7a8b9c"),
        "{text}"
    );
}

#[test]
fn plan_offline_lists_topics_without_contacting_any_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, topics: &str| {
        write(
            dir.path(),
            name,
            &format!(
                "clusters:\n  a: {{ bootstrapServers: \"no-such-host.invalid:9092\" }}\nstreams:\n  s:\n    clusters:\n      a: {{ topics: [{topics}] }}\n"
            ),
        )
    };
    let (old, new) = (file("old.yaml", "x, y"), file("new.yaml", "y, z"));
    let out = mck(&["plan", "--offline", arg(&old), arg(&new)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("cluster a: changed (bootstrap no-such-host.invalid:9092)\n  topics added: z\n  topics removed: x\n"), "{text}");
    assert!(text.contains("  new splits start at: earliest"), "{text}");
    assert!(
        text.contains("  splits: not looked up (--offline)"),
        "{text}"
    );

    let v = json(&mck(&["plan", "--offline", "--json", arg(&old), arg(&new)]));
    assert_eq!(v["clusters"][0]["splits"]["status"], "offline");

    let same = json(&mck(&["plan", "--offline", "--json", arg(&old), arg(&old)]));
    assert_eq!(same["changed"], false);
    assert_eq!(same["clusters"], serde_json::json!([]));
}

#[test]
fn plan_of_an_invalid_file_gives_a_located_one_line_error_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.yaml",
        "clusters:\n  east: { bootstrapServers: \"a:9092\" }\nstreams:\n  s:\n    clusters:\n      east: { topics: [t] }\n",
    );
    let bad = write(
        dir.path(),
        "bad.yaml",
        "clusters:\n  east:\n    bootstrapServers: a:9092\nstreams:\n  s:\n    clusters:\n      west: { topics: [t] }\n",
    );
    let out = mck(&["plan", "--offline", arg(&good), arg(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.yaml:7:") && err.contains("west"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());

    let out = mck(&["plan", "/nonexistent/old.yaml", arg(&good)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/old.yaml"),
        "{}",
        stderr(&out)
    );
}
