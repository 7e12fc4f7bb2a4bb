//! Source behaviours that need no real broker: bounded edge cases, cluster identity,
//! deserialization errors (in-process librdkafka mock clusters).

use crate::support;

use std::collections::BTreeMap;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::prelude::*;
use support::{Capture, meta_at, shared_source};

fn stream_on(
    id: &str,
    cluster_id: &str,
    c: &MockKafkaCluster,
    topic: &str,
) -> StaticMetadataService {
    let s = KafkaStream::new(id).with_cluster(cluster_id, meta_at(c.bootstrap_servers(), &[topic]));
    StaticMetadataService::new([s]).unwrap()
}

async fn read_all(builder: SourceBuilder<Utf8>) -> Result<(Vec<String>, Checkpoint), SourceError> {
    let mut s = builder.build()?.open().await?;
    let mut out = Vec::new();
    while let Some(r) = s.next().await {
        out.push(r?.value);
    }
    let cp = s.checkpoint()?;
    s.close().await;
    Ok((out, cp))
}

fn bounded(svc: StaticMetadataService, id: &str) -> SourceBuilder<Utf8> {
    MultiClusterKafkaSource::builder()
        .metadata_service(svc)
        .stream_ids([id])
        .deserializer(Utf8)
        .stopping_offsets(StoppingOffsets::Latest)
}

#[test]
fn a_bounded_stream_with_zero_clusters_ends_at_once() {
    let svc = StaticMetadataService::new([KafkaStream::new("empty")]).unwrap();
    let (records, cp) = mck_testkit::runtime()
        .block_on(read_all(bounded(svc, "empty")))
        .unwrap();
    assert!(records.is_empty());
    assert_eq!(cp.split_count(), 0);
}

#[test]
fn a_bounded_run_restored_after_it_finished_ends_without_rereading() {
    let c = MockKafkaCluster::start("done", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    let recs: Vec<TestRecord> = (0..6)
        .map(|i| TestRecord::value(format!("v{i}")).to_partition(i % 2))
        .collect();
    c.produce("t", &recs).unwrap();
    let rt = mck_testkit::runtime();
    let (first, cp) = rt
        .block_on(read_all(bounded(stream_on("s", "done", &c, "t"), "s")))
        .unwrap();
    assert_eq!(first.len(), 6);
    let (again, _) = rt
        .block_on(read_all(
            bounded(stream_on("s", "done", &c, "t"), "s").restore_from(cp),
        ))
        .unwrap();
    assert!(
        again.is_empty(),
        "restored finished splits are not read again: {again:?}"
    );
}

#[test]
fn positions_are_not_applied_to_another_physical_cluster_behind_the_same_id() {
    let a = MockKafkaCluster::start("a", 1).unwrap();
    let b = MockKafkaCluster::start("b", 1).unwrap();
    for c in [&a, &b] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value("x"), TestRecord::value("y")])
            .unwrap();
    }
    let rt = mck_testkit::runtime();
    let (_, cp) = rt
        .block_on(read_all(bounded(stream_on("s", "logical", &a, "t"), "s")))
        .unwrap();
    assert!(cp.clusters["logical"].kafka_cluster_id.is_some());
    // The logical id `logical` now points at another physical cluster.
    let err = rt
        .block_on(read_all(
            bounded(stream_on("s", "logical", &b, "t"), "s").restore_from(cp.clone()),
        ))
        .unwrap_err();
    assert!(matches!(err, SourceError::ClusterIdentity { .. }), "{err}");
    assert!(err.to_string().contains("refusing to apply them"), "{err}");
    // Explicitly choosing a fresh start reads the new cluster from its configured start.
    let (fresh, _) = rt
        .block_on(read_all(
            bounded(stream_on("s", "logical", &b, "t"), "s")
                .restore_from(cp)
                .discard_positions_of_replaced_clusters(true),
        ))
        .unwrap();
    assert_eq!(fresh, ["x", "y"]);
}

