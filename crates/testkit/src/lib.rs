//! Test kit: real Apache Kafka clusters and librdkafka mock clusters behind one API.
//!
//! - [`KafkaCluster`] starts Apache Kafka 4.x in KRaft combined mode as child JVM
//!   processes, from jars that Maven fetches from Maven Central into a cache that
//!   survives `cargo clean` (see [`kafka_libs`]). Brokers listen on free loopback ports;
//!   every cluster has its own logical id and its own Kafka `cluster.id`.
//! - [`MockKafkaCluster`] wraps an in-process librdkafka mock cluster for fast fault
//!   injection (broker down/up, request errors, round-trip delay). It cannot grow a
//!   topic's partitions or look offsets up by timestamp.
//!
//! - [`ClusterOptions::secured`] adds TLS and SASL listeners ([`Listener`]) with
//!   certificates and credentials generated at start ([`Security`]).
//! - [`MirrorMaker`] runs Apache Kafka's MirrorMaker 2 between two clusters, and
//!   [`mirror`] decodes what it writes to its internal topics; [`stage_offset_gaps`]
//!   and [`produce_transaction`] give a source partition the offset gaps that make a
//!   copy's offsets differ from the source's.
//!
//! Both implement [`TestCluster`], so a test written against the trait runs on either.
//! Every call here blocks; call it from a plain thread or `spawn_blocking`.

mod assertions;
mod error;
mod failover;
mod gaps;
mod groups;
mod jars;
pub mod layers;
mod metadata_file;
pub mod mirror;
mod mock;
mod process;
pub mod proxy;
mod real;
pub mod record_batch;
mod secured;
pub mod tools;
mod util;
mod verify;

pub use assertions::{
    Seen, assert_each_once, assert_exactly_once, assert_flowed_during, assert_in_partition_order,
    assert_seen_in_order,
};
pub use error::TestkitError;
pub use failover::{busiest_leader, java_produce_until_stopped, three_broker_options};
pub use gaps::{
    StagedGaps, TransactionEnd, delete_records_before, produce_transaction, stage_offset_gaps,
};
pub use groups::{commit_group_offsets, committed_group_offset};
pub use jars::{KAFKA_VERSION, kafka_libs, mirror_libs};
pub use metadata_file::{
    flink_metadata, flink_metadata_at, listener_properties_in, rich_cluster_entry, rich_metadata,
    write_atomically,
};
pub use mirror::{MirrorMaker, MirrorOptions};
pub use mock::MockKafkaCluster;
pub use real::{
    ClusterOptions, JavaProducer, KafkaCluster, shared_cluster, shared_cluster_with,
    shared_plain_and_secured, shared_secured_cluster,
};
pub use secured::{Listener, Security};
pub use util::free_ports;
pub use verify::{ReadRecord, read_topic, read_topic_committed};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// One record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestRecord {
    /// Target partition; `None` lets the partitioner choose (by key).
    pub partition: Option<i32>,
    /// Record key.
    pub key: Option<Vec<u8>>,
    /// Record value.
    pub value: Vec<u8>,
    /// Create time in ms since the epoch; `None` means now.
    pub timestamp: Option<i64>,
    /// Record headers.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl TestRecord {
    /// A record with this value and nothing else.
    pub fn value(value: impl Into<Vec<u8>>) -> Self {
        Self {
            value: value.into(),
            ..Self::default()
        }
    }

    /// Sets the partition.
    pub fn to_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the create timestamp.
    pub fn at(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Where a produced record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Produced {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

/// What a test needs from a Kafka cluster, real or mock.
pub trait TestCluster: Send + Sync {
    /// The logical cluster id (the name the metadata uses).
    fn logical_id(&self) -> &str;
    /// `host:port,host:port` of the running brokers.
    fn bootstrap_servers(&self) -> String;
    /// Creates a topic with this many partitions (replication factor = min(3, brokers)).
    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), TestkitError>;
    /// Produces the records in order and waits until all are acknowledged.
    fn produce(&self, topic: &str, records: &[TestRecord]) -> Result<Vec<Produced>, TestkitError>;
    /// Stops one broker abruptly (kill -9 for a real cluster; "down" for a mock one).
    fn kill_broker(&self, index: usize) -> Result<(), TestkitError>;
    /// Brings a killed broker back with its data and ports, and waits until it answers.
    fn restart_broker(&self, index: usize) -> Result<(), TestkitError>;
    /// Number of brokers.
    fn broker_count(&self) -> usize;
}

/// The tokio runtime the tests drive sources with: multi-threaded, two workers (the
/// machine's cores), every driver enabled.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the test kit cannot build a tokio runtime")
}

/// Produces `per_partition` records to each of partitions `0..partitions` of `topic`,
/// with values `<prefix>-<partition>-<i>` and keys `k<i>`, and returns
/// `(partition, value)` in the order produced. The topic must exist.
pub fn fill_partitions(
    cluster: &dyn TestCluster,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    prefix: &str,
) -> Result<Vec<(i32, String)>, TestkitError> {
    let mut records = Vec::new();
    let mut values = Vec::new();
    for p in 0..partitions {
        for i in 0..per_partition {
            let v = format!("{prefix}-{p}-{i}");
            records.push(
                TestRecord::value(v.clone())
                    .to_partition(p)
                    .with_key(format!("k{i}")),
            );
            values.push((p, v));
        }
    }
    cluster.produce(topic, &records)?;
    Ok(values)
}

/// Like [`fill_partitions`], returning only the values, in the order produced. Panics
/// if producing fails, as a test would.
pub fn fill_values(
    cluster: &dyn TestCluster,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    prefix: &str,
) -> Vec<String> {
    fill_partitions(cluster, topic, partitions, per_partition, prefix)
        .expect("produce")
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

/// Starts a thread that produces records with values `<prefix>-<n>` (`n` counting from
/// 0) to `topic`, 20 at a time every 20 ms, until `stop` is set; joining it gives every
/// value produced. With `keyed`, each record gets the key `k<i>`, `i` its place in its
/// batch of 20. The thread panics if producing fails.
pub fn produce_until_stopped(
    cluster: &'static dyn TestCluster,
    topic: &'static str,
    prefix: &'static str,
    keyed: bool,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<TestRecord> = (0..20)
                .map(|i| {
                    let r = TestRecord::value(format!("{prefix}-{}", n + i));
                    if keyed {
                        r.with_key(format!("k{i}"))
                    } else {
                        r
                    }
                })
                .collect();
            cluster.produce(topic, &batch).expect("produce");
            all.extend(
                batch
                    .into_iter()
                    .map(|r| String::from_utf8(r.value).unwrap()),
            );
            n += 20;
            std::thread::sleep(Duration::from_millis(20));
        }
        all
    })
}

/// How long [`KafkaCluster`] waits for a broker to answer a metadata request.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);
