//! Reading a topic back, independently of the library under test.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::{TestCluster, TestkitError};

/// A record read back by [`read_topic`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRecord {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key.
    pub key: Option<Vec<u8>>,
    /// Value.
    pub value: Vec<u8>,
    /// Timestamp in ms.
    pub timestamp: Option<i64>,
}

/// Reads every record of `topic` from the start of each partition up to its current
/// high watermark with a plain rdkafka consumer (manual assignment, no group), records
/// of aborted transactions included (`read_uncommitted`).
pub fn read_topic(cluster: &dyn TestCluster, topic: &str) -> Result<Vec<ReadRecord>, TestkitError> {
    read_topic_at(
        cluster.logical_id(),
        &cluster.bootstrap_servers(),
        topic,
        false,
    )
}

/// Like [`read_topic`], `read_committed`: what a consumer of committed data sees, so
/// no record of an aborted transaction (their offsets, and those of the transaction
/// markers, are gaps).
pub fn read_topic_committed(
    cluster: &dyn TestCluster,
    topic: &str,
) -> Result<Vec<ReadRecord>, TestkitError> {
    read_topic_at(
        cluster.logical_id(),
        &cluster.bootstrap_servers(),
        topic,
        true,
    )
}

/// [`read_topic`] of the cluster at `bootstrap` (`name` names it in errors). A
/// partition is done when a record at its end is read or, as a partition may end with
/// a transaction marker that no consumer sees, when the consumer's position reaches it.
pub(crate) fn read_topic_at(
    name: &str,
    bootstrap: &str,
    topic: &str,
    committed: bool,
) -> Result<Vec<ReadRecord>, TestkitError> {
    let fail = |message: String| TestkitError::Kafka {
        cluster: name.to_string(),
        message,
    };
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "mck-testkit-verify")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set(
            "isolation.level",
            if committed {
                "read_committed"
            } else {
                "read_uncommitted"
            },
        )
        .create()
        .map_err(|e| fail(format!("cannot create consumer: {e}")))?;
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| fail(format!("metadata for {topic}: {e}")))?;
    let partitions: Vec<i32> = md
        .topics()
        .first()
        .map(|t| t.partitions().iter().map(|p| p.id()).collect())
        .unwrap_or_default();
    let mut ends = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in &partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, *p, Duration::from_secs(10))
            .map_err(|e| fail(format!("watermarks for {topic}/{p}: {e}")))?;
        if high > low {
            ends.insert(*p, high);
            tpl.add_partition_offset(topic, *p, Offset::Offset(low))
                .map_err(|e| fail(e.to_string()))?;
        }
    }
    consumer
        .assign(&tpl)
        .map_err(|e| fail(format!("assign: {e}")))?;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut done: HashMap<i32, bool> = ends.keys().map(|p| (*p, false)).collect();
    while done.values().any(|d| !d) {
        if Instant::now() > deadline {
            return Err(fail(format!(
                "reading {topic} back did not finish within 60s"
            )));
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let p = m.partition();
                out.push(ReadRecord {
                    partition: p,
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                    timestamp: m.timestamp().to_millis(),
                });
                if m.offset() + 1 >= ends[&p] {
                    done.insert(p, true);
                }
            }
            Some(Err(e)) => return Err(fail(format!("reading {topic}: {e}"))),
            None => {
                let positions = consumer
                    .position()
                    .map_err(|e| fail(format!("positions in {topic}: {e}")))?;
                for e in positions.elements() {
                    if let Offset::Offset(o) = e.offset()
                        && ends.get(&e.partition()).is_some_and(|end| o >= *end)
                    {
                        done.insert(e.partition(), true);
                    }
                }
            }
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    Ok(out)
}
