//! One cluster's consumer inside a reader: an rdkafka consumer with manual assignment
//! (no group rebalancing), owned and polled by the cluster's fetcher thread
//! ([`super::fetcher`]).
//!
//! Records are taken from librdkafka a batch at a time (every message it has ready, up
//! to the batch size, in one call), their keys and values copied into one buffer per
//! batch, and deserialized, all on the fetcher thread. Nothing is buffered beyond
//! librdkafka's own prefetch queue, whose limits (`queued.max.messages.kbytes`,
//! `queued.min.messages`) bound memory, and the two batches the fetcher builds ahead:
//! when the application stops asking for records, librdkafka stops fetching. The
//! fetcher thread sleeps until librdkafka's queue-event callback wakes it. Creating and
//! closing the consumer block; both happen on the fetcher thread.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::Arc;

use bytes::Bytes;
use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::ReadPolicy;
use crate::deserializer::{DeserializeError, Deserializer};
use crate::error::SourceError;
use crate::kafka::client::client_config;
use crate::kafka::hooks::{ClientEvents, ClientHooks, ClientRole, SourceContext};
use crate::kafka::offsets::OffsetReset;
use crate::kafka::properties::ClientProperties;
use crate::record::{BatchEntry, RawRecord, RecordBatch};
use crate::split::{KafkaSplit, SplitId};

use super::native::MessageBatch;

/// How long the lookups for a position outside the log (its range, the reset) wait.
const OUT_OF_RANGE_LOOKUP: std::time::Duration = std::time::Duration::from_secs(10);

/// librdkafka settings the readers' consumers use (besides [`CLIENT_DEFAULTS`](crate::CLIENT_DEFAULTS))
/// unless the cluster's properties set them.
///
/// `fetch.queue.backoff.ms`: when the application applies back-pressure, librdkafka's
/// prefetch queue fills and it postpones the next fetch by this much (1000 ms by
/// default), which stalls a partition for a second after every burst. 10 ms keeps it
/// flowing.
pub const READER_DEFAULTS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "10")];

/// A record whose value could not be deserialized: handed out as an error after the
/// records fetched before it.
#[derive(Debug)]
pub(crate) struct Failed {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// Key + value bytes, for the metrics.
    pub bytes: u32,
    pub error: DeserializeError,
}

/// What one non-blocking poll found.
#[derive(Default)]
pub(crate) struct Polled {
    /// Records added to the batch.
    pub records: usize,
    /// A record after those that failed to deserialize (the batch stopped there).
    pub failed: Option<Failed>,
    /// Splits that reached their stop offset.
    pub finished: Vec<SplitId>,
    /// `(topic, partition, high watermark)` of every assigned partition, about once a
    /// second (empty in between).
    pub high_watermarks: Vec<(Arc<str>, i32, i64)>,
}

