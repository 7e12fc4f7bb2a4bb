//! The native fetch path (`fetch.backend=native`) read through the library, against
//! real Apache Kafka brokers: every record once and in partition order, bounded runs
//! ending at their stops, batches within their size, positions outside the log,
//! logs truncated (on the librdkafka path too), transactions, and what it refuses.

use crate::support;
use support::capture;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mck_testkit::ClusterOptions;
use mck_testkit::Seen;
use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{Listener, TestCluster, TestRecord, TransactionEnd, produce_transaction};
use multicluster_kafka::deserializer::{Deserializer, InBatch, RawValue};
use multicluster_kafka::hooks::{ClientHooks, KafkaErrorKind, OAuthToken};
use multicluster_kafka::prelude::*;
use multicluster_kafka::properties::DEFAULT_SHARE_MIN_BYTES;
use multicluster_kafka::record::RecordRef;
use multicluster_kafka::{ReadOrder, WatermarkStrategy};
use support::{drain, east, meta, meta_at, seen_ref, source_over, west};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// `b` with `fetch.backend=native` for every cluster.
fn native(b: SourceBuilder<Utf8>) -> SourceBuilder<Utf8> {
    capture();
    b.property("fetch.backend", "native")
}

/// Every fetcher of these logical clusters took the native path: each said so, and
/// none made a librdkafka consumer.
fn assert_fetched_natively(clusters: &[&str]) {
    let events = capture().events();
    for cluster in clusters {
        let of = |message: &str| {
            events.iter().any(|(_, _, fields)| {
                fields.contains(&format!("cluster={cluster} "))
                    && fields.contains(&format!("message={message} "))
            })
        };
        assert!(
            of("fetching natively"),
            "{cluster}: no fetcher said it fetches natively"
        );
        assert!(
            !of("consumer created"),
            "{cluster}: a reader made a librdkafka consumer"
        );
    }
}

/// Opens the source `b` builds, bounded by the logs' ends at start.
async fn open_bounded<D: Deserializer>(b: SourceBuilder<D>) -> KafkaSourceStream<D> {
    b.stopping_offsets(StoppingOffsets::Latest)
        .build()
        .unwrap()
        .open()
        .await
        .unwrap()
}

/// Opens the source `b` builds from the logs' starts on, without stops.
async fn open_following(b: SourceBuilder<Utf8>) -> KafkaSourceStream<Utf8> {
    b.starting_offsets(StartingOffsets::Earliest)
        .build()
        .unwrap()
        .open()
        .await
        .unwrap()
}

/// Reads a bounded source to its stops (within [`PATIENCE`]).
async fn drained(stream: &mut KafkaSourceStream<Utf8>) -> Vec<Seen> {
    tokio::time::timeout(PATIENCE, drain(stream))
        .await
        .expect("the bounded read ends")
}

/// Reads the source `b` builds to its stops (the logs' ends at start) and closes it.
async fn read_to_the_end(b: SourceBuilder<Utf8>) -> Vec<Seen> {
    let mut stream = open_bounded(b).await;
    let seen = drained(&mut stream).await;
    stream.close().await;
    seen
}

fn values_of(seen: &[Seen]) -> BTreeSet<String> {
    seen.iter().map(|s| s.4.clone()).collect()
}

