//! In-process librdkafka mock clusters behind [`TestCluster`].
//!
//! A librdkafka mock cluster (`rdkafka::mocking::MockCluster`) holds a raw pointer and
//! is neither `Send` nor `Sync`. [`MockKafkaCluster`] therefore gives it a dedicated
//! owner thread and sends it jobs over a channel: every method queues a closure, the
//! owner thread runs it against the mock and sends the answer back. Dropping the
//! handle closes the channel; the owner thread then destroys the mock cluster (which
//! stops its brokers and joins librdkafka's mock thread) and exits, and the drop waits
//! for it.

use std::fmt;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

use crate::util::produce_records;
use crate::{Produced, TestCluster, TestRecord, TestkitError};

type Mock = MockCluster<'static, DefaultProducerContext>;
type Job = Box<dyn FnOnce(&Mock) + Send>;

/// An in-process librdkafka mock cluster for fast fault injection.
///
/// The brokers listen on loopback ports inside the test process, so a cluster starts
/// in milliseconds and needs neither Java nor Docker. What the mock cannot do: grow a
/// topic's partitions, look offsets up by timestamp, run the Kafka admin API
/// (`CreateTopics` and friends; use [`TestCluster::create_topic`]), or move partition
/// leaders by itself when a broker goes down (use
/// [`MockKafkaCluster::set_partition_leader`]).
///
/// Broker indexes are 0-based, as everywhere in the test kit (librdkafka numbers mock
/// brokers from 1). Every call blocks; call it from a plain thread or `spawn_blocking`.
///
/// ```
/// use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
///
/// let cluster = MockKafkaCluster::start("east", 3).unwrap();
/// cluster.create_topic("orders", 2).unwrap();
/// let acks = cluster
///     .produce("orders", &[TestRecord::value("o-1").to_partition(1)])
///     .unwrap();
/// assert_eq!((acks[0].partition, acks[0].offset), (1, 0));
/// ```
pub struct MockKafkaCluster {
    logical_id: String,
    bootstrap: String,
    brokers: usize,
    jobs: Option<mpsc::Sender<Job>>,
    owner: Option<JoinHandle<()>>,
}