#[test]
fn a_record_that_fails_to_deserialize_is_reported_in_place_and_reading_goes_on() {
    let c = MockKafkaCluster::start("bad", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce(
        "t",
        &[
            TestRecord::value("ok-1"),
            TestRecord::value(vec![0xff, 0xfe]),
            TestRecord::value("ok-2"),
        ],
    )
    .unwrap();
    mck_testkit::runtime().block_on(async {
        let mut s = bounded(stream_on("s", "bad", &c, "t"), "s").build().unwrap().open().await.unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "ok-1");
        let err = s.next().await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "cannot deserialize bad/t/0 offset 1: value is not UTF-8: invalid utf-8 sequence of 1 bytes from index 0");
        assert_eq!(s.next().await.unwrap().unwrap().value, "ok-2");
        assert!(s.next().await.is_none());
        // The failed record counts as handed out: the checkpoint is past it.
        assert_eq!(s.checkpoint().unwrap().splits().next().unwrap().next_offset, 3);
        s.close().await;
    });
}

#[test]
fn builder_rejects_invalid_combinations_with_clear_messages() {
    let svc = || StaticMetadataService::new([KafkaStream::new("s")]).unwrap();
    let cases: Vec<(SourceBuilder<RawValue>, &str, &str)> = vec![
        (
            MultiClusterKafkaSource::builder().stream_ids(["s"]),
            "a metadata service is required",
            "metadata_service",
        ),
        (
            MultiClusterKafkaSource::builder().metadata_service(svc()),
            "set stream ids or a stream pattern",
            "stream_ids",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .stream_pattern("s"),
            "not both",
            "stream_ids",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .starting_offsets(StartingOffsets::Committed {
                    reset: OffsetReset::Earliest,
                }),
            "needs a group id",
            "group_id",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .stopping_offsets(StoppingOffsets::Latest)
                .partition_discovery_interval(std::time::Duration::from_secs(1)),
            "bounded mode",
            "partition_discovery_interval",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .parallelism(0),
            "parallelism",
            "parallelism",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .event_timestamps(|_: &Bytes| None),
            "need watermarks",
            "event_timestamps",
        ),
        (
            MultiClusterKafkaSource::builder()
                .metadata_service(svc())
                .stream_ids(["s"])
                .order(multicluster_kafka::ReadOrder::Time),
            "needs watermarks",
            "order",
        ),
    ];
    // Event timestamps of byte values, then a UTF-8 deserializer: the function
    // cannot take its values.
    let mismatched = MultiClusterKafkaSource::builder()
        .metadata_service(svc())
        .stream_ids(["s"])
        .watermarks(multicluster_kafka::WatermarkStrategy::monotonous_timestamps())
        .event_timestamps(|_: &Bytes| None)
        .deserializer(Utf8)
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        mismatched.contains("set before the deserializer"),
        "{mismatched}"
    );
    for (builder, expected, setting) in cases {
        let err = builder.build().unwrap_err();
        let text = err.to_string();
        assert!(text.contains(expected), "{text} should mention {expected}");
        assert!(!text.contains('\n'));
        assert!(!err.is_retriable(), "{text}");
        match err {
            SourceError::Config(c) => assert_eq!(c.setting, setting, "{text}"),
            other => panic!("a configuration error, not {other}"),
        }
    }
}

#[test]
fn an_unreachable_added_cluster_does_not_stall_the_others() {
    let a = MockKafkaCluster::start("alive", 1).unwrap();
    a.create_topic("t", 1).unwrap();
    let alive = || meta_at(a.bootstrap_servers(), &["t"]);
    let dead = meta_at("127.0.0.1:1", &["t"]);
    let svc = std::sync::Arc::new(
        StaticMetadataService::new([KafkaStream::new("s").with_cluster("alive", alive())]).unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .client_timeout(std::time::Duration::from_secs(2))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        a.produce("t", &[TestRecord::value("one")]).unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "one");
        svc.replace([KafkaStream::new("s")
            .with_cluster("alive", alive())
            .with_cluster("dead", dead)])
            .unwrap();
        for i in 0..5 {
            a.produce("t", &[TestRecord::value(format!("more-{i}"))])
                .unwrap();
            let r = tokio::time::timeout(std::time::Duration::from_secs(60), s.next())
                .await
                .expect("the live cluster keeps flowing")
                .unwrap()
                .unwrap();
            assert_eq!(r.value, format!("more-{i}"));
        }
        let cp = s.checkpoint().unwrap();
        assert!(
            !cp.clusters.contains_key("dead"),
            "nothing was read from the dead cluster"
        );
        s.close().await;
    });
}

