//! One cluster's consumer inside a reader: an rdkafka consumer with manual assignment
//! (no group rebalancing), polled by the cluster's fetcher on one of the reader's
//! fetch threads ([`super::fetcher`]). The client is often the enumerator's lookup
//! client of the cluster ([`crate::kafka::shared`]), taken for as long as the reader
//! reads the cluster.
//!
//! Records are taken from librdkafka a batch at a time (every message it has ready, up
//! to the batch size, in one call), their keys and values copied into one buffer per
//! batch, and deserialized, all on the fetch thread. Nothing is buffered beyond
//! librdkafka's own prefetch queue, whose limits (`queued.max.messages.kbytes`,
//! `queued.min.messages`) bound memory, and the two batches the fetcher builds ahead:
//! when the application stops asking for records, librdkafka stops fetching. The
//! fetch thread sleeps until librdkafka's queue-event callback wakes it. Making the
//! consumer happens on the fetch thread; closing a client blocks, and happens on a
//! thread of its own.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::Arc;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::base::config::ReadPolicy;
use crate::base::hooks::ClientHooks;
use crate::base::offsets::OffsetReset;
use crate::base::properties::ClientProperties;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::events::SourceContext;
use crate::kafka::shared::{ClientShare, SharedClient};
use crate::record::RecordBatch;

use super::native::{MessageBatch, set_leader_epoch};
use super::staging::{Slot, Staging};

mod out_of_range;
mod poll;
mod truncation;

pub(crate) use super::fetch_path::{FetchPath, Polled, Wake};
pub use crate::kafka::config::READER_DEFAULTS;

/// How often per-split lag is refreshed from librdkafka's cached high watermarks.
const LAG_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The queue-event callback: librdkafka calls it (on one of its threads) when the
/// consumer queue gets an event while the fetch thread may be asleep.
unsafe extern "C" fn wake(_rk: *mut rd::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is the `Wake` inside an `Arc` that the `ClusterConsumer` keeps
    // alive until it has disabled this callback.
    let wake = unsafe { &*(opaque as *const Wake) };
    wake.wake();
}

pub(crate) struct ClusterConsumer {
    cluster: Arc<str>,
    /// The client this reader fetches with, often the enumerator's lookup client of
    /// the cluster ([`crate::kafka::shared`]); released (everything unassigned) when
    /// the reader is done with it.
    client: Option<Arc<SharedClient>>,
    queue: *mut rd::rd_kafka_queue_t,
    /// What to wake when records arrive (librdkafka holds its address until the
    /// callback is disabled).
    _wake: Arc<Wake>,
    topics: HashMap<String, Arc<str>>,
    bounds: HashMap<(Arc<str>, i32), i64>,
    assigned: usize,
    include_headers: bool,
    /// What a split does when its position is outside the log.
    policy: ReadPolicy,
    /// The messages of the current poll (always empty between polls).
    messages: MessageBatch,
    /// Records taken and not handed out yet.
    staging: Staging,
    /// Reused from poll to poll.
    slots: Vec<Slot>,
    last_lag_report: std::time::Instant,
}

// SAFETY: the raw queue pointer is a reference-counted librdkafka handle, usable from
// any thread; it is only touched through `&mut self` or in `Drop`.
unsafe impl Send for ClusterConsumer {}

