//! Read throughput: this project's source against a plain rdkafka consumer per
//! cluster, alternating in the same run over the same data.

use std::time::{Duration, Instant};

use mck_bench::peers::{self, PeerCluster};
use multicluster_kafka::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use super::{TOPIC, median};
use crate::cpu::{ThreadsCpu, process_cpu, threads_cpu};

/// Options of the throughput benchmark.
#[derive(clap::Args, Clone, Copy)]
pub struct ThroughputArgs {
    /// Records per cluster.
    #[arg(long, default_value_t = 400_000)]
    records: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Partitions per cluster.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Alternating rounds (each reads everything once with each reader).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Parallel readers of this project's source.
    #[arg(long, default_value_t = 1)]
    readers: usize,
    /// Run only one side (to profile it): `ours` or `plain`. No ratio is printed.
    #[arg(long)]
    only: Option<Side>,
    /// How this project's side takes records: `batch` (`next_batch`) or `record`
    /// (`next`).
    #[arg(long, value_enum, default_value_t = Api::Batch)]
    api: Api,
    /// How the plain consumer takes records: `poll` (`BaseConsumer::poll`, one
    /// message per call, the usual rust-rdkafka loop) or `batch`
    /// (`rd_kafka_consume_batch_queue` through the raw bindings, as the library
    /// does).
    #[arg(long, value_enum, default_value_t = Peer::Poll)]
    peer: Peer,
    /// The source's `max_batch_size` (records per batch); the library's default
    /// unless set.
    #[arg(long)]
    max_batch: Option<usize>,
}

/// One side of the throughput comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Side {
    /// This project's source.
    Ours,
    /// The plain rdkafka consumer.
    Plain,
}

/// How the library side takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `SourceReader::next_batch`.
    Batch,
    /// `SourceReader::next`.
    Record,
}

/// How the plain consumer takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// `BaseConsumer::poll`.
    Poll,
    /// `rd_kafka_consume_batch_queue`.
    Batch,
}

/// What the benchmark's application does with each record, the same on both sides:
/// reads its timestamp and copies its key and value into one reused buffer (so
/// without an allocation per record). Returns the key + value size.
#[inline]
pub(crate) fn touch(
    scratch: &mut Vec<u8>,
    key: Option<&[u8]>,
    value: &[u8],
    timestamp: Option<i64>,
) -> u64 {
    scratch.clear();
    scratch.extend_from_slice(key.unwrap_or_default());
    scratch.extend_from_slice(value);
    std::hint::black_box(timestamp);
    std::hint::black_box(&*scratch).len() as u64
}

/// What one side read in one pass over the data.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    pub records: u64,
    /// Key + value bytes.
    pub bytes: u64,
    /// When the first record of the pass arrived (the earliest over the consumers or
    /// readers): the clock a tool starts once it has joined its group.
    pub first: Instant,
    /// When the last record arrived.
    pub end: Instant,
}

impl Pass {
    /// Folds the passes of concurrent consumers or readers into one.
    pub fn combine(parts: impl IntoIterator<Item = Pass>) -> Pass {
        parts
            .into_iter()
            .reduce(|a, b| Pass {
                records: a.records + b.records,
                bytes: a.bytes + b.bytes,
                first: a.first.min(b.first),
                end: a.end.max(b.end),
            })
            .expect("at least one consumer")
    }

    /// (records/s, MB/s) over the window from `start` to the last record.
    pub fn rate_since(&self, start: Instant) -> (f64, f64) {
        let secs = (self.end - start).as_secs_f64().max(1e-9);
        (self.records as f64 / secs, self.bytes as f64 / secs / 1e6)
    }

    /// (records/s, MB/s) from the first record to the last.
    pub fn reading_rate(&self) -> (f64, f64) {
        self.rate_since(self.first)
    }
}

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