#[test]
fn a_bounded_read_of_two_clusters_hands_out_every_record_once_in_order() {
    let topic = "np-eo";
    east().create_topic(topic, 3).unwrap();
    west().create_topic(topic, 2).unwrap();
    let mut want: BTreeSet<String> = mck_testkit::fill_values(east(), topic, 3, 700, "east")
        .into_iter()
        .collect();
    want.extend(mck_testkit::fill_values(west(), topic, 2, 700, "west"));
    mck_testkit::runtime().block_on(async {
        let mut stream = open_bounded(
            native(source_over(
                KafkaStream::new("s")
                    .with_cluster("np-eo-east", meta(east(), &[topic]))
                    .with_cluster("np-eo-west", meta(west(), &[topic])),
            ))
            .max_batch_size(100),
        )
        .await;
        let mut seen = Vec::new();
        let done = tokio::time::timeout(PATIENCE, async {
            while let Some(batch) = stream.next_batch().await {
                let batch = batch.expect("a batch");
                assert!(
                    batch.len() <= 100,
                    "{} records in a batch of 100",
                    batch.len()
                );
                seen.extend(batch.iter().map(|r| seen_ref(&r)));
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "the bounded read did not end; {} records",
            seen.len()
        );
        mck_testkit::assert_in_partition_order(
            seen.iter()
                .map(|(c, t, p, o, _)| (c.as_str(), t.as_str(), *p, *o)),
        );
        assert_eq!(seen.len(), want.len(), "records handed out");
        assert_eq!(values_of(&seen), want);
        let cp = stream.checkpoint().unwrap();
        assert_eq!(cp.split_count(), 5);
        assert!(cp.splits().all(|s| s.next_offset == 700), "{cp:?}");
        stream.close().await;
    });
    assert_fetched_natively(&["np-eo-east", "np-eo-west"]);
}

/// Bytes each broker's proxy has sent to clients so far.
fn bytes_down(cluster: &ProxiedCluster) -> Vec<u64> {
    cluster
        .proxies()
        .iter()
        .map(|p| p.stats().bytes_down)
        .collect()
}

#[test]
fn a_client_rack_is_read_from_the_replica_there_and_from_the_leader_when_it_dies() {
    // Three brokers in racks rack-0, rack-1 and rack-2, each behind its own proxy
    // (what it sends to the source is counted there).
    let rack = ProxiedCluster::start(ClusterOptions::new("np-rack").brokers(3).racks())
        .expect("cluster np-rack starts behind its proxies");
    let topic = "np-rack";
    rack.cluster().create_topic(topic, 1).unwrap();
    let mut want: BTreeSet<String> =
        mck_testkit::fill_values(rack.cluster(), topic, 1, 20_000, "near")
            .into_iter()
            .collect();
    let leader = rack.cluster().partition_leaders(topic).unwrap()[0].expect("a leader");
    let near = (leader + 1) % 3;
    mck_testkit::runtime().block_on(async {
        let before = bytes_down(&rack);
        let stream = KafkaStream::new("s").with_cluster(
            "np-rack",
            meta_at(rack.proxied_bootstrap_servers(), &[topic]),
        );
        let mut stream = open_following(
            native(source_over(stream)).property("client.rack", format!("rack-{near}")),
        )
        .await;
        let mut seen = support::take(&mut stream, 20_000).await;
        let after = bytes_down(&rack);
        let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        // 20 000 records of about 20 bytes: the replica in the client's rack sent
        // them; the leader sent metadata and answers without records.
        assert!(
            sent[near] > 300_000 && sent[leader] < sent[near] / 10,
            "bytes sent by each broker (leader {leader}, near {near}): {sent:?}"
        );

        // The replica dies: its partition is read from the leader again, and what
        // is produced meanwhile comes out once.
        rack.cluster().kill_broker(near).unwrap();
        let more = mck_testkit::fill_values(rack.cluster(), topic, 1, 500, "after");
        want.extend(more);
        support::read_until(&mut stream, &mut seen, |s| s.len() >= 20_500).await;
        mck_testkit::assert_exactly_once(&seen, &want);
        stream.close().await;
    });
    assert_fetched_natively(&["np-rack"]);
    let said = capture().events();
    assert!(
        said.iter().any(|(_, _, f)| f.contains("cluster=np-rack ")
            && f.contains("message=fetching from the preferred read replica ")
            && f.contains(&format!("replica={} ", near + 1))),
        "the fetch said it follows the replica (node {})",
        near + 1
    );
}

/// Three readers of one source reading one cluster share its connections: two to
/// fetch from its broker (`fetch.connections.per.broker`), one for its metadata
/// (and the enumerator's lookups), where each reader kept three of its own; every
/// record comes out once, in order.
#[test]
fn the_readers_of_a_source_share_its_connections_to_a_cluster() {
    let kafka = ProxiedCluster::start(ClusterOptions::new("np-share"))
        .expect("cluster np-share starts behind its proxy");
    let topic = "np-share";
    kafka.cluster().create_topic(topic, 6).unwrap();
    let want: BTreeSet<String> = mck_testkit::fill_values(kafka.cluster(), topic, 6, 3_000, "v")
        .into_iter()
        .collect();
    let accepted = mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster(
            "np-share",
            meta_at(kafka.proxied_bootstrap_servers(), &[topic]),
        );
        let (coordinator, readers) = native(source_over(stream))
            .stopping_offsets(StoppingOffsets::Latest)
            .parallelism(3)
            .max_batch_size(100)
            .build()
            .unwrap()
            .open_parallel()
            .await
            .unwrap();
        let tasks: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                tokio::spawn(async move {
                    let mut seen: Vec<Seen> = Vec::new();
                    while let Some(batch) = reader.next_batch().await {
                        seen.extend(batch.expect("a batch").iter().map(|r| seen_ref(&r)));
                    }
                    // Counted before any reader closes.
                    (seen, reader)
                })
            })
            .collect();
        let mut all = Vec::new();
        let mut done = Vec::new();
        for t in tasks {
            let (seen, reader) = tokio::time::timeout(PATIENCE, t)
                .await
                .expect("each reader reaches its stops")
                .unwrap();
            assert!(!seen.is_empty(), "a reader read nothing: no parallelism");
            all.extend(seen);
            done.push(reader);
        }
        let accepted = kafka.proxy().stats().accepted;
        for reader in done {
            reader.close().await;
        }
        coordinator.close().await;
        // Each record once, in offset order per partition.
        mck_testkit::assert_exactly_once(&all, &want);
        accepted
    });
    assert_fetched_natively(&["np-share"]);
    // The enumerator's lookups take a connection of their own; readers with
    // connections of their own would add three each.
    assert!(
        accepted <= 4,
        "{accepted} connections to the one broker for three readers"
    );
}

