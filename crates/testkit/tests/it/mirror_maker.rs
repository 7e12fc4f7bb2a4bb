//! Apache Kafka's MirrorMaker 2, run by the test kit between two real clusters: what
//! it copies, and what it writes about offsets.
//!
//! The wire formats the tests decode (see `mck_testkit::mirror`, checked here against
//! the records of a real MirrorMaker 2): Kafka protocol schemas, fields in order,
//! big-endian, a string being an `INT16` length and UTF-8 bytes.
//!
//! - Offset sync, in `mm2-offset-syncs.<target alias>.internal` on the source (or
//!   `mm2-offset-syncs.<source alias>.internal` on the target), partition 0:
//!   key `topic STRING, partition INT32` (the source's), value
//!   `upstreamOffset INT64, offset INT64` (source offset, target offset).
//! - Checkpoint, in `<source alias>.checkpoints.internal` on the target: key
//!   `group STRING, topic STRING, partition INT32` (the target's topic), value
//!   `version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING`.
//!
//! Every test has aliases and topics of its own, so they share one pair of clusters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mck_testkit::mirror::{Checkpoint, OffsetSync, OffsetSyncsLocation, ReplicationPolicy};
use mck_testkit::{
    KafkaCluster, MirrorMaker, MirrorOptions, ReadRecord, TestCluster, TestRecord,
    commit_group_offsets, committed_group_offset, fill_partitions, read_topic,
    read_topic_committed, shared_cluster, stage_offset_gaps,
};

const WAIT: Duration = Duration::from_secs(120);

/// The source and target clusters, started at the same time.
fn clusters() -> (&'static KafkaCluster, &'static KafkaCluster) {
    std::thread::scope(|s| {
        let source = s.spawn(|| shared_cluster("mm-source"));
        let target = shared_cluster("mm-target").expect("the target cluster starts");
        let source = source.join().unwrap().expect("the source cluster starts");
        (source, target)
    })
}

/// `(offset, value)` of each partition's records, in offset order.
fn by_partition(records: &[ReadRecord]) -> BTreeMap<i32, Vec<(i64, String)>> {
    let mut out: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition)
            .or_default()
            .push((r.offset, String::from_utf8(r.value.clone()).unwrap()));
    }
    out
}