/// Reads the stream to its end with the library; returns the pass and the CPU seconds
/// its fetcher threads used.
pub fn ours(
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster],
    topic: &str,
    readers: usize,
    api: Api,
    max_batch: Option<usize>,
) -> (Pass, ThreadsCpu) {
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
            .deserializer(RawValue)
            .parallelism(readers)
            .include_headers(false)
            .stopping_offsets(StoppingOffsets::Latest);
        if let Some(records) = max_batch {
            builder = builder.max_batch_size(records);
        }
        tracing::debug!("building the source");
        let source = builder.build().unwrap();
        let (coordinator, readers) = source.open_parallel().await.unwrap();
        tracing::debug!("source open");
        let tasks: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                tokio::spawn(async move {
                    let (mut records, mut bytes) = (0u64, 0u64);
                    let mut first = None;
                    let mut scratch: Vec<u8> = Vec::with_capacity(4096);
                    match api {
                        Api::Batch => {
                            while let Some(batch) = reader.next_batch().await {
                                first.get_or_insert_with(|| {
                                    tracing::debug!("first batch");
                                    Instant::now()
                                });
                                for r in &batch.unwrap() {
                                    records += 1;
                                    bytes += touch(&mut scratch, r.key, r.value, r.timestamp);
                                }
                            }
                        }
                        Api::Record => {
                            while let Some(r) = reader.next().await {
                                first.get_or_insert_with(Instant::now);
                                let r = r.unwrap();
                                records += 1;
                                bytes +=
                                    touch(&mut scratch, r.key.as_deref(), &r.value, r.timestamp);
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

/// One side's figures over the rounds.
#[derive(Default)]
struct Figures {
    /// From the side's start (client creation) to its last record.
    rps: Vec<f64>,
    mbps: Vec<f64>,
    /// From its first record to its last.
    rps_reading: Vec<f64>,
    cpu_ns: Vec<f64>,
    /// CPU ns per record of each thread group (ours only; see [`threads_cpu`]).
    threads_cpu_ns: std::collections::BTreeMap<String, Vec<f64>>,
}

impl Figures {
    fn push(&mut self, pass: &Pass, started: Instant, cpu_secs: f64) {
        let (rps, mbps) = pass.rate_since(started);
        self.rps.push(rps);
        self.mbps.push(mbps);
        self.rps_reading.push(pass.reading_rate().0);
        self.cpu_ns.push(cpu_secs / pass.records as f64 * 1e9);
    }

    fn last(&self) -> String {
        match (self.rps.last(), self.rps_reading.last(), self.cpu_ns.last()) {
            (Some(r), Some(f), Some(c)) => {
                format!("{r:.0} rec/s ({f:.0} from the first record) {c:.0} ns CPU/rec")
            }
            _ => "-".into(),
        }
    }

    /// Medians of records/s, MB/s, records/s from the first record, and CPU
    /// ns/record.
    fn medians(&self) -> (f64, f64, f64, f64) {
        (
            median(self.rps.clone()),
            median(self.mbps.clone()),
            median(self.rps_reading.clone()),
            median(self.cpu_ns.clone()),
        )
    }
}

pub fn throughput(args: &ThroughputArgs) {
    let ThroughputArgs {
        records,
        value_size,
        partitions,
        rounds,
        readers,
        only,
        api,
        peer,
        max_batch,
    } = *args;
    let (a, b) = mck_bench::start_clusters();
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| peers::prefill(&a, TOPIC, partitions, records, value_size).expect("fill a"));
        s.spawn(|| peers::prefill(&b, TOPIC, partitions, records, value_size).expect("fill b"));
    });
    eprintln!(
        "prefilled 2 × {records} records of {value_size} B in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rt = mck_testkit::runtime();
    let clusters = [PeerCluster::of(&a), PeerCluster::of(&b)];
    let expected = (2 * records) as u64;
    let (mut ours_f, mut plain_f) = (Figures::default(), Figures::default());
    // Warm the brokers' page cache and JIT once before measuring.
    plain(&clusters, TOPIC, partitions, Peer::Poll);
    eprintln!("measuring (pid {})", std::process::id());
    let sides: &[Side] = match only {
        Some(Side::Ours) => &[Side::Ours],
        Some(Side::Plain) => &[Side::Plain],
        None => &[Side::Plain, Side::Ours],
    };
    for round in 0..rounds {
        // Alternate which reader goes first, so neither always gets the warmer broker.
        let order: Vec<Side> = if round % 2 == 0 {
            sides.to_vec()
        } else {
            sides.iter().rev().copied().collect()
        };
        for side in order {
            let t = Instant::now();
            let cpu0 = process_cpu();
            let threads0 = threads_cpu();
            let (pass, threads, figures) = match side {
                Side::Plain => (
                    plain(&clusters, TOPIC, partitions, peer),
                    ThreadsCpu::new(),
                    &mut plain_f,
                ),
                Side::Ours => {
                    let (pass, threads) = ours(&rt, &clusters, TOPIC, readers, api, max_batch);
                    (pass, threads, &mut ours_f)
                }
            };
            assert_eq!(pass.records, expected, "{side:?} read everything");
            figures.push(&pass, t, process_cpu() - cpu0);
            if side == Side::Ours {
                for (group, secs) in threads {
                    // Threads that lived before the pass (the runtime's, the main thread)
                    // count from where they were.
                    let before = threads0.get(&group).copied().unwrap_or(0.0);
                    figures
                        .threads_cpu_ns
                        .entry(group)
                        .or_default()
                        .push((secs - before) / pass.records as f64 * 1e9);
                }
            }
        }
        eprintln!(
            "round {round}: plain {}, multicluster-kafka {}",
            plain_f.last(),
            ours_f.last()
        );
    }
    println!(
        "workload: 2 clusters x {partitions} partitions, {records} records/cluster, {value_size} B values, {readers} reader(s), library API {api:?}, plain consumer {peer:?}"
    );
    println!(
        "| reader | records/s (median of {rounds}) | MB/s | records/s from the first record | client CPU ns/record |"
    );
    println!("|---|---|---|---|---|");
    if !ours_f.rps.is_empty() {
        let (o, mb, of, oc) = ours_f.medians();
        println!(
            "| multicluster-kafka (library, {readers} reader(s)) | {o:.0} | {mb:.1} | {of:.0} | {oc:.0} |"
        );
    }
    if !plain_f.rps.is_empty() {
        let (p, mb, pf, pc) = plain_f.medians();
        let how = match peer {
            Peer::Poll => "BaseConsumer::poll",
            Peer::Batch => "rd_kafka_consume_batch_queue",
        };
        println!(
            "| plain rdkafka, {how} (1 consumer per cluster) | {p:.0} | {mb:.1} | {pf:.0} | {pc:.0} |"
        );
    }
    if !ours_f.threads_cpu_ns.is_empty() {
        let groups: Vec<String> = ours_f
            .threads_cpu_ns
            .iter()
            .map(|(group, ns)| format!("{group} {:.0}", median(ns.clone())))
            .collect();
        println!(
            "multicluster-kafka, CPU ns per record by thread (medians; mck-fetch: the fetcher threads, tokio-r: the readers' tasks and the bench's loop, rdk:*: librdkafka's; threads that ended before the pass did are not counted): {}",
            groups.join(", ")
        );
    }
    if only.is_none() {
        let (o, _, of, oc) = ours_f.medians();
        let (p, _, pf, pc) = plain_f.medians();
        println!(
            "ratio multicluster-kafka / plain rdkafka: throughput {:.2} ({:.2} from the first record), CPU per record {:.2}",
            o / p,
            of / pf,
            oc / pc
        );
    }
}