/// Waits until `topic`/0 of `cluster` is led by broker `index`.
fn await_leader(cluster: &mck_testkit::KafkaCluster, topic: &str, index: usize) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        // The whole answer, an error too, for the failure's message.
        let leaders = cluster.partition_leaders(topic);
        if leaders.as_ref().is_ok_and(|l| l[0] == Some(index)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}/0 not led by broker {index} after {PATIENCE:?}: leaders by broker index {leaders:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Makes broker `index` the leader of `topic`/0 by an unclean election, asking
/// again while it does not lead: a broker just restarted can still be fenced when
/// the first election runs, which then elects no one (the partition stays
/// leaderless) without the tool saying so.
fn elect_uncleanly(cluster: &mck_testkit::KafkaCluster, topic: &str, index: usize) {
    let bootstrap = cluster.bootstrap_servers();
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut tries = Vec::new();
    loop {
        let said = mck_testkit::tools::elect_unclean_leader(&bootstrap, topic, 0);
        tries.push(said.map_err(|e| e.to_string()));
        let asked = std::time::Instant::now();
        while asked.elapsed() < Duration::from_secs(5) {
            let leaders = cluster.partition_leaders(topic);
            if leaders.as_ref().is_ok_and(|l| l[0] == Some(index)) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{topic}/0 not led by broker {index} after {PATIENCE:?}: leaders by broker \
                 index {leaders:?}; the elections said {tries:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn a_log_truncated_by_an_unclean_election_is_read_on_from_where_the_logs_part_live_or_restored() {
    read_on_after_unclean_elections("native", "np-trunc");
}

#[test]
fn a_log_truncated_by_an_unclean_election_is_read_on_by_librdkafka_too() {
    read_on_after_unclean_elections("librdkafka", "rd-trunc");
}

/// Unclean elections truncate a log below the position of a source reading it with
/// `backend` (`fetch.backend`), then below the position of a checkpoint while no
/// source reads it: either way the source reads on from where the logs part, every
/// record once. `name` is the cluster's, the topic's and the logical cluster's.
fn read_on_after_unclean_elections(backend: &str, name: &str) {
    capture();
    let with_backend = |b: SourceBuilder<Utf8>| b.property("fetch.backend", backend);
    // Three controllers and two brokers (node ids 4 and 5) that hold the topic's
    // one partition; a broker that dies is out of the in-sync replicas in 3 s.
    let cluster = mck_testkit::KafkaCluster::start(
        ClusterOptions::new(name)
            .brokers(5)
            .broker_config("broker.session.timeout.ms", "3000")
            .broker_config("broker.heartbeat.interval.ms", "500"),
    )
    .unwrap_or_else(|e| panic!("cluster {name} starts: {e}"));
    let topic = name;
    let bootstrap = cluster.bootstrap_servers();
    mck_testkit::tools::create_topic_on(&bootstrap, topic, &[&[4, 5]]).unwrap();
    await_leader(&cluster, topic, 3);
    let values = |prefix: &str, n: usize| -> Vec<TestRecord> {
        (0..n)
            .map(|i| TestRecord::value(format!("{prefix}-{i}")))
            .collect()
    };
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster(name, meta(&cluster, &[topic]));
        let mut stream = open_following(with_backend(source_over(stream))).await;
        // A: on both replicas.
        cluster.produce(topic, &values("a", 100)).unwrap();
        let mut seen = support::take(&mut stream, 100).await;
        // B: node 5 is dead, so only node 4 has it; the source reads it.
        cluster.kill_broker(4).unwrap();
        cluster.produce(topic, &values("b", 100)).unwrap();
        support::read_until(&mut stream, &mut seen, |s| s.len() >= 200).await;
        // Node 4 dies too; node 5 comes back and is made leader uncleanly, without
        // B. C is written there from offset 100 on, where B was.
        cluster.kill_broker(3).unwrap();
        cluster.restart_broker(4).unwrap();
        elect_uncleanly(&cluster, topic, 4);
        cluster.produce(topic, &values("c", 150)).unwrap();
        // Every record of C comes out, those at B's offsets too; nothing twice.
        support::read_until(&mut stream, &mut seen, |s| s.len() >= 350).await;
        let got: Vec<&str> = seen.iter().map(|s| s.4.as_str()).collect();
        let want: Vec<String> = ["a", "b"]
            .iter()
            .flat_map(|p| (0..100).map(move |i| format!("{p}-{i}")))
            .chain((0..150).map(|i| format!("c-{i}")))
            .collect();
        assert_eq!(got, want, "A, B, then C, each once and in order");
        let offsets: Vec<i64> = seen.iter().map(|s| s.3).collect();
        assert_eq!(offsets[199], 199);
        assert_eq!(offsets[200], 100, "C starts where B was");
        let cp = stream.checkpoint().unwrap();
        assert!(cp.splits().all(|s| s.next_offset == 250), "{cp:?}");
        // Then while no source reads. Node 4 comes back and catches up; with it dead
        // again, D goes to node 5 alone and is read, and the checkpoint after it
        // keeps the leader epoch of D's batch. The source stops.
        cluster.restart_broker(3).unwrap();
        cluster.await_in_sync(topic, PATIENCE).unwrap();
        cluster.kill_broker(3).unwrap();
        cluster.produce(topic, &values("d", 50)).unwrap();
        support::read_until(&mut stream, &mut seen, |s| s.len() >= 400).await;
        let cp = stream.checkpoint().unwrap();
        assert!(cp.splits().all(|s| s.next_offset == 300), "{cp:?}");
        let last = cp
            .splits()
            .next()
            .and_then(|s| s.last)
            .expect("a last record");
        assert!(last.fingerprint.leader_epoch.is_some(), "{last:?}");
        stream.close().await;
        // Node 5 dies; node 4, without D, is made leader uncleanly, and E is written
        // from offset 250 on, where D was.
        cluster.kill_broker(4).unwrap();
        cluster.restart_broker(3).unwrap();
        elect_uncleanly(&cluster, topic, 3);
        cluster.produce(topic, &values("e", 80)).unwrap();
        // Restored from the checkpoint, the source finds the log truncated below its
        // position by the epoch kept, and reads every record of E, those at D's
        // offsets too (from 300 on it would miss 50 of them).
        let stream = KafkaStream::new("s").with_cluster(name, meta(&cluster, &[topic]));
        let mut stream = with_backend(source_over(stream))
            .restore_from(cp)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut after = Vec::new();
        support::read_until(&mut stream, &mut after, |s| s.len() >= 80).await;
        let got: Vec<&str> = after.iter().map(|s| s.4.as_str()).collect();
        let want: Vec<String> = (0..80).map(|i| format!("e-{i}")).collect();
        assert_eq!(
            got, want,
            "E from where the logs part, each once and in order"
        );
        assert_eq!(after[0].3, 250, "E starts where D was");
        stream.close().await;
    });
    let said = capture().events();
    let warned = |from: i64, to: i64| {
        said.iter().any(|(_, _, f)| {
            f.contains(&format!("split={name}/{name}/0 "))
                && f.contains("message=log truncated below the position")
                && f.contains(&format!("offset={from} "))
                && f.contains(&format!("to={to} "))
        })
    };
    assert!(warned(200, 100), "the truncation was warned about");
    assert!(
        warned(300, 250),
        "the truncation found from the checkpoint was warned about"
    );
}

#[test]
fn records_go_straight_into_batches_for_a_deserializer_that_reads_none() {
    // `InBatch` values do not depend on the record, so the path puts records in
    // the batch without staging them: keys, values (empty ones too), headers and
    // timestamps as written, each once and in order, batches within their size, and
    // the bounded read stops at the ends the logs had at start.
    let topic = "np-direct";
    east().create_topic(topic, 2).unwrap();
    let written: Vec<TestRecord> = (0..1500)
        .map(|i| {
            // Some empty values among them.
            let value = if i % 100 == 7 {
                String::new()
            } else {
                format!("v{i}")
            };
            TestRecord::value(value)
                .with_key(format!("k{i}"))
                .at(1_700_000_000_000 + i)
                .with_header("h", format!("x{i}"))
        })
        .collect();
    east().produce(topic, &written).unwrap();
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster("np-direct", meta(east(), &[topic]));
        let mut stream = native(source_over(stream))
            .include_headers(true)
            .max_batch_size(64)
            .deserializer(InBatch)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        // Written after the start: past the stops, never handed out.
        east().produce(topic, &[TestRecord::value("late")]).unwrap();
        let mut got = Vec::new();
        let done = tokio::time::timeout(PATIENCE, async {
            while let Some(batch) = stream.next_batch().await {
                let batch = batch.expect("a batch");
                assert!(
                    batch.len() <= 64,
                    "{} records in a batch of 64",
                    batch.len()
                );
                for r in batch.iter() {
                    got.push((
                        r.partition,
                        r.offset,
                        r.key.map(<[u8]>::to_vec),
                        r.raw_value().map(<[u8]>::to_vec),
                        r.timestamp,
                        r.headers.to_vec(),
                    ));
                }
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "the bounded read did not end; {} records",
            got.len()
        );
        assert_eq!(got.len(), 1500, "records handed out");
        // Each record as written: the key names it.
        let mut offsets = std::collections::HashMap::new();
        for (partition, offset, key, value, timestamp, headers) in &got {
            let key = String::from_utf8(key.clone().expect("a key")).unwrap();
            let i: i64 = key[1..].parse().unwrap();
            let last = offsets.insert(*partition, *offset);
            assert!(
                last.is_none_or(|l| l < *offset),
                "{partition}: {offset} after {last:?}"
            );
            let want = if i % 100 == 7 {
                String::new()
            } else {
                format!("v{i}")
            };
            assert_eq!(value, &Some(want.into_bytes()), "record {key}");
            assert_eq!(*timestamp, Some(1_700_000_000_000 + i));
            assert_eq!(
                headers,
                &[("h".to_string(), Some(format!("x{i}").into_bytes()))]
            );
        }
        let keys: BTreeSet<&Option<Vec<u8>>> = got.iter().map(|g| &g.2).collect();
        assert_eq!(keys.len(), 1500, "no record twice");
        let cp = stream.checkpoint().unwrap();
        let ends: i64 = cp.splits().map(|s| s.next_offset).sum();
        assert_eq!(ends, 1500, "{cp:?}");
        stream.close().await;
    });
    assert_fetched_natively(&["np-direct"]);
}

/// The value of record `i` of [`a_value_at_or_above_the_threshold_is_shared_and_every_value_reads_as_written`]:
/// sizes around the default threshold and far from it, letters only.
fn sized_value(i: usize) -> String {
    let size = [
        50,
        DEFAULT_SHARE_MIN_BYTES - 1,
        DEFAULT_SHARE_MIN_BYTES,
        9000,
        1,
    ][i % 5];
    let head = format!("v{i:04}-");
    let fill: String = (0..size.saturating_sub(head.len()))
        .map(|k| char::from(b'a' + (k % 26) as u8))
        .collect();
    head + &fill
}

/// Reads the source `b` builds to its stops, by batches: `(partition, offset,
/// value)` of every record, the value by `value_of` and checked against the record's
/// raw bytes, borrowed and shared.
async fn read_values<D: Deserializer>(
    b: SourceBuilder<D>,
    value_of: impl Fn(&RecordRef<'_, D::Value>) -> Vec<u8>,
) -> Vec<(i32, i64, Vec<u8>)> {
    let mut stream = open_bounded(b).await;
    let mut got = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(batch) = stream.next_batch().await {
            for r in batch.expect("a batch").iter() {
                let value = value_of(&r);
                assert_eq!(r.raw_value(), Some(&value[..]));
                assert_eq!(r.raw_value_bytes().as_deref(), Some(&value[..]));
                got.push((r.partition, r.offset, value));
            }
        }
    })
    .await
    .expect("the bounded read ends");
    stream.close().await;
    got
}

#[test]
fn a_value_at_or_above_the_threshold_is_shared_and_every_value_reads_as_written() {
    // Values from 1 byte to 9 000 around the default `fetch.share.min.bytes`, plain
    // and zstd from Kafka's Java producer, read with every value shared (0), with
    // the default, and with none shared: each record once, in order per partition,
    // byte for byte; through a deserializer that keeps its value (`RawValue`, a
    // slice of the shared answer) and through batches read in place (`InBatch`).
    let values: Vec<String> = (0..400).map(sized_value).collect();
    for (topic, codec) in [("np-share-plain", "none"), ("np-share-zstd", "zstd")] {
        east().create_topic(topic, 2).unwrap();
        east()
            .produce_with_java(topic, &values, &[("compression.type", codec)])
            .unwrap();
        for threshold in [Some("0"), None, Some("1000000000")] {
            let cluster = format!("{topic}-{}", threshold.unwrap_or("default"));
            let over = || {
                let stream = KafkaStream::new("s").with_cluster(&cluster, meta(east(), &[topic]));
                let b = native(source_over(stream)).max_batch_size(100);
                match threshold {
                    Some(t) => b.property("fetch.share.min.bytes", t),
                    None => b,
                }
            };
            let (kept, in_place) = mck_testkit::runtime().block_on(async {
                let kept = read_values(over().deserializer(RawValue), |r| r.value.to_vec()).await;
                let in_place = read_values(over().deserializer(InBatch), |r| {
                    r.raw_value().expect("a value").to_vec()
                })
                .await;
                (kept, in_place)
            });
            assert_eq!(kept.len(), values.len(), "{cluster}: records read");
            // The same records, whichever partition came first.
            let sorted = |mut v: Vec<(i32, i64, Vec<u8>)>| {
                v.sort();
                v
            };
            assert!(
                sorted(kept.clone()) == sorted(in_place),
                "{cluster}: the two deserializers did not read the same records"
            );
            let mut last: std::collections::HashMap<i32, (i64, usize)> = Default::default();
            let mut seen = BTreeSet::new();
            for (partition, offset, value) in &kept {
                let value = String::from_utf8(value.clone()).expect("letters");
                let i: usize = value[1..5].parse().expect("its index");
                assert_eq!(value, values[i], "{cluster}: record {i} as written");
                assert!(seen.insert(i), "{cluster}: record {i} twice");
                if let Some((o, j)) = last.insert(*partition, (*offset, i)) {
                    assert!(
                        o < *offset && j < i,
                        "{cluster}: {partition}: {i} after {j}"
                    );
                }
            }
            assert_fetched_natively(&[&cluster]);
        }
    }
}

/// In time order the merge holds what was fetched until the other splits catch up:
/// values of every size then stay in the answers they came in (a copy made at once
/// would be read long after, from memory gone cold), unless `fetch.share.min.bytes`
/// is set. In an answer, consecutive records' values lie apart, Kafka's framing of
/// the next record between them; copied into a batch's data, they lie back to back.
#[test]
fn in_time_order_small_values_stay_in_the_answers_unless_the_threshold_is_set() {
    let topic = "np-held-share";
    east().create_topic(topic, 1).unwrap();
    let records: Vec<TestRecord> = (0..300)
        .map(|i| TestRecord::value(format!("v{i:03}")).at(1_700_000_000_000 + i))
        .collect();
    east().produce(topic, &records).unwrap();
    for threshold in [None, Some("1000000000")] {
        let cluster = format!("{topic}-{}", threshold.unwrap_or("default"));
        let (values, pairs, back_to_back) = mck_testkit::runtime().block_on(async {
            let stream = KafkaStream::new("s").with_cluster(&cluster, meta(east(), &[topic]));
            let mut b = native(source_over(stream))
                .deserializer(InBatch)
                .watermarks(WatermarkStrategy::monotonous_timestamps())
                .order(ReadOrder::Time);
            if let Some(t) = threshold {
                b = b.property("fetch.share.min.bytes", t);
            }
            let mut stream = open_bounded(b).await;
            let (mut values, mut pairs, mut back_to_back) = (Vec::new(), 0, 0);
            tokio::time::timeout(PATIENCE, async {
                while let Some(batch) = stream.next_batch().await {
                    let batch = batch.expect("a batch");
                    let buffers: Vec<_> = batch.byte_buffers().collect();
                    let mut last: Option<(usize, usize)> = None;
                    for i in 0..batch.len() {
                        let (buffer, range) = batch.value_span(i).expect("a value");
                        values.push(String::from_utf8(buffers[buffer][range.clone()].to_vec()));
                        if let Some((_, end)) = last.filter(|(b, _)| *b == buffer) {
                            pairs += 1;
                            back_to_back += usize::from(end == range.start);
                        }
                        last = Some((buffer, range.end));
                    }
                }
            })
            .await
            .expect("the bounded read ends");
            stream.close().await;
            (values, pairs, back_to_back)
        });
        let expected: Vec<_> = (0..300).map(|i| Ok(format!("v{i:03}"))).collect();
        assert_eq!(values, expected, "{cluster}: every value once, in order");
        assert!(
            pairs > 200,
            "{cluster}: only {pairs} neighbours in one buffer"
        );
        match threshold {
            None => assert_eq!(back_to_back, 0, "{cluster}: values were copied"),
            Some(_) => assert_eq!(back_to_back, pairs, "{cluster}: values were shared"),
        }
        assert_fetched_natively(&[&cluster]);
    }
}

#[test]
fn keys_headers_and_timestamps_come_through_as_written() {
    let topic = "np-fields";
    east().create_topic(topic, 1).unwrap();
    let records: Vec<TestRecord> = (0..50)
        .map(|i| {
            TestRecord::value(format!("v{i}"))
                .with_key(format!("k{i}"))
                .at(1_700_000_000_000 + i)
                .with_header("h", format!("x{i}"))
                .with_header("empty", "")
        })
        .collect();
    east().produce(topic, &records).unwrap();
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster("np-fields", meta(east(), &[topic]));
        let mut stream = open_bounded(native(source_over(stream)).include_headers(true)).await;
        let mut got = Vec::new();
        while let Some(r) = stream.next().await {
            got.push(r.expect("a record"));
        }
        assert_eq!(got.len(), 50);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.value, format!("v{i}"));
            assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
            assert_eq!(r.timestamp, Some(1_700_000_000_000 + i as i64));
            assert_eq!(
                r.headers,
                vec![
                    ("h".to_string(), Some(format!("x{i}").into_bytes())),
                    ("empty".to_string(), Some(Vec::new())),
                ]
            );
        }
        stream.close().await;
    });
    assert_fetched_natively(&["np-fields"]);
}

