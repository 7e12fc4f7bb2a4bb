//! A stream moved onto a MirrorMaker 2 copy of its cluster continues at the same
//! record, on real brokers with a real MirrorMaker 2 (dedicated mode, offset syncs on
//! the target, a sync for every record): the source's position is translated by
//! MirrorMaker's offset syncs and verified against the last record handed out.
//!
//! Every check is by content: each record the source cluster held is handed out
//! exactly once across both clusters, in order per partition. Each test runs a
//! MirrorMaker of its own under aliases of its own (the mirror's `mirrorOf.alias`),
//! so the tests share the clusters `mm2-east` and `mm2-west`.

use crate::support;
use support::capture;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mck_testkit::mirror::OffsetSyncsLocation;
use mck_testkit::{
    KafkaCluster, MirrorMaker, MirrorOptions, TestCluster, TestRecord, stage_offset_gaps,
};
use multicluster_kafka::metadata::{MirrorOf, Translate};
use multicluster_kafka::prelude::*;
use support::{Got, Reading, cluster, meta, shared_source, stream};

/// How long MirrorMaker may take to copy what the tests wait for.
const COPY_WAIT: Duration = Duration::from_secs(45);

/// How long the source may take to hand out what the tests wait for.
const READ_WAIT: Duration = Duration::from_secs(45);

/// The source (`mm2-east`) and mirror (`mm2-west`) clusters, started at once.
fn clusters() -> (&'static KafkaCluster, &'static KafkaCluster) {
    std::thread::scope(|s| {
        let east = s.spawn(|| cluster("mm2-east"));
        let west = cluster("mm2-west");
        (east.join().unwrap(), west)
    })
}

/// MirrorMaker 2 copying `topic` from `east` (alias `alias`) to `west`: offset syncs on
/// the target, one for every record.
fn mirror_maker(alias: &str, topic: &str, read_committed: bool) -> MirrorMaker {
    mirror_maker_with_syncs_on(alias, topic, read_committed, OffsetSyncsLocation::Target)
}

/// [`mirror_maker`] with the offset syncs on the cluster `on`.
fn mirror_maker_with_syncs_on(
    alias: &str,
    topic: &str,
    read_committed: bool,
    on: OffsetSyncsLocation,
) -> MirrorMaker {
    mirror_maker_from(clusters().0, alias, topic, read_committed, on)
}

/// [`mirror_maker_with_syncs_on`] from the cluster `east` (to the shared `west`).
fn mirror_maker_from(
    east: &'static KafkaCluster,
    alias: &str,
    topic: &str,
    read_committed: bool,
    on: OffsetSyncsLocation,
) -> MirrorMaker {
    let west = clusters().1;
    let mut options = MirrorOptions::between(alias, east, format!("{alias}-to"), west)
        .topics(topic)
        .offset_syncs_on(on)
        .offset_lag_max(0);
    if read_committed {
        options = options.read_committed();
    }
    MirrorMaker::start(options).expect("MirrorMaker 2 starts")
}

/// The copy of `topic` on `west` as a mirror of `east` translated by MirrorMaker 2's
/// offset syncs, with `alias` as the source's alias.
fn mirror_meta(copy: &str, alias: &str) -> ClusterMetadata {
    let mut m = meta(clusters().1, &[copy]);
    let mut mirror = MirrorOf::new("east", Translate::Mm2);
    mirror.alias = Some(alias.to_string());
    m.mirror_of = Some(mirror);
    m
}

/// The stream `s` on `east` with its mirror on `west` (a standby).
fn both(topic: &str, copy: &str, alias: &str) -> KafkaStream {
    stream(
        "s",
        vec![
            ("east", meta(clusters().0, &[topic])),
            ("west", mirror_meta(copy, alias)),
        ],
    )
}

/// The stream `s` moved onto the mirror.
fn moved(copy: &str, alias: &str) -> KafkaStream {
    stream("s", vec![("west", mirror_meta(copy, alias))])
}

/// A source of stream `s` from `svc`, discovering every second.
fn source(svc: Arc<StaticMetadataService>) -> SourceBuilder<Utf8> {
    shared_source(svc).partition_discovery_interval(Duration::from_secs(1))
}

