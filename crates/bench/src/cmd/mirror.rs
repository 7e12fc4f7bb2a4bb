//! Moving onto a MirrorMaker 2 copy: how long from the metadata write (a planned
//! switch) to the first record from the mirror, and from the source broker's death (a
//! failover with `failoverAfter`) to every split continuing on the mirror; and how
//! many records each way of continuing would repeat or skip, all against the same copy
//! in one run:
//!
//! - this source (the lower bound from MirrorMaker's offset syncs on the mirror, then
//!   the search for the last record handed out);
//! - MirrorMaker's own translation of the group's committed offsets,
//!   `RemoteClusterUtils.translateOffsets` (run as a small Java program against the
//!   same jars);
//! - a timestamp lookup: the first offset on the mirror at the timestamp of the last
//!   record handed out, per partition.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::mirror::OffsetSyncsLocation;
use mck_testkit::{KafkaCluster, MirrorMaker, MirrorOptions, TestCluster};
use multicluster_kafka::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// `mck-bench mirror` options.
#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    /// Records per partition produced before the planned switch's reader starts (a
    /// backlog MirrorMaker copies with its usual sync spacing).
    #[arg(long, default_value_t = 5_000)]
    pub backlog: usize,
    /// Records handed out on the source before the planned switch.
    #[arg(long, default_value_t = 10_000)]
    pub handed: usize,
    /// Seconds of reading on the source before the failover's broker kill.
    #[arg(long, default_value_t = 8)]
    pub read_before: u64,
    /// The mirror's `failoverAfter` in the failover measure, in seconds.
    #[arg(long, default_value_t = 5)]
    pub failover_after: u64,
    /// MirrorMaker's `offset.lag.max` (its default is 100).
    #[arg(long, default_value_t = 100)]
    pub offset_lag_max: u64,
}

const PLANNED: &str = "planned";
const FAILOVER: &str = "failover";
const GROUP: &str = "bench-mirror";

fn yaml(
    a: &KafkaCluster,
    b: &KafkaCluster,
    topic: &str,
    with_source: bool,
    failover: Option<u64>,
) -> String {
    let (ia, ib) = (a.logical_id(), b.logical_id());
    let mut out = format!(
        "clusters:\n  {ia}: {{bootstrapServers: \"{}\"}}\n  {ib}: {{bootstrapServers: \"{}\"}}\nstreams:\n  s:\n    clusters:\n",
        a.bootstrap_servers(),
        b.bootstrap_servers()
    );
    if with_source {
        out.push_str(&format!("      {ia}: {{topics: [{topic}]}}\n"));
    }
    let after = failover.map_or(String::new(), |s| format!(", failoverAfter: {s}s"));
    out.push_str(&format!(
        "      {ib}:\n        topics: [{ia}.{topic}]\n        mirrorOf: {{cluster: {ia}, translate: mm2{after}}}\n"
    ));
    out
}

/// What was handed out before the switch: values, and per partition the last
/// record's timestamp.
#[derive(Default)]
struct Handed {
    values: BTreeSet<String>,
    last_ts: BTreeMap<i32, i64>,
    positions: BTreeMap<i32, i64>,
}

/// How many records starting each partition of the copy at `starts` would repeat
/// (handed out before) and skip (never handed out, and before the start).
fn repeats_and_skips(
    copy: &[mck_testkit::ReadRecord],
    handed: &Handed,
    starts: &BTreeMap<i32, i64>,
) -> (usize, usize) {
    let (mut repeated, mut skipped) = (0, 0);
    for r in copy {
        let value = String::from_utf8_lossy(&r.value).to_string();
        let Some(start) = starts.get(&r.partition) else {
            continue;
        };
        let seen = handed.values.contains(&value);
        if r.offset >= *start && seen {
            repeated += 1;
        } else if r.offset < *start && !seen {
            skipped += 1;
        }
    }
    (repeated, skipped)
}

fn offsets_at_times(b: &KafkaCluster, topic: &str, at: &BTreeMap<i32, i64>) -> BTreeMap<i32, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap_servers())
        .set("group.id", "bench-mirror-lookup")
        .create()
        .expect("a lookup consumer");
    let mut tpl = TopicPartitionList::new();
    for (p, ts) in at {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*ts))
            .unwrap();
    }
    let got = consumer
        .offsets_for_times(tpl, Duration::from_secs(10))
        .expect("offsets for times");
    got.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

