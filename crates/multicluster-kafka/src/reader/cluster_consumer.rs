//! One cluster's consumer inside a reader: an rdkafka consumer with manual assignment
//! (no group rebalancing), polled without blocking by the reader's own task.
//!
//! Records are read, deserialized and handed out by the same thread, so no record
//! crosses threads and nothing is buffered beyond librdkafka's own prefetch queue,
//! whose limits (`queued.max.messages.kbytes`, `queued.min.messages`) bound memory:
//! when the application stops asking for records, librdkafka stops fetching. The
//! reader sleeps on a [`Notify`] that librdkafka's queue-event callback wakes when
//! records arrive. Creating and closing the consumer block; the reader does both on
//! the blocking pool.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, c_void};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::Notify;

use crate::cluster_client::client_config;
use crate::deserializer::{DeserializeError, Deserializer};
use crate::error::SourceError;
use crate::properties::ClientProperties;
use crate::record::{RawRecord, Record};
use crate::split::{KafkaSplit, SplitId};

/// librdkafka settings the readers use unless the user sets them.
///
/// `fetch.queue.backoff.ms`: when the application applies back-pressure, librdkafka's
/// prefetch queue fills and it postpones the next fetch by this much (1000 ms by
/// default), which stalls a partition for a second after every burst. 10 ms keeps it
/// flowing.
pub const READER_DEFAULTS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "10")];

/// One fetched record (or its deserialization failure) and its position.
pub(crate) struct Item<V> {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub bytes: usize,
    pub value: Result<Record<V>, DeserializeError>,
}

/// What one non-blocking poll found.
#[derive(Default)]
pub(crate) struct Polled {
    /// Records added to the buffer.
    pub records: usize,
    /// Splits that reached their stop offset.
    pub finished: Vec<SplitId>,
    /// `(topic, partition, high watermark)` of partitions that had records.
    pub high_watermarks: Vec<(Arc<str>, i32, i64)>,
}

/// Size of each buffer that record keys and values are copied into.
const ARENA_CHUNK: usize = 256 << 10;

/// Copies `bytes` into the arena and splits them off as a shared handle. A new chunk
/// is started when the current one is full (the old one lives as long as its records).
fn copy_out(arena: &mut BytesMut, bytes: &[u8]) -> Bytes {
    if arena.capacity() - arena.len() < bytes.len() {
        *arena = BytesMut::with_capacity(ARENA_CHUNK.max(bytes.len()));
    }
    arena.extend_from_slice(bytes);
    arena.split().freeze()
}

/// How often per-split lag is refreshed from librdkafka's cached high watermarks.
const LAG_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The queue-event callback: librdkafka calls it (on one of its threads) when the
/// consumer queue gets an event while the reader may be asleep.
unsafe extern "C" fn wake(_rk: *mut rd::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is the `Notify` inside an `Arc` that the `ClusterConsumer` keeps
    // alive until it has disabled this callback.
    let notify = unsafe { &*(opaque as *const Notify) };
    notify.notify_one();
}

pub(crate) struct ClusterConsumer {
    cluster: Arc<str>,
    consumer: Option<BaseConsumer>,
    queue: *mut rd::rd_kafka_queue_t,
    notify: Arc<Notify>,
    topics: HashMap<String, Arc<str>>,
    bounds: HashMap<(Arc<str>, i32), i64>,
    assigned: usize,
    arena: BytesMut,
    include_headers: bool,
    /// A fatal error met after records that were handed out first.
    failed: Option<SourceError>,
    warned: Option<String>,
    last_lag_report: std::time::Instant,
}

// SAFETY: the raw queue pointer is a reference-counted librdkafka handle, usable from
// any thread; it is only touched through `&mut self` or in `Drop`.
unsafe impl Send for ClusterConsumer {}