/// A record taken from librdkafka, its key and value copied into the batch's buffer
/// (start and length), not yet deserialized.
#[derive(Clone)]
struct Slot {
    /// Index into the batch's topics.
    topic: u32,
    partition: i32,
    offset: i64,
    timestamp: Option<i64>,
    key: Option<(usize, u32)>,
    value: Option<(usize, u32)>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn span(data: &[u8], (start, len): (usize, u32)) -> &[u8] {
    &data[start..start + len as usize]
}

/// Records already taken from librdkafka that come after a deserialization failure:
/// the next poll hands them out first.
struct Leftover {
    topics: Vec<Arc<str>>,
    data: Bytes,
    slots: Vec<Slot>,
    /// Splits finished at a record among these.
    finished: Vec<SplitId>,
}

/// How often per-split lag is refreshed from librdkafka's cached high watermarks.
const LAG_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The queue-event callback: librdkafka calls it (on one of its threads) when the
/// consumer queue gets an event while the fetcher thread may be asleep.
unsafe extern "C" fn wake(_rk: *mut rd::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is the `Thread` inside an `Arc` that the `ClusterConsumer` keeps
    // alive until it has disabled this callback.
    let thread = unsafe { &*(opaque as *const std::thread::Thread) };
    thread.unpark();
}

pub(crate) struct ClusterConsumer {
    cluster: Arc<str>,
    /// Serves the consumer's log lines, errors, statistics and token requests on a
    /// thread of its own; stopped before the consumer is closed.
    events: Option<ClientEvents>,
    consumer: Option<BaseConsumer<SourceContext>>,
    queue: *mut rd::rd_kafka_queue_t,
    /// The thread to wake when records arrive (librdkafka holds its address until the
    /// callback is disabled).
    _wake: Arc<std::thread::Thread>,
    topics: HashMap<String, Arc<str>>,
    bounds: HashMap<(Arc<str>, i32), i64>,
    assigned: usize,
    include_headers: bool,
    /// What a split does when its position is outside the log.
    policy: ReadPolicy,
    /// The messages of the current poll (always empty between polls).
    messages: MessageBatch,
    leftover: Option<Leftover>,
    /// Reused from poll to poll.
    slots: Vec<Slot>,
    /// Capacity to start the next batch's buffer with.
    data_hint: usize,
    /// A fatal error met after records that were handed out first.
    failed: Option<SourceError>,
    last_lag_report: std::time::Instant,
}

// SAFETY: the raw queue pointer is a reference-counted librdkafka handle, usable from
// any thread; it is only touched through `&mut self` or in `Drop`.
unsafe impl Send for ClusterConsumer {}

impl ClusterConsumer {
    /// Creates the consumer (blocking), which unparks `wake` whenever records arrive.
    /// `hooks` are the cluster's [`ClientHooks`], if the program set any.
    pub fn create(
        cluster: Arc<str>,
        props: &ClientProperties,
        wake: std::thread::Thread,
        include_headers: bool,
        policy: ReadPolicy,
        hooks: Option<Arc<dyn ClientHooks>>,
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
        crate::kafka::hooks::prepare(&mut config, props, hooks.as_ref())
            .map_err(|e| SourceError::cluster(&cluster, "create consumer", &e, props))?;
        let context = SourceContext::new(cluster.clone(), ClientRole::Reader, hooks);
        let consumer: BaseConsumer<SourceContext> = config
            .create_with_context(context)
            .map_err(|e| SourceError::cluster(&cluster, "create consumer", &e, props))?;
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => cluster.to_string())
            .increment(1);
        tracing::debug!(cluster = %cluster, "consumer created");
        // SAFETY: the client pointer is valid while `consumer` lives; the returned queue
        // is our own reference, destroyed in Drop after the callback is disabled.
        let queue = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        if queue.is_null() {
            return Err(SourceError::Cluster {
                cluster: cluster.to_string(),
                message: "librdkafka returned no consumer queue".into(),
            });
        }
        // SAFETY: the client's opaque is this context; `disable_wakeups` stops the
        // event thread before the consumer is dropped.
        let events = unsafe {
            ClientEvents::start(
                consumer.client().native_ptr(),
                consumer.context().clone(),
                true,
                None,
            )
        };
        let wake_thread = Arc::new(wake);
        // SAFETY: the opaque pointer stays valid (we hold the Arc, and moving it does not
        // move the Thread) until Drop disables the callback.
        unsafe {
            rd::rd_kafka_queue_cb_event_enable(
                queue,
                Some(self::wake),
                Arc::as_ptr(&wake_thread) as *mut c_void,
            );
        }
        Ok(Self {
            cluster,
            events: Some(events),
            consumer: Some(consumer),
            queue,
            _wake: wake_thread,
            topics: HashMap::new(),
            bounds: HashMap::new(),
            assigned: 0,
            include_headers,
            policy,
            messages: MessageBatch::new(),
            leftover: None,
            slots: Vec::new(),
            data_hint: 0,
            failed: None,
            // Report lag at the first poll, then every interval.
            last_lag_report: std::time::Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(std::time::Instant::now),
        })
    }

