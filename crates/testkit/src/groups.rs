//! Consumer group offsets, committed and read by a client that never joins the group
//! (so the group stays empty, as an operator's tool leaves it).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::{TestCluster, TestkitError};

/// How long a group call is retried while the group's coordinator is not ready (as
/// on a cluster that just started).
const COORDINATOR_WAIT: Duration = Duration::from_secs(30);

fn group_client(cluster: &dyn TestCluster, group: &str) -> Result<BaseConsumer, TestkitError> {
    ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| TestkitError::Kafka {
            cluster: cluster.logical_id().to_string(),
            message: format!("cannot create a client of group {group}: {e}"),
        })
}

/// Runs `call` until it succeeds or [`COORDINATOR_WAIT`] passes.
fn retried<T>(
    cluster: &dyn TestCluster,
    what: &str,
    mut call: impl FnMut() -> rdkafka::error::KafkaResult<T>,
) -> Result<T, TestkitError> {
    let deadline = Instant::now() + COORDINATOR_WAIT;
    loop {
        match call() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(cluster = %cluster.logical_id(), %e, "{what}: retrying");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => {
                return Err(TestkitError::Kafka {
                    cluster: cluster.logical_id().to_string(),
                    message: format!("{what}: {e}"),
                });
            }
        }
    }
}

/// Commits `offsets` (`(partition, offset)`) of `topic` for `group`, retrying while
/// the group's coordinator is not ready.
pub fn commit_group_offsets(
    cluster: &dyn TestCluster,
    group: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> Result<(), TestkitError> {
    let consumer = group_client(cluster, group)?;
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
            .map_err(|e| TestkitError::Kafka {
                cluster: cluster.logical_id().to_string(),
                message: e.to_string(),
            })?;
    }
    retried(cluster, &format!("commit {group} on {topic}"), || {
        consumer.commit(&tpl, CommitMode::Sync)
    })
}

/// The offset `group` committed on `topic`/`partition`, `None` if it committed none.
pub fn committed_group_offset(
    cluster: &dyn TestCluster,
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, TestkitError> {
    let consumer = group_client(cluster, group)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let got = retried(cluster, &format!("offsets of {group} on {topic}"), || {
        consumer.committed_offsets(tpl.clone(), Duration::from_secs(10))
    })?;
    Ok(
        match got.find_partition(topic, partition).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        },
    )
}
