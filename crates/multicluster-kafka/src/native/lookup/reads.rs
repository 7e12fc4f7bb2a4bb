//! Short reads of a partition: a range of records, and the newest record's timestamp,
//! fetched from the partition's leader.

use std::collections::BTreeMap;
use std::sync::Arc;

use multicluster_kafka_client::Uuid;
use tokio::time::Instant;

use crate::error::SourceError;
use crate::lookups::EndEarly;

use super::metadata::{leader_of, topic_id};
use super::pool::stale;
use super::{BACKOFF_MAX, BACKOFF_MIN, Lookup};
use crate::error::KafkaErrorKind;
use crate::native::reported::issue_kind;
use multicluster_kafka_client::batch::Record;
use multicluster_kafka_client::error::NativeError;
use multicluster_kafka_client::fetch_response::FetchPartitionData;
use multicluster_kafka_client::partition::{PartitionIssue, PartitionReader};

impl Lookup {
    /// Reads `topic`/`partition` from `from` up to (not including) `to`, handing
    /// each record (read_committed: of committed transactions only) to `each`, in
    /// offset order, within the timeout; returns how many it handed. The answers are
    /// fetched on the runtime and decoded on the calling thread.
    pub fn read(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        (from, to): (i64, i64),
        each: &mut dyn FnMut(&Record<'_>),
    ) -> Result<u64, SourceError> {
        let what = format!("reading {topic}/{partition}");
        let deadline = Instant::now() + self.timeout;
        let mut reader = PartitionReader::new(from, self.settings.partition);
        let mut handed = 0u64;
        let mut backoff = BACKOFF_MIN;
        while reader.next_offset() < to {
            if Instant::now() >= deadline {
                return Err(SourceError::Kafka {
                    cluster: self.cluster.to_string(),
                    message: format!(
                        "{what}: at offset {} of {from}..{to} after {:?} (the client timeout)",
                        reader.next_offset(),
                        self.timeout
                    ),
                    kind: KafkaErrorKind::Timeout,
                    retriable: true,
                });
            }
            let answer = self.fetch(topic, partition, reader.next_offset(), deadline, &what)?;
            let absorbed = reader.absorb(&answer, |r| {
                if r.offset < to {
                    each(r);
                    handed += 1;
                }
            });
            match absorbed {
                Ok(_) => backoff = BACKOFF_MIN,
                Err(PartitionIssue::LeaderMoved { .. } | PartitionIssue::Unknown { .. }) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(issue) => {
                    return Err(SourceError::Kafka {
                        cluster: self.cluster.to_string(),
                        message: format!("{what}: at offset {}: {issue}", reader.next_offset()),
                        kind: issue_kind(&issue),
                        retriable: false,
                    });
                }
            }
        }
        Ok(handed)
    }

    /// The timestamp of the record at each partition's last offset (`None` for an
    /// empty partition, or one whose last offset holds no record handed out, such as
    /// a transaction marker).
    pub fn newest_timestamps(
        self: &Arc<Self>,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        let mut out: BTreeMap<(String, i32), Option<i64>> =
            partitions.iter().map(|k| (k.clone(), None)).collect();
        if partitions.is_empty() {
            return Ok(out);
        }
        let bounds = self.bounds(partitions)?;
        let deadline = Instant::now() + self.timeout;
        for (key, (low, high)) in bounds {
            if high <= low {
                continue;
            }
            let what = format!("the newest record of {}/{}", key.0, key.1);
            let mut reader = PartitionReader::new(high - 1, self.settings.partition);
            let mut newest = None;
            let mut backoff = BACKOFF_MIN;
            loop {
                let answer = self.fetch(&key.0, key.1, high - 1, deadline, &what)?;
                let absorbed = reader.absorb(&answer, |r| {
                    if r.offset == high - 1 {
                        newest = Some(r.timestamp);
                    }
                });
                match absorbed {
                    Ok(_) => break,
                    Err(PartitionIssue::LeaderMoved { .. }) if Instant::now() < deadline => {
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                    Err(issue) => {
                        return Err(SourceError::Kafka {
                            cluster: self.cluster.to_string(),
                            message: format!("{what}: {issue}"),
                            kind: issue_kind(&issue),
                            retriable: false,
                        });
                    }
                }
            }
            out.insert(key, newest);
        }
        Ok(out)
    }

    /// One fetch of `topic`/`partition` at `offset` from its leader (as the
    /// metadata says now): the partition's answer, error code and all.
    fn fetch(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Instant,
        what: &str,
    ) -> Result<FetchPartitionData, SourceError> {
        let me = self.clone();
        let topic = topic.to_string();
        let what = what.to_string();
        self.block(async move {
            let names = [topic.clone()];
            let md = me
                .metadata_until(Some(&names), EndEarly::OnRefusal, deadline)
                .await?;
            let leader = match leader_of(&md, &topic, partition) {
                Ok(leader) => leader,
                Err(code) => return Err(me.broker_code(&what, &topic, partition, code)),
            };
            let Some(addr) = me.address_of(leader) else {
                return Err(SourceError::Cluster {
                    cluster: me.cluster.to_string(),
                    message: format!("{what}: leader {leader} is not in the metadata"),
                });
            };
            let id = topic_id(&md, &topic);
            let fetched = me.fetch_on(&addr, (&topic, id, partition), offset);
            match tokio::time::timeout_at(deadline, fetched).await {
                Ok(answer) => answer.map_err(|e| me.error(&what, &e)),
                Err(_) => Err(me.error(&what, &me.late(&addr, "Fetch answer"))),
            }
        })
    }

    async fn fetch_on(
        &self,
        addr: &str,
        (topic, id, partition): (&str, Uuid, i32),
        offset: i64,
    ) -> Result<FetchPartitionData, NativeError> {
        let settings = &self.settings;
        let (max, committed) = (
            settings.partition_max_bytes,
            settings.partition.read_committed,
        );
        let (mut conn, reused) = self.take(addr, false).await?;
        let answer = match conn
            .fetch_once(topic, id, partition, offset, max, committed)
            .await
        {
            Err(e) if reused && stale(&e) => {
                conn = self.take(addr, true).await?.0;
                conn.fetch_once(topic, id, partition, offset, max, committed)
                    .await
            }
            other => other,
        }?;
        self.give(conn);
        Ok(answer)
    }
}
