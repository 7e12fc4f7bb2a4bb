//! One cluster's fetch thread for one reader: an rdkafka consumer with manual
//! assignment (no group rebalancing), polled on its own OS thread so blocking calls
//! never touch an async worker. Records are deserialized here and handed to the
//! reader in batches over a bounded channel, which is the back-pressure: when the
//! reader is slow, the thread blocks and librdkafka's own queue limits
//! (`queued.max.messages.kbytes`) stop fetching.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::cluster_client::client_config;
use crate::deserializer::{DeserializeError, Deserializer};
use crate::error::SourceError;
use crate::properties::ClientProperties;
use crate::record::{RawRecord, Record};
use crate::split::{KafkaSplit, SplitId};

/// One fetched record (or its deserialization failure) and its position.
pub(crate) struct Item<V> {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub bytes: usize,
    pub value: Result<Record<V>, DeserializeError>,
}

/// What a fetch thread sends to its reader.
pub(crate) enum Fetched<V> {
    /// Records in partition order, with the partitions' current high watermarks.
    Batch {
        cluster: Arc<str>,
        generation: u64,
        items: Vec<Item<V>>,
        high_watermarks: Vec<(Arc<str>, i32, i64)>,
    },
    /// The split reached its stop offset (no record at or past it will follow).
    Finished { id: SplitId, generation: u64 },
    /// The cluster's fetcher hit an error it cannot get past.
    Failed { cluster: Arc<str>, error: SourceError },
}

pub(crate) enum FetchCommand {
    Add(Vec<KafkaSplit>),
    #[allow(dead_code)] // sent when reconciliation removes splits from a live cluster
    Remove(Vec<SplitId>),
    Shutdown,
}

/// Handle to a running fetch thread.
pub(crate) struct Fetcher {
    commands: std_mpsc::Sender<FetchCommand>,
    thread: Option<JoinHandle<()>>,
    /// Distinguishes batches of this fetcher from those of a fetcher it replaced.
    pub generation: u64,
}

impl Fetcher {
    pub fn send(&self, cmd: FetchCommand) {
        let _ = self.commands.send(cmd);
    }

    /// Asks the thread to stop; returns its join handle.
    pub fn stop(mut self) -> Option<JoinHandle<()>> {
        let _ = self.commands.send(FetchCommand::Shutdown);
        self.thread.take()
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        let _ = self.commands.send(FetchCommand::Shutdown);
    }
}

/// Settings of a fetch thread.
pub(crate) struct FetchSettings {
    pub max_batch: usize,
    pub poll_timeout: Duration,
}

struct Bound {
    stop: i64,
}

/// Starts a fetch thread for `cluster` with the reader's final consumer properties.
pub(crate) fn spawn<D: Deserializer>(
    cluster: Arc<str>,
    props: &ClientProperties,
    generation: u64,
    deserializer: Arc<D>,
    out: mpsc::Sender<Fetched<D::Value>>,
    settings: FetchSettings,
) -> Result<Fetcher, SourceError> {
    let mut config = client_config(props);
    if props.get("group.id").is_none() {
        // librdkafka wants a group id even for manual assignment; it never joins.
        config.set("group.id", "multicluster-kafka-reader");
    }
    config
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("enable.partition.eof", "false");
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| SourceError::cluster(&cluster, "create consumer", &e, props))?;
    let (tx, rx) = std_mpsc::channel();
    let name = format!("mck-fetch-{cluster}");
    let thread = std::thread::Builder::new()
        .name(name.chars().take(15).collect())
        .spawn(move || {
            let mut f = FetchLoop {
                cluster,
                generation,
                consumer,
                deserializer,
                out,
                settings,
                topics: HashMap::new(),
                bounds: HashMap::new(),
                assigned: 0,
            };
            f.run(rx);
        })
        .map_err(|e| SourceError::Config(format!("cannot start a fetch thread: {e}")))?;
    Ok(Fetcher {
        commands: tx,
        thread: Some(thread),
        generation,
    })
}

struct FetchLoop<D: Deserializer> {
    cluster: Arc<str>,
    generation: u64,
    consumer: BaseConsumer,
    deserializer: Arc<D>,
    out: mpsc::Sender<Fetched<D::Value>>,
    settings: FetchSettings,
    topics: HashMap<String, Arc<str>>,
    bounds: HashMap<(Arc<str>, i32), Bound>,
    assigned: usize,
}

