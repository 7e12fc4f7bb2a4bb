//! Apache Kafka's `ConsumerPerformance` tool, one instance per cluster, concurrently.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use super::java::{self, io};
use super::{CONSUMER_PERF_CLASS, Figures, PeerError, StreamTarget};

const KAFKA_TOOL: &str = "Kafka ConsumerPerformance";

/// Settings of [`consumer_perf`].
#[derive(Clone, Debug)]
pub struct ConsumerPerfOptions {
    /// Rounds run first in the same JVM and returned marked as warm-up.
    pub warmup_rounds: usize,
    /// Measured rounds.
    pub rounds: usize,
    /// The tool's `--timeout`: the longest wait between two returned batches.
    pub record_timeout: Duration,
    /// Kill the JVM after this long.
    pub deadline: Duration,
}

impl Default for ConsumerPerfOptions {
    fn default() -> Self {
        Self {
            warmup_rounds: 1,
            rounds: 3,
            record_timeout: Duration::from_secs(60),
            deadline: Duration::from_secs(900),
        }
    }
}

/// One round of [`consumer_perf`]: every cluster's tool instance read its
/// `records_per_cluster` records, all instances at once.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerPerfRound {
    /// A warm-up round (run before the measured ones, in the same JVM).
    pub warmup: bool,
    /// From the first instance's start (after its `KafkaConsumer` was created, before it
    /// subscribed) to the last instance's last record: includes the consumer-group join.
    pub with_group_join: Figures,
    /// The same, but starting when the first instance had joined its group: the tool's
    /// own `fetch.nMsg.sec` window. This is the figure to set beside the plain rdkafka
    /// consumer, which assigns its partitions without a group.
    pub fetch: Figures,
}

/// Runs Kafka's `ConsumerPerformance` on each cluster of `target` concurrently (one
/// tool instance per cluster, each on its own thread of one JVM, each subscribing to
/// the whole topic with its own new group, from the earliest offset, auto-commit off),
/// for `warmup_rounds + rounds` rounds, and returns every round's combined figures.
///
/// The tool's clock starts after its consumer is created, so JVM start-up and client
/// construction are outside both windows. Its bytes are key + value sizes.
pub fn consumer_perf(
    target: &StreamTarget,
    options: &ConsumerPerfOptions,
) -> Result<Vec<ConsumerPerfRound>, PeerError> {
    let peer = KAFKA_TOOL;
    let kafka_libs = mck_testkit::kafka_libs().map_err(|e| PeerError::Failed {
        peer,
        reason: format!(
            "cannot get the Kafka {} jars: {e}",
            mck_testkit::KAFKA_VERSION
        ),
        log: PathBuf::from("-"),
    })?;
    let job = java::flink_job(peer)?;
    let work = java::work_dir(peer)?;
    let mut args: Vec<String> = vec![
        "-cp".into(),
        format!("{}:{}/*", job.jar.display(), kafka_libs.display()),
        "io.mck.bench.ConcurrentMain".into(),
        (options.warmup_rounds + options.rounds).to_string(),
        CONSUMER_PERF_CLASS.into(),
    ];
    for (i, c) in target.clusters.iter().enumerate() {
        let config = work.join(format!("consumer-{i}.properties"));
        // The tool sets bootstrap, group, deserializers, auto.offset.reset=earliest,
        // check.crcs=false, max.partition.fetch.bytes and receive.buffer.bytes itself.
        let text = format!(
            "enable.auto.commit=false\nclient.id=mck-perf-{}\n",
            sanitize(&c.id)
        );
        fs::write(&config, text).map_err(io(peer, &config))?;
        if i > 0 {
            args.push("--and".into());
        }
        args.extend([
            "--bootstrap-server".into(),
            c.bootstrap_servers.clone(),
            "--topic".into(),
            target.topic.clone(),
            "--messages".into(),
            target.records_per_cluster.to_string(),
            "--timeout".into(),
            options.record_timeout.as_millis().to_string(),
            "--consumer.config".into(),
            config.display().to_string(),
            "--date-format".into(),
            "yyyy-MM-dd HH:mm:ss.SSS".into(),
            "--reporting-interval".into(),
            "3600000".into(),
            "--hide-header".into(),
        ]);
    }
    let out = java::run_java(
        peer,
        &args,
        &[],
        &work.join("consumer-perf.log"),
        options.deadline,
    )?;
    parse_consumer_perf(&out.stdout, target, options.warmup_rounds).map_err(|reason| {
        PeerError::Failed {
            peer,
            reason,
            log: out.log.clone(),
        }
    })
}

/// One line of the tool's final report (10 comma-separated fields).
#[derive(Debug, PartialEq)]
struct ToolLine {
    start_ms: i64,
    end_ms: i64,
    bytes: u64,
    records: u64,
    join_ms: i64,
}

fn parse_tool_line(line: &str) -> Option<ToolLine> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != 10 {
        return None;
    }
    let mb: f64 = f[2].parse().ok()?;
    Some(ToolLine {
        start_ms: parse_datetime_ms(f[0])?,
        end_ms: parse_datetime_ms(f[1])?,
        bytes: (mb * 1024.0 * 1024.0).round() as u64,
        records: f[4].parse().ok()?,
        join_ms: f[6].parse().ok()?,
    })
}

