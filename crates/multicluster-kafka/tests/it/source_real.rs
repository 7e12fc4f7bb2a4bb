//! The multi-cluster source against real Apache Kafka brokers (two shared clusters).

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use mck_testkit::{KafkaCluster, Seen, TestCluster, TestRecord, assert_seen_in_order, fill_values};
use multicluster_kafka::offsets::PartitionOffset;
use multicluster_kafka::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use support::{PATIENCE, drain, east, meta_at, seen_of, take, west};

fn cluster(c: &dyn TestCluster, topics: &[&str]) -> ClusterMetadataBuilderExt {
    ClusterMetadataBuilderExt(
        ClusterMetadata::builder(c.bootstrap_servers()).topics(topics.iter().copied()),
    )
}

struct ClusterMetadataBuilderExt(multicluster_kafka::metadata::ClusterMetadataBuilder);

impl ClusterMetadataBuilderExt {
    fn start(self, o: StartingOffsets) -> Self {
        Self(self.0.starting_offsets(o))
    }
    fn stop(self, o: StoppingOffsets) -> Self {
        Self(self.0.stopping_offsets(o))
    }
    fn done(self) -> ClusterMetadata {
        self.0.build().unwrap()
    }
}

fn service(stream: &str, clusters: Vec<(&str, ClusterMetadata)>) -> StaticMetadataService {
    let mut s = KafkaStream::new(stream);
    for (id, m) in clusters {
        s = s.with_cluster(id, m);
    }
    StaticMetadataService::new([s]).unwrap()
}

/// A source of UTF-8 values reading one stream.
fn utf8_source(svc: StaticMetadataService, stream: &str) -> SourceBuilder<Utf8> {
    MultiClusterKafkaSource::builder()
        .metadata_service(svc)
        .stream_ids([stream])
        .deserializer(ValueOnly::<String>::utf8())
}

/// A stream made of `topic` on both clusters.
fn on_both(e: &KafkaCluster, w: &KafkaCluster, stream: &str, topic: &str) -> StaticMetadataService {
    service(
        stream,
        vec![
            ("east", cluster(e, &[topic]).done()),
            ("west", cluster(w, &[topic]).done()),
        ],
    )
}

/// Creates `topic` on both clusters with (east, west) partitions, fills each partition
/// with `n` records, and returns every value produced with a stream over both.
fn filled_on_both(
    e: &KafkaCluster,
    w: &KafkaCluster,
    topic: &str,
    partitions: (i32, i32),
    n: usize,
    stream: &str,
) -> (BTreeSet<String>, StaticMetadataService) {
    e.create_topic(topic, partitions.0).unwrap();
    w.create_topic(topic, partitions.1).unwrap();
    let mut want: BTreeSet<String> = fill_values(e, topic, partitions.0, n, "east")
        .into_iter()
        .collect();
    want.extend(fill_values(w, topic, partitions.1, n, "west"));
    (want, on_both(e, w, stream, topic))
}

fn values(seen: &[Seen]) -> BTreeSet<String> {
    seen.iter().map(|s| s.4.clone()).collect()
}

#[test]
fn every_record_of_two_clusters_is_read_exactly_once() {
    let (e, w) = (east(), west());
    let (want, svc) = filled_on_both(e, w, "eo", (3, 3), 40, "eo-stream");
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "eo-stream")
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let mut stream = source.open().await.unwrap();
        let seen = drain(&mut stream).await;
        assert_seen_in_order(&seen);
        assert_eq!(values(&seen), want);
        // The same topic name on two clusters gives two distinct sets of splits, and
        // every record names its cluster.
        let cp = stream.checkpoint().unwrap();
        assert_eq!(cp.split_count(), 6);
        assert_eq!(
            cp.clusters.keys().cloned().collect::<Vec<_>>(),
            ["east", "west"]
        );
        for (c, _, _, _, v) in &seen {
            assert!(v.starts_with(c.as_str()), "record {v} names cluster {c}");
        }
        stream.close().await;
    });
}

#[test]
fn per_cluster_starting_offsets_earliest_on_one_latest_on_the_other() {
    let (e, w) = (east(), west());
    e.create_topic("starts", 2).unwrap();
    w.create_topic("starts", 2).unwrap();
    let east_before = fill_values(e, "starts", 2, 10, "east-before");
    fill_values(w, "starts", 2, 10, "west-before");
    let svc = service(
        "starts-stream",
        vec![
            (
                "east",
                cluster(e, &["starts"])
                    .start(StartingOffsets::Earliest)
                    .done(),
            ),
            (
                "west",
                cluster(w, &["starts"])
                    .start(StartingOffsets::Latest)
                    .done(),
            ),
        ],
    );
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "starts-stream").build().unwrap();
        let mut stream = source.open().await.unwrap();
        let mut seen = take(&mut stream, east_before.len()).await;
        let west_after = fill_values(w, "starts", 2, 5, "west-after");
        let sentinels: Vec<String> = fill_values(e, "starts", 2, 1, "east-sentinel")
            .into_iter()
            .chain(fill_values(w, "starts", 2, 1, "west-sentinel"))
            .collect();
        seen.extend(take(&mut stream, west_after.len() + sentinels.len()).await);
        let want: BTreeSet<String> = east_before
            .into_iter()
            .chain(west_after)
            .chain(sentinels)
            .collect();
        assert_eq!(
            values(&seen),
            want,
            "west starts at latest: none of its earlier records"
        );
        assert_seen_in_order(&seen);
    });
}

