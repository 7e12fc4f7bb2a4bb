//! The native fetch path's connection: against a real broker (the test kit's Kafka
//! 4.1), and against fake brokers that answer badly, which must end in a typed
//! one-line error, never a panic or a hang.

use std::time::Duration;

use mck_testkit::{Produced, TestCluster, TestRecord, shared_cluster, tools};
use multicluster_kafka_client::{
    Batches, ConnectOptions, Connection, FetchRequest, ListOffsetsRequest, MetadataRequest,
    NativeError, Uuid,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// Kafka's error codes the tests expect.
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// The first broker of the shared cluster `native`, as `host:port`.
fn broker() -> (&'static mck_testkit::KafkaCluster, String) {
    let c = shared_cluster("native").unwrap_or_else(|e| panic!("cluster starts: {e:?}"));
    let bootstrap = c.bootstrap_servers();
    let first = bootstrap.split(',').next().unwrap().to_string();
    (c, first)
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(PATIENCE, f)
            .await
            .expect("done within the patience")
    })
}

async fn connect(addr: &str) -> Connection {
    Connection::connect(addr, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connects: {e}"))
}

fn values(n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::value(format!("v{i}")).to_partition(0))
        .collect()
}

#[test]
fn api_versions_are_agreed_with_a_real_broker() {
    let (_, addr) = broker();
    run(async {
        let conn = connect(&addr).await;
        let fetch = conn.version::<FetchRequest>().unwrap();
        // Kafka 4.1 offers Fetch up to v17, kafka-protocol 0.18 speaks up to v18.
        assert!(fetch >= 12, "Fetch v{fetch}");
        let (_, broker_max) = conn.broker_versions::<FetchRequest>().unwrap();
        assert_eq!(fetch, broker_max.min(18));
        let metadata = conn.version::<MetadataRequest>().unwrap();
        assert!(metadata >= 10, "Metadata v{metadata} has topic ids");
        assert!(conn.version::<ListOffsetsRequest>().unwrap() >= 1);
    });
}

#[test]
fn metadata_lists_a_topic_with_its_id_and_leader() {
    let (c, addr) = broker();
    let topic = "native-metadata";
    c.create_topic(topic, 2).unwrap();
    run(async {
        let mut conn = connect(&addr).await;
        let md = conn.metadata(Some(&[topic])).await.unwrap();
        assert_eq!(md.brokers.len(), 1, "{md:?}");
        let port: i32 = addr.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(md.brokers[0].port, port);
        assert_eq!(md.topics.len(), 1, "{md:?}");
        let t = &md.topics[0];
        assert_eq!(t.name, topic);
        assert_eq!(t.error_code, 0);
        assert!(!t.topic_id.is_nil(), "{t:?}");
        let mut parts: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
        parts.sort();
        assert_eq!(parts, [0, 1]);
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "{p:?}");
            assert_eq!(p.leader_id, md.brokers[0].node_id, "{p:?}");
            assert!(p.leader_epoch >= 0, "{p:?}");
        }

        // All topics include it, with the same id.
        let all = conn.metadata(None).await.unwrap();
        let again = all.topics.iter().find(|x| x.name == topic).unwrap();
        assert_eq!(again.topic_id, t.topic_id);

        // A topic that does not exist is reported, and not created by asking.
        for _ in 0..2 {
            let md = conn
                .metadata(Some(&["native-no-such-topic"]))
                .await
                .unwrap();
            assert_eq!(md.topics.len(), 1);
            assert_eq!(md.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
        }
    });
}