/// Record `<prefix>-<n>` to partition `n % 2`, with a key and a header.
fn record(prefix: &str, n: usize) -> TestRecord {
    TestRecord::value(format!("{prefix}-{n}"))
        .to_partition((n % 2) as i32)
        .with_key(format!("k{n}"))
        .with_header("n", n.to_string())
}

/// Records `from..to` of `prefix`.
fn records(prefix: &str, from: usize, to: usize) -> Vec<TestRecord> {
    (from..to).map(|n| record(prefix, n)).collect()
}

/// A thread producing records of `prefix` to `topic` on `east`: `burst` at once, then
/// 10 every 50 ms until stopped.
struct Producing {
    stop: Arc<AtomicBool>,
    join: JoinHandle<Vec<TestRecord>>,
}

impl Producing {
    fn start(topic: &'static str, prefix: &'static str, burst: usize) -> Producing {
        let stop = Arc::new(AtomicBool::new(false));
        let join = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut all = records(prefix, 0, burst);
                clusters().0.produce(topic, &all).expect("produce");
                while !stop.load(Ordering::Relaxed) {
                    let batch = records(prefix, all.len(), all.len() + 10);
                    clusters().0.produce(topic, &batch).expect("produce");
                    all.extend(batch);
                    std::thread::sleep(Duration::from_millis(50));
                }
                all
            }
        });
        Producing { stop, join }
    }

    /// Stops and returns every record produced, in order.
    fn finish(self) -> Vec<TestRecord> {
        self.stop.store(true, Ordering::Relaxed);
        self.join.join().expect("the producer does not panic")
    }
}

/// The values of `records` per partition, in order.
fn by_partition<'a>(
    records: impl IntoIterator<Item = &'a TestRecord>,
) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition.unwrap())
            .or_default()
            .push(String::from_utf8(r.value.clone()).unwrap());
    }
    out
}

/// Reads `n` records from `stream` into `got`.
async fn read_n(stream: &mut KafkaSourceStream<Utf8>, n: usize, got: &mut Vec<Got>) {
    let done = tokio::time::timeout(READ_WAIT, async {
        for _ in 0..n {
            let r = stream.next().await.expect("the stream continues");
            let r = r.expect("a record");
            got.push(Got {
                cluster: r.cluster.to_string(),
                topic: r.topic.to_string(),
                partition: r.partition,
                offset: r.offset,
                value: r.value,
                at: Instant::now(),
            });
        }
    })
    .await;
    assert!(done.is_ok(), "gave up after {} records", got.len());
}

