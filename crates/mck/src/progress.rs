//! The live progress line on a terminal, and the metrics recorder behind it: the
//! library reports through the `metrics` facade, and this recorder keeps what the
//! progress line shows (per-cluster lag) while passing everything on to Prometheus
//! when `--metrics-addr` is given.
//!
//! The facade cannot remove a series, so the library marks a split that left the
//! source by setting its `mck_split_lag` to NaN (see
//! `multicluster_kafka::metrics::SPLIT_LAG`). This recorder then forgets the series:
//! it leaves the live line at once, and the Prometheus endpoint within a few seconds.
//! For that the exporter drops gauges nobody wrote for [`IDLE`], and this recorder
//! writes every gauge it still knows to the exporter every [`REFRESH`] (so only the
//! forgotten ones go idle).

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use metrics::{
    Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Level, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use metrics_util::MetricKindMask;
use multicluster_kafka::metrics::SPLIT_LAG;

/// How often every live gauge is written to the Prometheus exporter.
const REFRESH: Duration = Duration::from_secs(1);
/// How long the exporter keeps a gauge nobody writes (a removed split's lag).
const IDLE: Duration = Duration::from_secs(3);

/// One gauge's value as last reported, and whether it is still reported.
#[derive(Debug)]
struct Cell {
    bits: AtomicU64,
    live: AtomicBool,
}

impl Cell {
    fn new() -> Self {
        Self {
            bits: AtomicU64::new(0f64.to_bits()),
            live: AtomicBool::new(true),
        }
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }
}

/// The gauges this recorder knows, by key: lag for the live line, and (with an
/// exporter) every gauge, written to the exporter every [`REFRESH`].
type Gauges = Mutex<HashMap<Key, Arc<Cell>>>;

fn lock(gauges: &Gauges) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Cell>>> {
    gauges.lock().unwrap_or_else(|e| e.into_inner())
}

/// The library's handle on one gauge.
struct Handle {
    key: Key,
    cell: Arc<Cell>,
    gauges: Arc<Gauges>,
}

impl Handle {
    /// A gauge written after its series was forgotten is known again.
    fn revive(&self) {
        if !self.cell.live.swap(true, Ordering::AcqRel) {
            lock(&self.gauges).insert(self.key.clone(), self.cell.clone());
        }
    }
}

impl GaugeFn for Handle {
    fn increment(&self, value: f64) {
        let _ = self
            .cell
            .bits
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |b| {
                Some((f64::from_bits(b) + value).to_bits())
            });
        self.revive();
    }
    fn decrement(&self, value: f64) {
        self.increment(-value);
    }
    fn set(&self, value: f64) {
        if value.is_nan() && self.key.name() == SPLIT_LAG {
            // The split left the source: forget its series.
            self.cell.live.store(false, Ordering::Release);
            let mut gauges = lock(&self.gauges);
            if gauges
                .get(&self.key)
                .is_some_and(|c| Arc::ptr_eq(c, &self.cell))
            {
                gauges.remove(&self.key);
            }
            return;
        }
        self.cell.bits.store(value.to_bits(), Ordering::Relaxed);
        self.revive();
    }
}

/// The process-wide recorder: gauges kept here (lag for the progress line), the rest
/// straight to the exporter.
struct CliRecorder {
    gauges: Arc<Gauges>,
    inner: Option<Arc<PrometheusRecorder>>,
}

impl Recorder for CliRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if let Some(r) = &self.inner {
            r.describe_counter(key, unit, description);
        }
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if let Some(r) = &self.inner {
            r.describe_gauge(key, unit, description);
        }
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if let Some(r) = &self.inner {
            r.describe_histogram(key, unit, description);
        }
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        match &self.inner {
            Some(r) => r.register_counter(key, metadata),
            None => Counter::noop(),
        }
    }
    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        if self.inner.is_none() && key.name() != SPLIT_LAG {
            return Gauge::noop();
        }
        let cell = lock(&self.gauges)
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Cell::new()))
            .clone();
        Gauge::from_arc(Arc::new(Handle {
            key: key.clone(),
            cell,
            gauges: self.gauges.clone(),
        }))
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        match &self.inner {
            Some(r) => r.register_histogram(key, metadata),
            None => Histogram::noop(),
        }
    }
}