#[test]
fn list_offsets_finds_the_earliest_and_latest_offsets() {
    let (c, addr) = broker();
    let topic = "native-offsets";
    c.create_topic(topic, 1).unwrap();
    let produced: Vec<Produced> = c.produce(topic, &values(7)).unwrap();
    assert_eq!(produced.first().unwrap().offset, 0);
    let end = produced.last().unwrap().offset + 1;
    run(async {
        let mut conn = connect(&addr).await;
        assert_eq!(conn.list_offsets(topic, 0, -2).await.unwrap(), 0);
        assert_eq!(conn.list_offsets(topic, 0, -1).await.unwrap(), end);

        // A partition that does not exist is the broker's error, naming the broker.
        let err = conn.list_offsets(topic, 9, -1).await.unwrap_err();
        match &err {
            NativeError::Broker { code, .. } => {
                assert_eq!(*code, UNKNOWN_TOPIC_OR_PARTITION, "{err}")
            }
            other => panic!("a broker error, got {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains(&addr) && text.contains("native-offsets/9"),
            "{text}"
        );
    });
    // Records deleted below 4: the earliest offset moves, the latest stays.
    tools::delete_records(&c.bootstrap_servers(), topic, 0, 4).unwrap();
    run(async {
        let mut conn = connect(&addr).await;
        assert_eq!(conn.list_offsets(topic, 0, -2).await.unwrap(), 4);
        assert_eq!(conn.list_offsets(topic, 0, -1).await.unwrap(), end);
    });
}

/// A topic of one partition holding `values`, and a connection that knows its id.
async fn one_partition(
    c: &mck_testkit::KafkaCluster,
    addr: &str,
    topic: &str,
    values: impl Iterator<Item = String>,
) -> (Connection, Uuid) {
    c.create_topic(topic, 1).unwrap();
    let records: Vec<TestRecord> = values
        .map(|v| TestRecord::value(v).to_partition(0))
        .collect();
    c.produce(topic, &records).unwrap();
    let mut conn = connect(addr).await;
    let md = conn.metadata(Some(&[topic])).await.unwrap();
    let id = md.topics[0].topic_id;
    (conn, id)
}

/// The record batches in `records`, as (base offset, next offset after the batch), by
/// the path's decoder (which refuses any magic but 2).
fn batches(records: &[u8]) -> Vec<(i64, i64)> {
    Batches::new(records)
        .map(|b| {
            let b = b.unwrap();
            (b.base_offset, b.next_offset())
        })
        .collect()
}

/// A large answer's buffer is read into again once nothing holds the answer, and
/// never while something does: a held answer keeps its bytes.
#[test]
fn a_large_answer_buffer_is_reused_only_once_let_go() {
    let (c, addr) = broker();
    let topic = "native-frames";
    run(async {
        // About 200 KiB: read into a kept buffer (from 64 KiB up).
        let values = (0..200).map(|i| format!("{i:04}{}", "x".repeat(1020)));
        let (mut conn, id) = one_partition(c, &addr, topic, values).await;
        let first = conn
            .fetch_once(topic, id, 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert!(
            first.records.len() > 100 << 10,
            "{} bytes",
            first.records.len()
        );
        let kept = first.records.clone();
        let held = conn
            .fetch_once(topic, id, 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert_ne!(
            held.records.as_ptr(),
            kept.as_ptr(),
            "a buffer still held was read into"
        );
        assert_eq!(held.records, kept, "the held answer's bytes are intact");
        assert_eq!(conn.frames_reused(), 0, "a buffer still held was read into");
        let at = held.records.as_ptr();
        drop(held);
        let again = conn
            .fetch_once(topic, id, 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(
            conn.frames_reused(),
            1,
            "the buffer let go is read into again"
        );
        assert_eq!(again.records.as_ptr(), at);
        assert_eq!(again.records, kept);
        drop((first, again));
    });
}

/// An answer above the kept buffers' size (8 MiB) is read whole into a buffer of its
/// own, every batch intact.
#[test]
fn an_answer_above_the_kept_buffers_size_arrives_whole() {
    let (c, addr) = broker();
    let topic = "native-huge";
    run(async {
        // About 10 MB in 100 records of 100 KiB.
        let fill = "y".repeat(100 << 10);
        let values = (0..100).map(|i| format!("<{i:03}>{fill}"));
        let (mut conn, id) = one_partition(c, &addr, topic, values).await;
        let answer = conn
            .fetch_once(topic, id, 0, 0, 16 << 20, false)
            .await
            .unwrap();
        let records = &answer.records;
        assert!(records.len() > 8 << 20, "{} bytes", records.len());
        let got = batches(records);
        assert_eq!(got.first().map(|b| b.0), Some(0));
        assert_eq!(got.last().map(|b| b.1), Some(100), "{got:?}");
        assert!(got.windows(2).all(|w| w[0].1 == w[1].0), "{got:?}");
        for i in 0..100 {
            let marker = format!("<{i:03}>");
            assert!(
                records
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes()),
                "{marker} in the answer"
            );
        }
        assert_eq!(conn.frames_reused(), 0, "not a kept buffer");
        let again = conn
            .fetch_once(topic, id, 0, 0, 16 << 20, false)
            .await
            .unwrap();
        assert_eq!(again.records, answer.records);
    });
}

#[test]
fn fetch_once_returns_the_record_batches_by_topic_id_and_by_name() {
    let (c, addr) = broker();
    let topic = "native-fetch";
    c.create_topic(topic, 1).unwrap();
    let produced = c.produce(topic, &values(5)).unwrap();
    let end = produced.last().unwrap().offset + 1;
    assert_eq!(end, 5);
    run(async {
        let mut conn = connect(&addr).await;
        assert!(conn.version::<FetchRequest>().unwrap() >= 13);
        let md = conn.metadata(Some(&[topic])).await.unwrap();
        let id = md.topics[0].topic_id;
        assert!(!id.is_nil());

        let by_id = conn
            .fetch_once(topic, id, 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(by_id.error_code, 0);
        assert_eq!(by_id.high_watermark, end);
        assert_eq!(by_id.log_start_offset, 0);
        assert!(!by_id.records.is_empty());
        assert_eq!(&by_id.records[0..8], &0i64.to_be_bytes(), "base offset 0");
        assert_eq!(by_id.records[16], 2, "magic byte");
        let found = batches(&by_id.records);
        assert_eq!(found.first().unwrap().0, 0);
        assert_eq!(found.last().unwrap().1, end, "{found:?}");
        for pair in found.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "batches follow each other: {found:?}");
        }

        // A nil topic id fetches by name (Fetch v12): the same bytes.
        let by_name = conn
            .fetch_once(topic, Uuid::nil(), 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(by_name.error_code, 0);
        assert_eq!(by_name.records, by_id.records);

        // From the middle: the batch holding offset 2 comes first.
        let mid = conn
            .fetch_once(topic, id, 0, 2, 1 << 20, false)
            .await
            .unwrap();
        let found = batches(&mid.records);
        let (base, next) = found[0];
        assert!(base <= 2 && 2 < next, "{found:?}");

        // At the end: nothing yet, no error (after the fetch's wait).
        let at_end = conn
            .fetch_once(topic, id, 0, end, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(at_end.error_code, 0);
        assert!(at_end.records.is_empty());
        assert_eq!(at_end.high_watermark, end);

        // Beyond the end: the partition's error code, not a failed call.
        let beyond = conn
            .fetch_once(topic, id, 0, end + 100, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(beyond.error_code, OFFSET_OUT_OF_RANGE);
        assert!(beyond.records.is_empty());

        // The connection still works after all that.
        assert_eq!(conn.list_offsets(topic, 0, -1).await.unwrap(), end);
    });
}

#[test]
fn a_closed_port_is_a_one_line_connect_error_naming_it() {
    run(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let err = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, NativeError::Connect { addr: a, .. } if *a == addr),
            "{err:?}"
        );
        assert_eq!(err.addr(), addr);
        let text = err.to_string();
        assert!(text.contains(&addr), "{text}");
        assert!(!text.contains('\n'), "{text}");
    });
}

/// A request as a fake broker saw it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
}

/// What a fake broker does with a request: writes these raw bytes (size included),
/// and closes the connection after them with `close`.
struct Reply {
    bytes: Vec<u8>,
    close: bool,
}

impl Reply {
    fn with(bytes: Vec<u8>) -> Option<Reply> {
        Some(Reply {
            bytes,
            close: false,
        })
    }
}

/// A fake broker on a free port: answers each request (the `usize`-th) of its one
/// connection as `answer` says; `None` closes the connection. Returns its address
/// and, at the end, the requests it saw.
async fn fake_broker<F>(mut answer: F) -> (String, tokio::task::JoinHandle<Vec<Seen>>)
where
    F: FnMut(usize, Seen) -> Option<Reply> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        let Ok((mut s, _)) = listener.accept().await else {
            return seen;
        };
        loop {
            let Ok(size) = s.read_i32().await else {
                return seen;
            };
            let mut frame = vec![0; size as usize];
            if s.read_exact(&mut frame).await.is_err() {
                return seen;
            }
            let req = Seen {
                api_key: i16::from_be_bytes([frame[0], frame[1]]),
                api_version: i16::from_be_bytes([frame[2], frame[3]]),
                correlation_id: i32::from_be_bytes(frame[4..8].try_into().unwrap()),
            };
            seen.push(req);
            let Some(reply) = answer(seen.len() - 1, req) else {
                return seen;
            };
            if s.write_all(&reply.bytes).await.is_err() || reply.close {
                return seen;
            }
        }
    });
    (addr, task)
}