/// MirrorMaker's `RemoteClusterUtils.translateOffsets` for the group, against the
/// mirror cluster: partition → offset.
fn translate_offsets(libs: &Path, b: &KafkaCluster, alias: &str) -> BTreeMap<i32, i64> {
    let dir = std::env::temp_dir().join(format!("mck-bench-translate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("Translate.java");
    std::fs::write(
        &source,
        "import java.time.Duration;\nimport java.util.*;\n\
         public class Translate {\n  public static void main(String[] a) throws Exception {\n\
         Map<String, Object> props = new HashMap<>();\n    props.put(\"bootstrap.servers\", a[0]);\n\
         var out = org.apache.kafka.connect.mirror.RemoteClusterUtils.translateOffsets(props, a[1], a[2], Duration.ofSeconds(30));\n\
         for (var e : out.entrySet()) System.out.println(e.getKey().partition() + \" \" + e.getValue().offset());\n  }\n}\n",
    )
    .unwrap();
    let out = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg(&source)
        .args([&b.bootstrap_servers(), alias, GROUP])
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "translateOffsets failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (p, o) = l.split_once(' ')?;
            Some((p.parse().ok()?, o.parse().ok()?))
        })
        .collect()
}

/// Waits until the copy `topic` on `b` holds at least `n` records.
fn mm2_wait(b: &KafkaCluster, topic: &str, n: usize) {
    let until = Instant::now() + Duration::from_secs(180);
    while mck_testkit::read_topic(b, topic).map_or(0, |r| r.len()) < n {
        assert!(
            Instant::now() < until,
            "MirrorMaker did not copy {n} records within 180 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Reads what comes for `how_long`.
async fn read_for(
    source: &mut KafkaSourceStream<Utf8>,
    how_long: Duration,
    seen: &mut Vec<Record<String>>,
) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), source.next()).await {
            seen.push(r.unwrap());
        }
    }
}

/// Reads until a record of `cluster` comes; returns the time it took and the records.
async fn until_first_of(
    source: &mut KafkaSourceStream<Utf8>,
    cluster: &str,
    seen: &mut Vec<Record<String>>,
) -> Duration {
    let t0 = Instant::now();
    loop {
        let r = tokio::time::timeout(Duration::from_secs(120), source.next())
            .await
            .expect("a record within 120 s")
            .expect("the stream continues")
            .expect("a record");
        let done = &*r.cluster == cluster;
        seen.push(r);
        if done {
            return t0.elapsed();
        }
    }
}

fn handed_of(seen: &[Record<String>]) -> Handed {
    let mut h = Handed::default();
    for r in seen {
        h.values.insert(r.value.clone());
        if let Some(ts) = r.timestamp {
            h.last_ts.insert(r.partition, ts);
        }
        h.positions.insert(r.partition, r.offset + 1);
    }
    h
}

fn duplicates(seen: &[Record<String>]) -> usize {
    let mut values = BTreeSet::new();
    seen.iter()
        .filter(|r| !values.insert(r.value.clone()))
        .count()
}