#[test]
fn read_committed_skips_aborted_transactions_and_their_markers() {
    let topic = "np-txn";
    east().create_topic(topic, 1).unwrap();
    let batch = |p: &str| -> Vec<TestRecord> {
        (0..20)
            .map(|i| TestRecord::value(format!("{p}{i}")).to_partition(0))
            .collect()
    };
    produce_transaction(east(), topic, &batch("a"), TransactionEnd::Commit).unwrap();
    produce_transaction(east(), topic, &batch("x"), TransactionEnd::Abort).unwrap();
    produce_transaction(east(), topic, &batch("b"), TransactionEnd::Commit).unwrap();
    mck_testkit::runtime().block_on(async {
        let stream = KafkaStream::new("s").with_cluster("np-txn", meta(east(), &[topic]));
        let mut stream = open_bounded(native(source_over(stream))).await;
        let seen = drained(&mut stream).await;
        let values: Vec<&str> = seen.iter().map(|s| s.4.as_str()).collect();
        let want: Vec<String> = (0..20)
            .map(|i| format!("a{i}"))
            .chain((0..20).map(|i| format!("b{i}")))
            .collect();
        assert_eq!(values, want);
        // Three markers and twenty aborted records were stepped over, not handed out.
        let cp = stream.checkpoint().unwrap();
        assert!(cp.splits().all(|s| s.next_offset == 63), "{cp:?}");
        stream.close().await;
    });
    assert_fetched_natively(&["np-txn"]);
}

