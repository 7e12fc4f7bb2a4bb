//! The requests the native fetch path makes, as calls on a [`Connection`]: the
//! cluster's metadata, a partition's offset for a time, and one fetch of one
//! partition.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::{Message, StrBytes};
use uuid::Uuid;

use super::conn::{Connection, NativeRequest};
use super::error::NativeError;
use super::fetch_response::{FetchPartitionData, decode_fetch_response};

/// How long a fetch waits for records before the broker answers without any.
const FETCH_MAX_WAIT_MS: i32 = 500;

/// What a broker knows of its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The cluster's brokers.
    pub brokers: Vec<BrokerInfo>,
    /// The topics asked for (or all), each with its own error code.
    pub topics: Vec<TopicInfo>,
}

/// One broker of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Its node id.
    pub node_id: i32,
    /// The host it is reached at.
    pub host: String,
    /// The port.
    pub port: i32,
}

/// One topic of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    /// Its name (empty if the broker gave none).
    pub name: String,
    /// Its id (nil before Metadata v10).
    pub topic_id: Uuid,
    /// Kafka's error code for the topic (0: none; 3: unknown topic).
    pub error_code: i16,
    /// Its partitions.
    pub partitions: Vec<PartitionInfo>,
}

/// One partition of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition's index.
    pub partition: i32,
    /// The leader's node id (−1: none).
    pub leader_id: i32,
    /// The leader's epoch (−1 before Metadata v7).
    pub leader_epoch: i32,
    /// Kafka's error code for the partition (0: none).
    pub error_code: i16,
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

impl Connection {
    /// The cluster's brokers and the `topics` asked for (all topics with `None`).
    /// Never creates a topic. A topic's error (unknown, unauthorized) is in its
    /// [`TopicInfo::error_code`].
    pub async fn metadata(&mut self, topics: Option<&[&str]>) -> Result<Metadata, NativeError> {
        let mut request = MetadataRequest::default();
        request.topics = topics.map(|names| {
            names
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                .collect()
        });
        request.allow_auto_topic_creation = false;
        let response = self.send(request).await?;
        if response.error_code != 0 {
            return Err(self.broker_error::<MetadataRequest>(response.error_code, "cluster"));
        }
        let brokers = response
            .brokers
            .iter()
            .map(|b| BrokerInfo {
                node_id: b.node_id.0,
                host: b.host.to_string(),
                port: b.port,
            })
            .collect();
        let topics = response
            .topics
            .iter()
            .map(|t| TopicInfo {
                name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                topic_id: t.topic_id,
                error_code: t.error_code,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| PartitionInfo {
                        partition: p.partition_index,
                        leader_id: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        error_code: p.error_code,
                    })
                    .collect(),
            })
            .collect();
        Ok(Metadata { brokers, topics })
    }

    /// The offset of `topic`/`partition` for `timestamp` (ms since the epoch; −2: the
    /// earliest offset, −1: the latest, i.e. the high watermark), from its leader.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<i64, NativeError> {
        let mut part = ListOffsetsPartition::default();
        part.partition_index = partition;
        part.timestamp = timestamp;
        let mut wanted = ListOffsetsTopic::default();
        wanted.name = topic_name(topic);
        wanted.partitions = vec![part];
        let mut request = ListOffsetsRequest::default();
        // The crate's default is 0, a follower's id: a consumer is −1 (and only a
        // consumer's "latest" is the high watermark).
        request.replica_id = BrokerId(-1);
        request.topics = vec![wanted];
        request.timeout_ms = i32::try_from(self.timeout().as_millis()).unwrap_or(i32::MAX);
        let version = self.version::<ListOffsetsRequest>()?;
        let response = self.send_at(&request, version).await?;
        let what = format!("{topic}/{partition}");
        let found = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition);
        let Some(found) = found else {
            return Err(self.missing::<ListOffsetsRequest>(version, &what));
        };
        if found.error_code != 0 {
            return Err(self.broker_error::<ListOffsetsRequest>(found.error_code, &what));
        }
        Ok(found.offset)
    }

    /// One fetch of `topic`/`partition` from `offset`, up to `max_bytes`, from its
    /// leader, `read_committed` or not: the partition's whole answer (error code,
    /// watermarks, aborted transactions, leader hints, and the raw record batches as a
    /// slice of the response). Waits up to 500 ms for a first byte. Fetches by
    /// `topic_id` from Fetch v13 up, by name below (and at v12 if `topic_id` is nil and
    /// the broker still speaks v12). No fetch session.
    pub async fn fetch_once(
        &mut self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        read_committed: bool,
    ) -> Result<FetchPartitionData, NativeError> {
        let mut version = self.version::<FetchRequest>()?;
        if version >= 13 && topic_id.is_nil() {
            version = 12;
            let (broker_min, broker_max) = self.broker_versions::<FetchRequest>().unwrap_or((0, 0));
            if broker_min > version {
                return Err(NativeError::Unsupported {
                    addr: self.addr().to_string(),
                    api: FetchRequest::NAME,
                    broker_min,
                    broker_max,
                    ours_min: FetchRequest::VERSIONS.min,
                    ours_max: 12,
                });
            }
        }
        let by_id = version >= 13;
        let mut part = FetchPartition::default();
        part.partition = partition;
        part.fetch_offset = offset;
        part.partition_max_bytes = max_bytes;
        let mut wanted = FetchTopic::default();
        if by_id {
            wanted.topic_id = topic_id;
        } else {
            wanted.topic = topic_name(topic);
        }
        wanted.partitions = vec![part];
        let mut request = FetchRequest::default();
        request.max_wait_ms = FETCH_MAX_WAIT_MS;
        request.min_bytes = 1;
        request.max_bytes = max_bytes;
        request.isolation_level = i8::from(read_committed);
        request.topics = vec![wanted];
        // Decoded by the path's own reader, which bounds every count by the bytes
        // left (docs/native-fetch.md, "Known gap").
        let body = self.exchange(&request, version).await?;
        let response = decode_fetch_response(&body, version).map_err(|e| NativeError::Decode {
            addr: self.addr().to_string(),
            api: FetchRequest::NAME,
            version,
            message: e.to_string(),
        })?;
        let what = format!("{topic}/{partition}");
        if response.error_code != 0 {
            return Err(self.broker_error::<FetchRequest>(response.error_code, &what));
        }
        let found = response
            .topics
            .into_iter()
            .filter(|t| {
                if by_id {
                    t.topic_id == topic_id
                } else {
                    t.name.as_deref() == Some(topic)
                }
            })
            .flat_map(|t| t.partitions)
            .find(|p| p.partition == partition);
        found.ok_or_else(|| self.missing::<FetchRequest>(version, &what))
    }

    /// A response that lacks the partition asked for.
    fn missing<R: NativeRequest>(&self, version: i16, what: &str) -> NativeError {
        NativeError::Decode {
            addr: self.addr().to_string(),
            api: R::NAME,
            version,
            message: format!("the response has no {what}"),
        }
    }
}
