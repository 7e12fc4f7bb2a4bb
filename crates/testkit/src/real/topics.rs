//! Topic administration and partition state of a running cluster.

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::{KafkaCluster, io};
#[cfg(doc)]
use crate::TestCluster;
use crate::TestkitError;
use crate::util::{block_on, tail_lines};

/// `(partition, leader node id, replicas, in-sync replicas)` of a partition.
type PartitionState = (i32, i32, Vec<i32>, Vec<i32>);

impl KafkaCluster {
    /// The broker index ([`TestCluster::kill_broker`]'s `index`) leading each
    /// partition of `topic`, in partition order; `None` for a partition without a
    /// leader right now.
    pub fn partition_leaders(&self, topic: &str) -> Result<Vec<Option<usize>>, TestkitError> {
        let md = self.topic_metadata(topic)?;
        Ok(md
            .into_iter()
            .map(|(_, leader, _, _)| self.broker_index(leader))
            .collect())
    }

    /// Waits until every partition of `topic` has a leader and every replica in sync:
    /// the moment another broker may fail without a partition going below
    /// `min.insync.replicas` for long.
    pub fn await_in_sync(&self, topic: &str, within: Duration) -> Result<(), TestkitError> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.topic_metadata(topic) {
                Ok(parts) => {
                    let lagging: Vec<String> = parts
                        .iter()
                        .filter(|(_, leader, replicas, isr)| {
                            *leader < 0 || isr.len() < replicas.len()
                        })
                        .map(|(p, leader, replicas, isr)| {
                            format!("{p}: leader {leader}, replicas {replicas:?}, isr {isr:?}")
                        })
                        .collect();
                    if lagging.is_empty() {
                        return Ok(());
                    }
                    lagging.join("; ")
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(self.kafka_err(format!(
                    "{topic} not fully in sync within {within:?}: {last}"
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every partition of `topic`, in partition order, from a fresh metadata request.
    fn topic_metadata(&self, topic: &str) -> Result<Vec<PartitionState>, TestkitError> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("log_level", "0")
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        let md = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| self.kafka_err(format!("metadata of {topic}: {e}")))?;
        let t = md
            .topics()
            .first()
            .filter(|t| t.error().is_none())
            .ok_or_else(|| self.kafka_err(format!("no metadata for {topic}")))?;
        let mut parts: Vec<_> = t
            .partitions()
            .iter()
            .map(|p| (p.id(), p.leader(), p.replicas().to_vec(), p.isr().to_vec()))
            .collect();
        parts.sort_by_key(|p| p.0);
        Ok(parts)
    }

    /// The index of the broker with this node id.
    fn broker_index(&self, node_id: i32) -> Option<usize> {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes.iter().position(|n| n.node_id as i32 == node_id)
    }

    /// The compression codecs of the record batches of every partition of `topic` on
    /// the first broker, as Kafka's `kafka-dump-log` names them (`none`, `gzip`,
    /// `snappy`, `lz4`, `zstd`): proof of what a producer really wrote.
    pub fn batch_codecs(
        &self,
        topic: &str,
    ) -> Result<std::collections::BTreeSet<String>, TestkitError> {
        let (data_dir, log_dir) = {
            let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            (nodes[0].data_dir.clone(), nodes[0].log_dir.clone())
        };
        let prefix = format!("{topic}-");
        let mut segments = Vec::new();
        for e in fs::read_dir(&data_dir).map_err(io(&data_dir))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_partition = name
                .strip_prefix(&prefix)
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            if !is_partition {
                continue;
            }
            for f in fs::read_dir(e.path()).map_err(io(&e.path()))?.flatten() {
                if f.path().extension().is_some_and(|x| x == "log") {
                    segments.push(f.path().display().to_string());
                }
            }
        }
        if segments.is_empty() {
            return Err(self.kafka_err(format!("no log segment of {topic} on broker 0")));
        }
        let out = self
            .java()
            .arg(format!("-Dkafka.logs.dir={}", log_dir.display()))
            .arg("kafka.tools.DumpLogSegments")
            .arg("--files")
            .arg(segments.join(","))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestkitError::Java(e.to_string()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(self.kafka_err(format!(
                "kafka-dump-log on {topic} failed ({}): {}",
                out.status,
                tail_lines(
                    &format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
                    20
                )
            )));
        }
        Ok(text
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0] == "compresscodec:")
            .map(|w| w[1].to_lowercase())
            .collect())
    }

    pub(super) fn admin(&self) -> Result<AdminClient<DefaultClientContext>, TestkitError> {
        self.client_config()
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create admin client: {e}")))
    }

    /// Grows a topic to `total` partitions.
    pub fn add_partitions(&self, topic: &str, total: usize) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = block_on(admin.create_partitions(&[NewPartitions::new(topic, total)], &opts))
            .map_err(|e| self.kafka_err(format!("create partitions for {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("create partitions for {t}: {e}")))?;
        }
        self.await_partitions(topic, total)
    }

    /// Deletes a topic.
    pub fn delete_topic(&self, topic: &str) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = block_on(admin.delete_topics(&[topic], &opts))
            .map_err(|e| self.kafka_err(format!("delete topic {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("delete topic {t}: {e}")))?;
        }
        Ok(())
    }

    /// Waits until metadata shows `topic` with `count` partitions, each with a leader.
    pub(super) fn await_partitions(&self, topic: &str, count: usize) -> Result<(), TestkitError> {
        let consumer: BaseConsumer = self
            .client_config()
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(md) = consumer.fetch_metadata(Some(topic), Duration::from_secs(2))
                && let Some(t) = md.topics().first()
                && t.error().is_none()
                && t.partitions().len() == count
                && t.partitions()
                    .iter()
                    .all(|p| p.leader() >= 0 && p.error().is_none())
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.kafka_err(format!(
                    "topic {topic} did not show {count} partitions with leaders within 30s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
