//! `mck-bench scale point` (hidden): one point of the clusters curve, in a fresh
//! process that holds nothing but the source (the mock clusters and producers run in
//! `scale mock`). Prints one `RESULT key=value …` line for `scale clusters`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use multicluster_kafka::metadata::MetadataError;
use multicluster_kafka::prelude::*;
use tokio::sync::{mpsc, watch};

use super::threads_sched;
use super::{rss_mib, thread_count, thread_groups};
use crate::cpu::process_cpu;

/// Options of `scale point`.
#[derive(clap::Args, Debug)]
pub struct PointArgs {
    /// Bootstrap servers of a measured cluster, in order (logical ids `c0`, `c1`, …).
    #[arg(long = "cluster", required = true)]
    pub clusters: Vec<String>,
    /// Bootstrap servers of a cluster added in a handover round (`x0`, `x1`, …).
    #[arg(long = "extra")]
    pub extras: Vec<String>,
    /// Readers (`parallelism`).
    #[arg(long)]
    pub readers: usize,
    /// Seconds of reading before the CPU window.
    #[arg(long)]
    pub warmup: f64,
    /// Seconds of the CPU window.
    #[arg(long)]
    pub secs: f64,
    /// Reconciliation rounds (topics `u0`, `u1`, … on `c0`).
    #[arg(long)]
    pub rounds: usize,
    /// `fetch.wait.max.ms` set in every cluster's properties (0: librdkafka's default).
    #[arg(long)]
    pub fetch_wait_ms: u64,
    /// `fetch.min.bytes` set in every cluster's properties (0: librdkafka's default).
    #[arg(long, default_value_t = 0)]
    pub fetch_min_bytes: u64,
}

/// A [`StaticMetadataService`] the bench keeps a handle to, so it can replace the
/// streams while the source reads.
struct Shared(Arc<StaticMetadataService>);

#[async_trait]
impl KafkaMetadataService for Shared {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.0.describe_streams(stream_ids).await
    }
    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.0.all_streams().await
    }
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        self.0.is_cluster_active(cluster_id).await
    }
    async fn close(&self) -> Result<(), MetadataError> {
        self.0.close().await
    }
    fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.0.changes()
    }
}

/// The stream: `t` on every measured cluster, `u_topic` also on `c0`, and the first
/// `extras` handover clusters.
fn stream(args: &PointArgs, u_topic: Option<&str>, extras: usize) -> KafkaStream {
    let mut s = KafkaStream::new("s");
    let meta = |bootstrap: &str, topics: &[&str]| {
        let mut b = ClusterMetadata::builder(bootstrap);
        if args.fetch_wait_ms > 0 {
            b = b.property("fetch.wait.max.ms", args.fetch_wait_ms.to_string());
        }
        if args.fetch_min_bytes > 0 {
            b = b.property("fetch.min.bytes", args.fetch_min_bytes.to_string());
        }
        for t in topics {
            b = b.topic(*t);
        }
        b.build().expect("cluster metadata")
    };
    for (i, bootstrap) in args.clusters.iter().enumerate() {
        let topics: Vec<&str> = match u_topic {
            Some(u) if i == 0 => vec!["t", u],
            _ => vec!["t"],
        };
        s = s.with_cluster(format!("c{i}"), meta(bootstrap, &topics));
    }
    for (h, bootstrap) in args.extras.iter().take(extras).enumerate() {
        s = s.with_cluster(format!("x{h}"), meta(bootstrap, &["t"]));
    }
    s
}

/// When each (cluster, topic) gave its first record.
struct Seen {
    rx: mpsc::UnboundedReceiver<(String, String, Instant)>,
    first: HashMap<(String, String), Instant>,
}

impl Seen {
    /// Waits up to `timeout` for the first record of (cluster, topic).
    async fn wait(&mut self, cluster: &str, topic: &str, timeout: Duration) -> Option<Instant> {
        let key = (cluster.to_string(), topic.to_string());
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(t) = self.first.get(&key) {
                return Some(*t);
            }
            let (c, t, at) = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .ok()??;
            self.first.entry((c, t)).or_insert(at);
        }
    }
}