impl<D: Deserializer> FetchLoop<D> {
    fn topic(&mut self, name: &str) -> Arc<str> {
        intern(&mut self.topics, name)
    }

    fn fail(&self, error: SourceError) -> bool {
        self.out
            .blocking_send(Fetched::Failed {
                cluster: self.cluster.clone(),
                error,
            })
            .is_ok()
    }

    /// Applies a command; returns false when the loop must end.
    fn apply(&mut self, cmd: FetchCommand) -> bool {
        match cmd {
            FetchCommand::Shutdown => false,
            FetchCommand::Add(splits) => {
                let mut tpl = TopicPartitionList::new();
                for s in splits {
                    let topic = self.topic(&s.id.topic);
                    if s.is_finished() {
                        let id = s.id.clone();
                        if self
                            .out
                            .blocking_send(Fetched::Finished {
                                id,
                                generation: self.generation,
                            })
                            .is_err()
                        {
                            return false;
                        }
                        continue;
                    }
                    if let Some(stop) = s.stop_offset {
                        self.bounds.insert((topic.clone(), s.id.partition), Bound { stop });
                    }
                    if tpl
                        .add_partition_offset(&topic, s.id.partition, Offset::Offset(s.next_offset))
                        .is_err()
                    {
                        return self.fail(SourceError::Cluster {
                            cluster: self.cluster.to_string(),
                            message: format!("invalid start offset {} for {}", s.next_offset, s.id),
                        });
                    }
                    self.assigned += 1;
                }
                if tpl.count() > 0
                    && let Err(e) = self.consumer.incremental_assign(&tpl)
                {
                    return self.fail(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!("assign: {e}"),
                    });
                }
                true
            }
            FetchCommand::Remove(ids) => {
                let mut tpl = TopicPartitionList::new();
                for id in ids {
                    let topic = self.topic(&id.topic);
                    self.bounds.remove(&(topic.clone(), id.partition));
                    tpl.add_partition(&topic, id.partition);
                }
                self.unassign(&tpl);
                true
            }
        }
    }

    fn unassign(&mut self, tpl: &TopicPartitionList) {
        if tpl.count() == 0 {
            return;
        }
        let current = self.consumer.assignment().unwrap_or_default();
        let mut present = TopicPartitionList::new();
        for e in tpl.elements() {
            if current.find_partition(e.topic(), e.partition()).is_some() {
                present.add_partition(e.topic(), e.partition());
            }
        }
        if present.count() > 0 {
            if let Err(e) = self.consumer.incremental_unassign(&present) {
                tracing::warn!(cluster = %self.cluster, error = %e, "unassign failed");
            }
            self.assigned = self.assigned.saturating_sub(present.count());
        }
    }

    fn run(&mut self, commands: std_mpsc::Receiver<FetchCommand>) {
        let mut warned: Option<String> = None;
        loop {
            // Commands first; block on them while there is nothing to fetch.
            loop {
                let next = if self.assigned == 0 {
                    match commands.recv_timeout(Duration::from_millis(200)) {
                        Ok(c) => Some(c),
                        Err(std_mpsc::RecvTimeoutError::Timeout) => {
                            if self.out.is_closed() {
                                return;
                            }
                            continue;
                        }
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                } else {
                    match commands.try_recv() {
                        Ok(c) => Some(c),
                        Err(std_mpsc::TryRecvError::Empty) => None,
                        Err(std_mpsc::TryRecvError::Disconnected) => return,
                    }
                };
                match next {
                    Some(c) => {
                        if !self.apply(c) {
                            return;
                        }
                    }
                    None => break,
                }
            }
            let mut items: Vec<Item<D::Value>> = Vec::new();
            let mut finished: Vec<(Arc<str>, i32)> = Vec::new();
            let mut timeout = self.settings.poll_timeout;
            while items.len() < self.settings.max_batch {
                let Some(polled) = self.consumer.poll(timeout) else {
                    break;
                };
                timeout = Duration::ZERO;
                match polled {
                    Ok(m) => {
                        warned = None;
                        let topic = intern(&mut self.topics, m.topic());
                        let partition = m.partition();
                        let offset = m.offset();
                        if let Some(b) = self.bounds.get(&(topic.clone(), partition)) {
                            if offset >= b.stop {
                                finished.push((topic.clone(), partition));
                                continue;
                            }
                            if offset + 1 >= b.stop {
                                finished.push((topic.clone(), partition));
                            }
                        }
                        let raw = RawRecord {
                            cluster: &self.cluster,
                            topic: &topic,
                            partition,
                            offset,
                            timestamp: m.timestamp().to_millis(),
                            key: m.key(),
                            value: m.payload(),
                        };
                        let bytes = m.key_len() + m.payload_len();
                        let value = self.deserializer.deserialize(&raw).map(|value| Record {
                            cluster: self.cluster.clone(),
                            topic: topic.clone(),
                            partition,
                            offset,
                            timestamp: raw.timestamp,
                            key: m.key().map(<[u8]>::to_vec),
                            headers: m
                                .headers()
                                .map(|h| {
                                    h.iter()
                                        .map(|x| (x.key.to_string(), x.value.map(<[u8]>::to_vec)))
                                        .collect()
                                })
                                .unwrap_or_default(),
                            value,
                        });
                        items.push(Item {
                            topic,
                            partition,
                            offset,
                            bytes,
                            value,
                        });
                    }
                    Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange)) => {
                        let _ = self.send_batch(std::mem::take(&mut items));
                        let _ = self.fail(SourceError::Cluster {
                            cluster: self.cluster.to_string(),
                            message: "offset out of range on a partition (log truncated or deleted); the policy is to fail rather than reset silently".into(),
                        });
                        return;
                    }
                    Err(e) => {
                        // Transient errors (broker down, …): librdkafka retries.
                        let text = e.to_string();
                        if warned.as_deref() != Some(text.as_str()) {
                            tracing::warn!(cluster = %self.cluster, error = %text, "fetch error; retrying");
                            warned = Some(text);
                        }
                        break;
                    }
                }
            }
            if !items.is_empty() && !self.send_batch(items) {
                return;
            }
            if !self.bounds.is_empty() {
                self.check_positions(&mut finished);
            }
            if !finished.is_empty() {
                finished.sort();
                finished.dedup();
                let mut tpl = TopicPartitionList::new();
                for (topic, partition) in &finished {
                    self.bounds.remove(&(topic.clone(), *partition));
                    tpl.add_partition(topic, *partition);
                }
                self.unassign(&tpl);
                for (topic, partition) in finished {
                    let id = SplitId {
                        cluster: self.cluster.clone(),
                        topic,
                        partition,
                    };
                    if self
                        .out
                        .blocking_send(Fetched::Finished {
                            id,
                            generation: self.generation,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Bounded splits whose fetch position passed the stop without a record at
    /// stop - 1 (transaction markers, compaction) are finished too.
    fn check_positions(&self, finished: &mut Vec<(Arc<str>, i32)>) {
        let Ok(positions) = self.consumer.position() else {
            return;
        };
        for e in positions.elements() {
            if let Offset::Offset(pos) = e.offset()
                && let Some(t) = self.topics.get(e.topic())
                && let Some(b) = self.bounds.get(&(t.clone(), e.partition()))
                && pos >= b.stop
            {
                finished.push((t.clone(), e.partition()));
            }
        }
    }

    fn send_batch(&self, items: Vec<Item<D::Value>>) -> bool {
        if items.is_empty() {
            return true;
        }
        let mut seen: Vec<(Arc<str>, i32)> = Vec::new();
        for it in &items {
            if !seen.iter().any(|(t, p)| *p == it.partition && **t == *it.topic) {
                seen.push((it.topic.clone(), it.partition));
            }
        }
        let high_watermarks = seen
            .into_iter()
            .filter_map(|(t, p)| cached_high_watermark(&self.consumer, &t, p).map(|h| (t, p, h)))
            .collect();
        self.out
            .blocking_send(Fetched::Batch {
                cluster: self.cluster.clone(),
                generation: self.generation,
                items,
                high_watermarks,
            })
            .is_ok()
    }
}

fn intern(topics: &mut HashMap<String, Arc<str>>, name: &str) -> Arc<str> {
    if let Some(t) = topics.get(name) {
        return t.clone();
    }
    let t: Arc<str> = Arc::from(name);
    topics.insert(name.to_string(), t.clone());
    t
}

/// librdkafka's cached high watermark (no network round trip).
fn cached_high_watermark(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let topic = CString::new(topic).ok()?;
    let mut low = -1i64;
    let mut high = -1i64;
    // SAFETY: the client pointer is valid while `consumer` lives; the out-pointers are
    // valid locals; the call only reads librdkafka's cached state.
    let err = unsafe {
        rdkafka::bindings::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}