    fn consumer(&self) -> &BaseConsumer<SourceContext> {
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
                .map_err(|e| {
                    let message =
                        format!("invalid start offset {} for {}: {e}", s.next_offset, s.id);
                    SourceError::kafka(&self.cluster, message, &e)
                })?;
            self.assigned += 1;
        }
        if tpl.count() > 0 {
            self.consumer()
                .incremental_assign(&tpl)
                .map_err(|e| SourceError::kafka(&self.cluster, format!("assign: {e}"), &e))?;
            self.ask_leaders(&tpl);
            tracing::debug!(cluster = %self.cluster, partitions = tpl.count(), "partitions assigned");
        }
        Ok(done)
    }

    /// Asks for the metadata of the topics just assigned, without waiting for the
    /// answer. A consumer that is already connected learns the leaders of newly
    /// assigned partitions only from its next metadata request, and librdkafka's scan
    /// for leaderless partitions runs once a second: without this, a partition added
    /// to an idle consumer starts about a second late (`mck-bench handover` measured
    /// ~1.18 s instead of ~0.2 s). The answer is applied by librdkafka's own threads;
    /// the zero timeout makes this call return at once ("timed out" is expected).
    fn ask_leaders(&self, tpl: &TopicPartitionList) {
        let mut topics: Vec<String> = tpl
            .elements()
            .iter()
            .map(|e| e.topic().to_owned())
            .collect();
        topics.sort_unstable();
        topics.dedup();
        for topic in &topics {
            let _ = self
                .consumer()
                .fetch_metadata(Some(topic), std::time::Duration::ZERO);
        }
    }

    /// Stops reading these splits; records of them already taken from librdkafka (after
    /// a deserialization failure) are dropped.
    pub fn remove(&mut self, ids: &[SplitId]) {
        let mut tpl = TopicPartitionList::new();
        for id in ids {
            let topic = self.topic(&id.topic);
            self.bounds.remove(&(topic.clone(), id.partition));
            tpl.add_partition(&topic, id.partition);
        }
        self.unassign(&tpl);
        if let Some(left) = &mut self.leftover {
            let topics = &left.topics;
            let gone = |topic: u32, partition: i32| {
                ids.iter()
                    .any(|id| id.partition == partition && *id.topic == *topics[topic as usize])
            };
            left.slots.retain(|s| !gone(s.topic, s.partition));
            left.finished.retain(|f| !ids.contains(f));
            if left.slots.is_empty() && left.finished.is_empty() {
                self.leftover = None;
            }
        }
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
    /// `out` (an empty batch of this cluster). A fatal error (offset out of range) is
    /// returned after the records before it; a record that fails to deserialize ends
    /// the batch (the records after it come with the next poll).
    pub fn poll<D: Deserializer>(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
    ) -> Result<Polled, SourceError> {
        let mut polled = Polled::default();
        if let Some(left) = self.leftover.take() {
            out.topics = left.topics;
            out.data = left.data;
            let mut slots = left.slots;
            self.deserialize(deserializer, &mut slots, out, &mut polled);
            polled.finished = self.defer_finished(left.finished);
            return Ok(polled);
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut finished: Vec<(Arc<str>, i32)> = Vec::new();
        let mut out_of_range: Vec<(String, i32, i64)> = Vec::new();
        let lag_due = self.last_lag_report.elapsed() >= LAG_REPORT_INTERVAL;
        // SAFETY: the queue belongs to the consumer, which lives as long as `self`;
        // the messages are destroyed below, before this returns.
        unsafe { self.messages.take_from(self.queue, max) };
        // Pass 1: keys and values go into one buffer for the whole batch (one
        // allocation, and a record's bytes are then slices of it).
        let mut data: Vec<u8> = Vec::with_capacity(self.data_hint);
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        // Records come in runs per partition: remember the last topic handle and
        // partition bound instead of looking them up for every record.
        let mut last_topic: Option<(*mut rd::rd_kafka_topic_t, Arc<str>, u32)> = None;
        let mut last_bound: Option<(*const str, i32, Option<i64>)> = None;
        for i in 0..self.messages.len() {
            let m = self.messages.get(i);
            if let Some(err) = m.error() {
                match err {
                    // With `auto.offset.reset=error` librdkafka reports a position
                    // outside the log as an automatic-reset failure.
                    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE
                    | rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET => {
                        out_of_range.push((m.topic(), m.partition(), m.offset()));
                    }
                    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF => {}
                    // Transient errors (broker down, …): librdkafka retries by itself.
                    _ => self.consumer().context().report_error(&m.error_text()),
                }
                continue;
            }
            let handle = m.topic_handle();
            let (topic, topic_index) = match &last_topic {
                Some((h, t, k)) if *h == handle => (t, *k),
                _ => {
                    let t = intern(&mut self.topics, &m.topic());
                    let k = out.topic_index(&t);
                    let (_, t, k) = last_topic.insert((handle, t, k));
                    (&*t, *k)
                }
            };
            let partition = m.partition();
            let offset = m.offset();
            if !self.bounds.is_empty() {
                let stop = match last_bound {
                    Some((t, p, stop)) if p == partition && std::ptr::eq(t, Arc::as_ptr(topic)) => {
                        stop
                    }
                    _ => {
                        let stop = self.bounds.get(&(topic.clone(), partition)).copied();
                        last_bound = Some((Arc::as_ptr(topic), partition, stop));
                        stop
                    }
                };
                if let Some(stop) = stop {
                    if offset >= stop {
                        finished.push((topic.clone(), partition));
                        continue;
                    }
                    if offset + 1 >= stop {
                        finished.push((topic.clone(), partition));
                    }
                }
            }
            let mut copy = |bytes: &[u8]| {
                let start = data.len();
                data.extend_from_slice(bytes);
                (start, bytes.len() as u32)
            };
            let key = m.key().map(&mut copy);
            let value = m.payload().map(&mut copy);
            slots.push(Slot {
                topic: topic_index,
                partition,
                offset,
                timestamp: m.timestamp(),
                key,
                value,
                headers: if self.include_headers {
                    m.headers()
                } else {
                    Vec::new()
                },
            });
        }
        let took = self.messages.len();
        self.messages.clear();
        if !slots.is_empty() {
            // Records flow again: the current error streak is over.
            self.consumer().context().end_error_streak();
        }
        self.data_hint = data.len().next_power_of_two().clamp(4096, 16 << 20);
        out.data = Bytes::from(data);
        // Pass 2: deserialize.
        self.deserialize(deserializer, &mut slots, out, &mut polled);
        self.slots = slots;
        if lag_due {
            // Every assigned partition, with records in this poll or not: a caught-up
            // split's lag falls to 0, and one that gets no records still has one.
            self.last_lag_report = std::time::Instant::now();
            if let Ok(assigned) = self.consumer().assignment() {
                for e in assigned.elements() {
                    let t = self.topic(e.topic());
                    if let Some(h) = self.cached_high_watermark(&t, e.partition()) {
                        polled.high_watermarks.push((t, e.partition(), h));
                    }
                }
            }
        }
        // A split whose last records before its stop are transaction markers (or
        // compacted away) is finished by its fetch position; that only matters once
        // records stop coming.
        let fatal = self.out_of_range(out_of_range);
        if fatal.is_none() && took == 0 && !self.bounds.is_empty() {
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
            let ids: Vec<SplitId> = finished
                .into_iter()
                .map(|(topic, partition)| SplitId {
                    cluster: self.cluster.clone(),
                    topic,
                    partition,
                })
                .collect();
            polled.finished = self.defer_finished(ids);
        }
        match fatal {
            // Splits finished by this poll are reported first too: they are unassigned
            // already, and nothing would report them later.
            Some(e)
                if polled.records == 0
                    && polled.failed.is_none()
                    && polled.finished.is_empty()
                    && self.leftover.is_none() =>
            {
                Err(e)
            }
            Some(e) => {
                // Hand out what came before the error first; it is reported next time.
                self.failed = Some(e);
                Ok(polled)
            }
            None => Ok(polled),
        }
    }

    /// Applies the out-of-range policy to positions librdkafka found outside their
    /// logs: with the policy to fail, the first one is the error to return; else each
    /// partition jumps to the log's start or end, said and counted.
    fn out_of_range(&mut self, hits: Vec<(String, i32, i64)>) -> Option<SourceError> {
        let mut fatal = None;
        for (topic, partition, offset) in hits {
            // The log's range now, for the error (or the reset).
            let range = self
                .consumer()
                .fetch_watermarks(&topic, partition, OUT_OF_RANGE_LOOKUP)
                .ok();
            let split = format!("{}/{topic}/{partition}", self.cluster);
            let target = match (self.policy.out_of_range, range) {
                (OffsetReset::Earliest, Some((low, _))) => low,
                (OffsetReset::Latest, Some((_, high))) => high,
                _ => {
                    fatal.get_or_insert(SourceError::OffsetOutOfRange {
                        split,
                        offset,
                        log_start: range.map(|r| r.0),
                        log_end: range.map(|r| r.1),
                    });
                    continue;
                }
            };
            let (low, high) = range.unwrap_or_default();
            tracing::warn!(
                split = %split,
                offset,
                log_start = low,
                log_end = high,
                to = target,
                "position outside the log (records deleted, or the topic re-created); resetting as the out-of-range policy says"
            );
            metrics::counter!(
                crate::metrics::OFFSET_RESETS,
                "cluster" => self.cluster.to_string(),
                "topic" => topic.clone()
            )
            .increment(1);
            // librdkafka stopped the partition on the error and takes no seek: it is
            // assigned again at the new position.
            let mut tpl = TopicPartitionList::new();
            let reassigned = tpl
                .add_partition_offset(&topic, partition, Offset::Offset(target))
                .and_then(|()| self.consumer().incremental_unassign(&tpl))
                .and_then(|()| self.consumer().incremental_assign(&tpl));
            if let Err(e) = reassigned {
                let message = format!("reset of {topic}/{partition} to offset {target}: {e}");
                fatal.get_or_insert(SourceError::kafka(&self.cluster, message, &e));
            }
        }
        fatal
    }

    /// Deserializes `slots` (draining them) into `out`, whose buffer holds their
    /// bytes. A failure ends the batch: the slots after it become the leftover.
    fn deserialize<D: Deserializer>(
        &mut self,
        deserializer: &D,
        slots: &mut Vec<Slot>,
        out: &mut RecordBatch<D::Value>,
        polled: &mut Polled,
    ) {
        out.entries.reserve(slots.len());
        let mut rest = slots.drain(..);
        for slot in rest.by_ref() {
            let raw = RawRecord {
                cluster: &self.cluster,
                topic: &out.topics[slot.topic as usize],
                partition: slot.partition,
                offset: slot.offset,
                timestamp: slot.timestamp,
                key: slot.key.map(|k| span(&out.data, k)),
                value: slot.value.map(|v| span(&out.data, v)),
                headers: &slot.headers,
                shared: Some(&out.data),
            };
            let bytes = slot.key.map_or(0, |k| k.1) + slot.value.map_or(0, |v| v.1);
            match deserializer.deserialize(&raw) {
                Ok(value) => {
                    out.entries.push(BatchEntry {
                        topic: slot.topic,
                        partition: slot.partition,
                        offset: slot.offset,
                        timestamp: slot.timestamp,
                        key: slot.key,
                        headers: slot.headers,
                        bytes,
                        value,
                    });
                    polled.records += 1;
                }
                Err(error) => {
                    polled.failed = Some(Failed {
                        topic: out.topics[slot.topic as usize].clone(),
                        partition: slot.partition,
                        offset: slot.offset,
                        bytes,
                        error,
                    });
                    break;
                }
            }
        }
        let left: Vec<Slot> = rest.collect();
        if !left.is_empty() {
            self.leftover = Some(Leftover {
                topics: out.topics.clone(),
                data: out.data.clone(),
                slots: left,
                finished: Vec::new(),
            });
        }
    }

    /// Keeps finished splits that still have records in the leftover with it (they
    /// finish with the poll that hands those out); returns the others.
    fn defer_finished(&mut self, ids: Vec<SplitId>) -> Vec<SplitId> {
        let Some(left) = &mut self.leftover else {
            return ids;
        };
        let (later, now): (Vec<SplitId>, Vec<SplitId>) = ids.into_iter().partition(|id| {
            left.slots
                .iter()
                .any(|s| s.partition == id.partition && *left.topics[s.topic as usize] == *id.topic)
        });
        left.finished.extend(later);
        now
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

    fn disable_wakeups(&mut self) {
        self.messages.clear();
        self.leftover = None;
        // Joins the event thread, and gives the consumer's events back to its queue,
        // where rdkafka's close serves them.
        self.events = None;
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