impl MockKafkaCluster {
    /// Starts a mock cluster with `brokers` brokers under this logical cluster id.
    ///
    /// Fails when `brokers` is 0 or librdkafka cannot create the cluster.
    pub fn start(logical_id: &str, brokers: usize) -> Result<Self, TestkitError> {
        let fail = |message: String| TestkitError::Kafka {
            cluster: logical_id.to_string(),
            message,
        };
        let count = match i32::try_from(brokers) {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(fail(format!(
                    "a mock cluster needs 1 to {} brokers, not {brokers}",
                    i32::MAX
                )));
            }
        };
        let (ready_tx, ready_rx) = mpsc::channel::<Result<String, String>>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let owner = thread::Builder::new()
            .name(format!("mock-kafka-{logical_id}"))
            .spawn(move || {
                let mock = match MockCluster::new(count) {
                    Ok(mock) => mock,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(mock.bootstrap_servers()));
                drop(ready_tx);
                // Ends when the handle drops its sender.
                while let Ok(job) = jobs_rx.recv() {
                    job(&mock);
                }
                // `mock` drops here: librdkafka destroys the brokers and its mock thread.
            })
            .map_err(|e| fail(format!("cannot start the mock cluster's owner thread: {e}")))?;
        let started = ready_rx.recv();
        let bootstrap = match started {
            Ok(Ok(bootstrap)) => bootstrap,
            Ok(Err(message)) => {
                let _ = owner.join();
                return Err(fail(format!(
                    "cannot create a librdkafka mock cluster: {message}"
                )));
            }
            Err(_) => {
                let _ = owner.join();
                return Err(fail(
                    "the mock cluster's owner thread stopped while starting".into(),
                ));
            }
        };
        tracing::debug!(cluster = logical_id, brokers, %bootstrap, "mock Kafka cluster started");
        Ok(Self {
            logical_id: logical_id.to_string(),
            bootstrap,
            brokers,
            jobs: Some(jobs_tx),
            owner: Some(owner),
        })
    }

    /// A client configuration with `bootstrap.servers` set to this cluster, for tests
    /// that build their own producers and consumers.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }

    /// Produces like [`TestCluster::produce`], with extra librdkafka producer
    /// properties on top of the test kit's defaults (idempotent producer, 60 s message
    /// timeout). For example `[("enable.idempotence", "false"), ("retries", "0")]`
    /// makes the first injected produce error fail the record.
    pub fn produce_with(
        &self,
        topic: &str,
        records: &[TestRecord],
        extra: &[(&str, &str)],
    ) -> Result<Vec<Produced>, TestkitError> {
        produce_records(&self.logical_id, &self.bootstrap, topic, records, extra)
    }

    /// Makes a broker close its connections and refuse new ones. Its partitions keep
    /// their leader, so they are unavailable until [`MockKafkaCluster::broker_up`].
    pub fn broker_down(&self, index: usize) -> Result<(), TestkitError> {
        let id = self.broker_id(index)?;
        tracing::debug!(cluster = %self.logical_id, broker = index, "mock broker down");
        self.run_op(format!("take broker {index} down"), move |m| {
            m.broker_down(id)
        })
    }

    /// Makes a broker accept connections again.
    pub fn broker_up(&self, index: usize) -> Result<(), TestkitError> {
        let id = self.broker_id(index)?;
        tracing::debug!(cluster = %self.logical_id, broker = index, "mock broker up");
        self.run_op(format!("bring broker {index} up"), move |m| m.broker_up(id))
    }

    /// Delays every response of one broker by `delay` (`Duration::ZERO` removes the
    /// delay).
    pub fn set_round_trip_delay(&self, index: usize, delay: Duration) -> Result<(), TestkitError> {
        let id = self.broker_id(index)?;
        self.run_op(
            format!("set the round-trip delay of broker {index}"),
            move |m| m.broker_round_trip_time(id, delay),
        )
    }

    /// Makes the next requests of kind `api`, on any broker, fail with these errors,
    /// one request per error, in order. Later requests succeed again.
    ///
    /// `RDKafkaRespErr::RD_KAFKA_RESP_ERR__TRANSPORT` makes the broker drop the
    /// connection instead of answering.
    pub fn request_errors(
        &self,
        api: RDKafkaApiKey,
        errors: &[RDKafkaRespErr],
    ) -> Result<(), TestkitError> {
        let errors = errors.to_vec();
        self.run(format!("inject {api:?} request errors"), move |m| {
            m.request_errors(api, &errors)
        })
    }

    /// Forgets errors queued by [`MockKafkaCluster::request_errors`] for `api` that no
    /// request has consumed yet.
    pub fn clear_request_errors(&self, api: RDKafkaApiKey) -> Result<(), TestkitError> {
        self.run(format!("clear {api:?} request errors"), move |m| {
            m.clear_request_errors(api)
        })
    }

    /// Makes a broker the leader of one partition (`None`: no leader). Creates the
    /// topic if it does not exist. The mock never moves leaders on its own.
    pub fn set_partition_leader(
        &self,
        topic: &str,
        partition: i32,
        leader: Option<usize>,
    ) -> Result<(), TestkitError> {
        let id = leader.map(|index| self.broker_id(index)).transpose()?;
        let topic = topic.to_string();
        self.run_op(format!("set the leader of {topic}-{partition}"), move |m| {
            m.partition_leader(&topic, partition, id)
        })
    }

    /// Makes metadata requests report this error for the topic
    /// (`RD_KAFKA_RESP_ERR_NO_ERROR` clears it).
    pub fn set_topic_error(&self, topic: &str, error: RDKafkaRespErr) -> Result<(), TestkitError> {
        let topic = topic.to_string();
        self.run_op(format!("set an error on topic {topic}"), move |m| {
            m.topic_error(&topic, error)
        })
    }

    /// Not supported: a mock topic keeps the partition count it was created with.
    pub fn add_partitions(&self, _topic: &str, _total: usize) -> Result<(), TestkitError> {
        Err(TestkitError::Unsupported("growing a topic's partitions"))
    }

    /// Not supported: mock topics cannot be deleted.
    pub fn delete_topic(&self, _topic: &str) -> Result<(), TestkitError> {
        Err(TestkitError::Unsupported("deleting a topic"))
    }

    /// Not supported: mock brokers do not look offsets up by timestamp.
    pub fn offset_for_timestamp(
        &self,
        _topic: &str,
        _partition: i32,
        _timestamp_ms: i64,
    ) -> Result<i64, TestkitError> {
        Err(TestkitError::Unsupported("looking offsets up by timestamp"))
    }

    /// librdkafka's 1-based broker id for a 0-based index.
    fn broker_id(&self, index: usize) -> Result<i32, TestkitError> {
        if index >= self.brokers {
            return Err(self.error(format!(
                "no broker {index}: the cluster has {} brokers (indexes start at 0)",
                self.brokers
            )));
        }
        i32::try_from(index + 1).map_err(|_| self.error(format!("no broker {index}")))
    }

    fn error(&self, message: String) -> TestkitError {
        TestkitError::Kafka {
            cluster: self.logical_id.clone(),
            message,
        }
    }

    /// Runs a mock operation that reports success or failure.
    fn run_op<F>(&self, what: String, op: F) -> Result<(), TestkitError>
    where
        F: FnOnce(&Mock) -> rdkafka::error::KafkaResult<()> + Send + 'static,
    {
        self.run(what.clone(), op)?
            .map_err(|e| self.error(format!("{what}: {e}")))
    }

    /// Runs `job` on the owner thread and returns its answer.
    fn run<F, R>(&self, what: String, job: F) -> Result<R, TestkitError>
    where
        F: FnOnce(&Mock) -> R + Send + 'static,
        R: Send + 'static,
    {
        let stopped = || {
            self.error(format!(
                "{what}: the mock cluster's owner thread has stopped"
            ))
        };
        let jobs = self.jobs.as_ref().ok_or_else(stopped)?;
        let (reply_tx, reply_rx) = mpsc::channel();
        jobs.send(Box::new(move |mock: &Mock| {
            let _ = reply_tx.send(job(mock));
        }))
        .map_err(|_| stopped())?;
        reply_rx.recv().map_err(|_| stopped())
    }
}