/// Milliseconds from `t0` to `t`, or NaN when it never came.
fn ms_since(t0: Instant, t: Option<Instant>) -> f64 {
    t.map_or(f64::NAN, |t| {
        t.saturating_duration_since(t0).as_secs_f64() * 1e3
    })
}

/// The phases of a metadata change, as the source reports them
/// (`mck_reconciliation_phase_seconds`).
pub const PHASES: [&str; 5] = ["read", "plan", "apply", "discover", "assign"];

/// Milliseconds spent in each of [`PHASES`] since the previous snapshot (the values of
/// one phase added up).
fn phase_ms(snapshotter: &metrics_util::debugging::Snapshotter) -> Vec<f64> {
    let snap = snapshotter.snapshot().into_vec();
    PHASES
        .iter()
        .map(|phase| {
            snap.iter()
                .filter(|(k, _, _, _)| {
                    k.key().name() == multicluster_kafka::metrics::RECONCILIATION_PHASE_SECONDS
                        && k.key().labels().any(|l| l.value() == *phase)
                })
                .map(|(_, _, _, v)| match v {
                    metrics_util::debugging::DebugValue::Histogram(xs) => {
                        xs.iter().map(|x| x.into_inner() * 1e3).sum()
                    }
                    _ => 0.0,
                })
                .sum()
        })
        .collect()
}