#[test]
fn retained_positions_are_refused_when_a_readded_cluster_is_another_physical_cluster() {
    let (real_a, impostor) = (
        MockKafkaCluster::start("phys-a", 1).unwrap(),
        MockKafkaCluster::start("phys-b", 1).unwrap(),
    );
    for c in [&real_a, &impostor] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value("x")]).unwrap();
    }
    let keep = MockKafkaCluster::start("keep", 1).unwrap();
    keep.create_topic("t", 1).unwrap();
    let m = |c: &MockKafkaCluster| meta_at(c.bootstrap_servers(), &["t"]);
    let svc = std::sync::Arc::new(
        StaticMetadataService::new([KafkaStream::new("s")
            .with_cluster("x", m(&real_a))
            .with_cluster("keep", m(&keep))])
        .unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let mut s = shared_source(svc.clone())
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "x");
        // `x` leaves the metadata (its position is retained)...
        svc.replace([KafkaStream::new("s").with_cluster("keep", m(&keep))])
            .unwrap();
        keep.produce("t", &[TestRecord::value("marker")]).unwrap();
        assert_eq!(s.next().await.unwrap().unwrap().value, "marker");
        // ...and comes back pointing at another physical cluster.
        svc.replace([KafkaStream::new("s")
            .with_cluster("x", m(&impostor))
            .with_cluster("keep", m(&keep))])
            .unwrap();
        let err = tokio::time::timeout(std::time::Duration::from_secs(60), s.next())
            .await
            .expect("the mismatch is reported")
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, SourceError::ClusterIdentity { .. }), "{err}");
        s.close().await;
    });
}

/// Reads a bounded stream with `next_batch`: each batch's values, errors in place.
async fn read_batches(
    builder: SourceBuilder<Utf8>,
) -> (Vec<Result<Vec<String>, String>>, Checkpoint) {
    let mut s = builder.build().unwrap().open().await.unwrap();
    let mut out = Vec::new();
    while let Some(b) = s.next_batch().await {
        out.push(
            b.map(|b| b.iter().map(|r| r.value.clone()).collect())
                .map_err(|e| e.to_string()),
        );
    }
    let cp = s.checkpoint().unwrap();
    s.close().await;
    (out, cp)
}