/// A frame: size, correlation id, then `body`.
fn frame(correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// An ApiVersions v0 body: error code, then (key, min, max) per API.
fn api_versions_v0(error_code: i16, keys: &[(i16, i16, i16)]) -> Vec<u8> {
    let mut out = error_code.to_be_bytes().to_vec();
    out.extend_from_slice(&(keys.len() as i32).to_be_bytes());
    for (k, min, max) in keys {
        for x in [k, min, max] {
            out.extend_from_slice(&x.to_be_bytes());
        }
    }
    out
}

/// An ApiVersions v3 body: error code, compact array of (key, min, max, no tags),
/// throttle time, no tags.
fn api_versions_v3(keys: &[(i16, i16, i16)]) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    out.push(keys.len() as u8 + 1);
    for (k, min, max) in keys {
        for x in [k, min, max] {
            out.extend_from_slice(&x.to_be_bytes());
        }
        out.push(0);
    }
    out.extend_from_slice(&0i32.to_be_bytes());
    out.push(0);
    out
}

const API_VERSIONS: i16 = 18;
const FETCH: i16 = 1;
const METADATA: i16 = 3;

fn quick() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

/// Connects to a fake broker answering the first request with `bytes`.
async fn connect_to_fake(bytes: Vec<u8>) -> NativeError {
    let (addr, task) = fake_broker(move |_, _| Reply::with(bytes.clone())).await;
    let err = Connection::connect(&addr, &quick()).await.unwrap_err();
    assert_eq!(err.addr(), addr);
    let text = err.to_string();
    assert!(text.contains(&addr) && !text.contains('\n'), "{text}");
    task.abort();
    err
}