#[test]
fn mm2_copies_a_topic_in_order_and_writes_offset_syncs_and_checkpoints() {
    let (source, target) = clusters();
    source.create_topic("orders", 3).unwrap();
    let produced = fill_partitions(source, "orders", 3, 20, "order").unwrap();
    commit_group_offsets(source, "orders-app", "orders", &[(0, 20), (1, 20), (2, 20)]).unwrap();

    let began = Instant::now();
    let mm =
        MirrorMaker::start(MirrorOptions::between("src", source, "dst", target).topics("orders"))
            .expect("MirrorMaker 2 starts");
    let copy = mm.options().remote_topic("orders");
    assert_eq!(copy, "src.orders");
    mm.wait_for_records(&copy, 1, WAIT).unwrap();
    eprintln!(
        "MirrorMaker 2: started in {:.1}s, first record on the target after {:.1}s",
        mm.startup_time().as_secs_f64(),
        began.elapsed().as_secs_f64()
    );

    // The same records, in the same order, at the same offsets (no gaps upstream).
    let copied = mm.wait_for_records(&copy, produced.len(), WAIT).unwrap();
    assert_eq!(copied.len(), produced.len(), "nothing copied twice");
    assert_eq!(
        by_partition(&copied),
        by_partition(&read_topic(source, "orders").unwrap())
    );
    let keys: Vec<_> = copied.iter().map(|r| r.key.clone()).collect();
    let source_keys: Vec<_> = read_topic(source, "orders")
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, source_keys);

    // The offset syncs: on the source, named after the target alias; keyed by the
    // source topic; each partition's last record is synced to the same offset.
    assert_eq!(
        mm.options().offset_syncs_topic(),
        "mm2-offset-syncs.dst.internal"
    );
    let syncs = mm
        .wait_for_offset_syncs(WAIT, |syncs| {
            (0..3).all(|p| {
                syncs
                    .iter()
                    .any(|s| s.partition == p && s.upstream_offset == 19)
            })
        })
        .unwrap();
    for s in &syncs {
        assert_eq!(s.topic, "orders", "{s:?}");
        assert_eq!(s.upstream_offset, s.downstream_offset, "{s:?}");
    }
    // Byte for byte: the decoded sync encodes back to the record MirrorMaker wrote.
    let raw = read_topic(source, "mm2-offset-syncs.dst.internal").unwrap();
    assert!(raw.iter().all(|r| r.partition == 0));
    let first = &raw[0];
    let key = first.key.clone().unwrap();
    assert_eq!(
        &key[..8],
        b"\x00\x06orders",
        "key: INT16 length, then the topic"
    );
    assert_eq!(key.len(), 2 + 6 + 4, "then the partition as INT32");
    assert_eq!(first.value.len(), 16, "value: two INT64");
    let decoded = OffsetSync::decode(&key, &first.value).unwrap();
    assert_eq!(decoded.encode_key(), key);
    assert_eq!(decoded.encode_value(), first.value);

    // The checkpoints: on the target, named after the source alias; keyed by the
    // group and the *target* topic. Those written while the copy still grew translate
    // the group's offset to one past the last sync below it, so they may stay behind;
    // the last of each partition reaches the copy's end.
    assert_eq!(mm.options().checkpoints_topic(), "src.checkpoints.internal");
    let last_of = |cps: &[Checkpoint], p: i32| {
        cps.iter()
            .rfind(|c| c.group == "orders-app" && c.partition == p)
            .map(|c| c.downstream_offset)
    };
    let checkpoints = mm
        .wait_for_checkpoints(WAIT, |cps| (0..3).all(|p| last_of(cps, p) == Some(20)))
        .unwrap();
    for p in 0..3 {
        let downstream: Vec<i64> = checkpoints
            .iter()
            .filter(|c| c.group == "orders-app" && c.partition == p)
            .inspect(|c| {
                assert_eq!(
                    (c.topic.as_str(), c.upstream_offset),
                    ("src.orders", 20),
                    "{c:?}"
                );
                assert_eq!(c.metadata, "", "{c:?}");
            })
            .map(|c| c.downstream_offset)
            .collect();
        assert!(downstream.is_sorted(), "partition {p}: {downstream:?}");
    }
    let raw = read_topic(target, "src.checkpoints.internal").unwrap();
    let first = &raw[0];
    let cp = Checkpoint::decode(first.key.as_deref().unwrap(), &first.value).unwrap();
    assert_eq!(
        &first.value[..2],
        b"\x00\x00",
        "value: the version, INT16 0"
    );
    assert_eq!(cp.encode_value(), first.value);
    assert_eq!(cp.encode_key(), first.key.clone().unwrap());
    mm.stop();
}