#[test]
fn a_record_that_fails_to_deserialize_ends_its_batch_and_comes_alone_in_place() {
    let c = MockKafkaCluster::start("bad-batch", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce(
        "t",
        &[
            TestRecord::value("ok-1"),
            TestRecord::value("ok-2"),
            TestRecord::value(vec![0xff]),
            TestRecord::value("ok-3"),
            TestRecord::value(vec![0xfe]),
            TestRecord::value("ok-4"),
        ],
    )
    .unwrap();
    let (batches, cp) = mck_testkit::runtime().block_on(read_batches(bounded(
        stream_on("s", "bad-batch", &c, "t"),
        "s",
    )));
    assert!(
        batches
            .iter()
            .all(|b| b.as_ref().is_err() || !b.as_ref().unwrap().is_empty()),
        "no empty batch: {batches:?}"
    );
    // However the records were split into polls, the order holds: each failure comes
    // alone, after the records before it and before those after it.
    let mut flat: Vec<String> = Vec::new();
    for b in &batches {
        match b {
            Ok(values) => flat.extend(values.iter().cloned()),
            Err(e) => {
                let at = e
                    .strip_prefix("cannot deserialize bad-batch/t/0 offset ")
                    .and_then(|rest| rest.split(':').next())
                    .unwrap_or_else(|| panic!("unexpected error {e}"));
                flat.push(format!("error at {at}"));
            }
        }
    }
    assert_eq!(
        flat,
        ["ok-1", "ok-2", "error at 2", "ok-3", "error at 4", "ok-4"],
        "{batches:?}"
    );
    // Every record, failed ones included, counts as handed out: the bounded read ended
    // (the last record, after a failure, finished its split) at the stop.
    assert_eq!(cp.splits().next().unwrap().next_offset, 6);
}

#[test]
fn a_checkpoint_after_a_failed_record_in_a_batch_resumes_after_it() {
    let c = MockKafkaCluster::start("bad-cp", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    let mut recs: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("a-{i}")).to_partition(0))
        .collect();
    recs.push(TestRecord::value(vec![0xff]).to_partition(0));
    recs.extend((10..20).map(|i| TestRecord::value(format!("a-{i}")).to_partition(0)));
    recs.extend((0..5).map(|i| TestRecord::value(format!("b-{i}")).to_partition(1)));
    c.produce("t", &recs).unwrap();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut s = bounded(stream_on("s", "bad-cp", &c, "t"), "s")
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut values = Vec::new();
        let cp = loop {
            match s
                .next_batch()
                .await
                .expect("the failure comes before the end")
            {
                Ok(b) => values.extend(b.iter().map(|r| (r.partition, r.value.clone()))),
                Err(_) => break s.checkpoint().unwrap(),
            }
        };
        // Partition 0 resumes after the failed record (offset 10); partition 1 after
        // whatever of it was handed out.
        let next: BTreeMap<i32, i64> = cp
            .splits()
            .map(|s| (s.id.partition, s.next_offset))
            .collect();
        assert_eq!(next[&0], 11);
        let b_seen = values.iter().filter(|(p, _)| *p == 1).count() as i64;
        assert_eq!(next[&1], b_seen);
        assert_eq!(
            values
                .iter()
                .filter(|(p, _)| *p == 0)
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>(),
            (0..10).map(|i| format!("a-{i}")).collect::<Vec<_>>()
        );
        drop(s);
        let (rest, _) =
            read_batches(bounded(stream_on("s", "bad-cp", &c, "t"), "s").restore_from(cp)).await;
        let rest: Vec<String> = rest
            .into_iter()
            .flat_map(|b| b.expect("no more failures"))
            .collect();
        let a_rest: Vec<String> = rest
            .iter()
            .filter(|v| v.starts_with("a-"))
            .cloned()
            .collect();
        assert_eq!(
            a_rest,
            (10..20).map(|i| format!("a-{i}")).collect::<Vec<_>>()
        );
        assert_eq!(
            rest.iter().filter(|v| v.starts_with("b-")).count() as i64,
            5 - b_seen
        );
    });
}

#[test]
fn fetch_errors_become_reader_warnings_and_librdkafka_lines_keep_their_target() {
    let events = read_through_a_broker_restart("librdkafka");
    // librdkafka's own lines arrive as events under its target (not on stderr), and
    // its client errors are not repeated there.
    assert!(
        events.iter().any(|(target, _, _)| target == "librdkafka"),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|(_, _, fields)| fields.contains("rdkafka#consumer")),
        "{events:?}"
    );
}

#[test]
fn native_fetch_errors_become_reader_warnings_and_no_librdkafka_client_is_made() {
    let events = read_through_a_broker_restart("native");
    assert!(
        !events.iter().any(|(target, _, _)| target == "librdkafka"),
        "{events:?}"
    );
}

