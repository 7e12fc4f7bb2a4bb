//! End-to-end benchmark against real Kafka brokers started by the test kit.
//!
//! `cargo run --release -p mck-bench -- throughput` pre-fills a logical stream of
//! 2 clusters × 8 partitions, then reads it to the end, alternating between this
//! project's source (`next_batch` by default, `--api record` for `next`) and a plain
//! rdkafka consumer per cluster (same partitions, same client settings;
//! `BaseConsumer::poll` by default, `--peer batch` for a raw
//! `rd_kafka_consume_batch_queue` loop). Both sides do the same work per record (read
//! the timestamp, copy key and value into a reused buffer). It prints records/s, MB/s
//! and client CPU per record (this process's user + system time, librdkafka's threads
//! included), and their ratios.
//!
//! `cargo run --release -p mck-bench -- compare` is the one-run comparison: every measure
//! against its peer on the same brokers, as one table (see [`compare`]).

mod compare;
mod tls;

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use mck_bench::peers::{self, PeerCluster};
use mck_testkit::{KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

#[derive(Parser)]
#[command(about = "multicluster-kafka end-to-end benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Read throughput: this project vs a plain rdkafka consumer, same run, same data.
    Throughput(ThroughputArgs),
    /// Isolation: records/s from an unaffected cluster while another cluster's
    /// properties change every 100 ms, against the same reader's steady-state rate.
    Isolation {
        /// Records pre-filled on the unaffected cluster.
        #[arg(long, default_value_t = 30_000_000)]
        records: usize,
        /// The source's `rebuild_interval` in ms (0: every change rebuilds B at once,
        /// the behaviour before it existed).
        #[arg(long, default_value_t = multicluster_kafka::DEFAULT_REBUILD_INTERVAL.as_millis() as u64)]
        rebuild_interval_ms: u64,
    },
    /// Handover latency: from a metadata file write that adds a cluster to the first
    /// record read from that cluster (file watch, no polling interval involved).
    Handover {
        /// Measured cluster additions.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
    },
    /// Every measure in one run: throughput, handover, isolation, memory and checkpoint cost,
    /// each beside its peer (plain rdkafka, Kafka's ConsumerPerformance, Flink's
    /// DynamicKafkaSource), on the same brokers, printed as one markdown table.
    Compare(compare::CompareArgs),
    /// Reads a topic to its end with one side, for `compare`'s peak-RSS measure (run
    /// as a child process).
    #[command(hide = true)]
    RssChild(compare::RssChildArgs),
    /// Read throughput over TLS: `mck consume` against plaintext and against kcat, one broker.
    Tls(tls::TlsArgs),
}

/// Options of the throughput benchmark.
#[derive(clap::Args, Clone, Copy)]
struct ThroughputArgs {
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
enum Side {
    /// This project's source.
    Ours,
    /// The plain rdkafka consumer.
    Plain,
}

/// How the library side takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Api {
    /// `SourceReader::next_batch`.
    Batch,
    /// `SourceReader::next`.
    Record,
}

/// How the plain consumer takes records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Peer {
    /// `BaseConsumer::poll`.
    Poll,
    /// `rd_kafka_consume_batch_queue`.
    Batch,
}

const TOPIC: &str = "bench";

/// What the benchmark's application does with each record, the same on both sides:
/// reads its timestamp and copies its key and value into one reused buffer (so
/// without an allocation per record). Returns the key + value size.
#[inline]
fn touch(scratch: &mut Vec<u8>, key: Option<&[u8]>, value: &[u8], timestamp: Option<i64>) -> u64 {
    scratch.clear();
    scratch.extend_from_slice(key.unwrap_or_default());
    scratch.extend_from_slice(value);
    std::hint::black_box(timestamp);
    std::hint::black_box(&*scratch).len() as u64
}

/// What one side read in one pass over the data.
#[derive(Clone, Copy, Debug)]
struct Pass {
    records: u64,
    /// Key + value bytes.
    bytes: u64,
    /// When the first record of the pass arrived (the earliest over the consumers or
    /// readers): the clock a tool starts once it has joined its group.
    first: Instant,
    /// When the last record arrived.
    end: Instant,
}