/// Writes every known gauge to the exporter, then renders once so the exporter
/// notices the gauges nobody wrote for [`IDLE`] and drops them.
fn refresh(gauges: &Gauges, exporter: &PrometheusRecorder, handle: &PrometheusHandle) {
    static META: Metadata<'static> =
        Metadata::new(module_path!(), Level::INFO, Some(module_path!()));
    let values: Vec<(Key, f64)> = lock(gauges)
        .iter()
        .map(|(k, c)| (k.clone(), c.get()))
        .collect();
    for (key, value) in values {
        // Registering again brings back a gauge the exporter dropped while idle.
        exporter.register_gauge(&key, &META).set(value);
    }
    let _ = handle.render();
}

/// The exporter's builder: gauges not written for `idle` are dropped.
fn exporter_builder(idle: Duration) -> PrometheusBuilder {
    PrometheusBuilder::new().idle_timeout(MetricKindMask::GAUGE, Some(idle))
}

static GAUGES: OnceLock<Arc<Gauges>> = OnceLock::new();

/// Installs the recorder once per process; with `metrics_addr`, also serves
/// Prometheus metrics there. Must run inside a Tokio runtime.
pub fn install(metrics_addr: Option<SocketAddr>) -> Result<(), String> {
    let gauges = Arc::new(Gauges::default());
    let inner = match metrics_addr {
        None => None,
        Some(addr) => {
            let recorder = Arc::new(exporter_builder(IDLE).build_recorder());
            let g = gauges.clone();
            let clusters: crate::endpoint::Clusters = Arc::new(move || {
                let value = |name: &str| {
                    lock(&g)
                        .iter()
                        .find(|(k, _)| k.name() == name && k.labels().next().is_none())
                        .map(|(_, c)| c.get())
                };
                (
                    value(multicluster_kafka::metrics::CLUSTERS),
                    value(multicluster_kafka::metrics::CLUSTERS_WAITING),
                )
            });
            crate::endpoint::serve(addr, recorder.handle(), clusters)?;
            let (g, r, handle) = (gauges.clone(), recorder.clone(), recorder.handle());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(REFRESH);
                loop {
                    tick.tick().await;
                    refresh(&g, &r, &handle);
                }
            });
            Some(recorder)
        }
    };
    metrics::set_global_recorder(CliRecorder {
        gauges: gauges.clone(),
        inner,
    })
    .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let _ = GAUGES.set(gauges);
    Ok(())
}

/// Total lag per cluster of the splits `gauges` knows.
fn lag_of(gauges: &Gauges) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (key, cell) in lock(gauges).iter() {
        if key.name() != SPLIT_LAG {
            continue;
        }
        let cluster = key
            .labels()
            .find(|l| l.key() == "cluster")
            .map(|l| l.value().to_string())
            .unwrap_or_default();
        let lag = cell.get();
        *out.entry(cluster).or_insert(0) += if lag > 0.0 { lag as u64 } else { 0 };
    }
    out
}

