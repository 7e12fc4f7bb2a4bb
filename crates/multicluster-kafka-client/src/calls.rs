//! The requests the native fetch path makes, as calls on a [`Connection`]: the
//! cluster's metadata, a partition's offset for a time, and fetches.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::{Message, StrBytes};
use uuid::Uuid;

use crate::conn::{Connection, NativeRequest};
use crate::error::NativeError;
use crate::fetch_response::{FetchPartitionData, FetchResponseData, decode_fetch_response};
use crate::responses;

/// One partition a fetch asks for.
#[derive(Clone, Copy, Debug)]
pub struct FetchWant<'a> {
    /// The topic's name (sent below Fetch v13).
    pub topic: &'a str,
    /// The topic's id (sent from Fetch v13 up; nil: unknown).
    pub topic_id: Uuid,
    /// The partition.
    pub partition: i32,
    /// The offset to read from.
    pub offset: i64,
    /// The leader epoch the client knows (−1: none), so that a broker with another
    /// epoch says so instead of answering (KIP-320).
    pub leader_epoch: i32,
    /// The most bytes to answer for this partition (one whole batch at least).
    pub max_bytes: i32,
    /// The leader epoch of the last batch fetched before `offset` (−1: none). From
    /// Fetch v12 up the broker checks that its log holds that epoch up to `offset`
    /// and answers a diverging epoch instead of records when not (KIP-320).
    pub last_fetched_epoch: i32,
}

/// What a fetch asks for as a whole.
#[derive(Clone, Debug)]
pub struct FetchSettings {
    /// How long the broker waits for `min_bytes` before it answers (`fetch.wait.max.ms`).
    pub max_wait_ms: i32,
    /// How many bytes the broker waits for (`fetch.min.bytes`).
    pub min_bytes: i32,
    /// The most bytes of the whole answer (`fetch.max.bytes`; one batch at least).
    pub max_bytes: i32,
    /// Skip what aborted transactions wrote (`isolation.level=read_committed`).
    pub read_committed: bool,
    /// The client's rack (`client.rack`, KIP-392); empty: none.
    pub rack: String,
}

impl Default for FetchSettings {
    /// librdkafka's defaults.
    fn default() -> Self {
        Self {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            read_committed: false,
            rack: String::new(),
        }
    }
}

/// What a broker knows of its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The cluster's brokers.
    pub brokers: Vec<BrokerInfo>,
    /// The cluster's id (`cluster.id`), if the broker gave one.
    pub cluster_id: Option<String>,
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