/// Waits until `reading` handed out `n` records in all, then a little longer for any
/// that should not come.
async fn read_all(reading: &Reading, n: usize) {
    let began = Instant::now();
    while reading.snapshot().len() < n {
        assert!(
            began.elapsed() < READ_WAIT,
            "{} of {n} records within {READ_WAIT:?}; errors: {:?}",
            reading.snapshot().len(),
            reading.errors.lock().unwrap()
        );
        assert!(!reading.task.is_finished(), "the reading task ended early");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// Every record of `want` handed out exactly once, in order per partition; in each
/// partition the source's records and then the mirror's, and some of the mirror's.
fn assert_moved(got: &[Got], want: &BTreeMap<i32, Vec<String>>) {
    let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut from: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
    for g in got {
        seen.entry(g.partition).or_default().push(g.value.clone());
        from.entry(g.partition)
            .or_default()
            .push(g.cluster.as_str());
    }
    for (p, values) in want {
        let got = seen.get(p).cloned().unwrap_or_default();
        if &got != values {
            let first_wrong = got.iter().zip(values).position(|(a, b)| a != b);
            panic!(
                "partition {p}: {} handed out, {} wanted, first difference at {first_wrong:?}",
                got.len(),
                values.len()
            );
        }
    }
    assert_eq!(seen.len(), want.len(), "no other partitions");
    for (p, cs) in from {
        let first_west = cs.iter().position(|c| *c == "west");
        let first_west = first_west.unwrap_or_else(|| panic!("partition {p}: never on the mirror"));
        assert!(first_west > 0, "partition {p}: nothing from the source");
        assert!(
            cs[first_west..].iter().all(|c| *c == "west"),
            "partition {p}: the source's records, then the mirror's"
        );
    }
}

/// How a partition of the mirror continued, from what the source said: the source's
/// offset of the last record handed out there, how the lower bound was found and where
/// it is, the offset sync used, and where the record was found on the mirror.
#[derive(Debug, PartialEq, Eq)]
struct Continued {
    source_offset: i64,
    found_by: String,
    lower_bound: i64,
    sync: Option<(i64, i64)>,
    found_at: i64,
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> Option<i64> {
    let rest = &text[text.find(prefix)? + prefix.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// What the source said of split `west/<copy>/<partition>` (see [`Continued`]).
fn continued(copy: &str, partition: i32) -> Continued {
    let split = format!("west/{copy}/{partition}");
    let events = capture().events();
    let of = |message: &str| {
        events
            .iter()
            .map(|(_, _, fields)| fields)
            .find(|f| f.contains(&split) && f.contains(message))
            .unwrap_or_else(|| panic!("{split}: no {message:?}"))
            .clone()
    };
    let carried = of("continuing a split on its mirror from the source's position");
    let found = of("found the last record handed out from the source on its mirror");
    let found_by = carried
        .split("found_by=Some(\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("none")
        .to_string();
    Continued {
        source_offset: number_after(&carried, "source_offset=Some(").expect("source offset"),
        found_by,
        lower_bound: number_after(&carried, "lower_bound=Some(").expect("lower bound"),
        sync: number_after(&carried, "upstream: ").zip(number_after(&carried, "downstream: ")),
        found_at: number_after(&found, " offset=").expect("found offset"),
    }
}

/// The partitions of `upto` for which MirrorMaker has written an offset sync at or
/// below the offset given (the last one handed out from the source), waited for up
/// to 15 s. MirrorMaker writes a sync when it can (a bounded number in flight), not
/// one for every record, and does not write a skipped one later: a partition may
/// have none that low. A switch then translates by timestamp, which is exact too.
fn synced(mm: &MirrorMaker, topic: &str, upto: &BTreeMap<i32, i64>) -> BTreeSet<i32> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let syncs = mm.offset_syncs().unwrap();
        let ready: BTreeSet<i32> = upto
            .iter()
            .filter(|(p, at)| {
                syncs
                    .iter()
                    .any(|s| s.topic == topic && s.partition == **p && s.upstream_offset <= **at)
            })
            .map(|(p, _)| *p)
            .collect();
        if ready.len() == upto.len() || Instant::now() >= until {
            return ready;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How partitions 0 and 1 of the mirror continued, each checked to come from an
/// offset sync MirrorMaker wrote where [`synced`] found one (`ready`); the others were
/// translated by timestamp, which the callers check by content.
fn continued_by_sync_where_written(
    copy: &str,
    mm: &MirrorMaker,
    topic: &str,
    ready: &BTreeSet<i32>,
) -> Vec<Continued> {
    (0..2)
        .map(|p| {
            let c = continued(copy, p);
            eprintln!("partition {p}: {c:?}");
            if ready.contains(&p) {
                assert_by_sync(&c, mm, topic, p);
            } else {
                eprintln!("partition {p}: no offset sync at or below its position");
            }
            c
        })
        .collect()
}

/// The last offset handed out from `cluster`, per partition.
fn last_offsets(got: &[Got], cluster: &str) -> BTreeMap<i32, i64> {
    let mut out = BTreeMap::new();
    for g in got.iter().filter(|g| g.cluster == cluster) {
        let at = out.entry(g.partition).or_insert(g.offset);
        *at = (*at).max(g.offset);
    }
    out
}

/// Checks that `c` came from an offset sync that MirrorMaker really wrote for the
/// source's `topic`/`partition`, and that the record was found within the records the
/// sync bounds.
fn assert_by_sync(c: &Continued, mm: &MirrorMaker, topic: &str, partition: i32) {
    if c.found_by != "sync" {
        let said: Vec<String> = capture()
            .events()
            .into_iter()
            .map(|(_, _, fields)| fields)
            .filter(|f| f.contains("MirrorMaker"))
            .collect();
        panic!("{c:?}: not found by an offset sync; the source said {said:#?}");
    }
    let (upstream, downstream) = c.sync.expect("the sync used");
    assert_eq!(c.lower_bound, downstream, "{c:?}");
    assert!(upstream <= c.source_offset, "{c:?}");
    let written = mm.offset_syncs().unwrap();
    assert!(
        written.iter().any(|s| s.topic == topic
            && s.partition == partition
            && s.upstream_offset == upstream
            && s.downstream_offset == downstream),
        "{c:?}: MirrorMaker wrote no such sync"
    );
    assert!(
        c.found_at >= c.lower_bound && c.found_at - c.lower_bound <= c.source_offset - upstream,
        "{c:?}: found within the records the sync bounds"
    );
}

#[test]
fn a_planned_switch_under_production_continues_on_the_mm2_copy_at_the_next_record() {
    let began = Instant::now();
    let (alias, topic) = ("mm2live", "mm2-live");
    let copy = format!("{alias}.{topic}");
    let (east, _) = clusters();
    capture();
    east.create_topic(topic, 2).unwrap();
    // A backlog: at the switch the source has handed out only part of what the
    // source cluster holds, and has more of it fetched.
    let producing = Producing::start(topic, "live", 600);
    let mm = mirror_maker(alias, topic, false);
    mm.wait_for_records(&copy, 1, COPY_WAIT).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, &copy, alias)]).unwrap());
    mck_testkit::runtime().block_on(async {
        let reading = Reading::start(source(svc.clone()).build().unwrap().open().await.unwrap());
        reading.until("east", 100, READ_WAIT).await;
        assert_eq!(reading.count_of("west"), 0, "the mirror is a standby");
        let handed_out = last_offsets(&reading.snapshot(), "east");
        let ready = synced(&mm, topic, &handed_out);
        // The switch comes while records are produced to the source and copied.
        svc.replace([moved(&copy, alias)]).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let produced = producing.finish();
        mm.wait_for_records(&copy, produced.len(), COPY_WAIT)
            .unwrap();
        read_all(&reading, produced.len()).await;
        let got = reading.close(Duration::from_secs(30)).await;
        assert_moved(&got, &by_partition(&produced));
        continued_by_sync_where_written(&copy, &mm, topic, &ready);
    });
    mm.stop();
    eprintln!("took {:.1}s", began.elapsed().as_secs_f64());
}

#[test]
fn a_switch_finds_the_record_by_offset_sync_where_the_copy_has_other_offsets() {
    let began = Instant::now();
    let (alias, topic) = ("mm2gaps", "mm2-gaps");
    let copy = format!("{alias}.{topic}");
    let (east, _) = clusters();
    capture();
    east.create_topic(topic, 2).unwrap();
    // Deleted records, an aborted and a committed transaction in each partition: a
    // committed copy holds the same records at other offsets.
    let staged: Vec<Vec<String>> = (0..2)
        .map(|p| {
            let s = stage_offset_gaps(east, topic, p, &format!("gap{p}")).unwrap();
            s.visible.into_iter().map(|(_, v)| v).collect()
        })
        .collect();
    let mm = mirror_maker(alias, topic, true);
    let producing = Producing::start(topic, "gaps", 0);
    mm.wait_for_records(&copy, 16, COPY_WAIT).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, &copy, alias)]).unwrap());
    mck_testkit::runtime().block_on(async {
        let reading = Reading::start(source(svc.clone()).build().unwrap().open().await.unwrap());
        reading.until("east", 60, READ_WAIT).await;
        svc.replace([moved(&copy, alias)]).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let produced = producing.finish();
        let mut want = by_partition(&produced);
        for (p, visible) in staged.iter().enumerate() {
            let tail = want.remove(&(p as i32)).unwrap_or_default();
            want.insert(p as i32, visible.iter().cloned().chain(tail).collect());
        }
        let total: usize = want.values().map(Vec::len).sum();
        mm.wait_for_records(&copy, total, COPY_WAIT).unwrap();
        read_all(&reading, total).await;
        let got = reading.close(Duration::from_secs(30)).await;
        assert_moved(&got, &want);
        for p in 0..2 {
            let c = continued(&copy, p);
            eprintln!("partition {p}: {c:?}");
            assert_by_sync(&c, &mm, topic, p);
            // The copy packs the records: 7 offsets of each partition hold no record
            // there (2 deleted, 3 aborted, 2 markers).
            assert_eq!(c.source_offset - c.found_at, 7, "{c:?}");
            let first_west = got
                .iter()
                .find(|g| g.partition == p && g.cluster == "west")
                .unwrap();
            assert_eq!(first_west.offset, c.found_at + 1, "{c:?}");
        }
    });
    mm.stop();
    eprintln!("took {:.1}s", began.elapsed().as_secs_f64());
}