impl Pass {
    /// Folds the passes of concurrent consumers or readers into one.
    fn combine(parts: impl IntoIterator<Item = Pass>) -> Pass {
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
    fn rate_since(&self, start: Instant) -> (f64, f64) {
        let secs = (self.end - start).as_secs_f64().max(1e-9);
        (self.records as f64 / secs, self.bytes as f64 / secs / 1e6)
    }

    /// (records/s, MB/s) from the first record to the last.
    fn reading_rate(&self) -> (f64, f64) {
        self.rate_since(self.first)
    }
}

/// Reads every partition of both clusters to its end with one plain consumer per
/// cluster (each on its own thread).
fn plain(clusters: &[PeerCluster], topic: &str, partitions: i32, peer: Peer) -> Pass {
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
fn ours(
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

/// CPU seconds used by this process so far (user + system, all threads; the brokers
/// are other processes and not counted).
fn process_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The process ids of `cluster`'s brokers (found by their log dir on the command
/// line).
fn broker_pids(cluster: &KafkaCluster) -> Vec<u32> {
    // Each broker logs under `<log dir>/node-<id>`.
    let needle = format!("-Dkafka.logs.dir={}/", cluster.log_dir().display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .any(|arg| arg.starts_with(needle.as_bytes()))
            })
        })
        .collect()
}

/// CPU seconds (user + system) used so far by these processes.
fn pids_cpu(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| stat_cpu(&stat).map(|(_, secs)| secs))
        .sum()
}

/// The name and CPU seconds (user + system) of a `/proc/…/stat` line.
fn stat_cpu(stat: &str) -> Option<(&str, f64)> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // `pid (comm) state ...`: utime and stime are the 12th and 13th fields after the
    // name.
    let (head, rest) = stat.rsplit_once(") ")?;
    let name = head.split_once(" (").map_or("", |(_, name)| name);
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks_used = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks_used as f64 / ticks))
}

/// CPU seconds by thread group (see [`threads_cpu`]).
type ThreadsCpu = std::collections::BTreeMap<String, f64>;

/// CPU seconds used so far by this process's live threads, grouped by thread name
/// with the per-instance tail cut off: `mck-fetch` (the library's fetcher threads,
/// `mck-fetch-<cluster>`), `tokio-r` (the tokio runtime's workers and blocking pool),
/// `rdk:broker` (librdkafka's `rdk:broker<N>`), `rdk:main`, the main thread and so
/// on; from `/proc/self/task/*/stat`. Threads that already exited are not counted.
fn threads_cpu() -> ThreadsCpu {
    let mut groups = ThreadsCpu::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return groups;
    };
    for task in tasks.flatten() {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("stat"))
            && let Some((name, secs)) = stat_cpu(&stat)
        {
            *groups.entry(thread_group(name).to_string()).or_default() += secs;
        }
    }
    groups
}

/// The group a thread name belongs to (see [`threads_cpu`]).
fn thread_group(name: &str) -> &str {
    for prefix in ["mck-fetch", "tokio-r"] {
        if name.starts_with(prefix) {
            return prefix;
        }
    }
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '/')
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn metadata_yaml(clusters: &[&KafkaCluster]) -> String {
    let mut out = String::from("clusters:\n");
    for c in clusters {
        out.push_str(&format!(
            "  {}:\n    bootstrapServers: {}\n",
            c.logical_id(),
            c.bootstrap_servers()
        ));
        // MCK_BENCH_RDKAFKA_DEBUG: librdkafka `debug` contexts for the readers' clients.
        if let Ok(debug) = std::env::var("MCK_BENCH_RDKAFKA_DEBUG") {
            out.push_str(&format!("    properties: {{ debug: \"{debug}\" }}\n"));
        }
    }
    out.push_str("streams:\n  s:\n    clusters:\n");
    for c in clusters {
        out.push_str(&format!("      {}: {{ topics: [h] }}\n", c.logical_id()));
    }
    out
}

