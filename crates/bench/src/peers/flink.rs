//! Apache Flink's `DynamicKafkaSource` in a local Flink job, from the Maven module
//! `crates/bench/flink-dynamic`.

use std::collections::HashMap;
use std::time::Duration;

use super::java::{self, FlinkJob};
use super::{Figures, PeerCluster, PeerError, StreamTarget};

const FLINK: &str = "Flink DynamicKafkaSource";

/// Settings of [`flink_throughput`].
#[derive(Clone, Debug)]
pub struct FlinkOptions {
    /// Source (and sink) parallelism; the MiniCluster gets as many task slots.
    pub parallelism: usize,
    /// Jobs run first in the same JVM and returned marked as warm-up.
    pub warmup_rounds: usize,
    /// Measured jobs.
    pub rounds: usize,
    /// Kill the JVM after this long.
    pub deadline: Duration,
}

impl Default for FlinkOptions {
    fn default() -> Self {
        Self {
            parallelism: 1,
            warmup_rounds: 1,
            rounds: 3,
            deadline: Duration::from_secs(900),
        }
    }
}

/// One bounded Flink job that read the whole stream.
#[derive(Clone, Copy, Debug)]
pub struct FlinkRound {
    /// A warm-up job (run before the measured ones, in the same JVM).
    pub warmup: bool,
    /// From the first sink writer's creation (the task is deployed; the source reader
    /// and its Kafka consumers are created right after, in the same chained task) to the
    /// end of input at the last sink writer. The figure to set beside this project's
    /// (whose clock runs from creating the clients to the end of the stream).
    pub from_task_start: Figures,
    /// From the first record at a sink to the end of input: what Flink reaches once
    /// running, split discovery and consumer start-up excluded (favours Flink).
    pub from_first_record: Figures,
    /// From job submission (MiniCluster start, scheduling, deployment included) to the
    /// end of input (penalises Flink for the local cluster's start-up).
    pub from_submit: Figures,
}

/// Reads the logical stream `target` with Flink's `DynamicKafkaSource` in a local Flink
/// job (MiniCluster in one JVM, `parallelism` source subtasks chained to a counting,
/// discarding sink, object reuse on), bounded at the latest offsets (`setBounded(latest)`,
/// from the earliest), with the stream's clusters served by a file metadata service.
/// Runs `warmup_rounds + rounds` jobs one after the other in the same JVM.
///
/// Records arrive at the sink as `Integer` key + value sizes (the source's deserializer
/// computes them from the `byte[]` key and value the Kafka client copied out).
pub fn flink_throughput(
    target: &StreamTarget,
    options: &FlinkOptions,
) -> Result<Vec<FlinkRound>, PeerError> {
    let peer = FLINK;
    let job = java::flink_job(peer)?;
    let work = java::work_dir(peer)?;
    let mut args = flink_base_args(&job, "throughput", &target.clusters, &target.topic);
    args.extend([
        "--expected".into(),
        target.total_records().to_string(),
        "--parallelism".into(),
        options.parallelism.to_string(),
        "--warmup-rounds".into(),
        options.warmup_rounds.to_string(),
        "--rounds".into(),
        options.rounds.to_string(),
        "--timeout-s".into(),
        options.deadline.as_secs().max(1).to_string(),
    ]);
    let log = work.join(format!("flink-throughput-p{}.log", options.parallelism));
    let out = java::run_java(peer, &args, java::FLINK_JVM_OPENS, &log, options.deadline)?;
    let fail = |reason: String| PeerError::Failed {
        peer,
        reason,
        log: out.log.clone(),
    };
    let mut rounds = Vec::new();
    for fields in flink_lines(&out.stdout, "throughput").map_err(fail)? {
        let num = |k: &str| -> Result<f64, PeerError> {
            fields
                .get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| fail(format!("result line without a number `{k}`")))
        };
        let records = num("records")? as u64;
        let bytes = num("bytes")? as u64;
        let window = |ms: f64| Figures {
            records,
            bytes,
            elapsed: Duration::from_secs_f64(ms.max(0.001) / 1e3),
        };
        rounds.push(FlinkRound {
            warmup: fields.get("warmup").map(String::as_str) == Some("true"),
            from_task_start: window(num("open_to_last_ms")?),
            from_first_record: window(num("first_to_last_ms")?),
            from_submit: window(num("submit_to_last_ms")?),
        });
    }
    if rounds.len() != options.warmup_rounds + options.rounds {
        return Err(fail(format!(
            "{} result lines for {} jobs",
            rounds.len(),
            options.warmup_rounds + options.rounds
        )));
    }
    Ok(rounds)
}