#[test]
fn a_restart_from_a_checkpoint_taken_before_the_switch_continues_on_the_mm2_copy() {
    let began = Instant::now();
    let (alias, topic) = ("mm2restart", "mm2-restart");
    let copy = format!("{alias}.{topic}");
    let (east, west) = clusters();
    capture();
    east.create_topic(topic, 2).unwrap();
    // Records already on the copy that the source never had: its offsets are shifted
    // by them, and they are never handed out.
    west.create_topic(&copy, 2).unwrap();
    west.produce(&copy, &records("old", 0, 6)).unwrap();
    east.produce(topic, &records("r", 0, 40)).unwrap();
    let mm = mirror_maker(alias, topic, false);
    mm.wait_for_records(&copy, 46, COPY_WAIT).unwrap();
    // The source's group: MirrorMaker checkpoints what it commits on the source, and
    // the translation reads those checkpoints too (an offset sync, found, wins).
    let group = "mm2-restart-app";
    mck_testkit::runtime().block_on(async {
        let svc = Arc::new(StaticMetadataService::new([both(topic, &copy, alias)]).unwrap());
        let source_of_east = source(svc).group_id(group).build().unwrap();
        let mut stream = source_of_east.open().await.unwrap();
        let mut got = Vec::new();
        read_n(&mut stream, 20, &mut got).await;
        let early = stream.checkpoint().unwrap();
        stream.commit(&early).await.unwrap();
        read_n(&mut stream, 20, &mut got).await;
        let checkpoint = Checkpoint::decode(&stream.checkpoint().unwrap().encode()).unwrap();
        stream.close().await;
        assert!(got.iter().all(|g| g.cluster == "east"));

        east.produce(topic, &records("r", 40, 80)).unwrap();
        mm.wait_for_records(&copy, 86, COPY_WAIT).unwrap();
        let ready = synced(&mm, topic, &last_offsets(&got, "east"));
        mm.wait_for_checkpoints(COPY_WAIT, |cps| cps.iter().any(|c| c.group == group))
            .unwrap();
        let svc = Arc::new(StaticMetadataService::new([moved(&copy, alias)]).unwrap());
        let reading = Reading::start(
            source(svc)
                .group_id(group)
                .restore_from(checkpoint)
                .build()
                .unwrap()
                .open()
                .await
                .unwrap(),
        );
        read_all(&reading, 40).await;
        got.extend(reading.close(Duration::from_secs(30)).await);
        assert_moved(&got, &by_partition(&records("r", 0, 80)));
        for c in continued_by_sync_where_written(&copy, &mm, topic, &ready) {
            assert_eq!(
                c.found_at - c.source_offset,
                3,
                "{c:?}: behind the old records"
            );
        }
        // The group's checkpoints were read, and every record of MirrorMaker's topics
        // decoded.
        let lines: Vec<String> = capture()
            .events()
            .into_iter()
            .map(|(_, _, fields)| fields)
            .filter(|f| f.contains(&format!("alias=\"{alias}\"")))
            .collect();
        let read = lines
            .iter()
            .find(|f| f.contains("read MirrorMaker 2's offset syncs and checkpoints"))
            .expect("the lookup says what it read");
        eprintln!("{read}");
        assert!(number_after(read, "checkpoints=").unwrap() >= 1, "{read}");
        assert!(number_after(read, "syncs=").unwrap() >= 2, "{read}");
        assert!(!lines.iter().any(|f| f.contains("skipped")), "{lines:?}");
    });
    mm.stop();
    eprintln!("took {:.1}s", began.elapsed().as_secs_f64());
}