fn handover(rounds: usize) {
    let (a, b) = mck_bench::start_clusters();
    let mut latencies = handover_latencies(&a, &b, rounds);
    latencies.sort_by(f64::total_cmp);
    println!(
        "handover (file write -> first record from the added cluster), {rounds} rounds: min {:.0} ms, median {:.0} ms, max {:.0} ms",
        latencies[0],
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
}

/// Handover latencies in ms, one per round: topic `h` (created here) on `a` and `b`,
/// `b` added to a watched metadata file in each round and removed again after it.
fn handover_latencies(a: &KafkaCluster, b: &KafkaCluster, rounds: usize) -> Vec<f64> {
    a.create_topic("h", 1).unwrap();
    b.create_topic("h", 1).unwrap();
    let dir = std::env::temp_dir().join(format!("mck-handover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("streams.yaml");
    std::fs::write(&path, metadata_yaml(&[a])).unwrap();
    let rt = mck_testkit::runtime();
    let mut latencies = Vec::new();
    rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .metadata_service(FileMetadataService::watch(&path).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            // Only the file watch triggers reconciliation here.
            .metadata_discovery_interval(Duration::from_secs(3600))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for round in 0..rounds {
            let marker = format!("b-{round}");
            b.produce("h", &[TestRecord::value(marker.clone())])
                .unwrap();
            let t0 = Instant::now();
            std::fs::write(&path, metadata_yaml(&[a, b])).unwrap();
            loop {
                let r = tokio::time::timeout(Duration::from_secs(60), source.next())
                    .await
                    .expect("a record from the added cluster within 60 s")
                    .expect("stream continues")
                    .expect("record");
                if &*r.cluster == b.logical_id() {
                    break;
                }
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            eprintln!("round {round}: {ms:.0} ms");
            latencies.push(ms);
            // Drain what else B had (a re-added cluster starts from earliest), then
            // remove B again.
            while let Ok(Some(_)) =
                tokio::time::timeout(Duration::from_millis(300), source.next()).await
            {}
            std::fs::write(&path, metadata_yaml(&[a])).unwrap();
            tokio::time::sleep(Duration::from_millis(1000)).await;
        }
        source.close().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
    latencies
}

fn isolation(records: usize, rebuild_interval: Duration) {
    let (a, b) = mck_bench::start_clusters();
    let r = isolation_run(&a, &b, TOPIC, records, rebuild_interval);
    println!(
        "isolation: cluster A {:.0} rec/s steady, {:.0} rec/s while B's properties changed ({} changes, {} rebuilds); ratio {:.3}; process CPU per A record {:.0} ns steady, {:.0} ns changing",
        r.steady,
        r.changing,
        r.changes,
        r.rebuilds,
        r.changing / r.steady,
        r.cpu_ns[0],
        r.cpu_ns[1]
    );
    for (kind, cores) in ["steady", "changing"].iter().zip(r.cores) {
        println!(
            "cores used while {kind}: this process {:.2}, A's broker {:.2}, B's broker {:.2}",
            cores[0], cores[1], cores[2]
        );
    }
}

/// What [`isolation_run`] measured.
struct Isolation {
    /// Cluster A's records/s while B is left alone.
    steady: f64,
    /// Cluster A's records/s while B's properties change every 100 ms.
    changing: f64,
    /// Property changes made to B's metadata.
    changes: u64,
    /// Rebuilds of B's clients they caused (fewer: see `rebuild_interval`).
    rebuilds: u64,
    /// This process's CPU ns per A record in each kind of phase ([steady, changing]).
    cpu_ns: [f64; 2],
    /// Cores used in each kind of phase ([steady, changing]) by this process, by A's
    /// broker and by B's broker.
    cores: [[f64; 3]; 2],
}

/// Fills `topic` on `a` (4 partitions, `records` records of 100 B) and on `b` (1
/// partition, 10 records), reads the stream of both with one reader while B's
/// `client.id` changes every 100 ms for 500 ms, then rests 500 ms, and so on; returns
/// A's rate in each kind of phase. The first tenth of A's records (at most 100 000)
/// warm up and are not counted.
fn isolation_run(
    a: &KafkaCluster,
    b: &KafkaCluster,
    topic: &str,
    records: usize,
    rebuild_interval: Duration,
) -> Isolation {
    use std::sync::atomic::{AtomicBool, Ordering};
    std::thread::scope(|s| {
        s.spawn(|| peers::prefill(a, topic, 4, records, 100).expect("pre-fill a"));
        s.spawn(|| peers::prefill(b, topic, 1, 10, 100).expect("pre-fill b"));
    });
    let meta = |c: &KafkaCluster, client_id: &str| {
        ClusterMetadata::builder(c.bootstrap_servers())
            .topic(topic)
            .property("client.id", client_id)
            .build()
            .unwrap()
    };
    let streams = |b_client: &str| {
        [KafkaStream::new("s")
            .with_cluster("a", meta(a, "a"))
            .with_cluster("b", meta(b, b_client))]
    };
    let svc = Arc::new(StaticMetadataService::new(streams("b-0")).unwrap());
    let rt = mck_testkit::runtime();
    let changing = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    // Seconds spent in each kind of phase and A's records read in it ([steady,
    // changing]), accounted by the reader at each phase switch and at the end.
    let (mut secs, mut counts, mut cpu) = ([0f64; 2], [0u64; 2], [[0f64; 3]; 2]);
    let brokers = [broker_pids(a), broker_pids(b)];
    let sample = || [process_cpu(), pids_cpu(&brokers[0]), pids_cpu(&brokers[1])];
    let add = |to: &mut [f64; 3], from: [f64; 3], now: [f64; 3]| {
        for i in 0..3 {
            to[i] += now[i] - from[i];
        }
    };
    let (mut changes, mut rebuilds) = (0u64, 0u64);
    rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone() as Arc<dyn KafkaMetadataService>)
            .stream_ids(["s"])
            .deserializer(RawValue)
            .include_headers(false)
            .rebuild_interval(rebuild_interval)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let warmup = (records / 10).min(100_000);
        let mut seen_a = 0usize;
        while seen_a < warmup {
            let r = source.next().await.unwrap().unwrap();
            if &*r.cluster == "a" {
                seen_a += 1;
            }
        }
        let rebuilds_before = REBUILDS.load(std::sync::atomic::Ordering::Relaxed);
        let toggler = {
            let (svc, changing, done) = (svc.clone(), changing.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    // 500 ms steady, then 500 ms with B's properties changed every 100 ms.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    changing.store(true, Ordering::Relaxed);
                    for _ in 0..5 {
                        n += 1;
                        let mut current = svc.all_streams().await.unwrap();
                        if let Some(b) = current.get_mut("s").and_then(|s| s.clusters.get_mut("b"))
                        {
                            b.properties.set("client.id", format!("b-{n}"));
                        }
                        svc.replace(current.into_values()).unwrap();
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    changing.store(false, Ordering::Relaxed);
                }
                n
            })
        };
        let total_a = records - seen_a;
        let mut read_a = 0usize;
        let (mut phase, mut phase_start, mut phase_n) = (0usize, Instant::now(), 0u64);
        let mut phase_cpu = sample();
        while read_a < total_a {
            let r = source.next().await.unwrap().unwrap();
            if &*r.cluster == "a" {
                read_a += 1;
                let now_phase = usize::from(changing.load(Ordering::Relaxed));
                if now_phase != phase {
                    secs[phase] += phase_start.elapsed().as_secs_f64();
                    counts[phase] += phase_n;
                    let now_cpu = sample();
                    add(&mut cpu[phase], phase_cpu, now_cpu);
                    phase_cpu = now_cpu;
                    (phase, phase_start, phase_n) = (now_phase, Instant::now(), 0);
                }
                phase_n += 1;
            }
        }
        secs[phase] += phase_start.elapsed().as_secs_f64();
        counts[phase] += phase_n;
        add(&mut cpu[phase], phase_cpu, sample());
        done.store(true, Ordering::Relaxed);
        changes = toggler.await.unwrap();
        rebuilds = REBUILDS.load(std::sync::atomic::Ordering::Relaxed) - rebuilds_before;
        source.close().await;
    });
    let rate = |i: usize| counts[i] as f64 / secs[i].max(1e-9);
    Isolation {
        steady: rate(0),
        changing: rate(1),
        changes,
        rebuilds,
        cpu_ns: [0, 1].map(|i| cpu[i][0] / counts[i].max(1) as f64 * 1e9),
        cores: [0, 1].map(|i| cpu[i].map(|c| c / secs[i].max(1e-9))),
    }
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

fn throughput(args: &ThroughputArgs) {
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

/// Client rebuilds after property changes, counted from the enumerator's log event.
static REBUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A tracing layer that counts [`REBUILDS`].
struct RebuildCounter;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RebuildCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 |= format!("{value:?}").contains("rebuilding the cluster's clients");
                }
            }
        }
        let mut m = Message(false);
        event.record(&mut m);
        if m.0 {
            REBUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

fn main() {
    // MCK_BENCH_LOG (a tracing filter such as `librdkafka=debug`) turns on logs to
    // stderr, for looking inside a slow round; off by default so they cost nothing.
    // The rebuild counter sees only the enumerator's info events.
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::Targets};
    let logs = std::env::var("MCK_BENCH_LOG").ok().map(|filter| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::EnvFilter::new(filter))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(RebuildCounter.with_filter(
            Targets::new().with_target("multicluster_kafka::enumerator", tracing::Level::INFO),
        ))
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Isolation {
            records,
            rebuild_interval_ms,
        } => isolation(records, Duration::from_millis(rebuild_interval_ms)),
        Cmd::Handover { rounds } => handover(rounds),
        Cmd::Throughput(args) => throughput(&args),
        Cmd::Compare(args) => compare::compare(&args),
        Cmd::RssChild(args) => compare::rss_child(&args),
        Cmd::Tls(args) => tls::tls(&args),
    }
}
