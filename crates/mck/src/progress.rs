//! The live progress line on a terminal, and the metrics recorder behind it: the
//! library reports through the `metrics` facade, and this recorder keeps what the
//! progress line shows (per-cluster lag) while passing everything on to Prometheus
//! when `--metrics-addr` is given.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use metrics::{
    Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use multicluster_kafka::metrics::SPLIT_LAG;

/// One split's lag as last reported.
#[derive(Debug, Default)]
struct LagCell(AtomicU64);

impl LagCell {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

impl GaugeFn for LagCell {
    fn increment(&self, value: f64) {
        self.set(self.get() + value);
    }
    fn decrement(&self, value: f64) {
        self.set(self.get() - value);
    }
    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// A gauge that updates both our cell and the exporter's gauge.
struct Tee(Arc<LagCell>, Gauge);

impl GaugeFn for Tee {
    fn increment(&self, value: f64) {
        self.0.increment(value);
        self.1.increment(value);
    }
    fn decrement(&self, value: f64) {
        self.0.decrement(value);
        self.1.decrement(value);
    }
    fn set(&self, value: f64) {
        self.0.set(value);
        self.1.set(value);
    }
}

/// Per-split lag cells, by (cluster, topic, partition).
type LagTable = Mutex<BTreeMap<(String, String, String), Arc<LagCell>>>;

/// The process-wide recorder: lag for the progress line, everything to `inner`.
struct CliRecorder {
    lags: Arc<LagTable>,
    inner: Option<metrics_exporter_prometheus::PrometheusRecorder>,
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
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        let inner = match &self.inner {
            Some(r) => r.register_gauge(key, metadata),
            None => Gauge::noop(),
        };
        if key.name() != SPLIT_LAG {
            return inner;
        }
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_string())
                .unwrap_or_default()
        };
        let id = (label("cluster"), label("topic"), label("partition"));
        let cell = self
            .lags
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_default()
            .clone();
        Gauge::from_arc(Arc::new(Tee(cell, inner)))
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        match &self.inner {
            Some(r) => r.register_histogram(key, metadata),
            None => Histogram::noop(),
        }
    }
}

static LAGS: OnceLock<Arc<LagTable>> = OnceLock::new();

/// Installs the recorder once per process; with `metrics_addr`, also serves
/// Prometheus metrics there. Must run inside a Tokio runtime.
pub fn install(metrics_addr: Option<SocketAddr>) -> Result<(), String> {
    let lags = Arc::new(LagTable::default());
    let inner = match metrics_addr {
        None => None,
        Some(addr) => {
            let (recorder, exporter) = metrics_exporter_prometheus::PrometheusBuilder::new()
                .with_http_listener(addr)
                .build()
                .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
            tokio::spawn(async move {
                if let Err(e) = exporter.await {
                    tracing::warn!("metrics endpoint stopped: {e:?}");
                }
            });
            Some(recorder)
        }
    };
    metrics::set_global_recorder(CliRecorder {
        lags: lags.clone(),
        inner,
    })
    .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let _ = LAGS.set(lags);
    Ok(())
}

/// Current total lag per cluster (records behind the high watermarks).
pub fn lag_by_cluster() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Some(lags) = LAGS.get() {
        for ((cluster, _, _), cell) in lags.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let lag = cell.get();
            *out.entry(cluster.clone()).or_insert(0) += if lag > 0.0 { lag as u64 } else { 0 };
        }
    }
    out
}

/// The progress line: redrawn in place on a terminal, silent elsewhere.
pub struct Progress {
    enabled: bool,
    started: Instant,
    last_draw: Instant,
    last_count: u64,
}

impl Progress {
    /// Enabled when stderr is a terminal.
    pub fn new() -> Self {
        let now = Instant::now();
        Self {
            enabled: std::io::stderr().is_terminal(),
            started: now,
            last_draw: now,
            last_count: 0,
        }
    }

    /// Redraws at most once a second.
    pub fn tick(&mut self, records: u64, note: Option<&str>) {
        if !self.enabled || self.last_draw.elapsed().as_millis() < 1000 {
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
