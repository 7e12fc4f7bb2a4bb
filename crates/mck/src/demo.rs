//! `mck demo`: a cluster migration on two in-process (librdkafka mock) clusters,
//! watched live, and checked at the end: every produced record read exactly once.
//!
//! librdkafka's mock partitions keep only about the newest 5 MiB of log, so the demo
//! produces a few thousand small records a second and its reader stays close behind;
//! a reader more than 5 MiB behind on a partition would lose records there.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{MockKafkaCluster, TestCluster};
use multicluster_kafka::MultiClusterKafkaSource;
use multicluster_kafka::deserializer::RawValue;
use multicluster_kafka::metadata::FileMetadataService;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::watch;

const STREAM: &str = "orders";
const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;

/// Arguments of `mck demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Records produced per second.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=20_000))]
    pub rate: u64,
    /// Seconds of each phase (east only, then east and west, then west only).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=15))]
    pub phase_seconds: u64,
    /// Keep the metadata file in this directory instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs the demo on its own runtime.
pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(demo(args))
}

/// Writes one line of the demo's output (see [`out`]).
macro_rules! say_line {
    ($($arg:tt)*) => {
        out(format_args!($($arg)*))
    };
}

/// Prints a line with the time since start.
struct Narrator(Instant);

impl Narrator {
    fn say(&self, what: impl std::fmt::Display) {
        say_line!("[{:5.1}s] {what}", self.0.elapsed().as_secs_f64());
    }
}

/// Writes one line of the demo's output. When standard output's reader has gone
/// (`mck demo | head`) the demo ends there, quietly and successfully, as kcat does;
/// another write error ends it with the error on stderr.
fn out(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    if let Err(e) = writeln!(std::io::stdout(), "{text}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        crate::stdio::say!("mck: error: stdout: {e}");
        std::process::exit(1);
    }
}

/// The demo's clusters are librdkafka's in-process mock brokers, which hold an empty
/// fetch for the whole of `fetch.wait.max.ms` (500 ms by default) even when records
/// arrive meanwhile; a real broker answers as soon as they do. A short wait keeps
/// the demo's handover what it is on real brokers.
const MOCK_FETCH_WAIT: &str = "      # Mock brokers answer a waiting fetch only when its wait ends.\n      \
                               properties: {fetch.wait.max.ms: \"20\"}\n";

/// Writes the metadata file atomically (a reader never sees half a file).
fn write_metadata(path: &Path, clusters: &[&MockKafkaCluster]) -> Result<(), String> {
    let mut yaml = format!("- streamId: {STREAM}\n  clusterMetadataList:\n");
    for c in clusters {
        yaml.push_str(&format!(
            "    - clusterId: {}\n      bootstrapServers: {}\n      topics: [{TOPIC}]\n{MOCK_FETCH_WAIT}",
            c.logical_id(),
            c.bootstrap_servers()
        ));
    }
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, yaml).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// What the producer task reports.
#[derive(Default)]
struct Produced {
    /// Acknowledged records per cluster.
    per_cluster: BTreeMap<String, u64>,
    /// Which cluster the producer writes to now (after every earlier record is acked).
    current: String,
}

/// Produces `seq` numbers at `rate` per second to the cluster `target` names, until
/// `target` becomes empty. Each batch is acknowledged before the next is sent, so when
/// `current` changes every record sent to the previous cluster is acknowledged.
async fn produce(
    clusters: Vec<(String, FutureProducer)>,
    rate: u64,
    mut target: watch::Receiver<String>,
    report: watch::Sender<Produced>,
    seq: Arc<AtomicU64>,
) -> Result<(), String> {
    let tick = Duration::from_millis(20);
    let per_tick = (rate / 50).max(1);
    let mut ticker = tokio::time::interval(tick);
    loop {
        ticker.tick().await;
        let name = target.borrow_and_update().clone();
        if name.is_empty() {
            return Ok(());
        }
        let Some((_, producer)) = clusters.iter().find(|(n, _)| *n == name) else {
            return Err(format!("no producer for cluster {name}"));
        };
        report.send_modify(|p| p.current = name.clone());
        let mut pending = Vec::with_capacity(per_tick as usize);
        for _ in 0..per_tick {
            let n = seq.fetch_add(1, Ordering::Relaxed);
            let key = n.to_string();
            let value = format!("{{\"order\":{n},\"cluster\":\"{name}\"}}");
            let record = FutureRecord::to(TOPIC).key(&key).payload(&value);
            let delivery = producer
                .send_result(record)
                .map_err(|(e, _)| format!("produce to {name}: {e}"))?;
            pending.push(delivery);
        }
        for d in pending {
            match d.await {
                Ok(Ok(_)) => {
                    report.send_modify(|p| *p.per_cluster.entry(name.clone()).or_default() += 1)
                }
                Ok(Err((e, _))) => return Err(format!("produce to {name}: {e}")),
                Err(_) => return Err(format!("produce to {name}: delivery report lost")),
            }
        }
    }
}

