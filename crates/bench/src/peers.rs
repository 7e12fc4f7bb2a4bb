//! The Java peers of the end-to-end benchmark (`compare`), run as child processes against
//! the same brokers and data as this project:
//!
//! - [`consumer_perf`]: Apache Kafka's own consumer performance tool
//!   (`org.apache.kafka.tools.ConsumerPerformance`, from `kafka-tools`, the test kit's
//!   Kafka version), one instance per cluster, **concurrently**, on parallel threads of one
//!   JVM (like the plain rdkafka peer: one consumer per cluster, one clock).
//! - [`flink_throughput`] and [`flink_handover`]: Apache Flink's `DynamicKafkaSource`
//!   (flink-connector-kafka) in a local Flink job (MiniCluster), from the Maven module
//!   `crates/bench/flink-dynamic`, which is built on first use and cached beside the test
//!   kit's Kafka jars (`~/.cache/multicluster-kafka/flink-dynamic-<hash>/`).
//!
//! **Timing.** JVM start-up is never inside a timed window. Every peer runs warm-up rounds
//! in the same JVM before the measured rounds, so the measured rounds run JIT-compiled
//! code; the warm-up rounds are returned too, marked, for anyone who wants the cold
//! figure. Each peer's windows are described on its result type.
//!
//! Every function blocks; failures of Java, Maven or the tools come back as a
//! [`PeerError`] whose message is one line naming the peer and the reason, with the path
//! of the full log.
//!
//! ```no_run
//! use mck_bench::peers::{self, PeerCluster, StreamTarget};
//! let target = StreamTarget {
//!     clusters: vec![
//!         PeerCluster::new("a", "127.0.0.1:9092"),
//!         PeerCluster::new("b", "127.0.0.1:9192"),
//!     ],
//!     topic: "bench".into(),
//!     partitions: 8,
//!     records_per_cluster: 200_000,
//! };
//! let rounds = peers::consumer_perf(&target, &peers::ConsumerPerfOptions::default())?;
//! let fetch = peers::median(rounds.iter().filter(|r| !r.warmup).map(|r| r.fetch));
//! println!("{:.0} records/s", fetch.unwrap().records_per_sec());
//! # Ok::<(), peers::PeerError>(())
//! ```

mod consumer_perf;
mod flink;
mod java;

use std::path::PathBuf;
use std::time::Duration;

use mck_testkit::{KafkaCluster, TestCluster};

pub use consumer_perf::{ConsumerPerfOptions, ConsumerPerfRound, consumer_perf};
pub use flink::{FlinkHandoverOptions, FlinkOptions, FlinkRound, flink_handover, flink_throughput};

/// The Kafka tool class measured by [`consumer_perf`].
pub const CONSUMER_PERF_CLASS: &str = "org.apache.kafka.tools.ConsumerPerformance";
/// The Flink version pinned in `crates/bench/flink-dynamic/pom.xml`.
pub const FLINK_VERSION: &str = "2.2.0";
/// The flink-connector-kafka version pinned there (it carries `DynamicKafkaSource`).
pub const FLINK_KAFKA_CONNECTOR_VERSION: &str = "5.0.0-2.2";

/// A failure to run or to read a peer. `Display` is one line.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A file or folder could not be used.
    #[error("{peer}: {path}: {source}")]
    Io {
        /// Which peer.
        peer: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program could not be started at all.
    #[error("{peer}: cannot start `{program}`: {source}")]
    Spawn {
        /// Which peer.
        peer: &'static str,
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Maven could not build `crates/bench/flink-dynamic` (offline, then online).
    #[error(
        "{peer}: building crates/bench/flink-dynamic with Maven failed: {reason} (full output: {log})"
    )]
    Maven {
        /// Which peer.
        peer: &'static str,
        /// The most telling line of Maven's output.
        reason: String,
        /// Maven's full output.
        log: PathBuf,
    },
    /// The peer ran and failed, or did not finish in time.
    #[error("{peer}: {reason} (full output: {log})")]
    Failed {
        /// Which peer.
        peer: &'static str,
        /// What went wrong, from the peer's own error line where it printed one.
        reason: String,
        /// The peer's stdout and stderr.
        log: PathBuf,
    },
}

/// One cluster of the logical stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCluster {
    /// Logical cluster id (Flink's `kafkaClusterId`).
    pub id: String,
    /// `host:port,...` of its brokers.
    pub bootstrap_servers: String,
}