pub fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// A Fetch request of `version` for `wants` (each topic's partitions next to each
/// other), its topics named by id from v13 up, by name below; no fetch session (the
/// caller sets one).
pub fn fetch_request(
    wants: &[FetchWant<'_>],
    settings: &FetchSettings,
    version: i16,
) -> FetchRequest {
    let by_id = version >= 13;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for w in wants {
        let same = topics.last().is_some_and(|t| {
            if by_id {
                t.topic_id == w.topic_id
            } else {
                t.topic.0.as_str() == w.topic
            }
        });
        if !same {
            let mut topic = FetchTopic::default();
            if by_id {
                topic.topic_id = w.topic_id;
            } else {
                topic.topic = topic_name(w.topic);
            }
            topics.push(topic);
        }
        let mut part = FetchPartition::default();
        part.partition = w.partition;
        part.fetch_offset = w.offset;
        part.current_leader_epoch = w.leader_epoch;
        part.partition_max_bytes = w.max_bytes;
        if version >= 12 {
            part.last_fetched_epoch = w.last_fetched_epoch;
        }
        topics.last_mut().expect("pushed").partitions.push(part);
    }
    let mut request = FetchRequest::default();
    request.max_wait_ms = settings.max_wait_ms;
    request.min_bytes = settings.min_bytes;
    request.max_bytes = settings.max_bytes;
    request.isolation_level = i8::from(settings.read_committed);
    request.rack_id = StrBytes::from_string(settings.rack.clone());
    request.topics = topics;
    request
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
        let version = self.version_within::<MetadataRequest>(&responses::METADATA)?;
        let body = self.exchange(&request, version).await?;
        let response =
            self.decoded::<MetadataRequest, _>(version, responses::metadata(&body, version))?;
        let brokers = response
            .brokers
            .into_iter()
            .map(|b| BrokerInfo {
                node_id: b.node_id,
                host: b.host,
                port: b.port,
            })
            .collect();
        let topics = response
            .topics
            .into_iter()
            .map(|t| TopicInfo {
                name: t.name.unwrap_or_default(),
                topic_id: t.topic_id,
                error_code: t.error_code,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(
                        |(partition, error_code, leader_id, leader_epoch)| PartitionInfo {
                            partition,
                            leader_id,
                            leader_epoch,
                            error_code,
                        },
                    )
                    .collect(),
            })
            .collect();
        Ok(Metadata {
            brokers,
            cluster_id: response.cluster_id,
            topics,
        })
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
        let version = self.version_within::<ListOffsetsRequest>(&responses::LIST_OFFSETS)?;
        let body = self.exchange(&request, version).await?;
        let response = self
            .decoded::<ListOffsetsRequest, _>(version, responses::list_offsets(&body, version))?;
        let what = format!("{topic}/{partition}");
        let found = response
            .iter()
            .find(|p| p.topic == topic && p.partition == partition);
        let Some(found) = found else {
            return Err(self.missing::<ListOffsetsRequest>(version, &what));
        };
        if found.error_code != 0 {
            return Err(self.broker_error::<ListOffsetsRequest>(found.error_code, &what));
        }
        Ok(found.offset)
    }

    /// The offsets of several partitions, each `(topic, partition, timestamp)` with
    /// the timestamps of [`Self::list_offsets`], in one request to their leader;
    /// `read_committed` makes the latest offset the last stable one, as a consumer
    /// of that isolation level reads up to. Each partition's answer keeps its own
    /// error code; its offset is −1 for a timestamp no record reaches.
    pub async fn list_offsets_of(
        &mut self,
        wanted: &[(&str, i32, i64)],
        read_committed: bool,
    ) -> Result<Vec<responses::OffsetAnswer>, NativeError> {
        let mut topics: Vec<ListOffsetsTopic> = Vec::new();
        for &(topic, partition, timestamp) in wanted {
            let mut part = ListOffsetsPartition::default();
            part.partition_index = partition;
            part.timestamp = timestamp;
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(part),
                None => {
                    let mut t = ListOffsetsTopic::default();
                    t.name = topic_name(topic);
                    t.partitions = vec![part];
                    topics.push(t);
                }
            }
        }
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.isolation_level = i8::from(read_committed);
        request.topics = topics;
        request.timeout_ms = i32::try_from(self.timeout().as_millis()).unwrap_or(i32::MAX);
        let version = self.version_within::<ListOffsetsRequest>(&responses::LIST_OFFSETS)?;
        let body = self.exchange(&request, version).await?;
        self.decoded::<ListOffsetsRequest, _>(version, responses::list_offsets(&body, version))
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
        let want = FetchWant {
            topic,
            topic_id,
            partition,
            offset,
            leader_epoch: -1,
            max_bytes,
            last_fetched_epoch: -1,
        };
        let settings = FetchSettings {
            max_bytes,
            read_committed,
            ..FetchSettings::default()
        };
        let (response, by_id) = self.fetch(&[want], &settings).await?;
        let version = self.version::<FetchRequest>()?;
        let what = format!("{topic}/{partition}");
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

    /// One fetch of several partitions (each topic's partitions next to each other
    /// in `wants`), without a fetch session. Returns the answer and whether its
    /// topics are named by id (Fetch v13 up: then every want had a topic id) or by
    /// name. A broker's top-level error code is an error; partitions' codes are the
    /// caller's to read.
    pub async fn fetch(
        &mut self,
        wants: &[FetchWant<'_>],
        settings: &FetchSettings,
    ) -> Result<(FetchResponseData, bool), NativeError> {
        let version = self.fetch_version(wants)?;
        let request = fetch_request(wants, settings, version);
        let by_id = version >= 13;
        let response = self.send_fetch(&request, version).await?;
        if response.error_code != 0 {
            return Err(self.broker_error::<FetchRequest>(response.error_code, "fetch"));
        }
        Ok((response, by_id))
    }

    /// The Fetch version for `wants`: the highest both sides speak, but v12 (topics
    /// by name) when a want has no topic id.
    pub fn fetch_version(&self, wants: &[FetchWant<'_>]) -> Result<i16, NativeError> {
        let version = self.version::<FetchRequest>()?;
        if version < 13 || wants.iter().all(|w| !w.topic_id.is_nil()) {
            return Ok(version);
        }
        let (broker_min, broker_max) = self.broker_versions::<FetchRequest>().unwrap_or((0, 0));
        if broker_min > 12 {
            return Err(NativeError::Unsupported {
                addr: self.addr().to_string(),
                api: FetchRequest::NAME,
                broker_min,
                broker_max,
                ours_min: FetchRequest::VERSIONS.min,
                ours_max: 12,
            });
        }
        Ok(12)
    }

    /// Sends a Fetch request and decodes its answer with the path's own reader,
    /// which bounds every count by the bytes left (docs/native-fetch.md, "Known
    /// gap"). The top-level error code is the caller's to read.
    pub async fn send_fetch(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponseData, NativeError> {
        let body = self.exchange(request, version).await?;
        decode_fetch_response(&body, version).map_err(|e| NativeError::Decode {
            addr: self.addr().to_string(),
            api: FetchRequest::NAME,
            version,
            message: e.to_string(),
        })
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