#[test]
fn per_cluster_stopping_offsets_bound_each_cluster() {
    let (e, w) = (east(), west());
    e.create_topic("stops", 2).unwrap();
    w.create_topic("stops", 2).unwrap();
    let east_all = fill_values(e, "stops", 2, 20, "east");
    fill_values(w, "stops", 2, 20, "west");
    let west_stop = StoppingOffsets::Specific {
        offsets: vec![
            PartitionOffset {
                topic: "stops".into(),
                partition: 0,
                offset: 5,
            },
            PartitionOffset {
                topic: "stops".into(),
                partition: 1,
                offset: 7,
            },
        ],
    };
    let svc = service(
        "stops-stream",
        vec![
            ("east", cluster(e, &["stops"]).done()),
            ("west", cluster(w, &["stops"]).stop(west_stop).done()),
        ],
    );
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "stops-stream")
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let mut stream = source.open().await.unwrap();
        let seen = drain(&mut stream).await;
        let mut want: BTreeSet<String> = east_all.into_iter().collect();
        want.extend((0..5).map(|i| format!("west-0-{i}")));
        want.extend((0..7).map(|i| format!("west-1-{i}")));
        assert_eq!(values(&seen), want);
        assert_seen_in_order(&seen);
    });
}

#[test]
fn timestamp_starting_offsets_skip_older_records() {
    let e = east();
    e.create_topic("stamped-src", 1).unwrap();
    let base = 1_700_000_000_000i64;
    let recs: Vec<TestRecord> = (0..100)
        .map(|i| TestRecord::value(format!("v{i}")).at(base + i))
        .collect();
    e.produce("stamped-src", &recs).unwrap();
    let svc = service(
        "ts-stream",
        vec![("east", cluster(e, &["stamped-src"]).done())],
    );
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "ts-stream")
            .starting_offsets(StartingOffsets::Timestamp(base + 60))
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let mut stream = source.open().await.unwrap();
        let seen = drain(&mut stream).await;
        let got: Vec<String> = seen.iter().map(|s| s.4.clone()).collect();
        assert_eq!(got, (60..100).map(|i| format!("v{i}")).collect::<Vec<_>>());
    });
}

fn commit_plain(c: &dyn TestCluster, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap_servers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
            .unwrap();
    }
    consumer
        .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        .unwrap();
}

fn committed_plain(
    c: &dyn TestCluster,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Vec<Option<i64>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap_servers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    (0..partitions)
        .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        })
        .collect()
}

#[test]
fn committed_offsets_are_used_and_missing_ones_fall_back() {
    let (e, w) = (east(), west());
    e.create_topic("committed", 2).unwrap();
    w.create_topic("committed", 2).unwrap();
    fill_values(e, "committed", 2, 20, "east");
    let west_all = fill_values(w, "committed", 2, 20, "west");
    commit_plain(e, "g-committed", "committed", &[(0, 10), (1, 15)]);
    let svc = on_both(e, w, "committed-stream", "committed");
    mck_testkit::runtime().block_on(async {
        let source = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["committed-stream"])
            .group_id("g-committed")
            .deserializer(ValueOnly::<String>::utf8())
            .starting_offsets(StartingOffsets::Committed {
                reset: OffsetReset::Earliest,
            })
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let mut stream = source.open().await.unwrap();
        let seen = drain(&mut stream).await;
        let mut want: BTreeSet<String> = west_all.into_iter().collect();
        want.extend((10..20).map(|i| format!("east-0-{i}")));
        want.extend((15..20).map(|i| format!("east-1-{i}")));
        assert_eq!(values(&seen), want);
    });
}

