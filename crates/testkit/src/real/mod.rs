//! Real Apache Kafka clusters (KRaft combined mode) as child JVM processes.
//!
//! The cluster and its broker handles live here; starting one ([`start`]), the
//! brokers' JVMs ([`jvm`]) and the class-data archive they map ([`archive`]), topic
//! administration ([`topics`]), the secured and proxied listeners ([`listeners`]),
//! Kafka's Java producer ([`java_producer`]) and the clusters shared by a test binary
//! ([`shared`]) each have a module of their own.

mod archive;
mod java_producer;
mod jvm;
mod listeners;
mod options;
mod shared;
mod start;
mod topics;

pub use java_producer::JavaProducer;
pub(crate) use jvm::{java_binary, java_command};
pub use options::ClusterOptions;
pub(crate) use options::small_jvm_options;
pub use shared::{
    shared_cluster, shared_cluster_with, shared_plain_and_secured, shared_secured_cluster,
};
pub(crate) use start::prepare_run_dirs;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};

#[cfg(doc)]
use crate::Listener;
use crate::process::kill_and_wait;
use crate::secured::Security;
use crate::util::{block_on, produce_records};
use crate::{Produced, TestCluster, TestRecord, TestkitError};

struct Node {
    node_id: usize,
    port: u16,
    /// Ports of the secured listeners, in [`Listener::ALL`] order (empty if none).
    secured_ports: Vec<u16>,
    /// Port of the `PROXIED` listener, if any.
    proxied_port: Option<u16>,
    data_dir: PathBuf,
    config: PathBuf,
    log_dir: PathBuf,
    child: Option<Child>,
}

/// A running Apache Kafka cluster of child JVM processes on loopback ports.
///
/// Dropping it kills every broker and deletes its data; broker logs stay under
/// `target/kafka-tests/logs/`. Brokers also die with the test process, whatever
/// ends it.
pub struct KafkaCluster {
    options: ClusterOptions,
    kafka_cluster_id: String,
    libs: PathBuf,
    data_root: PathBuf,
    log_root: PathBuf,
    nodes: Mutex<Vec<Node>>,
    started_in: Duration,
    security: Option<Security>,
}

impl std::fmt::Debug for KafkaCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaCluster")
            .field("logical_id", &self.options.logical_id)
            .field("kafka_cluster_id", &self.kafka_cluster_id)
            .field("bootstrap", &self.bootstrap_servers())
            .finish()
    }
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestkitError + '_ {
    move |source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl KafkaCluster {
    pub(super) fn kafka_err(&self, message: String) -> TestkitError {
        TestkitError::Kafka {
            cluster: self.options.logical_id.clone(),
            message,
        }
    }

    /// The Kafka `cluster.id` the log dirs were formatted with.
    pub fn kafka_cluster_id(&self) -> &str {
        &self.kafka_cluster_id
    }

    /// How long [`KafkaCluster::start`] took (jar fetch excluded when cached).
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Where the brokers' logs are.
    pub fn log_dir(&self) -> &Path {
        &self.log_root
    }

    /// A client config pointing at this cluster.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap_servers());
        c
    }

    /// Asks every broker to stop (SIGTERM) and waits up to `within` for each to exit,
    /// then kills what is left.
    pub(crate) fn terminate(&self, within: Duration) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        for node in nodes.iter_mut() {
            if let Some(mut child) = node.child.take() {
                crate::process::terminate_and_wait(&mut child, within);
            }
        }
    }

    /// Kills every broker and removes the data (logs are kept).
    pub fn shutdown(&self) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        for node in nodes.iter_mut() {
            if let Some(mut child) = node.child.take() {
                kill_and_wait(&mut child);
            }
        }
        let _ = fs::remove_dir_all(&self.data_root);
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl TestCluster for KafkaCluster {
    fn logical_id(&self) -> &str {
        &self.options.logical_id
    }

    fn bootstrap_servers(&self) -> String {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let rf = self.broker_count().min(3) as i32;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(rf));
        let results = block_on(admin.create_topics(&[new], &opts))
            .map_err(|e| self.kafka_err(format!("create topic {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("create topic {t}: {e}")))?;
        }
        self.await_partitions(topic, partitions as usize)
    }

    fn produce(&self, topic: &str, records: &[TestRecord]) -> Result<Vec<Produced>, TestkitError> {
        produce_records(
            &self.options.logical_id,
            &self.bootstrap_servers(),
            topic,
            records,
            &[],
        )
    }

    fn kill_broker(&self, index: usize) -> Result<(), TestkitError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        let node = nodes
            .get_mut(index)
            .ok_or_else(|| self.kafka_err(format!("no broker {index}")))?;
        if let Some(mut child) = node.child.take() {
            kill_and_wait(&mut child);
        }
        Ok(())
    }

    fn restart_broker(&self, index: usize) -> Result<(), TestkitError> {
        {
            let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            let node = nodes
                .get_mut(index)
                .ok_or_else(|| self.kafka_err(format!("no broker {index}")))?;
            if let Some(mut child) = node.child.take() {
                kill_and_wait(&mut child);
            }
            // The data dir survives a kill; the broker recovers its log on start.
            debug_assert!(node.data_dir.exists());
            let child = self.spawn_broker(node)?;
            node.child = Some(child);
        }
        self.await_ready(index)
    }

    fn broker_count(&self) -> usize {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