/// Settings of [`flink_handover`].
#[derive(Clone, Debug)]
pub struct FlinkHandoverOptions {
    /// Measured cluster additions.
    pub rounds: usize,
    /// `stream-metadata-discovery-interval-ms`: how often Flink's enumerator asks the
    /// metadata service. Flink polls (it has no change notification); 1 ms is the lowest
    /// value it takes (0 or less turns discovery off after the first).
    pub discovery_interval: Duration,
    /// Source parallelism.
    pub parallelism: usize,
    /// Kill the JVM after this long.
    pub deadline: Duration,
}

impl Default for FlinkHandoverOptions {
    fn default() -> Self {
        Self {
            rounds: 10,
            discovery_interval: Duration::from_millis(1),
            parallelism: 1,
            deadline: Duration::from_secs(900),
        }
    }
}

/// Handover latency of Flink's `DynamicKafkaSource`: an unbounded local job reads topic
/// `topic` on cluster `a` only; then, in each round, a marker record is produced to `b`,
/// the metadata file is rewritten to list `a` and `b`, and the clock runs from that
/// write to the marker's arrival at the sink. `b` is removed again between rounds (1.5 s
/// pause). `topic` must exist on both clusters. Returns one latency per round.
pub fn flink_handover(
    a: &PeerCluster,
    b: &PeerCluster,
    topic: &str,
    options: &FlinkHandoverOptions,
) -> Result<Vec<Duration>, PeerError> {
    let peer = FLINK;
    let job = java::flink_job(peer)?;
    let work = java::work_dir(peer)?;
    let mut args = flink_base_args(&job, "handover", &[a.clone(), b.clone()], topic);
    args.extend([
        "--rounds".into(),
        options.rounds.to_string(),
        "--parallelism".into(),
        options.parallelism.to_string(),
        "--discovery-interval-ms".into(),
        options.discovery_interval.as_millis().max(1).to_string(),
        "--timeout-s".into(),
        "120".into(),
    ]);
    let out = java::run_java(
        peer,
        &args,
        java::FLINK_JVM_OPENS,
        &work.join("flink-handover.log"),
        options.deadline,
    )?;
    let fail = |reason: String| PeerError::Failed {
        peer,
        reason,
        log: out.log.clone(),
    };
    let mut latencies = Vec::new();
    for fields in flink_lines(&out.stdout, "handover").map_err(fail)? {
        let ms: f64 = fields
            .get("latency_ms")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| fail("result line without `latency_ms`".into()))?;
        latencies.push(Duration::from_secs_f64(ms / 1e3));
    }
    if latencies.len() != options.rounds {
        return Err(fail(format!(
            "{} result lines for {} rounds",
            latencies.len(),
            options.rounds
        )));
    }
    Ok(latencies)
}

fn flink_base_args(
    job: &FlinkJob,
    mode: &str,
    clusters: &[PeerCluster],
    topic: &str,
) -> Vec<String> {
    let mut args = vec![
        "-cp".into(),
        format!("{}:{}/*", job.jar.display(), job.libs.display()),
        "io.mck.bench.FlinkDynamicBench".into(),
        "--mode".into(),
        mode.into(),
        "--topic".into(),
        topic.into(),
    ];
    for c in clusters {
        args.push("--cluster".into());
        args.push(format!("{}={}", c.id, c.bootstrap_servers));
    }
    args
}

/// The `key=value` fields of each `MCK-FLINK mode=<mode> ...` line, or the job's own
/// error line.
fn flink_lines(stdout: &str, mode: &str) -> Result<Vec<HashMap<String, String>>, String> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        if let Some(reason) = line.strip_prefix("MCK-FLINK-ERROR ") {
            return Err(reason.trim().to_string());
        }
        let Some(rest) = line.strip_prefix("MCK-FLINK ") else {
            continue;
        };
        let fields: HashMap<String, String> = rest
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if fields.get("mode").map(String::as_str) == Some(mode) {
            out.push(fields);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_result_lines_are_read_by_mode_and_its_error_line_wins() {
        let out = "noise\nMCK-FLINK mode=throughput round=0 records=5 open_to_last_ms=1.5\nMCK-FLINK mode=handover latency_ms=3\n";
        let lines = flink_lines(out, "throughput").unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["open_to_last_ms"], "1.5");
        let err = flink_lines(
            "MCK-FLINK-ERROR IllegalStateException: read 3 records\n",
            "throughput",
        );
        assert_eq!(err.unwrap_err(), "IllegalStateException: read 3 records");
    }
}