impl TestCluster for MockKafkaCluster {
    fn logical_id(&self) -> &str {
        &self.logical_id
    }

    fn bootstrap_servers(&self) -> String {
        self.bootstrap.clone()
    }

    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), TestkitError> {
        let replication = i32::try_from(self.brokers.min(3)).unwrap_or(1);
        let name = topic.to_string();
        self.run_op(format!("create topic {topic}"), move |m| {
            m.create_topic(&name, partitions, replication)
        })
    }

    fn produce(&self, topic: &str, records: &[TestRecord]) -> Result<Vec<Produced>, TestkitError> {
        self.produce_with(topic, records, &[])
    }

    fn kill_broker(&self, index: usize) -> Result<(), TestkitError> {
        self.broker_down(index)
    }

    fn restart_broker(&self, index: usize) -> Result<(), TestkitError> {
        self.broker_up(index)
    }

    fn broker_count(&self) -> usize {
        self.brokers
    }
}

impl fmt::Debug for MockKafkaCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockKafkaCluster")
            .field("logical_id", &self.logical_id)
            .field("bootstrap", &self.bootstrap)
            .field("brokers", &self.brokers)
            .finish()
    }
}

impl Drop for MockKafkaCluster {
    fn drop(&mut self) {
        // Closing the channel ends the owner thread's loop; it then destroys the mock.
        drop(self.jobs.take());
        if let Some(owner) = self.owner.take()
            && owner.join().is_err()
        {
            tracing::warn!(cluster = %self.logical_id, "the mock cluster's owner thread panicked");
        }
        tracing::debug!(cluster = %self.logical_id, "mock Kafka cluster destroyed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_brokers_is_refused() {
        let err = MockKafkaCluster::start("none", 0).unwrap_err();
        assert!(matches!(err, TestkitError::Kafka { .. }), "{err}");
    }

    #[test]
    fn broker_indexes_start_at_zero_and_stop_before_the_count() {
        let cluster = MockKafkaCluster::start("idx", 2).unwrap();
        assert_eq!(cluster.broker_id(0).unwrap(), 1);
        assert_eq!(cluster.broker_id(1).unwrap(), 2);
        let err = cluster.broker_down(2).unwrap_err();
        assert!(err.to_string().contains("no broker 2"), "{err}");
    }

    #[test]
    fn the_handle_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<MockKafkaCluster>();
    }
}