#[test]
fn tls_and_sasl_listeners_are_read_natively_by_native_and_by_auto() {
    capture();
    let c = mck_testkit::shared_secured_cluster().expect("the secured cluster starts");
    let topic = "np-secured";
    c.create_topic(topic, 2).unwrap();
    let want: BTreeSet<String> = mck_testkit::fill_values(c, topic, 2, 300, "sec")
        .into_iter()
        .collect();
    let over = |listener: Listener, backend: Option<&str>| {
        let mut m = ClusterMetadata::builder(c.listener_bootstrap(listener)).topics([topic]);
        for (k, v) in c.security().unwrap().client_properties(listener) {
            m = m.property(k, v);
        }
        if let Some(b) = backend {
            m = m.property("fetch.backend", b);
        }
        m.build().unwrap()
    };
    let mut clusters = Vec::new();
    for (listener, name) in [
        (Listener::Mtls, "mtls"),
        (Listener::ScramSsl, "scram"),
        (Listener::PlainSasl, "plain"),
        // librdkafka's unsecured JWT from `sasl.oauthbearer.config`.
        (Listener::OauthSsl, "oauth"),
    ] {
        for backend in [Some("native"), None] {
            let cluster = format!("np-{name}-{}", backend.unwrap_or("auto"));
            let stream = KafkaStream::new("s").with_cluster(&cluster, over(listener, backend));
            let seen = mck_testkit::runtime().block_on(read_to_the_end(source_over(stream)));
            mck_testkit::assert_exactly_once(&seen, &want);
            clusters.push(cluster);
        }
    }
    // OAUTHBEARER with tokens from an OIDC endpoint (client credentials).
    let principal = &c.security().unwrap().oauth_principal;
    let endpoint = support::TokenEndpoint::start(principal, "np-reader", "np-secret");
    for backend in [Some("native"), None] {
        let mut m = over(Listener::OauthSsl, backend);
        m.properties.remove("enable.sasl.oauthbearer.unsecure.jwt");
        m.properties.remove("sasl.oauthbearer.config");
        for (k, v) in endpoint.properties("np-reader", "np-secret") {
            m.properties.set(k, v);
        }
        let cluster = format!("np-oidc-{}", backend.unwrap_or("auto"));
        let stream = KafkaStream::new("s").with_cluster(&cluster, m);
        let seen = mck_testkit::runtime().block_on(read_to_the_end(source_over(stream)));
        mck_testkit::assert_exactly_once(&seen, &want);
        clusters.push(cluster);
    }
    assert!(!endpoint.granted.lock().unwrap().is_empty());
    let names: Vec<&str> = clusters.iter().map(String::as_str).collect();
    assert_fetched_natively(&names);
}