/// Reads a record of a mock cluster with `fetch.backend` = `backend`, takes its
/// broker down until the reader warns once about its fetches, brings it back and
/// reads the next record; returns the events logged meanwhile.
fn read_through_a_broker_restart(backend: &str) -> Vec<(String, tracing::Level, String)> {
    let c = MockKafkaCluster::start("flaky", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce("t", &[TestRecord::value("one")]).unwrap();
    let capture = Capture::default();
    // One thread: the reader's task runs where the subscriber is installed, and its
    // fetcher threads (which log the fetch errors) take the subscriber from it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(capture.clone(), || {
        rt.block_on(async {
            let mut s = MultiClusterKafkaSource::builder()
                .metadata_service(stream_on("s", "flaky", &c, "t"))
                .stream_ids(["s"])
                .deserializer(Utf8)
                .property("fetch.backend", backend)
                .build()
                .unwrap()
                .open()
                .await
                .unwrap();
            assert_eq!(s.next().await.unwrap().unwrap().value, "one");
            c.broker_down(0).unwrap();
            let warned = |events: &[(String, tracing::Level, String)]| {
                events.iter().any(|(target, level, fields)| {
                    target.starts_with("multicluster_kafka")
                        && *level == tracing::Level::WARN
                        && fields.contains("fetch error; retrying")
                        && fields.contains("cluster=flaky")
                })
            };
            // A guard against hangs, not a timing assertion.
            let patience = std::time::Instant::now();
            while !warned(&capture.events()) {
                assert!(
                    patience.elapsed() < std::time::Duration::from_secs(90),
                    "no fetch warning: {:?}",
                    capture.events()
                );
                let _ = tokio::time::timeout(std::time::Duration::from_millis(200), s.next()).await;
            }
            c.broker_up(0).unwrap();
            c.produce("t", &[TestRecord::value("two")]).unwrap();
            let next = tokio::time::timeout(std::time::Duration::from_secs(90), s.next())
                .await
                .expect("reading resumes once the broker is back");
            assert_eq!(next.unwrap().unwrap().value, "two");
            s.close().await;
        })
    });
    capture.events()
}

#[test]
fn a_panic_in_the_deserializer_reaches_the_caller_of_next() {
    let c = MockKafkaCluster::start("panics", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce("t", &[TestRecord::value("fine"), TestRecord::value("boom")])
        .unwrap();
    use multicluster_kafka::deserializer::DeserializeError;
    use multicluster_kafka::record::RawRecord;
    let touchy = |r: &RawRecord<'_>| -> Result<String, DeserializeError> {
        let v = std::str::from_utf8(r.value.unwrap_or_default()).unwrap_or("?");
        assert_ne!(v, "boom", "the deserializer met a bad record");
        Ok(v.to_string())
    };
    let rt = mck_testkit::runtime();
    let read = rt.spawn(async move {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(stream_on("s", "panics", &c, "t"))
            .stream_ids(["s"])
            .deserializer(touchy)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Some(r) = s.next().await {
            seen.push(r.unwrap().value);
        }
        seen
    });
    let err = rt
        .block_on(read)
        .expect_err("the panic ends the reading task");
    assert!(err.is_panic());
    let payload = err.into_panic();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("the deserializer met a bad record"),
        "{message:?}"
    );
}