#[test]
fn a_live_switch_reads_the_offset_syncs_mirror_maker_keeps_on_the_source_cluster() {
    let (alias, topic) = ("mm2src", "mm2-src");
    let copy = format!("{alias}.{topic}");
    let (east, _) = clusters();
    capture();
    east.create_topic(topic, 2).unwrap();
    // Deleted records and transactions: offsets differ, so only a sync finds the
    // record at once. MirrorMaker's default: the syncs on the source cluster.
    let staged: Vec<Vec<String>> = (0..2)
        .map(|p| {
            let s = stage_offset_gaps(east, topic, p, &format!("src{p}")).unwrap();
            s.visible.into_iter().map(|(_, v)| v).collect()
        })
        .collect();
    let mm = mirror_maker_with_syncs_on(alias, topic, true, OffsetSyncsLocation::Source);
    let producing = Producing::start(topic, "src", 0);
    mm.wait_for_records(&copy, 16, COPY_WAIT).unwrap();
    let svc = Arc::new(StaticMetadataService::new([both(topic, &copy, alias)]).unwrap());
    mck_testkit::runtime().block_on(async {
        let reading = Reading::start(source(svc.clone()).build().unwrap().open().await.unwrap());
        reading.until("east", 60, READ_WAIT).await;
        svc.replace([moved(&copy, alias)]).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let produced = producing.finish();
        let mut want = by_partition(&produced);
        for (p, visible) in staged.iter().enumerate() {
            let tail = want.remove(&(p as i32)).unwrap_or_default();
            want.insert(p as i32, visible.iter().cloned().chain(tail).collect());
        }
        let total: usize = want.values().map(Vec::len).sum();
        mm.wait_for_records(&copy, total, COPY_WAIT).unwrap();
        read_all(&reading, total).await;
        let got = reading.close(Duration::from_secs(30)).await;
        assert_moved(&got, &want);
        for p in 0..2 {
            let c = continued(&copy, p);
            eprintln!("partition {p}: {c:?}");
            assert_by_sync(&c, &mm, topic, p);
        }
    });
    mm.stop();
}