impl PeerCluster {
    /// A cluster with this id and bootstrap list.
    pub fn new(id: impl Into<String>, bootstrap_servers: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            bootstrap_servers: bootstrap_servers.into(),
        }
    }

    /// The id and bootstrap list of a test-kit cluster.
    pub fn of(cluster: &KafkaCluster) -> Self {
        Self::new(cluster.logical_id(), cluster.bootstrap_servers())
    }
}

/// A pre-filled logical stream: the same topic on every cluster, read from the earliest
/// offset to the end. The peers read every partition of the topic (they cannot be told a
/// subset), so the topic must have exactly `partitions` partitions and
/// `records_per_cluster` records on each cluster.
#[derive(Clone, Debug)]
pub struct StreamTarget {
    /// The clusters of the stream.
    pub clusters: Vec<PeerCluster>,
    /// The topic on each cluster.
    pub topic: String,
    /// Partitions of the topic on each cluster (checked by nobody; stated in reports).
    pub partitions: i32,
    /// Records on each cluster.
    pub records_per_cluster: u64,
}

impl StreamTarget {
    /// Records over all clusters.
    pub fn total_records(&self) -> u64 {
        self.records_per_cluster * self.clusters.len() as u64
    }
}

/// Records and key + value bytes read in a window of time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    /// Records read.
    pub records: u64,
    /// Key + value bytes read.
    pub bytes: u64,
    /// The window.
    pub elapsed: Duration,
}

impl Figures {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Megabytes (10^6 bytes, key + value) per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The figures with the median records/s (the upper median for an even count).
pub fn median(figures: impl IntoIterator<Item = Figures>) -> Option<Figures> {
    let mut v: Vec<Figures> = figures.into_iter().collect();
    v.sort_by(|a, b| a.records_per_sec().total_cmp(&b.records_per_sec()));
    v.get(v.len() / 2).copied()
}

/// Creates `topic` with `partitions` partitions on `cluster` and produces `records`
/// records round-robin over the partitions: 8-byte keys (`{:08}` of the index) and
/// `value_size`-byte values, the same layout as the `throughput` command's fill.
///
/// One idempotent producer with large batches does the whole fill (the test kit's
/// `produce` makes a producer per call and keeps a delivery report per record, which
/// made a fill of 10 000 000 records take minutes). Any failed delivery fails the fill.
pub fn prefill(
    cluster: &KafkaCluster,
    topic: &str,
    partitions: i32,
    records: usize,
    value_size: usize,
) -> Result<(), mck_testkit::TestkitError> {
    use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext};
    use std::sync::Mutex;

    /// Counts failed deliveries and keeps the first failure's reason.
    #[derive(Default)]
    struct Failures(Mutex<(u64, Option<String>)>);
    impl rdkafka::ClientContext for Failures {}
    impl ProducerContext for Failures {
        type DeliveryOpaque = ();
        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            if let Err((e, _)) = result {
                let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
                f.0 += 1;
                f.1.get_or_insert_with(|| e.to_string());
            }
        }
    }

    let fail = |message: String| mck_testkit::TestkitError::Kafka {
        cluster: cluster.logical_id().to_string(),
        message: format!("pre-filling {topic}: {message}"),
    };
    cluster.create_topic(topic, partitions)?;
    let producer: rdkafka::producer::BaseProducer<Failures> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "1000000")
        .set("message.timeout.ms", "120000")
        .create_with_context(Failures::default())
        .map_err(|e| fail(format!("cannot create the producer: {e}")))?;
    let value = vec![b'x'; value_size];
    for i in 0..records {
        let key = format!("{i:08}");
        let mut record = BaseRecord::to(topic)
            .key(key.as_bytes())
            .payload(value.as_slice())
            .partition((i % partitions as usize) as i32);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, back))
                    if e.rdkafka_error_code()
                        == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                {
                    // Serve delivery reports until the queue has room.
                    producer.poll(Duration::from_millis(10));
                    record = back;
                }
                Err((e, _)) => return Err(fail(format!("send: {e}"))),
            }
        }
    }
    producer
        .flush(Duration::from_secs(300))
        .map_err(|e| fail(format!("flush: {e}")))?;
    let failures = producer
        .context()
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    match &*failures {
        (0, _) => Ok(()),
        (n, first) => Err(fail(format!(
            "{n} record(s) not delivered, the first: {}",
            first.as_deref().unwrap_or("?")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_picks_the_middle_rate() {
        let f = |ms| Figures {
            records: 1000,
            bytes: 0,
            elapsed: Duration::from_millis(ms),
        };
        let m = median([f(100), f(300), f(200)]).unwrap();
        assert_eq!(m.elapsed, Duration::from_millis(200));
        assert_eq!(median(std::iter::empty()), None);
    }
}