#[test]
fn a_follow_run_starts_without_a_cluster_that_is_down_and_takes_it_up_when_it_returns() {
    let a = MockKafkaCluster::start("up", 1).unwrap();
    let b = MockKafkaCluster::start("down", 1).unwrap();
    a.create_topic("t", 1).unwrap();
    b.create_topic("t", 1).unwrap();
    b.produce("t", &[TestRecord::value("b-0")]).unwrap();
    b.kill_broker(0).unwrap();
    let meta = |c: &MockKafkaCluster| meta_at(c.bootstrap_servers(), &["t"]);
    let svc = StaticMetadataService::new([KafkaStream::new("s")
        .with_cluster("up", meta(&a))
        .with_cluster("down", meta(&b))])
    .unwrap();
    let patience = std::time::Duration::from_secs(60);
    mck_testkit::runtime().block_on(async {
        let mut s = tokio::time::timeout(
            patience,
            MultiClusterKafkaSource::builder()
                .metadata_service(svc)
                .stream_ids(["s"])
                .deserializer(Utf8)
                .client_timeout(std::time::Duration::from_secs(2))
                .metadata_discovery_interval(std::time::Duration::from_millis(500))
                .build()
                .unwrap()
                .open(),
        )
        .await
        .expect("start-up does not wait for the cluster that is down")
        .expect("a follow run starts with the cluster that answers");
        a.produce("t", &[TestRecord::value("a-0")]).unwrap();
        let r = tokio::time::timeout(patience, s.next()).await.unwrap();
        assert_eq!(r.unwrap().unwrap().value, "a-0");

        b.restart_broker(0).unwrap();
        let r = tokio::time::timeout(patience, s.next())
            .await
            .expect("the returned cluster is taken up by itself");
        let r = r.unwrap().unwrap();
        assert_eq!(
            (&*r.cluster, r.value.as_str()),
            ("down", "b-0"),
            "read from its start, once"
        );
        s.close().await;
    });

    // A bounded run cannot end without the cluster: it fails after its start-up
    // timeout, naming it.
    let c = MockKafkaCluster::start("gone", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.kill_broker(0).unwrap();
    let svc = stream_on("s", "gone", &c, "t");
    let err = mck_testkit::runtime()
        .block_on(read_all(
            bounded(svc, "s")
                .client_timeout(std::time::Duration::from_secs(2))
                .startup_timeout(Some(std::time::Duration::from_secs(3))),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("gone"), "{err}");
}

#[test]
fn a_deserializer_sees_the_headers_of_each_record() {
    let c = MockKafkaCluster::start("headers", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce(
        "t",
        &[
            TestRecord::value("plain").with_header("content-type", "text/plain"),
            TestRecord::value("shout").with_header("content-type", "text/upper"),
            TestRecord::value("bare"),
        ],
    )
    .unwrap();
    let by_type = |r: &RawRecord<'_>| -> Result<String, DeserializeError> {
        let text = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
        let kind = r.headers.iter().find(|(k, _)| k == "content-type");
        Ok(match kind.and_then(|(_, v)| v.as_deref()) {
            Some(b"text/upper") => text.to_uppercase(),
            Some(_) => text,
            None => format!("{text} (no type)"),
        })
    };
    let values = mck_testkit::runtime().block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(stream_on("s", "c", &c, "t"))
            .stream_ids(["s"])
            .deserializer(by_type)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Some(r) = s.next().await {
            let r = r.unwrap();
            out.push((r.value, r.headers.len()));
        }
        s.close().await;
        out
    });
    assert_eq!(
        values,
        [
            ("plain".to_string(), 1),
            ("SHOUT".to_string(), 1),
            ("bare (no type)".to_string(), 0)
        ]
    );
}

#[test]
fn each_record_names_the_streams_that_read_its_topic() {
    let c = MockKafkaCluster::start("streams-of", 1).unwrap();
    for t in ["orders", "shared"] {
        c.create_topic(t, 1).unwrap();
        c.produce(t, &[TestRecord::value(t)]).unwrap();
    }
    let on = |topics: &[&str]| meta_at(c.bootstrap_servers(), topics);
    let svc = StaticMetadataService::new([
        KafkaStream::new("orders").with_cluster("c", on(&["orders", "shared"])),
        KafkaStream::new("audit").with_cluster("c", on(&["shared"])),
    ])
    .unwrap();
    let got = mck_testkit::runtime().block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["orders", "audit"])
            .deserializer(Utf8)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = BTreeMap::new();
        while let Some(r) = s.next().await {
            let r = r.unwrap();
            let streams: Vec<String> = r.streams.iter().map(|s| s.to_string()).collect();
            got.insert(r.value, streams);
        }
        s.close().await;
        got
    });
    assert_eq!(got["orders"], ["orders"]);
    assert_eq!(got["shared"], ["audit", "orders"]);
}