pub fn mirror(args: &MirrorArgs) {
    let (a, b) = mck_bench::start_clusters();
    let (a, b): (&'static KafkaCluster, &'static KafkaCluster) =
        (Box::leak(Box::new(a)), Box::leak(Box::new(b)));
    for t in [PLANNED, FAILOVER] {
        a.create_topic(t, 4).unwrap();
    }
    let mm2 = MirrorMaker::start(
        MirrorOptions::between(a.logical_id(), a, b.logical_id(), b)
            .topics(format!("{PLANNED}|{FAILOVER}"))
            .groups(GROUP)
            .offset_syncs_on(OffsetSyncsLocation::Target)
            .offset_lag_max(args.offset_lag_max)
            .emit_checkpoints_every(Duration::from_secs(1))
            .refresh_every(Duration::from_secs(1)),
    )
    .expect("MirrorMaker starts");
    mck_testkit::fill_values(a, PLANNED, 4, args.backlog, "backlog");
    let stop = Arc::new(AtomicBool::new(false));
    let producers = [PLANNED, FAILOVER]
        .map(|t| mck_testkit::produce_until_stopped(a, t, "m", true, stop.clone()));
    let dir = std::env::temp_dir().join(format!("mck-bench-mirror-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = mck_testkit::runtime();

    // A planned switch.
    let path = dir.join("planned.yaml");
    std::fs::write(&path, yaml(a, b, PLANNED, true, None)).unwrap();
    let copy_topic = format!("{}.{PLANNED}", a.logical_id());
    let (switch_ms, ours_dups, handed, seen_after) = rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .metadata_service(FileMetadataService::watch(&path).unwrap())
            .stream_ids(["s"])
            .group_id(GROUP)
            .deserializer(Utf8)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        let mut last_commit = Instant::now();
        while seen.len() < args.handed {
            let r = tokio::time::timeout(Duration::from_secs(60), source.next())
                .await
                .expect("records within 60 s")
                .expect("the stream continues");
            seen.push(r.unwrap());
            if last_commit.elapsed() > Duration::from_millis(500) {
                let cp = source.checkpoint().unwrap();
                source.commit(&cp).await.unwrap();
                last_commit = Instant::now();
            }
        }
        // The copy holds the backlog before the switch, so its time is the switch's.
        let backlog = 4 * args.backlog;
        tokio::task::spawn_blocking(move || {
            mm2_wait(b, &format!("{}.{PLANNED}", a.logical_id()), backlog)
        })
        .await
        .unwrap();
        // The last commit: what MirrorMaker's checkpoints translate.
        let cp = source.checkpoint().unwrap();
        source.commit(&cp).await.unwrap();
        let handed = handed_of(&seen);
        let before = seen.len();
        eprintln!("planned switch after {before} records");
        std::fs::write(&path, yaml(a, b, PLANNED, false, None)).unwrap();
        let took = until_first_of(&mut source, b.logical_id(), &mut seen).await;
        // Read on a while, to count duplicates after the switch.
        read_for(&mut source, Duration::from_secs(3), &mut seen).await;
        let after = seen.len() - before;
        source.close().await;
        (took.as_secs_f64() * 1e3, duplicates(&seen), handed, after)
    });
    // Let MirrorMaker emit checkpoints of the last commit, then the peers.
    std::thread::sleep(Duration::from_secs(5));
    let copy = mck_testkit::read_topic(b, &copy_topic).expect("the copy reads");
    let libs = mck_testkit::mirror_libs().expect("MirrorMaker's jars");
    let mm2_starts = translate_offsets(&libs, b, a.logical_id());
    let ts_starts = offsets_at_times(b, &copy_topic, &handed.last_ts);
    let (mm2_rep, mm2_skip) = repeats_and_skips(&copy, &handed, &mm2_starts);
    let (ts_rep, ts_skip) = repeats_and_skips(&copy, &handed, &ts_starts);

    // A failover: the source broker dies.
    let path = dir.join("failover.yaml");
    std::fs::write(&path, yaml(a, b, FAILOVER, true, Some(args.failover_after))).unwrap();
    let (failover_ms, failover_dups, failover_after_reads) = rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .metadata_service(FileMetadataService::watch(&path).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .client_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        read_for(
            &mut source,
            Duration::from_secs(args.read_before),
            &mut seen,
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        // Drain what is buffered from the source, so the measure starts at the kill.
        while let Ok(Some(r)) =
            tokio::time::timeout(Duration::from_millis(300), source.next()).await
        {
            seen.push(r.unwrap());
        }
        let before = seen.len();
        tokio::task::spawn_blocking(move || a.kill_broker(0).unwrap())
            .await
            .unwrap();
        // Everything the source held was handed out, so the mirror holds nothing new:
        // the measure is the kill to every split continuing on the mirror (it found
        // the last record handed out), and any record handed out after is a repeat.
        let t0 = Instant::now();
        loop {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "no failover within 120 s"
            );
            let cp = source.checkpoint().unwrap();
            let continued = cp.clusters.get(b.logical_id()).is_some_and(|c| {
                c.splits.len() == 4
                    && c.splits
                        .iter()
                        .all(|s| s.last.as_ref().is_some_and(|l| l.search.is_none()))
            });
            if continued {
                break;
            }
            if let Ok(Some(r)) =
                tokio::time::timeout(Duration::from_millis(50), source.next()).await
            {
                seen.push(r.unwrap());
            }
        }
        let took = t0.elapsed();
        read_for(&mut source, Duration::from_secs(3), &mut seen).await;
        let after = seen.len() - before;
        source.close().await;
        (took.as_secs_f64() * 1e3, duplicates(&seen), after)
    });
    for p in producers {
        let _ = p.join();
    }
    drop(mm2);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "\n## Moving onto a MirrorMaker 2 copy ({}, load {})\n",
        super::utc_minute(),
        super::load_average()
    );
    println!(
        "MirrorMaker 2 (connect-mirror {}), offset syncs on the mirror, offset.lag.max {}, 4 partitions, {} records handed out before the planned switch.\n",
        mck_testkit::KAFKA_VERSION,
        args.offset_lag_max,
        handed.values.len()
    );
    println!("| measure | this source | MirrorMaker's translateOffsets | timestamp lookup |");
    println!("|---|---|---|---|");
    println!(
        "| planned switch: metadata write → first record from the mirror | {switch_ms:.0} ms | | |"
    );
    println!(
        "| planned switch: records repeated | {ours_dups} (of {seen_after} read after it) | {mm2_rep} | {ts_rep} |"
    );
    println!("| planned switch: records skipped | 0 | {mm2_skip} | {ts_skip} |");
    println!(
        "| failover (failoverAfter {}s): broker kill → every split continuing on the mirror | {failover_ms:.0} ms | | |",
        args.failover_after
    );
    println!(
        "| failover: records repeated | {failover_dups} (of {failover_after_reads} read after it) | | |"
    );
}