/// A restart after the source left the streams, from a checkpoint taken before: with
/// the source's settings carried by its mirror entry (as the richer file layout's
/// `clusters:` gives them), the offset syncs MirrorMaker keeps on the source are read
/// still, and the record is found by a sync, not by a timestamp search.
#[test]
fn a_restart_reads_the_source_clusters_offset_syncs_through_its_definition() {
    let (alias, topic) = ("mm2def", "mm2-def");
    let copy = format!("{alias}.{topic}");
    // A source cluster of its own: the flows of the tests beside it keep their syncs
    // on east too, and with several such topics there the one to read is told only
    // by a target alias named after the mirror (docs/mirrors.md).
    let east = cluster("mm2def-east");
    let west = clusters().1;
    capture();
    east.create_topic(topic, 2).unwrap();
    // Records already on the copy: its offsets are shifted by them.
    west.create_topic(&copy, 2).unwrap();
    west.produce(&copy, &records("old", 0, 6)).unwrap();
    east.produce(topic, &records("r", 0, 40)).unwrap();
    let mm = mirror_maker_from(east, alias, topic, false, OffsetSyncsLocation::Source);
    mm.wait_for_records(&copy, 46, COPY_WAIT).unwrap();
    mck_testkit::runtime().block_on(async {
        let pair = stream(
            "s",
            vec![
                ("east", meta(east, &[topic])),
                ("west", mirror_meta(&copy, alias)),
            ],
        );
        let svc = Arc::new(StaticMetadataService::new([pair]).unwrap());
        let mut before = source(svc).build().unwrap().open().await.unwrap();
        let mut got = Vec::new();
        read_n(&mut before, 40, &mut got).await;
        let checkpoint = Checkpoint::decode(&before.checkpoint().unwrap().encode()).unwrap();
        before.close().await;
        assert!(got.iter().all(|g| g.cluster == "east"));

        east.produce(topic, &records("r", 40, 60)).unwrap();
        mm.wait_for_records(&copy, 66, COPY_WAIT).unwrap();
        let ready = synced(&mm, topic, &last_offsets(&got, "east"));
        let mut entry = mirror_meta(&copy, alias);
        if let Some(m) = entry.mirror_of.as_mut() {
            m.source_properties = Some(meta(east, &[topic]).properties);
        }
        let svc =
            Arc::new(StaticMetadataService::new([stream("s", vec![("west", entry)])]).unwrap());
        let reading = Reading::start(
            source(svc)
                .restore_from(checkpoint)
                .build()
                .unwrap()
                .open()
                .await
                .unwrap(),
        );
        read_all(&reading, 20).await;
        got.extend(reading.close(Duration::from_secs(30)).await);
        assert_moved(&got, &by_partition(&records("r", 0, 60)));
        continued_by_sync_where_written(&copy, &mm, topic, &ready);
    });
    mm.stop();
}