#[test]
fn closing_a_source_does_not_wait_for_its_clients_to_be_destroyed() {
    // rust-rdkafka's consumer polls its queue 100 ms at a time until librdkafka says
    // it is closed, so a close that waited for the clients took at least 100 ms
    // however fast librdkafka was (sometimes the first close of a process was quick).
    // The median of five closes shows that floor is gone (a loaded machine can slow
    // some closes, hardly three of five by that much).
    let c = MockKafkaCluster::start("closing", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    c.produce("t", &[TestRecord::value("v")]).unwrap();
    let rt = mck_testkit::runtime();
    let mut closes = Vec::new();
    for _ in 0..5 {
        let svc = stream_on("s", "closing", &c, "t");
        let took = rt.block_on(async {
            let mut s = bounded(svc, "s").build().unwrap().open().await.unwrap();
            assert_eq!(s.next().await.unwrap().unwrap().value, "v");
            assert!(s.next().await.is_none());
            let t = std::time::Instant::now();
            s.close().await;
            t.elapsed()
        });
        closes.push(took);
    }
    closes.sort();
    assert!(
        closes[2] < std::time::Duration::from_millis(60),
        "closes took {closes:?}"
    );
}

#[test]
fn offsets_asked_while_a_leader_moves_are_asked_again() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let c = MockKafkaCluster::start("moving", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce("t", &[TestRecord::value("one"), TestRecord::value("two")])
        .unwrap();
    // The first offset lookups meet a partition whose leader is moving (a topic just
    // made, a broker restarting): the source asks again instead of giving up.
    c.request_errors(
        RDKafkaApiKey::ListOffsets,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        ],
    )
    .unwrap();
    let (values, _) = mck_testkit::runtime()
        .block_on(read_all(bounded(stream_on("s", "moving", &c, "t"), "s")))
        .expect("a moving leader is waited for");
    assert_eq!(values, ["one", "two"]);
}

/// Hooks that do nothing: with `statistics.interval.ms` set they make the native
/// path refuse the cluster (their statistics are librdkafka's).
struct Quiet;
impl ClientHooks for Quiet {}

/// A cluster whose fetcher cannot open (here: `fetch.backend: native` with client
/// hooks and `statistics.interval.ms`, which the native path refuses when it opens,
/// while the lookups, on librdkafka, work) is tried again with a growing backoff, and
/// its error is said once, not once per poll: a program that reads on after errors
/// is not handed the same error in a tight loop.
#[test]
fn a_fetcher_that_cannot_open_is_retried_with_backoff_and_said_once() {
    let c = MockKafkaCluster::start("unopenable", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    c.produce("t", &[TestRecord::value("x")]).unwrap();
    let meta = ClusterMetadata::builder(c.bootstrap_servers())
        .topics(["t"])
        .property("fetch.backend", "native")
        .property("statistics.interval.ms", "60000")
        .build()
        .unwrap();
    let svc = StaticMetadataService::new([KafkaStream::new("s").with_cluster("unopenable", meta)])
        .unwrap();
    let capture = support::capture();
    let rt = mck_testkit::runtime();
    let errors = rt.block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["s"])
            .deserializer(Utf8)
            .client_hooks(|_: &str| {
                Some(std::sync::Arc::new(Quiet) as std::sync::Arc<dyn ClientHooks>)
            })
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut errors = Vec::new();
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
        while let Ok(next) = tokio::time::timeout_at(until, s.next()).await {
            match next {
                Some(Err(e)) => {
                    assert!(e.reads_on(), "{e}");
                    errors.push(e.to_string());
                }
                Some(Ok(r)) => panic!("no record can be read: {:?}", r.value),
                None => break,
            }
        }
        s.close().await;
        errors
    });
    assert!(!errors.is_empty(), "the error is said");
    assert!(errors[0].contains("statistics"), "{}", errors[0]);
    assert_eq!(
        errors.len(),
        1,
        "said once in 3 s, not per poll: {errors:#?}"
    );
    // Tried again after 100, 200, 400, 800 ms...: about four more times in 3 s.
    let again = capture
        .events()
        .into_iter()
        .filter(|(_, _, fields)| {
            fields.contains("unopenable") && fields.contains("fetcher ended again")
        })
        .count();
    assert!(
        (2..=6).contains(&again),
        "{again} fetchers started again in 3 s"
    );
}