impl ClusterConsumer {
    /// Creates the consumer (blocking: run it on the blocking pool).
    pub fn create(
        cluster: Arc<str>,
        props: &ClientProperties,
        notify: Arc<Notify>,
        include_headers: bool,
    ) -> Result<Self, SourceError> {
        let mut config = client_config(props);
        for (key, value) in READER_DEFAULTS {
            if props.get(key).is_none() {
                config.set(*key, *value);
            }
        }
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
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => cluster.to_string())
            .increment(1);
        // SAFETY: the client pointer is valid while `consumer` lives; the returned queue
        // is our own reference, destroyed in Drop after the callback is disabled.
        let queue = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        if queue.is_null() {
            return Err(SourceError::Cluster {
                cluster: cluster.to_string(),
                message: "librdkafka returned no consumer queue".into(),
            });
        }
        // SAFETY: the opaque pointer stays valid (we hold the Arc) until Drop disables
        // the callback.
        unsafe {
            rd::rd_kafka_queue_cb_event_enable(
                queue,
                Some(wake),
                Arc::as_ptr(&notify) as *mut c_void,
            );
        }
        Ok(Self {
            cluster,
            consumer: Some(consumer),
            queue,
            notify,
            topics: HashMap::new(),
            bounds: HashMap::new(),
            assigned: 0,
            arena: BytesMut::new(),
            include_headers,
            failed: None,
            warned: None,
            // Report lag at the first poll, then every interval.
            last_lag_report: std::time::Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(std::time::Instant::now),
        })
    }

    fn consumer(&self) -> &BaseConsumer {
        self.consumer.as_ref().expect("present until drop")
    }

    fn topic(&mut self, name: &str) -> Arc<str> {
        intern(&mut self.topics, name)
    }

    /// Starts reading these splits at their positions. Returns those already at their
    /// stop (nothing to read).
    pub fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        let mut done = Vec::new();
        for s in splits {
            if s.is_finished() {
                done.push(s.id);
                continue;
            }
            let topic = self.topic(&s.id.topic);
            if let Some(stop) = s.stop_offset {
                self.bounds.insert((topic.clone(), s.id.partition), stop);
            }
            tpl.add_partition_offset(&topic, s.id.partition, Offset::Offset(s.next_offset))
                .map_err(|e| SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: format!("invalid start offset {} for {}: {e}", s.next_offset, s.id),
                })?;
            self.assigned += 1;
        }
        if tpl.count() > 0 {
            self.consumer()
                .incremental_assign(&tpl)
                .map_err(|e| SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: format!("assign: {e}"),
                })?;
            self.notify.notify_one();
        }
        Ok(done)
    }

    /// Stops reading these splits.
    pub fn remove(&mut self, ids: &[SplitId]) {
        let mut tpl = TopicPartitionList::new();
        for id in ids {
            let topic = self.topic(&id.topic);
            self.bounds.remove(&(topic.clone(), id.partition));
            tpl.add_partition(&topic, id.partition);
        }
        self.unassign(&tpl);
    }

    fn unassign(&mut self, tpl: &TopicPartitionList) {
        if tpl.count() == 0 {
            return;
        }
        let current = self.consumer().assignment().unwrap_or_default();
        let mut present = TopicPartitionList::new();
        for e in tpl.elements() {
            if current.find_partition(e.topic(), e.partition()).is_some() {
                present.add_partition(e.topic(), e.partition());
            }
        }
        if present.count() > 0 {
            if let Err(e) = self.consumer().incremental_unassign(&present) {
                tracing::warn!(cluster = %self.cluster, error = %e, "unassign failed");
            }
            self.assigned = self.assigned.saturating_sub(present.count());
        }
    }

    /// Reads what librdkafka already has (never waits), up to `max` records, into
    /// `out`. A fatal error (offset out of range) is returned after the records
    /// before it.
    pub fn poll<D: Deserializer>(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut VecDeque<Item<D::Value>>,
    ) -> Result<Polled, SourceError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut polled = Polled::default();
        let mut finished: Vec<(Arc<str>, i32)> = Vec::new();
        // Keys and values are copied into one growing buffer and split off as shared
        // `Bytes`: one allocation per few thousand records, not two per record.
        let mut arena = std::mem::take(&mut self.arena);
        let mut fatal = None;
        // Records come in runs per partition: remember the last topic handle and
        // partition bound instead of looking them up for every record.
        let mut last_topic: Option<(*mut rd::rd_kafka_topic_t, Arc<str>)> = None;
        let mut last_bound: Option<(*const str, i32, Option<i64>)> = None;
        let lag_due = self.last_lag_report.elapsed() >= LAG_REPORT_INTERVAL;
        let mut seen: Vec<(Arc<str>, i32)> = Vec::new();
        let consumer = self.consumer.as_ref().expect("present until drop");
        while polled.records < max {
            let Some(next) = consumer.poll(std::time::Duration::ZERO) else {
                break;
            };
            let m = match next {
                Ok(m) => m,
                Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange)) => {
                    fatal = Some(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: "offset out of range on a partition (log truncated or deleted); the policy is to fail rather than reset silently".into(),
                    });
                    break;
                }
                Err(e) => {
                    // Transient errors (broker down, …): librdkafka retries by itself.
                    let text = e.to_string();
                    if self.warned.as_deref() != Some(text.as_str()) {
                        tracing::warn!(cluster = %self.cluster, error = %text, "fetch error; retrying");
                        self.warned = Some(text);
                    }
                    break;
                }
            };
            self.warned = None;
            let handle = m.topic_ptr();
            let topic = match &last_topic {
                Some((h, t)) if *h == handle => t.clone(),
                _ => {
                    let t = intern(&mut self.topics, m.topic());
                    last_topic = Some((handle, t.clone()));
                    t
                }
            };
            let partition = m.partition();
            let offset = m.offset();
            if !self.bounds.is_empty() {
                let stop = match last_bound {
                    Some((t, p, stop))
                        if p == partition && std::ptr::eq(t, Arc::as_ptr(&topic)) =>
                    {
                        stop
                    }
                    _ => {
                        let stop = self.bounds.get(&(topic.clone(), partition)).copied();
                        last_bound = Some((Arc::as_ptr(&topic), partition, stop));
                        stop
                    }
                };
                if let Some(stop) = stop {
                    if offset >= stop {
                        finished.push((topic, partition));
                        continue;
                    }
                    if offset + 1 >= stop {
                        finished.push((topic.clone(), partition));
                    }
                }
            }
            if lag_due
                && !seen
                    .iter()
                    .any(|(t, q)| *q == partition && Arc::ptr_eq(t, &topic))
            {
                seen.push((topic.clone(), partition));
            }
            let key = m.key().map(|k| copy_out(&mut arena, k));
            let value = m.payload().map(|v| copy_out(&mut arena, v));
            let headers = if self.include_headers {
                m.headers()
                    .map(|h| {
                        h.iter()
                            .map(|x| (x.key.to_string(), x.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let timestamp = m.timestamp().to_millis();
            let bytes = key.as_ref().map_or(0, Bytes::len) + value.as_ref().map_or(0, Bytes::len);
            let raw = RawRecord {
                cluster: &self.cluster,
                topic: &topic,
                partition,
                offset,
                timestamp,
                key: key.as_deref(),
                value: value.as_deref(),
                shared: value.as_ref(),
            };
            let result = deserializer.deserialize(&raw).map(|v| Record {
                cluster: self.cluster.clone(),
                topic: topic.clone(),
                partition,
                offset,
                timestamp,
                key,
                headers,
                value: v,
            });
            out.push_back(Item {
                topic,
                partition,
                offset,
                bytes,
                value: result,
            });
            polled.records += 1;
        }
        self.arena = arena;
        if lag_due && !seen.is_empty() {
            self.last_lag_report = std::time::Instant::now();
            for (t, p) in seen {
                if let Some(h) = self.cached_high_watermark(&t, p) {
                    polled.high_watermarks.push((t, p, h));
                }
            }
        }
        // A split whose last records before its stop are transaction markers (or
        // compacted away) is finished by its fetch position; that only matters once
        // records stop coming.
        if fatal.is_none() && polled.records == 0 && !self.bounds.is_empty() {
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
            polled.finished = finished
                .into_iter()
                .map(|(topic, partition)| SplitId {
                    cluster: self.cluster.clone(),
                    topic,
                    partition,
                })
                .collect();
        }
        match fatal {
            Some(e) if polled.records == 0 => Err(e),
            Some(e) => {
                // Hand out what came before the error first; it is reported next time.
                self.failed = Some(e);
                Ok(polled)
            }
            None => Ok(polled),
        }
    }

    /// Bounded splits whose fetch position passed the stop without a record at
    /// stop - 1 (transaction markers, compaction) are finished too.
    fn check_positions(&self, finished: &mut Vec<(Arc<str>, i32)>) {
        let Ok(positions) = self.consumer().position() else {
            return;
        };
        for e in positions.elements() {
            if let Offset::Offset(pos) = e.offset()
                && let Some(t) = self.topics.get(e.topic())
                && let Some(stop) = self.bounds.get(&(t.clone(), e.partition()))
                && pos >= *stop
            {
                finished.push((t.clone(), e.partition()));
            }
        }
    }

    /// librdkafka's cached high watermark (no network round trip).
    fn cached_high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        let topic = CString::new(topic).ok()?;
        let mut low = -1i64;
        let mut high = -1i64;
        // SAFETY: the client pointer is valid while the consumer lives; the
        // out-pointers are valid locals; the call only reads librdkafka's cache.
        let err = unsafe {
            rd::rd_kafka_get_watermark_offsets(
                self.consumer().client().native_ptr(),
                topic.as_ptr(),
                partition,
                &mut low,
                &mut high,
            )
        };
        (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
    }

    /// Detaches the consumer so it can be closed off the async runtime; the wake-up
    /// callback is disabled first.
    pub fn into_closer(mut self) -> impl FnOnce() + Send + 'static {
        self.disable_wakeups();
        let consumer = self.consumer.take();
        move || drop(consumer)
    }

    fn disable_wakeups(&mut self) {
        if !self.queue.is_null() {
            // SAFETY: the queue handle is ours; after this call librdkafka no longer
            // uses the opaque pointer.
            unsafe {
                rd::rd_kafka_queue_cb_event_enable(self.queue, None, std::ptr::null_mut());
                rd::rd_kafka_queue_destroy(self.queue);
            }
            self.queue = std::ptr::null_mut();
        }
    }
}

impl Drop for ClusterConsumer {
    fn drop(&mut self) {
        self.disable_wakeups();
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