impl ClusterConsumer {
    /// Creates the consumer, which wakes `wake` whenever records arrive.
    /// `hooks` are the cluster's [`ClientHooks`], if the program set any.
    pub fn create(
        cluster: Arc<str>,
        props: &ClientProperties,
        wake: Arc<Wake>,
        include_headers: bool,
        policy: ReadPolicy,
        hooks: Option<Arc<dyn ClientHooks>>,
        share: &ClientShare,
    ) -> Result<Self, SourceError> {
        let setup = ClientSetup {
            hooks,
            dispatch: None,
        };
        let client = share.reader_client(&cluster, props, setup)?;
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => cluster.to_string())
            .increment(1);
        tracing::debug!(cluster = %cluster, "consumer created");
        let consumer = client.consumer();
        // SAFETY: the client pointer is valid while `consumer` lives; the returned queue
        // is our own reference, destroyed in Drop after the callback is disabled.
        let queue = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        if queue.is_null() {
            client.release_reading();
            return Err(SourceError::Cluster {
                cluster: cluster.to_string(),
                message: "librdkafka returned no consumer queue".into(),
            });
        }
        let wake_thread = wake;
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
            client: Some(client),
            queue,
            _wake: wake_thread,
            topics: HashMap::new(),
            bounds: HashMap::new(),
            assigned: 0,
            include_headers,
            policy,
            messages: MessageBatch::new(),
            staging: Staging::default(),
            slots: Vec::new(),
            // Report lag at the first poll, then every interval.
            last_lag_report: std::time::Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(std::time::Instant::now),
        })
    }

    fn consumer(&self) -> &BaseConsumer<SourceContext> {
        self.client.as_ref().expect("present until drop").consumer()
    }

    fn topic(&mut self, name: &str) -> Arc<str> {
        intern(&mut self.topics, name)
    }

    /// Starts reading these splits at their positions. Returns those already at their
    /// stop (nothing to read). A position that comes with the leader epoch of the
    /// record before it (a restored split) is checked with it before anything is
    /// fetched ([`Self::seek_checked`]).
    pub fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        let mut checked = Vec::new();
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
            if let Some(epoch) = s.epoch_before().filter(|_| s.next_offset > 0)
                && set_leader_epoch(&mut tpl, &topic, s.id.partition, epoch)
            {
                checked.push((topic, s.id.partition, s.next_offset, epoch));
            }
            self.assigned += 1;
        }
        if tpl.count() > 0 {
            self.consumer()
                .incremental_assign(&tpl)
                .map_err(|e| SourceError::kafka(&self.cluster, format!("assign: {e}"), &e))?;
            // The client may be one that paused a partition before (alignment, time
            // order) and is reused: librdkafka keeps that pause across assignments,
            // and a split added is fetched.
            if let Err(e) = self.consumer().resume(&tpl) {
                tracing::debug!(cluster = %self.cluster, error = %e, "resuming partitions just assigned failed");
            }
            self.seek_checked(checked);
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
        self.staging.remove(ids);
    }

    /// Pauses or resumes fetching these splits. librdkafka drops what it fetched of a
    /// paused partition and not yet handed to this consumer's queue's reader, and on
    /// resuming fetches again from the position after the last message taken: nothing
    /// is skipped.
    pub fn pause(&mut self, ids: &[SplitId], paused: bool) {
        let mut tpl = TopicPartitionList::new();
        for id in ids {
            let topic = self.topic(&id.topic);
            tpl.add_partition(&topic, id.partition);
        }
        if tpl.count() == 0 {
            return;
        }
        let result = if paused {
            self.consumer().pause(&tpl)
        } else {
            self.consumer().resume(&tpl)
        };
        if let Err(e) = result {
            tracing::warn!(cluster = %self.cluster, error = %e, paused, "pausing or resuming partitions failed");
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

    /// Stops reading, and gives the client up to the caller (see [`Self::release`]).
    pub fn release_client(mut self) -> Option<Arc<SharedClient>> {
        self.release()
    }

    /// Stops reading with the client: the wake-up callback goes, everything is
    /// unassigned and what the consumer queue still holds is dropped, so whoever
    /// fetches with the client next (or nobody: it may be the enumerator's) starts
    /// clean. The client is closed when its last holder lets it go.
    fn release(&mut self) -> Option<Arc<SharedClient>> {
        self.messages.clear();
        self.staging.clear();
        let client = self.client.take()?;
        if !self.queue.is_null() {
            // SAFETY: the queue handle is ours; after the first call librdkafka no
            // longer uses the opaque pointer; messages taken are destroyed at once.
            unsafe {
                rd::rd_kafka_queue_cb_event_enable(self.queue, None, std::ptr::null_mut());
            }
            if let Ok(assigned) = client.consumer().assignment()
                && assigned.count() > 0
                && let Err(e) = client.consumer().incremental_unassign(&assigned)
            {
                tracing::warn!(cluster = %self.cluster, error = %e, "unassign failed");
            }
            // SAFETY: as above.
            unsafe {
                loop {
                    let m = rd::rd_kafka_consume_queue(self.queue, 0);
                    if m.is_null() {
                        break;
                    }
                    rd::rd_kafka_message_destroy(m);
                }
                rd::rd_kafka_queue_destroy(self.queue);
            }
            self.queue = std::ptr::null_mut();
        }
        client.release_reading();
        Some(client)
    }
}

impl Drop for ClusterConsumer {
    fn drop(&mut self) {
        drop(self.release());
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

/// librdkafka's consumer as a fetch path.
impl<D: Deserializer> FetchPath<D> for ClusterConsumer {
    fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError> {
        ClusterConsumer::add(self, splits)
    }

    fn remove(&mut self, ids: &[SplitId]) {
        ClusterConsumer::remove(self, ids)
    }

    fn pause(&mut self, ids: &[SplitId], paused: bool) {
        ClusterConsumer::pause(self, ids, paused)
    }

    fn poll(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
    ) -> Result<Polled, SourceError> {
        ClusterConsumer::poll(self, deserializer, max, out)
    }

    fn close(self: Box<Self>, closed: std::sync::mpsc::Sender<()>) {
        // What the reader read with the client is unassigned at once; the client,
        // when this was its last holder, is closed on a thread of its own.
        let client = self.release_client();
        crate::kafka::client::close_detached((client, closed));
    }
}
