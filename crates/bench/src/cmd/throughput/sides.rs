//! The two readers of the throughput comparison: plain rdkafka consumers, one per
//! cluster, and this project's source.

use std::time::{Duration, Instant};

use mck_bench::peers::PeerCluster;
use multicluster_kafka::deserializer::InBatch;
use multicluster_kafka::prelude::*;
use multicluster_kafka::record::RecordRef;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use super::{Api, Pass, Peer, touch};
use crate::cpu::{ThreadsCpu, threads_cpu};

/// Reads every partition of both clusters to its end with one plain consumer per
/// cluster (each on its own thread).
pub fn plain(clusters: &[PeerCluster], topic: &str, partitions: i32, peer: Peer) -> Pass {
    std::thread::scope(|s| {
        let handles: Vec<_> = clusters
            .iter()
            .map(|c| {
                s.spawn(move || {
                    let mut config = ClientConfig::new();
                    // The same librdkafka settings the library's readers use.
                    for (key, value) in multicluster_kafka::CLIENT_DEFAULTS
                        .iter()
                        .chain(multicluster_kafka::READER_DEFAULTS)
                    {
                        config.set(*key, *value);
                    }
                    let consumer: BaseConsumer = config
                        .set("bootstrap.servers", &c.bootstrap_servers)
                        .set("group.id", "bench-plain")
                        .set("enable.auto.commit", "false")
                        .set("enable.auto.offset.store", "false")
                        .set("auto.offset.reset", "error")
                        .set("enable.partition.eof", "false")
                        .create()
                        .unwrap();
                    let mut tpl = TopicPartitionList::new();
                    let mut remaining = 0usize;
                    let mut ends = Vec::new();
                    for p in 0..partitions {
                        let (_, high) = consumer
                            .fetch_watermarks(topic, p, Duration::from_secs(10))
                            .unwrap();
                        ends.push(high);
                        if high > 0 {
                            remaining += 1;
                        }
                        tpl.add_partition_offset(topic, p, Offset::Beginning)
                            .unwrap();
                    }
                    consumer.assign(&tpl).unwrap();
                    let (mut records, mut bytes) = (0u64, 0u64);
                    let mut first = None;
                    let mut scratch: Vec<u8> = Vec::with_capacity(4096);
                    if peer == Peer::Batch {
                        (records, bytes, first) =
                            read_batches(&consumer, &ends, remaining, &mut scratch);
                        remaining = 0;
                    }
                    while remaining > 0 {
                        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                            let m = m.unwrap();
                            first.get_or_insert_with(Instant::now);
                            records += 1;
                            bytes += touch(
                                &mut scratch,
                                m.key(),
                                m.payload().unwrap_or_default(),
                                m.timestamp().to_millis(),
                            );
                            if m.offset() + 1 == ends[m.partition() as usize] {
                                remaining -= 1;
                            }
                        }
                    }
                    // The clock stops at the last record; closing the consumer is not timed.
                    let end = Instant::now();
                    let pass = Pass {
                        records,
                        bytes,
                        first: first.unwrap_or(end),
                        end,
                    };
                    (pass, consumer)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        Pass::combine(results.iter().map(|r| r.0))
    })
}

/// The plain consumer's loop with `rd_kafka_consume_batch_queue`: up to 1024
/// messages per call. Returns (records, bytes, when the first record came) once every
/// partition reached its end.
fn read_batches(
    consumer: &BaseConsumer,
    ends: &[i64],
    mut remaining: usize,
    scratch: &mut Vec<u8>,
) -> (u64, u64, Option<Instant>) {
    use rdkafka::bindings as rd;
    const MAX: usize = 1024;
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut first = None;
    // SAFETY: the client lives as long as `consumer`; the queue reference is
    // released below.
    let queue = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
    assert!(!queue.is_null(), "a consumer queue");
    let mut messages: Vec<*mut rd::rd_kafka_message_t> = Vec::with_capacity(MAX);
    while remaining > 0 {
        // SAFETY: a live queue and room for MAX message pointers.
        let n = unsafe { rd::rd_kafka_consume_batch_queue(queue, 100, messages.as_mut_ptr(), MAX) };
        if n > 0 {
            first.get_or_insert_with(Instant::now);
        }
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: librdkafka filled the first `n` pointers with live messages,
            // each destroyed once below.
            let m = unsafe { &*messages.as_ptr().add(i).read() };
            assert_eq!(
                m.err,
                rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                "a record"
            );
            let slice = |p: *mut std::ffi::c_void, len: usize| {
                // SAFETY: librdkafka keeps `len` bytes at `p` while the message lives.
                (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p as *const u8, len) })
            };
            let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
            // SAFETY: a live message and a valid out-pointer.
            let ts = unsafe { rd::rd_kafka_message_timestamp(m, &mut kind) };
            let timestamp = (kind
                != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
                .then_some(ts);
            records += 1;
            bytes += touch(
                scratch,
                slice(m.key, m.key_len),
                slice(m.payload, m.len).unwrap_or_default(),
                timestamp,
            );
            if m.offset + 1 == ends[m.partition as usize] {
                remaining -= 1;
            }
            // SAFETY: see above.
            unsafe { rd::rd_kafka_message_destroy(messages.as_ptr().add(i).read()) };
        }
    }
    // SAFETY: our reference to the queue, released once.
    unsafe { rd::rd_kafka_queue_destroy(queue) };
    (records, bytes, first)
}

/// The library's event time in a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventTime {
    Off,
    /// Watermarks (monotonous timestamps).
    Watermarks,
    /// Watermarks aligned across splits with 1 s of drift.
    Aligned,
    /// Watermarks, and records in time order.
    TimeOrder,
}