/// Current total lag per cluster: records not handed out yet, summed over the splits
/// the source reads (removed ones drop out).
pub fn lag_by_cluster() -> BTreeMap<String, u64> {
    GAUGES.get().map(|g| lag_of(g)).unwrap_or_default()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The progress line: redrawn in place on a terminal, silent elsewhere.
pub struct Progress {
    enabled: bool,
    started: Instant,
    last_draw: Instant,
    last_count: u64,
}

impl Progress {
    /// Enabled when stderr is a terminal and records go elsewhere.
    /// `records_elsewhere`: records do not go to the terminal (a file, a pipe), so a
    /// line redrawn in place cannot break one of them.
    pub fn new(records_elsewhere: bool) -> Self {
        let now = Instant::now();
        Self {
            enabled: records_elsewhere && std::io::stderr().is_terminal(),
            started: now,
            last_draw: now,
            last_count: 0,
        }
    }

    /// Whether the next [`tick`](Self::tick) draws (at most once a second).
    pub fn due(&self) -> bool {
        self.enabled && self.last_draw.elapsed().as_millis() >= 1000
    }

    /// Redraws at most once a second. `watermark`: the source's, in ms since the
    /// epoch, shown as how far it is behind the clock.
    pub fn tick(&mut self, records: u64, watermark: Option<i64>, note: Option<&str>) {
        if !self.due() {
            return;
        }
        let secs = self.last_draw.elapsed().as_secs_f64();
        let rate = (records - self.last_count) as f64 / secs.max(1e-3);
        self.last_draw = Instant::now();
        self.last_count = records;
        let lag = lag_by_cluster()
            .iter()
            .map(|(c, l)| format!("{c}={l}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!(
            "\r\x1b[2K{records} records  {rate:.0} rec/s  lag: {}  [{:.0}s]",
            if lag.is_empty() { "-" } else { &lag },
            self.started.elapsed().as_secs_f64()
        );
        if let Some(w) = watermark {
            let behind = (now_ms() - w) as f64 / 1000.0;
            line.push_str(&format!("  watermark lag: {behind:.1}s"));
        }
        if let Some(n) = note {
            line.push_str("  ");
            line.push_str(n);
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    /// Ends the line so later messages start on a fresh one.
    pub fn finish(&mut self) {
        if self.enabled {
            let _ = std::io::stderr().write_all(b"\n");
        }
        self.enabled = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_splits_lag_leaves_the_live_line_at_once_and_prometheus_once_idle() {
        let idle = Duration::from_millis(300);
        let exporter = Arc::new(exporter_builder(idle).build_recorder());
        let handle = exporter.handle();
        let gauges = Arc::new(Gauges::default());
        let recorder = CliRecorder {
            gauges: gauges.clone(),
            inner: Some(exporter.clone()),
        };
        let lag = |cluster: &str, p: &str| {
            metrics::with_local_recorder(
                &recorder,
                || metrics::gauge!(SPLIT_LAG, "cluster" => cluster.to_string(), "topic" => "t", "partition" => p.to_string()),
            )
        };
        let (east0, east1, west0) = (lag("east", "0"), lag("east", "1"), lag("west", "0"));
        let clusters = metrics::with_local_recorder(&recorder, || metrics::gauge!("mck_clusters"));
        east0.set(5.0);
        east1.set(2.0);
        west0.set(7.0);
        clusters.set(2.0);
        refresh(&gauges, &exporter, &handle);
        let text = handle.render();
        assert!(
            text.contains(r#"mck_split_lag{cluster="west",topic="t",partition="0"} 7"#),
            "{text}"
        );
        assert_eq!(
            lag_of(&gauges),
            BTreeMap::from([("east".into(), 7), ("west".into(), 7)])
        );

        // West is removed: gone from the live line at once…
        west0.set(f64::NAN);
        east1.set(0.0);
        assert_eq!(lag_of(&gauges), BTreeMap::from([("east".into(), 5)]));
        // …and from Prometheus once idle, while the gauges still reported (lag or
        // not, changing or not) stay.
        let until = Instant::now() + idle * 3;
        while Instant::now() < until {
            refresh(&gauges, &exporter, &handle);
            std::thread::sleep(idle / 4);
        }
        let text = handle.render();
        assert!(!text.contains(r#"cluster="west""#), "{text}");
        assert!(
            text.contains(r#"mck_split_lag{cluster="east",topic="t",partition="0"} 5"#),
            "{text}"
        );
        assert!(text.contains("mck_clusters 2"), "{text}");

        // A split that comes back is reported again.
        west0.set(3.0);
        refresh(&gauges, &exporter, &handle);
        assert_eq!(lag_of(&gauges)["west"], 3);
        assert!(
            handle
                .render()
                .contains(r#"mck_split_lag{cluster="west",topic="t",partition="0"} 3"#)
        );
    }
}