/// Client hooks that make unsecured tokens for `principal` (a token the broker
/// cannot parse when it is empty) and keep the errors they hear of.
struct Hooks {
    principal: String,
    made: AtomicU64,
    heard: Mutex<Vec<(KafkaErrorKind, String)>>,
}

impl ClientHooks for Hooks {
    fn enable_token_refresh(&self) -> bool {
        true
    }

    fn generate_oauth_token(
        &self,
        _: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        if self.principal.is_empty() {
            let mut t = support::unsecured_token("x", Duration::from_secs(300))?;
            t.token = "not-a-jwt".into();
            return Ok(t);
        }
        support::unsecured_token(&self.principal, Duration::from_secs(300))
    }

    fn error(&self, kind: KafkaErrorKind, reason: &str) {
        self.heard.lock().unwrap().push((kind, reason.to_string()));
    }
}

#[test]
fn the_client_hooks_tokens_are_used_natively_and_their_error_hook_hears_of_refusals() {
    capture();
    let c = mck_testkit::shared_secured_cluster().expect("the secured cluster starts");
    let topic = "np-hooked";
    c.create_topic(topic, 2).unwrap();
    let want: BTreeSet<String> = mck_testkit::fill_values(c, topic, 2, 100, "hk")
        .into_iter()
        .collect();
    let over = |cluster: &str| {
        let mut props = support::oauth_without_token_maker(c);
        let mut m = ClusterMetadata::builder(props.remove(0).1).topics([topic]);
        for (k, v) in props {
            m = m.property(k, v);
        }
        KafkaStream::new("s").with_cluster(cluster, m.build().unwrap())
    };
    let hooks = |principal: &str| {
        Arc::new(Hooks {
            principal: principal.into(),
            made: AtomicU64::new(0),
            heard: Mutex::new(Vec::new()),
        })
    };

    // Good tokens, by auto: read natively, the hooks asked.
    let good = hooks(&c.security().unwrap().oauth_principal);
    let given = good.clone();
    let seen = mck_testkit::runtime().block_on(read_to_the_end(
        source_over(over("np-hooked-good"))
            .client_hooks(move |_: &str| Some(given.clone() as Arc<dyn ClientHooks>)),
    ));
    mck_testkit::assert_exactly_once(&seen, &want);
    assert!(good.made.load(Ordering::Relaxed) >= 1);
    assert!(good.heard.lock().unwrap().is_empty(), "{:?}", good.heard);
    assert_fetched_natively(&["np-hooked-good"]);

    // A token the broker refuses: the start fails in the broker's words, the hooks
    // hear of it as an authentication error, and the token is never shown.
    let bad = hooks("");
    let given = bad.clone();
    let err = mck_testkit::runtime()
        .block_on(
            native(source_over(over("np-hooked-bad")))
                .client_hooks(move |_: &str| Some(given.clone() as Arc<dyn ClientHooks>))
                .stopping_offsets(StoppingOffsets::Latest)
                .startup_timeout(Some(Duration::from_secs(30)))
                .build()
                .unwrap()
                .open(),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("refused the token"), "{err}");
    assert!(!err.contains("not-a-jwt") && !err.contains('\n'), "{err}");
    let heard = bad.heard.lock().unwrap();
    assert!(
        heard.iter().any(|(kind, reason)| {
            *kind == KafkaErrorKind::Authentication && reason.contains("refused the token")
        }),
        "{heard:?}"
    );
    assert!(
        heard.iter().all(|(_, r)| !r.contains("not-a-jwt")),
        "{heard:?}"
    );
}