/// How the library reads in a pass.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub readers: usize,
    pub api: Api,
    pub max_batch: Option<usize>,
    pub event_time: EventTime,
}

impl Reading {
    /// `readers` readers taking batches, the default batch size, no event time.
    pub fn batches(readers: usize) -> Self {
        Self {
            readers,
            api: Api::Batch,
            max_batch: None,
            event_time: EventTime::Off,
        }
    }
}

/// Reads the stream to its end with the library; returns the pass and the CPU seconds
/// its fetcher threads used.
pub fn ours(
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    topic: &str,
    how: Reading,
) -> (Pass, ThreadsCpu) {
    match how.api {
        // `next` takes records one by one: only with values of their own.
        Api::InBatch => read_with(
            rt,
            clusters,
            topic,
            how,
            InBatch,
            (|r| r.raw_value().unwrap_or_default(), |_| &[]),
        ),
        Api::Batch | Api::Record => {
            read_with(rt, clusters, topic, how, RawValue, (|r| r.value, |v| v))
        }
    }
}

/// How a side gets a record's value bytes: from a record of a batch, and from a
/// value taken on its own.
type ValueBytes<V> = (for<'a> fn(&RecordRef<'a, V>) -> &'a [u8], fn(&V) -> &[u8]);

/// [`ours`] with `deserializer`, reading values with `bytes`.
fn read_with<D>(
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    topic: &str,
    how: Reading,
    deserializer: D,
    bytes: ValueBytes<D::Value>,
) -> (Pass, ThreadsCpu)
where
    D: multicluster_kafka::deserializer::Deserializer + Clone + Send + Sync + 'static,
    D::Value: Send + 'static,
{
    let Reading {
        readers,
        api,
        max_batch,
        event_time,
    } = how;
    let mut stream = KafkaStream::new("bench");
    for c in clusters {
        stream = stream.with_cluster(
            &c.id,
            ClusterMetadata::builder(&c.bootstrap_servers)
                .topic(topic)
                .build()
                .unwrap(),
        );
    }
    let svc = StaticMetadataService::new([stream]).unwrap();
    rt.block_on(async {
        let mut builder = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["bench"])
            .deserializer(deserializer)
            .parallelism(readers)
            .include_headers(false)
            .stopping_offsets(StoppingOffsets::Latest);
        if let Some(records) = max_batch {
            builder = builder.max_batch_size(records);
        }
        let strategy = multicluster_kafka::WatermarkStrategy::monotonous_timestamps();
        builder = match event_time {
            EventTime::Off => builder,
            EventTime::Watermarks => builder.watermarks(strategy),
            EventTime::Aligned => {
                builder.watermarks(strategy.with_alignment(std::time::Duration::from_secs(1)))
            }
            EventTime::TimeOrder => builder
                .watermarks(strategy)
                .order(multicluster_kafka::ReadOrder::Time),
        };
        tracing::debug!("building the source");
        let source = builder.build().unwrap();
        let (coordinator, readers) = source.open_parallel().await.unwrap();
        tracing::debug!("source open");
        let tasks: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                let (bytes_of, owned) = bytes;
                tokio::spawn(async move {
                    let (mut records, mut bytes) = (0u64, 0u64);
                    let mut first = None;
                    let mut scratch: Vec<u8> = Vec::with_capacity(4096);
                    match api {
                        Api::Batch | Api::InBatch => {
                            while let Some(batch) = reader.next_batch().await {
                                first.get_or_insert_with(|| {
                                    tracing::debug!("first batch");
                                    Instant::now()
                                });
                                for r in &batch.unwrap() {
                                    records += 1;
                                    bytes += touch(&mut scratch, r.key, bytes_of(&r), r.timestamp);
                                }
                            }
                        }
                        Api::Record => {
                            while let Some(r) = reader.next().await {
                                first.get_or_insert_with(Instant::now);
                                let r = r.unwrap();
                                records += 1;
                                bytes += touch(
                                    &mut scratch,
                                    r.key.as_deref(),
                                    owned(&r.value),
                                    r.timestamp,
                                );
                            }
                        }
                    }
                    // The clock stops at the last record; closing the consumers is not timed.
                    let end = Instant::now();
                    let pass = Pass {
                        records,
                        bytes,
                        first: first.unwrap_or(end),
                        end,
                    };
                    (pass, reader)
                })
            })
            .collect();
        let mut passes = Vec::new();
        let mut open = Vec::new();
        for t in tasks {
            let (pass, reader) = t.await.unwrap();
            passes.push(pass);
            open.push(reader);
        }
        // The threads of this pass, before closing ends the fetchers and librdkafka's.
        let threads = threads_cpu();
        for reader in open {
            reader.close().await;
        }
        coordinator.close().await;
        (Pass::combine(passes), threads)
    })
}
