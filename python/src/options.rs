//! `Source`: a source's settings from Python's keyword arguments, named as the
//! library's builder names them, and built anew for each `open()`.

use std::collections::BTreeMap;
use std::time::Duration;

use multicluster_kafka::deserializer::NullableValue;
use multicluster_kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use multicluster_kafka::{
    AssignmentStrategy, MultiClusterKafkaSource, ReadOrder, ScaleOut, SourceBuilder,
    WatermarkStrategy,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors;
use crate::hooks::Hooks;
use crate::metadata::Metadata;
use crate::stream::{Checkpoint, Stream};

/// A multi-cluster source's settings. `open()` starts reading.
#[pyclass(module = "multicluster_kafka", frozen)]
pub struct Source {
    metadata: Metadata,
    settings: Settings,
}

/// Everything but the metadata, checked when the `Source` is made.
#[derive(Clone, Default)]
struct Settings {
    streams: Option<Vec<String>>,
    stream_pattern: Option<String>,
    group: Option<String>,
    starting: Option<StartingOffsets>,
    stopping: Option<StoppingOffsets>,
    properties: BTreeMap<String, String>,
    restore: Option<multicluster_kafka::checkpoint::Checkpoint>,
    scale_out: Option<ScaleOut>,
    watermarks: Option<WatermarkStrategy>,
    order: Option<ReadOrder>,
    durations: BTreeMap<&'static str, Option<Duration>>,
    max_batch_size: Option<usize>,
    include_headers: Option<bool>,
    on_offset_out_of_range: Option<OffsetReset>,
    allow_missing_topics: Option<bool>,
    new_partition_starting_offsets: Option<StartingOffsets>,
    discard_positions_of_replaced_clusters: Option<bool>,
    metadata_failure_threshold: Option<u32>,
    assignment_strategy: Option<AssignmentStrategy>,
    hooks: Option<std::sync::Arc<Hooks>>,
}

#[pymethods]
impl Source {
    #[new]
    #[pyo3(signature = (
        metadata, *, streams = None, stream_pattern = None, group = None,
        starting_offsets = None, stopping_offsets = None, properties = None, restore = None,
        scale_out = None, watermarks = None, order = None, idle_timeout = None,
        startup_timeout = None, client_timeout = None, partition_discovery_interval = None,
        metadata_discovery_interval = None, max_batch_size = None, include_headers = None,
        on_offset_out_of_range = None, allow_missing_topics = None,
        new_partition_starting_offsets = None, discard_positions_of_replaced_clusters = None,
        metadata_failure_threshold = None, assignment_strategy = None, rebuild_interval = None,
        removed_position_retention = None, shard_lock_wait = None, client_hooks = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        metadata: &Bound<'_, PyAny>,
        streams: Option<&Bound<'_, PyAny>>,
        stream_pattern: Option<String>,
        group: Option<String>,
        starting_offsets: Option<&Bound<'_, PyAny>>,
        stopping_offsets: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyDict>>,
        restore: Option<PyRef<'_, Checkpoint>>,
        scale_out: Option<&str>,
        watermarks: Option<&Bound<'_, PyAny>>,
        order: Option<&str>,
        idle_timeout: Option<&Bound<'_, PyAny>>,
        startup_timeout: Option<&Bound<'_, PyAny>>,
        client_timeout: Option<&Bound<'_, PyAny>>,
        partition_discovery_interval: Option<&Bound<'_, PyAny>>,
        metadata_discovery_interval: Option<&Bound<'_, PyAny>>,
        max_batch_size: Option<usize>,
        include_headers: Option<bool>,
        on_offset_out_of_range: Option<&str>,
        allow_missing_topics: Option<bool>,
        new_partition_starting_offsets: Option<&Bound<'_, PyAny>>,
        discard_positions_of_replaced_clusters: Option<bool>,
        metadata_failure_threshold: Option<u32>,
        assignment_strategy: Option<&str>,
        rebuild_interval: Option<&Bound<'_, PyAny>>,
        removed_position_retention: Option<&Bound<'_, PyAny>>,
        shard_lock_wait: Option<&Bound<'_, PyAny>>,
        client_hooks: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut s = Settings {
            stream_pattern,
            group,
            max_batch_size,
            include_headers,
            allow_missing_topics,
            discard_positions_of_replaced_clusters,
            metadata_failure_threshold,
            ..Settings::default()
        };
        if let Some(streams) = streams {
            if streams.is_instance_of::<PyString>() {
                return Err(errors::config(
                    "streams: expected a list of stream ids, got one string (streams=[\"...\"])",
                ));
            }
            s.streams = Some(
                streams
                    .extract()
                    .map_err(|_| errors::config("streams: expected a list of stream ids"))?,
            );
        }
        match (&s.streams, &s.stream_pattern) {
            (None, None) => {
                return Err(errors::config(
                    "give streams=[...] or stream_pattern=\"...\"",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(errors::config("give streams or stream_pattern, not both"));
            }
            _ => {}
        }
        s.starting = starting_offsets
            .map(|v| starting(v, "starting_offsets"))
            .transpose()?;
        s.new_partition_starting_offsets = new_partition_starting_offsets
            .map(|v| starting(v, "new_partition_starting_offsets"))
            .transpose()?;
        s.stopping = stopping_offsets.map(stopping).transpose()?;
        if let Some(properties) = properties {
            for (k, v) in properties.iter() {
                let key: String = k
                    .extract()
                    .map_err(|_| errors::config("properties: keys must be strings"))?;
                let value = property_value(&v).ok_or_else(|| {
                    errors::config(format!(
                        "properties: `{key}` must be a string, a number or a bool"
                    ))
                })?;
                s.properties.insert(key, value);
            }
        }
        if !s.properties.is_empty() {
            let mut all = multicluster_kafka::properties::ClientProperties::new();
            for (k, v) in &s.properties {
                all.set(k, v);
            }
            all.check()
                .map_err(|e| errors::config(format!("properties: {e}")))?;
        }
        s.restore = restore.map(|c| c.0.clone());
        s.scale_out = scale_out.map(parse_scale_out).transpose()?;
        s.order = match order {
            None => None,
            Some("fetch") => Some(ReadOrder::Fetch),
            Some("time") => Some(ReadOrder::Time),
            Some(other) => {
                return Err(errors::config(format!(
                    "order: expected \"fetch\" or \"time\", got {other:?}"
                )));
            }
        };
        if let Some(w) = watermarks {
            let mut strategy =
                WatermarkStrategy::bounded_out_of_orderness(duration(w, "watermarks")?);
            if let Some(idle) = idle_timeout {
                strategy = match duration_or_none(idle, "idle_timeout")? {
                    Some(d) => strategy.with_idle_timeout(d),
                    None => strategy.without_idleness(),
                };
            }
            s.watermarks = Some(strategy);
        } else if idle_timeout.is_some() {
            return Err(errors::config(
                "idle_timeout needs watermarks=<out-of-orderness>",
            ));
        } else if s.order == Some(ReadOrder::Time) {
            s.watermarks = Some(WatermarkStrategy::bounded_out_of_orderness(Duration::ZERO));
        }
        for (name, value) in [
            ("startup_timeout", startup_timeout),
            ("client_timeout", client_timeout),
            ("partition_discovery_interval", partition_discovery_interval),
            ("metadata_discovery_interval", metadata_discovery_interval),
            ("rebuild_interval", rebuild_interval),
            ("removed_position_retention", removed_position_retention),
            ("shard_lock_wait", shard_lock_wait),
        ] {
            if let Some(value) = value {
                s.durations.insert(name, duration_or_none(value, name)?);
            }
        }
        s.on_offset_out_of_range = on_offset_out_of_range
            .map(|v| reset(v, "on_offset_out_of_range"))
            .transpose()?;
        s.assignment_strategy = match assignment_strategy {
            None => None,
            Some("per_cluster") => Some(AssignmentStrategy::PerCluster),
            Some("global") => Some(AssignmentStrategy::Global),
            Some(other) => {
                return Err(errors::config(format!(
                    "assignment_strategy: expected \"per_cluster\" or \"global\", got {other:?}"
                )));
            }
        };
        s.hooks = client_hooks
            .map(Hooks::from_py)
            .transpose()?
            .map(std::sync::Arc::new);
        let metadata = Metadata::from_py(metadata)?;
        let source = Source {
            metadata,
            settings: s,
        };
        // The builder's own checks (combinations, properties) now, not at open().
        let nothing = multicluster_kafka::metadata::StaticMetadataService::new([])
            .map_err(|e| errors::from_source(e.into()))?;
        source
            .settings
            .builder()
            .metadata_service(nothing)
            .build()
            .map_err(errors::from_source)?;
        Ok(source)
    }

    /// A stream over the source; it connects when first used (`with`, `async with`
    /// or the first record). A source may be opened again once a stream is closed.
    fn open(&self, py: Python<'_>) -> PyResult<Stream> {
        let service = self.metadata.service(py)?;
        let source = self
            .settings
            .builder()
            .shared_metadata_service(service)
            .build()
            .map_err(errors::from_source)?;
        Ok(Stream::new(source))
    }

    /// True when the source ends (stopping_offsets set).
    #[getter]
    fn bounded(&self) -> bool {
        self.settings.stopping.is_some()
    }
}

impl Settings {
    fn builder(&self) -> SourceBuilder<NullableValue> {
        let s = self.clone();
        let mut b = MultiClusterKafkaSource::builder().deserializer(NullableValue);
        if let Some(hooks) = &s.hooks {
            b = Python::attach(|py| b.client_hooks(hooks.factory(py)));
        }
        if let Some(ids) = s.streams {
            b = b.stream_ids(ids);
        }
        if let Some(p) = s.stream_pattern {
            b = b.stream_pattern(p);
        }
        if let Some(g) = s.group {
            b = b.group_id(g);
        }
        if let Some(o) = s.starting {
            b = b.starting_offsets(o);
        }
        if let Some(o) = s.stopping {
            b = b.stopping_offsets(o);
        }
        for (k, v) in s.properties {
            b = b.property(k, v);
        }
        if let Some(c) = s.restore {
            b = b.restore_from(c);
        }
        if let Some(x) = s.scale_out {
            b = b.scale_out(x);
        }
        if let Some(w) = s.watermarks {
            b = b.watermarks(w);
        }
        if let Some(o) = s.order {
            b = b.order(o);
        }
        for (name, d) in s.durations {
            b = match (name, d) {
                ("startup_timeout", d) => b.startup_timeout(d),
                ("client_timeout", Some(d)) => b.client_timeout(d),
                ("partition_discovery_interval", Some(d)) => b.partition_discovery_interval(d),
                ("partition_discovery_interval", None) => b.without_partition_discovery(),
                ("metadata_discovery_interval", Some(d)) => b.metadata_discovery_interval(d),
                ("metadata_discovery_interval", None) => b.without_metadata_discovery(),
                ("rebuild_interval", Some(d)) => b.rebuild_interval(d),
                ("removed_position_retention", Some(d)) => b.removed_position_retention(d),
                ("shard_lock_wait", Some(d)) => b.shard_lock_wait(d),
                _ => b,
            };
        }
        if let Some(n) = s.max_batch_size {
            b = b.max_batch_size(n);
        }
        if let Some(h) = s.include_headers {
            b = b.include_headers(h);
        }
        if let Some(p) = s.on_offset_out_of_range {
            b = b.on_offset_out_of_range(p);
        }
        if let Some(a) = s.allow_missing_topics {
            b = b.allow_missing_topics(a);
        }
        if let Some(o) = s.new_partition_starting_offsets {
            b = b.new_partition_starting_offsets(o);
        }
        if let Some(d) = s.discard_positions_of_replaced_clusters {
            b = b.discard_positions_of_replaced_clusters(d);
        }
        if let Some(n) = s.metadata_failure_threshold {
            b = b.metadata_failure_threshold(n);
        }
        if let Some(a) = s.assignment_strategy {
            b = b.assignment_strategy(a);
        }
        b
    }
}

fn property_value(v: &Bound<'_, PyAny>) -> Option<String> {
    if let Ok(b) = v.extract::<bool>() {
        return Some(b.to_string());
    }
    if let Ok(i) = v.extract::<i64>() {
        return Some(i.to_string());
    }
    if let Ok(f) = v.extract::<f64>() {
        return Some(f.to_string());
    }
    v.extract::<String>().ok()
}

fn reset(v: &str, what: &str) -> PyResult<OffsetReset> {
    match v {
        "earliest" => Ok(OffsetReset::Earliest),
        "latest" => Ok(OffsetReset::Latest),
        "none" | "fail" => Ok(OffsetReset::None),
        other => Err(errors::config(format!(
            "{what}: expected \"earliest\", \"latest\" or \"none\", got {other:?}"
        ))),
    }
}

/// Milliseconds since the epoch of a `datetime.datetime`, if `v` is one.
fn datetime_ms(v: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    let datetime = v.py().import("datetime")?.getattr("datetime")?;
    if !v.is_instance(&datetime)? {
        return Ok(None);
    }
    let seconds: f64 = v.call_method0("timestamp")?.extract()?;
    Ok(Some((seconds * 1000.0).round() as i64))
}

/// Where to start: "earliest" | "latest" | "committed" | a datetime |
/// {"committed": "earliest"} | {"offset": N} | {"beforeEnd": N} | {"timestamp": ms}
/// | {"specific": ...} (the metadata file's and the library's JSON layout).
fn starting(v: &Bound<'_, PyAny>, what: &str) -> PyResult<StartingOffsets> {
    if let Some(ms) = datetime_ms(v)? {
        return Ok(StartingOffsets::Timestamp(ms));
    }
    if let Ok(s) = v.extract::<String>() {
        return match s.as_str() {
            "earliest" => Ok(StartingOffsets::Earliest),
            "latest" => Ok(StartingOffsets::Latest),
            "committed" => Ok(StartingOffsets::Committed {
                reset: OffsetReset::None,
            }),
            other => Err(errors::config(format!(
                "{what}: expected \"earliest\", \"latest\", \"committed\", a datetime or a dict, got {other:?}"
            ))),
        };
    }
    if let Ok(d) = v.cast::<PyDict>() {
        if let (1, Some(reset_to)) = (d.len(), d.get_item("committed")?)
            && let Ok(r) = reset_to.extract::<String>()
        {
            return Ok(StartingOffsets::Committed {
                reset: reset(&r, what)?,
            });
        }
        return from_json(v, what);
    }
    Err(errors::config(format!(
        "{what}: expected a string, a datetime or a dict, got {}",
        v.get_type().name()?
    )))
}

/// Where to stop: "latest" | "committed" | a datetime | a dict.
fn stopping(v: &Bound<'_, PyAny>) -> PyResult<StoppingOffsets> {
    if let Some(ms) = datetime_ms(v)? {
        return Ok(StoppingOffsets::Timestamp(ms));
    }
    if let Ok(s) = v.extract::<String>() {
        return match s.as_str() {
            "latest" => Ok(StoppingOffsets::Latest),
            "committed" => Ok(StoppingOffsets::Committed),
            other => Err(errors::config(format!(
                "stopping_offsets: expected None, \"latest\", \"committed\", a datetime or a dict, got {other:?}"
            ))),
        };
    }
    from_json(v, "stopping_offsets")
}

fn from_json<T: serde::de::DeserializeOwned>(v: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let text: String = v
        .py()
        .import("json")?
        .call_method1("dumps", (v,))
        .and_then(|t| t.extract())
        .map_err(|e| errors::config(format!("{what}: {}", e.value(v.py()))))?;
    serde_json::from_str(&text).map_err(|e| errors::config(format!("{what}: {e} in {text}")))
}

/// Seconds (int or float) or a `datetime.timedelta`.
fn duration(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Duration> {
    let seconds: f64 = if let Ok(s) = v.extract::<f64>() {
        s
    } else if let Ok(total) = v.call_method0("total_seconds") {
        total.extract()?
    } else {
        return Err(errors::config(format!(
            "{what}: expected seconds or a datetime.timedelta, got {}",
            v.get_type().name()?
        )));
    };
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| errors::config(format!("{what}: {seconds} is not a duration")))
}

/// [`duration`], or `float("inf")` for none (wait for ever, or off).
fn duration_or_none(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Duration>> {
    if let Ok(s) = v.extract::<f64>()
        && s.is_infinite()
        && s > 0.0
    {
        return Ok(None);
    }
    duration(v, what).map(Some)
}

/// "kafka_group", or "I/N" for one shard of N.
fn parse_scale_out(v: &str) -> PyResult<ScaleOut> {
    match v {
        "whole" => Ok(ScaleOut::Whole),
        "kafka_group" => Ok(ScaleOut::KafkaGroup),
        shard => shard.parse().map(ScaleOut::Shard).map_err(|e| {
            errors::config(format!(
                "scale_out: expected \"whole\", \"kafka_group\" or \"I/N\" (a shard): {e}"
            ))
        }),
    }
}