#[test]
fn endpoint_identification_is_turned_off_by_none_and_a_bad_value_is_refused() {
    capture();
    let c = mck_testkit::shared_secured_cluster().expect("the secured cluster starts");
    let topic = "np-wronghost";
    c.create_topic(topic, 1).unwrap();
    let want: BTreeSet<String> = mck_testkit::fill_values(c, topic, 1, 50, "wh")
        .into_iter()
        .collect();
    let over = |identification: &str| {
        let mut m =
            ClusterMetadata::builder(c.listener_bootstrap(Listener::WrongHost)).topics([topic]);
        for (k, v) in c.security().unwrap().client_properties(Listener::WrongHost) {
            m = m.property(k, v);
        }
        m.property("ssl.endpoint.identification.algorithm", identification)
            .build()
            .unwrap()
    };
    mck_testkit::runtime().block_on(async {
        // The broker's certificate names another host: read with the check off.
        let stream = KafkaStream::new("s").with_cluster("np-wronghost-none", over("none"));
        let seen = read_to_the_end(native(source_over(stream))).await;
        mck_testkit::assert_exactly_once(&seen, &want);

        // A value that is neither https nor none is refused at open, naming the
        // property and never the value.
        let stream = KafkaStream::new("s").with_cluster("np-wronghost-bad", over("maybe"));
        let opened = native(source_over(stream))
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await;
        let text = match opened {
            Ok(_) => panic!("a source with ssl.endpoint.identification.algorithm=maybe opened"),
            Err(e) => e.to_string(),
        };
        assert!(
            text.contains("`ssl.endpoint.identification.algorithm` refused"),
            "{text}"
        );
        assert!(!text.contains("maybe"), "{text}");
    });
    assert_fetched_natively(&["np-wronghost-none"]);
}