#[test]
fn a_checkpoint_taken_mid_stream_restores_to_exactly_once_output_and_commits_offsets() {
    let (e, w) = (east(), west());
    e.create_topic("cp", 3).unwrap();
    w.create_topic("cp", 2).unwrap();
    let mut want: BTreeSet<String> = fill_values(e, "cp", 3, 30, "east").into_iter().collect();
    want.extend(fill_values(w, "cp", 2, 30, "west"));
    let make = |restore: Option<Checkpoint>| {
        let svc = on_both(e, w, "cp-stream", "cp");
        let mut b = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["cp-stream"])
            .group_id("g-cp")
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest);
        if let Some(cp) = restore {
            b = b.restore_from(cp);
        }
        b.build().unwrap()
    };
    mck_testkit::runtime().block_on(async {
        let mut first = make(None).open().await.unwrap();
        let before = take(&mut first, 70).await;
        let cp = first.checkpoint().unwrap();
        // Records fetched but not handed out are not in the checkpoint: read a few
        // more, then crash (drop without checkpointing).
        let _lost_after_checkpoint = take(&mut first, 10).await;
        drop(first);
        let bytes = cp.encode();
        let restored = Checkpoint::decode(&bytes).unwrap();
        let mut second = make(Some(restored)).open().await.unwrap();
        let after = drain(&mut second).await;
        let mut all = before.clone();
        all.extend(after);
        assert_seen_in_order(&all);
        assert_eq!(values(&all), want);

        let done = second.checkpoint().unwrap();
        second.commit(&done).await.unwrap();
        assert_eq!(committed_plain(e, "g-cp", "cp", 3), vec![Some(30); 3]);
        assert_eq!(committed_plain(w, "g-cp", "cp", 2), vec![Some(30); 2]);
    });
}

#[test]
fn partitions_added_while_running_are_read() {
    let e = east();
    e.create_topic("grows", 1).unwrap();
    let first = fill_values(e, "grows", 1, 10, "first");
    let svc = service(
        "grows-stream",
        vec![("east", cluster(e, &["grows"]).done())],
    );
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "grows-stream")
            .partition_discovery_interval(Duration::from_millis(500))
            .build()
            .unwrap();
        let mut stream = source.open().await.unwrap();
        let mut seen = take(&mut stream, first.len()).await;
        tokio::task::spawn_blocking(move || e.add_partitions("grows", 3))
            .await
            .unwrap()
            .unwrap();
        let recs: Vec<TestRecord> = (1..3)
            .flat_map(|p| {
                (0..5).map(move |i| TestRecord::value(format!("new-{p}-{i}")).to_partition(p))
            })
            .collect();
        tokio::task::spawn_blocking(move || e.produce("grows", &recs))
            .await
            .unwrap()
            .unwrap();
        seen.extend(take(&mut stream, 10).await);
        let mut want: BTreeSet<String> = first.into_iter().collect();
        want.extend((1..3).flat_map(|p| (0..5).map(move |i| format!("new-{p}-{i}"))));
        assert_eq!(values(&seen), want);
        assert_seen_in_order(&seen);
    });
}

#[test]
fn splits_of_a_dropped_reader_move_to_the_others_without_loss_or_repeat() {
    let (e, w) = (east(), west());
    let (want, svc) = filled_on_both(e, w, "failover", (4, 2), 25, "failover-stream");
    mck_testkit::runtime().block_on(async {
        let source = utf8_source(svc, "failover-stream")
            .parallelism(2)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let (_coordinator, mut readers) = source.open_parallel().await.unwrap();
        let mut survivor = readers.pop().unwrap();
        let mut failing = readers.pop().unwrap();
        let mut seen: Vec<Seen> = Vec::new();
        for _ in 0..20 {
            let r = tokio::time::timeout(PATIENCE, failing.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            seen.push(seen_of(r));
        }
        drop(failing);
        let rest = tokio::time::timeout(PATIENCE, async {
            let mut out = Vec::new();
            while let Some(r) = survivor.next().await {
                let r = r.unwrap();
                out.push(seen_of(r));
            }
            out
        })
        .await
        .expect("the survivor finishes");
        seen.extend(rest);
        assert_seen_in_order(&seen);
        assert_eq!(values(&seen), want);
    });
}

#[test]
fn unknown_streams_unreachable_clusters_and_bad_patterns_are_clear_errors() {
    let e = east();
    mck_testkit::runtime().block_on(async {
        let svc = service("known", vec![("east", cluster(e, &["whatever"]).done())]);
        let err = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["known", "nope"])
            .build()
            .unwrap()
            .open()
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "unknown stream id(s): nope");

        let dead = meta_at("127.0.0.1:1", &["t"]);
        let svc = service("dead-stream", vec![("dead", dead)]);
        // A bounded run cannot end without the cluster (a follow run starts without
        // it and retries it).
        let err = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["dead-stream"])
            .client_timeout(Duration::from_secs(3))
            .startup_timeout(Some(Duration::from_secs(5)))
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("cluster `dead`:"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");

        let svc = service("p", vec![("east", cluster(e, &["t"]).done())]);
        let err = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_pattern("orders-(")
            .build()
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "invalid source configuration: stream_pattern: invalid stream pattern `orders-(`"
            ),
            "{text}"
        );
        assert!(!text.contains('\n'), "one line: {text}");
    });
}