pub fn point(args: &PointArgs) {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only metrics recorder of this process");
    let rt = mck_testkit::runtime();
    // Let the runtime's workers start before the baseline.
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
    let threads_base = thread_count();
    let rss_base = rss_mib();
    let n = args.clusters.len();
    let service = Arc::new(StaticMetadataService::new([stream(args, None, 0)]).unwrap());
    let records = Arc::new(AtomicU64::new(0));
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    rt.block_on(async {
        let t0 = Instant::now();
        let source = MultiClusterKafkaSource::builder()
            .metadata_service(Shared(service.clone()))
            .stream_ids(["s"])
            .deserializer(RawValue)
            .include_headers(false)
            .parallelism(args.readers)
            .starting_offsets(StartingOffsets::Latest)
            // Only the bench's replace() triggers reconciliation.
            .metadata_discovery_interval(Duration::from_secs(3600))
            .build()
            .unwrap();
        let (coordinator, readers) = source.open_parallel().await.unwrap();
        let opened = t0.elapsed();
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut seen = Seen {
            rx,
            first: HashMap::new(),
        };
        let tasks: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                let (tx, records) = (tx.clone(), records.clone());
                let mut stop = stop_rx.clone();
                tokio::spawn(async move {
                    let mut pairs: HashSet<(Arc<str>, Arc<str>)> = HashSet::new();
                    loop {
                        let batch = tokio::select! {
                            _ = stop.changed() => break,
                            b = reader.next_batch() => match b {
                                Some(b) => b.expect("a batch"),
                                None => break,
                            },
                        };
                        let cluster = batch.cluster().clone();
                        let mut last: Option<&Arc<str>> = None;
                        for r in &batch {
                            if last.is_some_and(|l| Arc::ptr_eq(l, r.topic)) {
                                continue;
                            }
                            last = Some(r.topic);
                            if pairs.insert((cluster.clone(), r.topic.clone())) {
                                let _ = tx.send((
                                    cluster.to_string(),
                                    r.topic.to_string(),
                                    Instant::now(),
                                ));
                            }
                        }
                        records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    }
                    reader
                })
            })
            .collect();
        drop(tx);
        let wait = Duration::from_secs(60);
        let mut all = Some(t0);
        for i in 0..n {
            let t = seen.wait(&format!("c{i}"), "t", wait).await;
            all = all.zip(t).map(|(a, b)| a.max(b));
        }
        let first = seen.first.values().min().copied();
        put("open_call_ms", format!("{:.1}", opened.as_secs_f64() * 1e3));
        put("open_first_ms", format!("{:.1}", ms_since(t0, first)));
        put("open_all_ms", format!("{:.1}", ms_since(t0, all)));

        tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
        let groups0 = threads_sched();
        let (r0, cpu0, w0) = (
            records.load(Ordering::Relaxed),
            process_cpu(),
            Instant::now(),
        );
        tokio::time::sleep(Duration::from_secs_f64(args.secs)).await;
        let (r1, cpu1, secs) = (
            records.load(Ordering::Relaxed),
            process_cpu(),
            w0.elapsed().as_secs_f64(),
        );
        let groups1 = threads_sched();
        let read = (r1 - r0).max(1);
        // CPU ns per record, and times scheduled in per second, by thread group
        // (threads live through the whole window).
        let (mut by_group, mut runs) = (Vec::new(), Vec::new());
        for (g, (cpu, n)) in &groups1 {
            let (cpu0, n0) = groups0.get(g).copied().unwrap_or_default();
            let g = g.replace([' ', '=', ','], "_");
            by_group.push(format!("{g}:{:.0}", (cpu - cpu0) / read as f64 * 1e9));
            runs.push(format!("{g}:{:.0}", n.saturating_sub(n0) as f64 / secs));
        }
        put("runs_groups", runs.join(","));
        put("cpu_groups", by_group.join(","));
        put("records", read.to_string());
        put("rate", format!("{:.0}", read as f64 / secs));
        put(
            "cpu_ns",
            format!("{:.0}", (cpu1 - cpu0) / read as f64 * 1e9),
        );
        put("cpu_cores", format!("{:.3}", (cpu1 - cpu0) / secs));
        put("threads", thread_count().to_string());
        put("threads_base", threads_base.to_string());
        put("rss_mib", format!("{:.1}", rss_mib()));
        put("rss_base_mib", format!("{rss_base:.1}"));
        let groups: Vec<String> = thread_groups()
            .into_iter()
            .map(|(g, c)| format!("{}:{c}", g.replace([' ', '='], "_")))
            .collect();
        put("groups", groups.join(","));

        // Reconciliation: add topic u<k> to c0 alone; time to its first record.
        let mut reconcile = Vec::new();
        let mut phases: Vec<Vec<String>> = vec![Vec::new(); PHASES.len()];
        // The time to the first record after the enumerator's phases: the reader's
        // assignment, its next fetch, the hand-out.
        let mut rest = Vec::new();
        for k in 0..args.rounds {
            let u = format!("u{k}");
            let _ = phase_ms(&snapshotter);
            let t = Instant::now();
            service.replace([stream(args, Some(&u), 0)]).unwrap();
            let got = seen.wait("c0", &u, wait).await;
            let total = ms_since(t, got);
            reconcile.push(format!("{total:.1}"));
            // After the pause: the enumerator records `discover` once the discovery
            // call returns, which can be after the first record came.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let round = phase_ms(&snapshotter);
            // `assign` overlaps the end of `discover`: the rest is what comes after
            // the enumerator's phases.
            let enumerator: f64 = round[..4].iter().sum();
            rest.push(format!("{:.2}", total - enumerator));
            for (list, ms) in phases.iter_mut().zip(round) {
                list.push(format!("{ms:.2}"));
            }
        }
        put("reconcile_ms", reconcile.join(","));
        for (phase, list) in PHASES.iter().zip(&phases) {
            put(&format!("phase_{phase}_ms"), list.join(","));
        }
        put("phase_rest_ms", rest.join(","));
        service.replace([stream(args, None, 0)]).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;

        // Handover: add cluster x<h>; time to its first record.
        let mut handover = Vec::new();
        for h in 0..args.extras.len() {
            let t = Instant::now();
            service.replace([stream(args, None, h + 1)]).unwrap();
            let got = seen.wait(&format!("x{h}"), "t", wait).await;
            handover.push(format!("{:.1}", ms_since(t, got)));
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        put("handover_ms", handover.join(","));

        let t = Instant::now();
        let _ = stop_tx.send(true);
        for task in tasks {
            task.await.unwrap().close().await;
        }
        coordinator.close().await;
        put(
            "close_ms",
            format!("{:.1}", t.elapsed().as_secs_f64() * 1e3),
        );
    });
    let line: Vec<String> = out.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("RESULT {}", line.join(" "));
}