#[test]
fn aborted_transactions_and_deleted_records_give_the_copy_other_offsets() {
    let (source, target) = clusters();
    source.create_topic("orders-gaps", 1).unwrap();
    let staged = stage_offset_gaps(source, "orders-gaps", 0, "gap").unwrap();
    // What a committed reader of the source sees: the staged records, at their offsets.
    let seen: Vec<(i64, String)> = read_topic_committed(source, "orders-gaps")
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, String::from_utf8(r.value).unwrap()))
        .collect();
    assert_eq!(seen, staged.visible);
    commit_group_offsets(source, "gaps-app", "orders-gaps", &[(0, staged.end)]).unwrap();

    let mm = MirrorMaker::start(
        MirrorOptions::between("gsrc", source, "gdst", target)
            .topics("orders-gaps")
            .read_committed()
            .offset_syncs_on(OffsetSyncsLocation::Target)
            .sync_group_offsets(true),
    )
    .expect("MirrorMaker 2 starts");
    let copy = mm.options().remote_topic("orders-gaps");
    let copied = mm
        .wait_for_records(&copy, staged.visible.len(), WAIT)
        .unwrap();
    // The same records, none aborted, packed from offset 0.
    let got: Vec<(i64, String)> = copied
        .iter()
        .map(|r| (r.offset, String::from_utf8(r.value.clone()).unwrap()))
        .collect();
    let want: Vec<(i64, String)> = staged
        .visible
        .iter()
        .enumerate()
        .map(|(i, (_, v))| (i as i64, v.clone()))
        .collect();
    assert_eq!(got, want);
    // Source offset → target offset of each record.
    let pairs: BTreeMap<i64, i64> = staged
        .visible
        .iter()
        .zip(&copied)
        .map(|((upstream, _), r)| (*upstream, r.offset))
        .collect();
    eprintln!("source → target offsets: {pairs:?}; staged: {staged:?}");

    // The offset syncs now live on the target, named after the source alias, and
    // map source offsets to the copy's.
    assert_eq!(
        mm.options().offset_syncs_topic(),
        "mm2-offset-syncs.gsrc.internal"
    );
    let last = *pairs.keys().last().unwrap();
    let syncs = mm
        .wait_for_offset_syncs(WAIT, |syncs| {
            syncs.iter().any(|s| s.upstream_offset == last)
        })
        .unwrap();
    eprintln!("offset syncs: {syncs:?}");
    for s in &syncs {
        assert_eq!((s.topic.as_str(), s.partition), ("orders-gaps", 0));
        assert_eq!(
            pairs.get(&s.upstream_offset),
            Some(&s.downstream_offset),
            "{s:?}"
        );
    }
    assert!(
        syncs
            .iter()
            .any(|s| s.upstream_offset != s.downstream_offset),
        "the offsets differ: {syncs:?}"
    );
    let raw = read_topic(target, "mm2-offset-syncs.gsrc.internal").unwrap();
    assert_eq!(raw.len(), syncs.len(), "the syncs are on the target");

    // The group's committed end of the source translates to the copy's end, in a
    // checkpoint and (sync.group.offsets) in the group's offsets on the target.
    let end = staged.visible.len() as i64;
    let cps = mm
        .wait_for_checkpoints(WAIT, |cps| {
            cps.iter()
                .any(|c| c.group == "gaps-app" && c.downstream_offset == end)
        })
        .unwrap();
    eprintln!("checkpoints: {cps:?}");
    let cp = cps.iter().rfind(|c| c.group == "gaps-app").unwrap();
    assert_eq!(
        (cp.topic.as_str(), cp.upstream_offset, cp.downstream_offset),
        (copy.as_str(), staged.end, end)
    );
    let deadline = Instant::now() + WAIT;
    let on_target = || committed_group_offset(target, "gaps-app", &copy, 0).unwrap();
    while on_target() != Some(end) {
        assert!(
            Instant::now() < deadline,
            "gaps-app has {:?} on the target, not {end}",
            on_target()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    mm.stop();
}

#[test]
fn records_already_on_the_target_shift_an_identity_copy() {
    let (source, target) = clusters();
    source.create_topic("orders-pre", 1).unwrap();
    target.create_topic("orders-pre", 1).unwrap();
    let before: Vec<TestRecord> = (0..5)
        .map(|i| TestRecord::value(format!("there-{i}")))
        .collect();
    target.produce("orders-pre", &before).unwrap();
    let mirrored: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("mirrored-{i}")))
        .collect();
    source.produce("orders-pre", &mirrored).unwrap();

    let mm = MirrorMaker::start(
        MirrorOptions::between("isrc", source, "idst", target)
            .topics("orders-pre")
            .replication_policy(ReplicationPolicy::Identity),
    )
    .expect("MirrorMaker 2 starts");
    assert_eq!(mm.options().remote_topic("orders-pre"), "orders-pre");
    let copied = mm.wait_for_records("orders-pre", 15, WAIT).unwrap();
    let values: Vec<String> = copied
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    let want: Vec<String> = (0..5)
        .map(|i| format!("there-{i}"))
        .chain((0..10).map(|i| format!("mirrored-{i}")))
        .collect();
    assert_eq!(values, want);
    // Source offset n is target offset n + 5.
    let syncs = mm
        .wait_for_offset_syncs(WAIT, |syncs| syncs.iter().any(|s| s.upstream_offset == 9))
        .unwrap();
    for s in &syncs {
        assert_eq!(s.topic, "orders-pre");
        assert_eq!(s.downstream_offset, s.upstream_offset + 5, "{s:?}");
    }
    mm.stop();
}
