//! Failover onto a MirrorMaker 2 copy, on real brokers with a real MirrorMaker 2
//! (dedicated mode, offset syncs on the target, a sync at most every 100 records): the
//! source's broker is killed with records it holds not yet handed out; once it has been
//! unreachable for `failoverAfter` the stream continues on the copy by itself, with
//! only what the mirror cluster holds, and stays there when the source comes back.
//!
//! Every check is by content: each record the source cluster held is handed out
//! exactly once across both clusters, in order per partition.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::mirror::OffsetSyncsLocation;
use mck_testkit::{KafkaCluster, MirrorMaker, MirrorOptions, TestCluster, TestRecord, read_topic};
use multicluster_kafka::metadata::{MirrorOf, Translate};
use multicluster_kafka::prelude::*;
use support::{cluster, meta, read_records, shared_source, stream};

const TOPIC: &str = "orders";
/// The source's alias in MirrorMaker: the copy is `mm2f.orders`.
const ALIAS: &str = "mm2f";
/// How long MirrorMaker may take to copy what the test waits for.
const COPY_WAIT: Duration = Duration::from_secs(60);

/// The source (`mm2f-east`) and mirror (`mm2f-west`) clusters, started at once.
fn clusters() -> (&'static KafkaCluster, &'static KafkaCluster) {
    std::thread::scope(|s| {
        let east = s.spawn(|| cluster("mm2f-east"));
        let west = cluster("mm2f-west");
        (east.join().unwrap(), west)
    })
}

#[test]
fn a_dead_source_fails_over_to_its_mm2_copy_with_each_record_once_and_stays_there() {
    let began = Instant::now();
    let (east, west) = clusters();
    let copy = format!("{ALIAS}.{TOPIC}");
    east.create_topic(TOPIC, 2).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = mck_testkit::produce_until_stopped(east, TOPIC, "f", true, stop.clone());
    let mm = MirrorMaker::start(
        MirrorOptions::between(ALIAS, east, format!("{ALIAS}-to"), west)
            .topics(TOPIC)
            .offset_syncs_on(OffsetSyncsLocation::Target)
            .offset_lag_max(100),
    )
    .expect("MirrorMaker 2 starts");
    mm.wait_for_records(&copy, 1, COPY_WAIT).unwrap();

    let mut mirror = meta(west, &[&copy]);
    let mut of = MirrorOf::new("east", Translate::Mm2);
    of.alias = Some(ALIAS.to_string());
    of.failover_after = Some(Duration::from_secs(3));
    mirror.mirror_of = Some(of);
    let pair = stream("s", vec![("east", meta(east, &[TOPIC])), ("west", mirror)]);
    let svc = Arc::new(StaticMetadataService::new([pair]).unwrap());

    mck_testkit::runtime().block_on(async {
        let mut source = shared_source(svc)
            .partition_discovery_interval(Duration::from_secs(1))
            .client_timeout(Duration::from_secs(5))
            // Small fetches and queues: the records not handed out at the kill stay
            // on the source's broker rather than in the reader's buffers.
            .property("fetch.max.bytes", "1024")
            .property("message.max.bytes", "1000")
            .property("max.partition.fetch.bytes", "256")
            .property("queued.min.messages", "1")
            .property("queued.max.messages.kbytes", "1")
            .max_batch_size(10)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        read_records(&mut source, 40, &mut got).await;
        let stop = stop.clone();
        let produced = tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_secs(6));
            stop.store(true, Ordering::Relaxed);
            producer.join().unwrap()
        })
        .await
        .unwrap();
        read_records(&mut source, 20, &mut got).await;
        assert!(
            got.iter().all(|r| &*r.cluster == "east"),
            "the copy is a standby"
        );
        // Everything the source holds is copied (nothing is lost with it), then
        // MirrorMaker stops and the source dies with a backlog not handed out.
        let held = tokio::task::spawn_blocking(move || {
            let held = read_topic(east, TOPIC).unwrap();
            assert_eq!(held.len(), produced.len(), "the source holds what was sent");
            mm.wait_for_records(&copy, held.len(), COPY_WAIT).unwrap();
            mm.stop();
            east.kill_broker(0).unwrap();
            held
        })
        .await
        .unwrap();
        let killed = Instant::now();
        assert!(
            got.len() + 100 < held.len(),
            "a backlog: {} of {} handed out",
            got.len(),
            held.len()
        );
        let before_kill = got.len();
        read_records(&mut source, held.len() - got.len(), &mut got).await;
        let first_west = got.iter().position(|r| &*r.cluster == "west");
        eprintln!(
            "{} records, {} handed out before the kill, the copy's first at {:?}; all read {:.1}s after the kill",
            held.len(),
            before_kill,
            first_west,
            killed.elapsed().as_secs_f64()
        );

        let mut want: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for r in &held {
            want.entry(r.partition)
                .or_default()
                .push(String::from_utf8(r.value.clone()).unwrap());
        }
        let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        let mut from: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for r in &got {
            seen.entry(r.partition).or_default().push(r.value.clone());
            from.entry(r.partition)
                .or_default()
                .push(r.cluster.to_string());
        }
        for (p, values) in &want {
            let have = seen.get(p).cloned().unwrap_or_default();
            if &have != values {
                let first_wrong = have.iter().zip(values).position(|(a, b)| a != b);
                panic!(
                    "partition {p}: {} handed out, {} held, first difference at {first_wrong:?}",
                    have.len(),
                    values.len()
                );
            }
        }
        assert_eq!(seen.len(), want.len(), "no other partitions");
        for (p, cs) in &from {
            let first_west = cs.iter().position(|c| c == "west");
            let first_west =
                first_west.unwrap_or_else(|| panic!("partition {p}: never on the copy"));
            assert!(first_west > 0, "partition {p}: nothing from the source");
            assert!(
                cs[first_west..].iter().all(|c| c == "west"),
                "partition {p}: the source's records, then the copy's"
            );
        }

        // The source comes back with new records (no MirrorMaker copies them): the
        // stream stays on the copy and hands out nothing of the source.
        tokio::task::spawn_blocking(move || {
            east.restart_broker(0).unwrap();
            let after: Vec<TestRecord> = (0..20)
                .map(|i| TestRecord::value(format!("after-{i}")).with_key(format!("k{i}")))
                .collect();
            east.produce(TOPIC, &after).unwrap();
        })
        .await
        .unwrap();
        let more = tokio::time::timeout(Duration::from_secs(5), source.next()).await;
        assert!(more.is_err(), "nothing more, from either cluster: {more:?}");
        source.close().await;
    });
    eprintln!("took {:.1}s", began.elapsed().as_secs_f64());
}