fn parse_consumer_perf(
    stdout: &str,
    target: &StreamTarget,
    warmup_rounds: usize,
) -> Result<Vec<ConsumerPerfRound>, String> {
    let mut rounds = Vec::new();
    let mut lines: Vec<ToolLine> = Vec::new();
    for line in stdout.lines() {
        let line = line.trim();
        if let Some(reason) = line.strip_prefix("MCK-ERROR ") {
            return Err(reason.to_string());
        }
        if line.starts_with("WARNING: Exiting before consuming") {
            return Err(format!(
                "the tool stopped before reading {} records per cluster from topic `{}`: {line}",
                target.records_per_cluster, target.topic
            ));
        }
        if line.starts_with("MCK-ROUND-END") {
            if lines.len() != target.clusters.len() {
                return Err(format!(
                    "round {}: {} result lines for {} clusters",
                    rounds.len(),
                    lines.len(),
                    target.clusters.len()
                ));
            }
            let records: u64 = lines.iter().map(|l| l.records).sum();
            if records != target.total_records() {
                return Err(format!(
                    "round {}: read {records} records, expected {}",
                    rounds.len(),
                    target.total_records()
                ));
            }
            let bytes = lines.iter().map(|l| l.bytes).sum();
            let end = lines.iter().map(|l| l.end_ms).max().unwrap_or(0);
            let start = lines.iter().map(|l| l.start_ms).min().unwrap_or(0);
            let fetch_start = lines
                .iter()
                .map(|l| l.start_ms + l.join_ms)
                .min()
                .unwrap_or(0);
            let window = |from: i64| Figures {
                records,
                bytes,
                elapsed: Duration::from_millis((end - from).max(1) as u64),
            };
            rounds.push(ConsumerPerfRound {
                warmup: rounds.len() < warmup_rounds,
                with_group_join: window(start),
                fetch: window(fetch_start),
            });
            lines.clear();
        } else if let Some(l) = parse_tool_line(line) {
            lines.push(l);
        }
    }
    if rounds.is_empty() {
        return Err("no result line in the tool's output".into());
    }
    Ok(rounds)
}

/// `yyyy-MM-dd HH:mm:ss.SSS` (the JVM's local time) as milliseconds on a continuous
/// scale; only differences are used.
fn parse_datetime_ms(s: &str) -> Option<i64> {
    let (date, time) = s.split_once(' ')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, millis) = time.split_once('.')?;
    let mut t = hms.split(':').map(|x| x.parse::<i64>());
    let (h, min, sec) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    let millis: i64 = millis.parse().ok()?;
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + min) * 60_000 + sec * 1000 + millis)
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::PeerCluster;

    fn target(clusters: usize, per_cluster: u64) -> StreamTarget {
        StreamTarget {
            clusters: (0..clusters)
                .map(|i| PeerCluster::new(format!("c{i}"), "127.0.0.1:1"))
                .collect(),
            topic: "t".into(),
            partitions: 8,
            records_per_cluster: per_cluster,
        }
    }

    #[test]
    fn datetimes_differ_by_their_milliseconds_across_a_month_end() {
        let a = parse_datetime_ms("2026-01-31 23:59:59.900").unwrap();
        let b = parse_datetime_ms("2026-02-01 00:00:00.150").unwrap();
        assert_eq!(b - a, 250);
        assert_eq!(parse_datetime_ms("1970-01-01 00:00:01.000"), Some(1000));
    }

    #[test]
    fn concurrent_tool_lines_combine_into_one_window_per_round() {
        let out = "\
2026-11-29 10:00:00.000, 2026-11-29 10:00:02.000, 10.2997, 5.1, 100, 50.0, 100, 1900, 5.4, 52.6
2026-11-29 10:00:00.500, 2026-11-29 10:00:03.000, 10.2997, 4.1, 100, 40.0, 200, 2300, 4.4, 43.4
MCK-ROUND-END 0
2026-11-29 10:00:05.000, 2026-11-29 10:00:06.000, 10.2997, 5.1, 100, 50.0, 0, 1000, 5.4, 52.6
2026-11-29 10:00:05.000, 2026-11-29 10:00:06.000, 10.2997, 4.1, 100, 40.0, 0, 1000, 4.4, 43.4
MCK-ROUND-END 1
";
        let rounds = parse_consumer_perf(out, &target(2, 100), 1).unwrap();
        assert_eq!(rounds.len(), 2);
        assert!(rounds[0].warmup && !rounds[1].warmup);
        assert_eq!(
            rounds[0].with_group_join.elapsed,
            Duration::from_millis(3000)
        );
        // The first instance joined at 0.100 s, the second at 0.700 s.
        assert_eq!(rounds[0].fetch.elapsed, Duration::from_millis(2900));
        assert_eq!(rounds[1].fetch.records, 200);
        // The tool prints MiB with four decimals: bytes are exact to about 50 per line.
        assert!(rounds[1].fetch.bytes.abs_diff(2 * 10_800_000) < 200);
    }

    #[test]
    fn a_tool_timeout_is_an_error_naming_the_topic() {
        let out = "WARNING: Exiting before consuming the expected number of messages: timeout (10 ms) exceeded.\n";
        let e = parse_consumer_perf(out, &target(1, 5), 0).unwrap_err();
        assert!(e.contains("topic `t`"), "{e}");
    }

    #[test]
    fn a_round_short_of_records_is_an_error() {
        let out = "2026-11-29 10:00:00.000, 2026-11-29 10:00:01.000, 1.0, 1.0, 99, 99.0, 0, 1000, 1.0, 99.0\nMCK-ROUND-END 0\n";
        let e = parse_consumer_perf(out, &target(1, 100), 0).unwrap_err();
        assert!(e.contains("read 99 records, expected 100"), "{e}");
    }
}