#[test]
fn a_property_the_native_path_lacks_is_refused_by_native_and_left_to_librdkafka_by_auto() {
    let topic = "np-refused";
    east().create_topic(topic, 1).unwrap();
    east().produce(topic, &[TestRecord::value("only")]).unwrap();
    mck_testkit::runtime().block_on(async {
        // native: the read fails, naming the property and never its value.
        let stream =
            KafkaStream::new("s").with_cluster("np-refused-native", meta(east(), &[topic]));
        let mut stream =
            open_bounded(native(source_over(stream)).property("ssl.curves.list", "curve-secret-1"))
                .await;
        let err = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("an answer")
            .expect("the stream goes on")
            .expect_err("native refuses ssl.curves.list");
        let text = err.to_string();
        assert!(
            text.contains("fetch.backend=native") && text.contains("`ssl.curves.list`"),
            "{text}"
        );
        assert!(!text.contains("curve-secret-1"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        stream.close().await;

        // auto: the same cluster is read with librdkafka.
        let stream = KafkaStream::new("s").with_cluster("np-refused-auto", meta(east(), &[topic]));
        let mut stream = open_bounded(
            source_over(stream)
                .property("fetch.backend", "auto")
                .property("ssl.curves.list", "P-256"),
        )
        .await;
        let seen = drained(&mut stream).await;
        assert_eq!(values_of(&seen), BTreeSet::from(["only".to_string()]));
        stream.close().await;
    });
    let said = capture().events();
    assert!(
        said.iter()
            .any(|(_, _, fields)| fields.contains("fetching with librdkafka")
                && fields.contains("ssl.curves.list")),
        "auto said why the cluster stays on librdkafka: {said:?}"
    );
    let made = |cluster: &str, message: &str| {
        said.iter().any(|(_, _, f)| {
            f.contains(&format!("cluster={cluster} ")) && f.contains(&format!("message={message} "))
        })
    };
    assert!(made("np-refused-auto", "consumer created"));
    assert!(!made("np-refused-native", "fetching natively"));
}

#[test]
fn a_backend_that_does_not_exist_is_refused_by_the_property_check() {
    let mut p = multicluster_kafka::properties::ClientProperties::new();
    p.set("bootstrap.servers", "127.0.0.1:9");
    p.set("fetch.backend", "turbo");
    let refused = p.check().unwrap_err();
    assert_eq!(refused.key.as_deref(), Some("fetch.backend"));
    assert_eq!(
        refused.to_string(),
        "property `fetch.backend` refused: fetch.backend must be native, librdkafka or auto"
    );
    p.set("fetch.backend", "Native");
    p.check()
        .expect("case is ignored, and librdkafka never sees the key");
}