#[test]
fn a_huge_frame_size_is_refused_without_allocating_it() {
    run(async {
        let err = connect_to_fake(0x7fff_ffffi32.to_be_bytes().to_vec()).await;
        assert!(
            matches!(err, NativeError::FrameTooLarge { size: 0x7fff_ffff, max, .. } if max == 100 << 20),
            "{err:?}"
        );
        let err = connect_to_fake((-5i32).to_be_bytes().to_vec()).await;
        assert!(
            matches!(err, NativeError::FrameTooSmall { size: -5, .. }),
            "{err:?}"
        );
    });
}

#[test]
fn garbage_and_wrong_answers_are_typed_errors() {
    run(async {
        // A body too short for ApiVersions, in either version: v3's answer cannot be
        // read, so it is asked again in v0, whose answer cannot be read either.
        let (addr, task) = fake_broker(|_, r| Reply::with(frame(r.correlation_id, &[0xff]))).await;
        let err = Connection::connect(&addr, &quick()).await.unwrap_err();
        assert!(
            matches!(
                &err,
                NativeError::Decode {
                    api: "ApiVersions",
                    version: 0,
                    ..
                }
            ),
            "{err:?}"
        );
        let asked: Vec<i16> = task.await.unwrap().iter().map(|r| r.api_version).collect();
        assert_eq!(asked, [3, 0]);

        // Another request's correlation id.
        let (addr, _task) =
            fake_broker(|_, r| Reply::with(frame(r.correlation_id + 7, &api_versions_v3(&[]))))
                .await;
        let err = Connection::connect(&addr, &quick()).await.unwrap_err();
        assert!(
            matches!(
                err,
                NativeError::CorrelationMismatch {
                    expected: 0,
                    got: 7,
                    ..
                }
            ),
            "{err:?}"
        );

        // Closed in the middle of a frame.
        let (addr, _task) = fake_broker(|_, r| {
            let mut bytes = frame(r.correlation_id, &[0; 50]);
            bytes.truncate(20);
            Some(Reply { bytes, close: true })
        })
        .await;
        let err = Connection::connect(&addr, &quick()).await.unwrap_err();
        assert!(matches!(err, NativeError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("closed by the broker"), "{err}");

        // Never answers: a timeout naming the broker, in about the time given.
        let (addr, _task) = fake_broker(|_, _| Reply::with(Vec::new())).await;
        let options = ConnectOptions {
            timeout: Duration::from_millis(300),
            ..ConnectOptions::default()
        };
        let started = std::time::Instant::now();
        let err = Connection::connect(&addr, &options).await.unwrap_err();
        assert!(matches!(err, NativeError::Timeout { .. }), "{err:?}");
        assert!(err.to_string().contains(&addr), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    });
}

#[test]
fn an_old_broker_is_asked_again_in_api_versions_v0() {
    run(async {
        let (addr, task) = fake_broker(|i, r| {
            let body = match i {
                // What Kafka answers a version it does not know: v0, UNSUPPORTED_VERSION.
                0 => api_versions_v0(35, &[(API_VERSIONS, 0, 2)]),
                _ => api_versions_v0(0, &[(API_VERSIONS, 0, 2), (FETCH, 4, 11), (METADATA, 0, 9)]),
            };
            Reply::with(frame(r.correlation_id, &body))
        })
        .await;
        let conn = Connection::connect(&addr, &quick()).await.unwrap();
        assert_eq!(conn.version::<FetchRequest>().unwrap(), 11);
        assert_eq!(conn.version::<MetadataRequest>().unwrap(), 9);
        let err = conn.version::<ListOffsetsRequest>().unwrap_err();
        assert!(
            matches!(
                err,
                NativeError::NotOffered {
                    api: "ListOffsets",
                    ..
                }
            ),
            "{err:?}"
        );
        drop(conn);
        let seen = task.await.unwrap();
        let asked: Vec<(i16, i16, i32)> = seen
            .iter()
            .map(|s| (s.api_key, s.api_version, s.correlation_id))
            .collect();
        assert_eq!(asked, [(API_VERSIONS, 3, 0), (API_VERSIONS, 0, 1)]);
    });
}

#[test]
fn versions_that_do_not_overlap_are_unsupported() {
    run(async {
        let (addr, _task) = fake_broker(|_, r| {
            let body = api_versions_v3(&[(API_VERSIONS, 0, 4), (FETCH, 0, 3)]);
            Reply::with(frame(r.correlation_id, &body))
        })
        .await;
        let conn = Connection::connect(&addr, &quick()).await.unwrap();
        let err = conn.version::<FetchRequest>().unwrap_err();
        assert!(
            matches!(
                err,
                NativeError::Unsupported {
                    api: "Fetch",
                    broker_min: 0,
                    broker_max: 3,
                    ours_min: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&addr) && text.contains("v0..v3"), "{text}");
    });
}

#[test]
fn a_connection_out_of_step_is_not_used_again() {
    run(async {
        let (addr, task) = fake_broker(|i, r| match i {
            0 => Reply::with(frame(
                r.correlation_id,
                &api_versions_v3(&[(API_VERSIONS, 0, 4), (METADATA, 0, 12)]),
            )),
            // The metadata answer announces a frame over a small limit.
            _ => Reply::with(1000i32.to_be_bytes().to_vec()),
        })
        .await;
        let options = ConnectOptions {
            max_frame_size: 999,
            ..quick()
        };
        let mut conn = Connection::connect(&addr, &options).await.unwrap();
        let err = conn.send(MetadataRequest::default()).await.unwrap_err();
        assert!(
            matches!(
                err,
                NativeError::FrameTooLarge {
                    size: 1000,
                    max: 999,
                    ..
                }
            ),
            "{err:?}"
        );
        let err = conn.send(MetadataRequest::default()).await.unwrap_err();
        assert!(matches!(err, NativeError::Closed { .. }), "{err:?}");
        drop(conn);
        // The second call sent nothing.
        assert_eq!(task.await.unwrap().len(), 2);
    });
}

#[test]
fn a_request_given_up_by_its_caller_leaves_the_connection_closed() {
    run(async {
        // Answers ApiVersions, then nothing.
        let (addr, _task) = fake_broker(|i, r| {
            let bytes = match i {
                0 => frame(
                    r.correlation_id,
                    &api_versions_v3(&[(API_VERSIONS, 0, 4), (METADATA, 0, 12)]),
                ),
                _ => Vec::new(),
            };
            Reply::with(bytes)
        })
        .await;
        let mut conn = Connection::connect(&addr, &quick()).await.unwrap();
        let waited = tokio::time::timeout(
            Duration::from_millis(200),
            conn.send(MetadataRequest::default()),
        )
        .await;
        assert!(waited.is_err(), "no answer came");
        let err = conn.send(MetadataRequest::default()).await.unwrap_err();
        assert!(matches!(err, NativeError::Closed { .. }), "{err:?}");
    });
}