fn seq_of(value: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(value).ok()?;
    let rest = s.strip_prefix("{\"order\":")?;
    rest.split(',').next()?.parse().ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    EastOnly,
    Both,
    WestOnly,
    Draining,
}

async fn demo(args: DemoArgs) -> Result<ExitCode, String> {
    let say = Narrator(Instant::now());
    let started = |name: &str| -> Result<MockKafkaCluster, String> {
        let c = MockKafkaCluster::start(name, 1).map_err(|e| e.to_string())?;
        c.create_topic(TOPIC, PARTITIONS)
            .map_err(|e| e.to_string())?;
        Ok(c)
    };
    let east = started("east")?;
    let west = started("west")?;
    say.say(format!(
        "two in-process Kafka clusters: east ({}) and west ({}), topic `{TOPIC}` with {PARTITIONS} partitions on each",
        east.bootstrap_servers(),
        west.bootstrap_servers()
    ));

    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
            tmp.path().to_path_buf()
        }
    };
    let path = dir.join("streams.yaml");
    write_metadata(&path, &[&east])?;
    say.say(format!(
        "metadata {}: stream `{STREAM}` -> east",
        path.display()
    ));

    let producer_of = |c: &MockKafkaCluster| -> Result<(String, FutureProducer), String> {
        let p: FutureProducer = c
            .client_config()
            .set("linger.ms", "5")
            .set("enable.idempotence", "true")
            .create()
            .map_err(|e| format!("producer for {}: {e}", c.logical_id()))?;
        Ok((c.logical_id().to_string(), p))
    };
    let producers = vec![producer_of(&east)?, producer_of(&west)?];
    let (target_tx, target_rx) = watch::channel("east".to_string());
    let (report_tx, report_rx) = watch::channel(Produced::default());
    let seq = Arc::new(AtomicU64::new(0));
    let producer = tokio::spawn(produce(producers, args.rate, target_rx, report_tx, seq));

    let service = FileMetadataService::watch(&path).map_err(|e| e.to_string())?;
    let source = MultiClusterKafkaSource::builder()
        .metadata_service(service)
        .stream_ids([STREAM])
        .deserializer(RawValue)
        .build()
        .map_err(|e| e.to_string())?;
    let mut stream = source.open().await.map_err(|e| e.to_string())?;
    say.say(format!(
        "reading stream `{STREAM}`; producing {} records/s to east",
        args.rate
    ));

    let phase_len = Duration::from_secs(args.phase_seconds);
    let deadline = Instant::now() + phase_len * 3 + Duration::from_secs(40);
    let mut phase = Phase::EastOnly;
    let mut phase_started = Instant::now();
    let mut switched_at: Option<Instant> = None;
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut read_per_cluster: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_offset: HashMap<(String, i32), i64> = HashMap::new();
    let mut out_of_order = 0u64;
    let mut unreadable = 0u64;
    let mut handover: Option<Duration> = None;
    let mut done_at: Option<Instant> = None;
    let mut ticker = tokio::time::interval(Duration::from_millis(50));

    let outcome: Result<(), String> = loop {
        if Instant::now() > deadline {
            break Err("the demo did not finish in time".into());
        }
        tokio::select! {
            next = stream.next() => match next {
                None => break Err("the stream ended unexpectedly".into()),
                Some(Err(e)) => say.say(format!("warning: {e}")),
                Some(Ok(r)) => {
                    let key = (r.cluster.to_string(), r.partition);
                    if let Some(prev) = last_offset.insert(key, r.offset)
                        && r.offset <= prev
                    {
                        out_of_order += 1;
                    }
                    *read_per_cluster.entry(r.cluster.to_string()).or_default() += 1;
                    match seq_of(&r.value) {
                        Some(n) => *seen.entry(n).or_default() += 1,
                        None => unreadable += 1,
                    }
                    if &*r.cluster == "west" && handover.is_none()
                        && let Some(t) = switched_at
                    {
                        let d = t.elapsed();
                        handover = Some(d);
                        say.say(format!(
                            "first record from west, {} ms after the metadata file was written",
                            d.as_millis()
                        ));
                    }
                }
            },
            _ = ticker.tick() => {
                if producer.is_finished() && phase != Phase::Draining {
                    break Err("the producer stopped early".into());
                }
                let (east_produced, total, current) = {
                    let p = report_rx.borrow();
                    (
                        p.per_cluster.get("east").copied().unwrap_or(0),
                        p.per_cluster.values().sum::<u64>(),
                        p.current.clone(),
                    )
                };
                let east_read = read_per_cluster.get("east").copied().unwrap_or(0);
                match phase {
                    Phase::EastOnly if phase_started.elapsed() >= phase_len => {
                        write_metadata(&path, &[&east, &west])?;
                        switched_at = Some(Instant::now());
                        let _ = target_tx.send("west".into());
                        say.say("metadata: `orders` -> east + west; producers move to west");
                        phase = Phase::Both;
                        phase_started = Instant::now();
                    }
                    Phase::Both if current == "west" && east_read >= east_produced
                        && phase_started.elapsed() >= phase_len / 2 => {
                        say.say(format!(
                            "east drained: all {east_produced} records produced there were read; metadata: `orders` -> west only"
                        ));
                        write_metadata(&path, &[&west])?;
                        phase = Phase::WestOnly;
                        phase_started = Instant::now();
                    }
                    Phase::WestOnly if phase_started.elapsed() >= phase_len => {
                        let _ = target_tx.send(String::new());
                        say.say("producers stopped; reading the rest");
                        phase = Phase::Draining;
                        phase_started = Instant::now();
                    }
                    Phase::Draining if producer.is_finished() => {
                        match done_at {
                            None if seen.len() as u64 >= total => done_at = Some(Instant::now()),
                            // Read on a little to catch any late duplicate.
                            Some(t) if t.elapsed() >= Duration::from_millis(500) => break Ok(()),
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
        }
    };
    stream.close().await;
    let produced_result = producer.await;
    outcome?;
    match produced_result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(format!("producer task: {e}")),
    }
    let produced = report_rx.borrow();

    let total: u64 = produced.per_cluster.values().sum();
    let duplicates = seen.values().filter(|c| **c > 1).count();
    let missing = (0..total).filter(|n| !seen.contains_key(n)).count();
    let per = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    say_line!("");
    say_line!("summary");
    say_line!(
        "  produced         {total} ({})",
        per(&produced.per_cluster)
    );
    say_line!(
        "  read             {} ({})",
        read_per_cluster.values().sum::<u64>(),
        per(&read_per_cluster)
    );
    say_line!("  distinct read    {}", seen.len());
    say_line!("  missing          {missing}");
    say_line!("  duplicates       {duplicates}");
    say_line!("  out of order     {out_of_order}");
    if let Some(h) = handover {
        say_line!(
            "  handover         {} ms (metadata write -> first record from west)",
            h.as_millis()
        );
    }
    let ok = missing == 0
        && duplicates == 0
        && out_of_order == 0
        && unreadable == 0
        && seen.len() as u64 == total
        && produced.per_cluster.get("east").copied().unwrap_or(0) > 0
        && produced.per_cluster.get("west").copied().unwrap_or(0) > 0;
    if ok {
        say_line!(
            "PASS: every record produced to east and west was read exactly once, in order, across the migration"
        );
        Ok(ExitCode::SUCCESS)
    } else {
        say_line!("FAIL: the migration lost, repeated or reordered records (see above)");
        Ok(ExitCode::from(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_are_read_back_from_values() {
        assert_eq!(seq_of(br#"{"order":42,"cluster":"east"}"#), Some(42));
        assert_eq!(seq_of(b"junk"), None);
    }
}
