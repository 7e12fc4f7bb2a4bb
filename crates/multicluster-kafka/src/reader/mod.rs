//! Readers: the parallel workers that own splits, fetch from each cluster they have
//! splits on, and hand records out in order while tracking positions.

pub(crate) mod cluster_consumer;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::checkpoint::Checkpoint;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::metrics as m;
use crate::properties::ClientProperties;
use crate::record::Record;
use crate::split::{KafkaSplit, SplitId};
use cluster_consumer::{ClusterConsumer, Item};

/// What the enumerator tells a reader.
#[derive(Debug)]
pub(crate) enum ReaderEvent {
    /// Facts about a cluster, recorded in this reader's checkpoints.
    ClusterInfo {
        cluster: Arc<str>,
        kafka_cluster_id: Option<String>,
        initial_discovery_done: bool,
    },
    /// New splits to read, with the final consumer properties of their cluster.
    Assign {
        cluster: Arc<str>,
        properties: ClientProperties,
        splits: Vec<KafkaSplit>,
    },
    /// No split will ever be assigned again (bounded mode).
    NoMoreSplits,
    /// Stop reading these splits and forget them (their topic or cluster left the
    /// metadata). A cluster left with no split has its consumer closed.
    Remove {
        ids: Vec<SplitId>,
        /// Keep their positions until then (ms since the epoch), if set.
        retain_until_ms: Option<i64>,
    },
    /// The cluster's client properties changed: rebuild its consumer with these and
    /// resume every split at its current position.
    Rebuild {
        cluster: Arc<str>,
        properties: ClientProperties,
    },
    /// The cluster left the metadata: forget its facts.
    ForgetCluster { cluster: Arc<str> },
    /// The metadata service kept failing past the threshold (reading goes on with
    /// the last good metadata).
    MetadataFailed(crate::metadata::MetadataError),
    /// Retained positions of a re-added cluster belong to another physical cluster.
    IdentityMismatch {
        cluster: Arc<str>,
        expected: String,
        actual: String,
    },
}

/// What a reader tells the enumerator.
#[derive(Debug)]
pub(crate) enum ReaderNotice {
    /// The reader is gone; these splits (at the positions handed out) need a new owner.
    Closed {
        reader: usize,
        splits: Vec<KafkaSplit>,
    },
}

#[derive(Debug)]
struct SplitState {
    id: SplitId,
    next_offset: i64,
    stop: Option<i64>,
    finished: bool,
}

struct ClusterInfo {
    kafka_cluster_id: Option<String>,
    initial_discovery_done: bool,
}

/// One of the source's parallel readers: a stream of records from the splits it owns.
///
/// Positions count only the records handed out by [`SourceReader::next`]; a
/// [`checkpoint`](SourceReader::checkpoint) resumes each split at exactly the record
/// after the last one handed out. Dropping a reader returns its splits (at those
/// positions) to the enumerator, which gives them to the other readers.
pub struct SourceReader<D: Deserializer> {
    id: usize,
    deserializer: Arc<D>,
    events: mpsc::UnboundedReceiver<ReaderEvent>,
    notices: mpsc::UnboundedSender<ReaderNotice>,
    /// One consumer per cluster this reader has splits on.
    consumers: BTreeMap<Arc<str>, ClusterConsumer>,
    /// Splits assigned but not yet handed to their cluster's consumer, with the
    /// consumer properties of the cluster.
    to_start: BTreeMap<Arc<str>, (ClientProperties, Vec<KafkaSplit>)>,
    /// Consumers being created on the blocking pool.
    creating: HashMap<Arc<str>, tokio::task::JoinHandle<Result<ClusterConsumer, SourceError>>>,
    /// Woken by librdkafka when any consumer of this reader has something.
    notify: Arc<Notify>,
    /// Which consumer to poll first next time (fairness between clusters).
    rotate: usize,
    /// Split states; `index` maps ids to positions in this vector.
    states: Vec<SplitState>,
    index: HashMap<SplitId, usize>,
    /// The split of the previous record handed out: records come in runs per
    /// partition, so this saves a hash lookup per record.
    last: Option<(Arc<str>, i32, usize)>,
    clusters: BTreeMap<Arc<str>, ClusterInfo>,
    buffer: VecDeque<Item<D::Value>>,
    buffer_cluster: Option<Arc<str>>,
    /// Records and bytes handed out from the current batch, added to the metrics
    /// when the batch is done.
    pending_counts: (u64, u64),
    no_more_splits: bool,
    enumerator_gone: bool,
    max_batch: usize,
    poll_timeout: Duration,
    include_headers: bool,
    retained: crate::retention::Retained,
    counters: HashMap<Arc<str>, (metrics::Counter, metrics::Counter)>,
    closed: bool,
}

impl<D: Deserializer> std::fmt::Debug for SourceReader<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceReader")
            .field("id", &self.id)
            .field("splits", &self.states.len())
            .finish()
    }
}

pub(crate) struct ReaderParts<D: Deserializer> {
    pub id: usize,
    pub deserializer: Arc<D>,
    pub events: mpsc::UnboundedReceiver<ReaderEvent>,
    pub notices: mpsc::UnboundedSender<ReaderNotice>,
    pub max_batch: usize,
    pub poll_timeout: Duration,
    pub include_headers: bool,
    pub retained: crate::retention::Retained,
}

impl<D: Deserializer> SourceReader<D> {
    pub(crate) fn new(parts: ReaderParts<D>) -> Self {
        Self {
            id: parts.id,
            deserializer: parts.deserializer,
            events: parts.events,
            notices: parts.notices,
            consumers: BTreeMap::new(),
            to_start: BTreeMap::new(),
            creating: HashMap::new(),
            notify: Arc::new(Notify::new()),
            rotate: 0,
            states: Vec::new(),
            index: HashMap::new(),
            last: None,
            clusters: BTreeMap::new(),
            buffer: VecDeque::new(),
            buffer_cluster: None,
            pending_counts: (0, 0),
            no_more_splits: false,
            enumerator_gone: false,
            max_batch: parts.max_batch,
            poll_timeout: parts.poll_timeout,
            include_headers: parts.include_headers,
            retained: parts.retained,
            counters: HashMap::new(),
            closed: false,
        }
    }

    /// This reader's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Number of splits this reader owns (finished ones included).
    pub fn split_count(&self) -> usize {
        self.states.len()
    }

    fn state_mut(&mut self, id: &SplitId) -> Option<&mut SplitState> {
        let i = *self.index.get(id)?;
        self.states.get_mut(i)
    }

    /// Records an event. Splits to start are queued; [`Self::start_pending`] hands them
    /// to their consumers (creating consumers blocks, so it happens in `next`).
    fn apply(&mut self, event: ReaderEvent) -> Result<(), SourceError> {
        match event {
            ReaderEvent::ClusterInfo {
                cluster,
                kafka_cluster_id,
                initial_discovery_done,
            } => {
                self.clusters.insert(
                    cluster,
                    ClusterInfo {
                        kafka_cluster_id,
                        initial_discovery_done,
                    },
                );
            }
            ReaderEvent::NoMoreSplits => self.no_more_splits = true,
            ReaderEvent::Remove {
                ids,
                retain_until_ms,
            } => {
                if let Some(until) = retain_until_ms {
                    for s in self.positions().iter().filter(|s| ids.contains(&s.id)) {
                        let kafka_id = self
                            .clusters
                            .get(&s.id.cluster)
                            .and_then(|c| c.kafka_cluster_id.clone());
                        self.retained.keep(s, until, kafka_id);
                    }
                }
                self.remove(&ids)
            }
            ReaderEvent::Rebuild {
                cluster,
                properties,
            } => self.rebuild(cluster, properties),
            ReaderEvent::ForgetCluster { cluster } => {
                self.clusters.remove(&cluster);
            }
            ReaderEvent::MetadataFailed(e) => return Err(SourceError::Metadata(e)),
            ReaderEvent::IdentityMismatch {
                cluster,
                expected,
                actual,
            } => {
                return Err(SourceError::ClusterIdentity {
                    cluster: cluster.to_string(),
                    expected,
                    actual,
                });
            }
            ReaderEvent::Assign {
                cluster,
                properties,
                splits,
            } => {
                let mut to_fetch = Vec::new();
                for s in splits {
                    let finished = s.is_finished();
                    let i = match self.index.get(&s.id) {
                        Some(i) => *i,
                        None => {
                            self.states.push(SplitState {
                                id: s.id.clone(),
                                next_offset: s.next_offset,
                                stop: s.stop_offset,
                                finished,
                            });
                            self.index.insert(s.id.clone(), self.states.len() - 1);
                            self.states.len() - 1
                        }
                    };
                    let state = &mut self.states[i];
                    // A split assigned again keeps the position this reader handed out.
                    let split = KafkaSplit {
                        id: s.id,
                        next_offset: state.next_offset.max(s.next_offset),
                        stop_offset: state.stop,
                    };
                    state.next_offset = split.next_offset;
                    state.finished = split.is_finished();
                    if !state.finished {
                        to_fetch.push(split);
                    }
                }
                if !to_fetch.is_empty() {
                    let entry = self
                        .to_start
                        .entry(cluster)
                        .or_insert_with(|| (properties.clone(), Vec::new()));
                    entry.0 = properties;
                    entry.1.extend(to_fetch);
                }
                self.report_active();
            }
        }
        Ok(())
    }

    fn report_active(&self) {
        let active = self.states.iter().filter(|s| !s.finished).count();
        metrics::gauge!(m::ACTIVE_SPLITS, "reader" => self.id.to_string()).set(active as f64);
    }

    /// Adds the current batch's counts to the per-cluster metrics.
    fn flush_counts(&mut self) {
        let (records, bytes) = std::mem::take(&mut self.pending_counts);
        if records == 0 {
            return;
        }
        let Some(cluster) = self.buffer_cluster.clone() else {
            return;
        };
        let (r, b) = self.counters.entry(cluster.clone()).or_insert_with(|| {
            (
                metrics::counter!(m::RECORDS, "cluster" => cluster.to_string()),
                metrics::counter!(m::BYTES, "cluster" => cluster.to_string()),
            )
        });
        r.increment(records);
        b.increment(bytes);
    }

    fn is_done(&self) -> bool {
        self.no_more_splits
            && self.buffer.is_empty()
            && self.to_start.is_empty()
            && self.creating.is_empty()
            && self.states.iter().all(|s| s.finished)
    }

    /// Forgets splits: their positions leave this reader's state and checkpoints, and
    /// buffered records of them are never handed out.
    fn remove(&mut self, ids: &[SplitId]) {
        let gone: std::collections::HashSet<&SplitId> = ids.iter().collect();
        self.states.retain(|s| !gone.contains(&s.id));
        self.index = self
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        self.last = None;
        for (_, splits) in self.to_start.values_mut() {
            splits.retain(|s| !gone.contains(&s.id));
        }
        let mut by_cluster: BTreeMap<Arc<str>, Vec<SplitId>> = BTreeMap::new();
        for id in ids {
            by_cluster
                .entry(id.cluster.clone())
                .or_default()
                .push(id.clone());
        }
        for (cluster, ids) in by_cluster {
            let still_used = self.states.iter().any(|s| s.id.cluster == cluster);
            if still_used {
                if let Some(c) = self.consumers.get_mut(&cluster) {
                    c.remove(&ids);
                }
            } else if let Some(c) = self.consumers.remove(&cluster) {
                close_off_runtime(vec![Box::new(c.into_closer())]);
            }
        }
        self.report_active();
    }

    /// Replaces a cluster's consumer; its splits restart at their current positions
    /// (records the old consumer had fetched but not handed out are read again, and
    /// positions drop any duplicate).
    fn rebuild(&mut self, cluster: Arc<str>, properties: ClientProperties) {
        if let Some(old) = self.consumers.remove(&cluster) {
            close_off_runtime(vec![Box::new(old.into_closer())]);
        }
        // A consumer still being made has the old properties: let it go (the blocking
        // pool drops it when done).
        self.creating.remove(&cluster);
        let active: Vec<KafkaSplit> = self
            .states
            .iter()
            .filter(|s| s.id.cluster == cluster && !s.finished)
            .map(|s| KafkaSplit {
                id: s.id.clone(),
                next_offset: s.next_offset,
                stop_offset: s.stop,
            })
            .collect();
        let entry = self
            .to_start
            .entry(cluster)
            .or_insert_with(|| (properties.clone(), Vec::new()));
        entry.0 = properties;
        for s in active {
            if !entry.1.iter().any(|x| x.id == s.id) {
                entry.1.push(s);
            }
        }
    }

    /// Creates missing consumers (on the blocking pool) and starts queued splits.
    async fn start_pending(&mut self) -> Result<(), SourceError> {
        // Consumers whose creation finished.
        let ready: Vec<Arc<str>> = self
            .creating
            .iter()
            .filter(|(_, h)| h.is_finished())
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in ready {
            if let Some(handle) = self.creating.remove(&cluster) {
                let created = handle.await.map_err(|e| {
                    SourceError::Config(format!("consumer creation task failed: {e}"))
                })??;
                if self.states.iter().any(|s| s.id.cluster == cluster)
                    || self.to_start.contains_key(&cluster)
                {
                    self.consumers.insert(cluster, created);
                } else {
                    // Every split of the cluster left while its consumer was being made.
                    close_off_runtime(vec![Box::new(created.into_closer())]);
                }
            }
        }
        let waiting: Vec<Arc<str>> = self.to_start.keys().cloned().collect();
        for cluster in waiting {
            if self.consumers.contains_key(&cluster) {
                let (_, splits) = self.to_start.remove(&cluster).expect("listed");
                let consumer = self.consumers.get_mut(&cluster).expect("checked");
                for id in consumer.add(splits)? {
                    self.mark_finished(&id);
                }
            } else if !self.creating.contains_key(&cluster) {
                // Creating a consumer blocks for a while: it happens on the blocking
                // pool while this reader goes on with its other clusters.
                let props = self.to_start[&cluster].0.clone();
                let (c, n) = (cluster.clone(), self.notify.clone());
                let headers = self.include_headers;
                let handle = tokio::task::spawn_blocking(move || {
                    let created = ClusterConsumer::create(c, &props, n.clone(), headers);
                    n.notify_one();
                    created
                });
                self.creating.insert(cluster, handle);
            }
        }
        Ok(())
    }

    fn mark_finished(&mut self, id: &SplitId) {
        if let Some(s) = self.state_mut(id) {
            s.finished = true;
            if let Some(stop) = s.stop {
                s.next_offset = s.next_offset.max(stop);
            }
        }
        self.report_active();
    }

    /// Polls the consumers without waiting, starting with a different one each time;
    /// stops at the first that has records. Returns the number of records buffered.
    fn poll_consumers(&mut self) -> Result<usize, SourceError> {
        let clusters: Vec<Arc<str>> = self.consumers.keys().cloned().collect();
        if clusters.is_empty() {
            return Ok(0);
        }
        self.rotate = self.rotate.wrapping_add(1);
        for k in 0..clusters.len() {
            let cluster = &clusters[(self.rotate + k) % clusters.len()];
            let Some(consumer) = self.consumers.get_mut(cluster) else {
                continue;
            };
            let polled =
                consumer.poll(self.deserializer.as_ref(), self.max_batch, &mut self.buffer)?;
            for id in &polled.finished {
                // Records of the split buffered before the stop are still handed out;
                // `pop` finishes the split at its last record.
                let pending = self
                    .buffer
                    .iter()
                    .any(|i| i.partition == id.partition && *i.topic == *id.topic);
                if !pending {
                    self.mark_finished(id);
                }
            }
            for (topic, partition, hw) in polled.high_watermarks {
                if let Some(next) = self
                    .index
                    .get(&SplitId {
                        cluster: cluster.clone(),
                        topic: topic.clone(),
                        partition,
                    })
                    .map(|i| self.states[*i].next_offset)
                {
                    metrics::gauge!(m::SPLIT_LAG, "cluster" => cluster.to_string(), "topic" => topic.to_string(), "partition" => partition.to_string())
                        .set((hw - next).max(0) as f64);
                }
            }
            if polled.records > 0 {
                self.buffer_cluster = Some(cluster.clone());
                return Ok(polled.records);
            }
        }
        Ok(0)
    }

    /// Hands out the next buffered record, if any, advancing its split's position.
    fn pop(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        let cluster = self.buffer_cluster.clone()?;
        while let Some(item) = self.buffer.pop_front() {
            let i = match &self.last {
                Some((topic, partition, i))
                    if *partition == item.partition && Arc::ptr_eq(topic, &item.topic) =>
                {
                    *i
                }
                _ => {
                    let id = SplitId {
                        cluster: cluster.clone(),
                        topic: item.topic.clone(),
                        partition: item.partition,
                    };
                    let Some(i) = self.index.get(&id).copied() else {
                        continue; // a split this reader no longer owns
                    };
                    self.last = Some((item.topic.clone(), item.partition, i));
                    i
                }
            };
            let state = &mut self.states[i];
            if state.finished || item.offset < state.next_offset {
                continue; // already handed out (a rebuilt consumer re-fetched it)
            }
            if let Some(stop) = state.stop
                && item.offset >= stop
            {
                state.finished = true;
                continue;
            }
            state.next_offset = item.offset + 1;
            let reached_stop = state.stop.is_some_and(|stop| state.next_offset >= stop);
            if reached_stop {
                state.finished = true;
                self.report_active();
            }
            self.pending_counts.0 += 1;
            self.pending_counts.1 += item.bytes as u64;
            return Some(item.value.map_err(SourceError::from));
        }
        self.flush_counts();
        None
    }

    /// The next record, or `None` once the input has ended (bounded mode: every split
    /// reached its stop and no more splits will come).
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        loop {
            if self.closed {
                return None;
            }
            if let Some(r) = self.pop() {
                return Some(r);
            }
            if let Err(e) = self.drain_events() {
                return Some(Err(e));
            }
            if let Err(e) = self.start_pending().await {
                return Some(Err(e));
            }
            match self.poll_consumers() {
                Ok(0) => {}
                Ok(_) => continue,
                Err(e) => return Some(Err(e)),
            }
            if self.is_done() {
                return None;
            }
            tokio::select! {
                biased;
                event = self.events.recv(), if !self.enumerator_gone => match event {
                    Some(e) => {
                        if let Err(e) = self.apply(e) {
                            return Some(Err(e));
                        }
                    }
                    None => {
                        self.enumerator_gone = true;
                        if self.states.is_empty() {
                            self.closed = true;
                            return Some(Err(SourceError::Closed));
                        }
                    }
                },
                _ = self.notify.notified() => {}
                // A safety net: librdkafka's wake-up covers new records, this covers
                // anything else (position-based stops, missed wake-ups).
                _ = tokio::time::sleep(self.poll_timeout) => {}
            }
        }
    }

    /// Applies every event the enumerator has already sent (assignments in flight), so
    /// a checkpoint taken now includes them.
    fn drain_events(&mut self) -> Result<(), SourceError> {
        while let Ok(e) = self.events.try_recv() {
            self.apply(e)?;
        }
        Ok(())
    }

    /// This reader's positions: every split it owns at the offset after the last
    /// record handed out. Merge the checkpoints of all readers with
    /// [`Checkpoint::merge`].
    pub fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        self.drain_events()?;
        let mut cp = Checkpoint::from_splits(self.positions());
        // Retained positions go into every reader's checkpoint; merging keeps one.
        for (id, r) in self.retained.live() {
            let c = cp.clusters.entry(id.cluster.to_string()).or_default();
            if c.kafka_cluster_id.is_none() {
                c.kafka_cluster_id = r.kafka_cluster_id.clone();
            }
            if !c
                .splits
                .iter()
                .any(|s| *s.topic == *id.topic && s.partition == id.partition)
            {
                c.splits.push(crate::checkpoint::SplitCheckpoint {
                    topic: id.topic.to_string(),
                    partition: id.partition,
                    next_offset: r.next_offset,
                    stop_offset: r.stop_offset,
                    retained_until_ms: Some(r.until_ms),
                });
            }
        }
        cp.normalize();
        for (cluster, info) in &self.clusters {
            let c = cp.clusters.entry(cluster.to_string()).or_default();
            c.kafka_cluster_id = info.kafka_cluster_id.clone();
            c.initial_discovery_done = info.initial_discovery_done;
        }
        Ok(cp)
    }

    fn positions(&self) -> Vec<KafkaSplit> {
        self.states
            .iter()
            .map(|s| KafkaSplit {
                id: s.id.clone(),
                next_offset: s.next_offset,
                stop_offset: s.stop,
            })
            .collect()
    }

    /// Stops reading and closes every consumer (on the blocking pool, waiting for
    /// them), returning unfinished splits to the enumerator.
    pub async fn close(mut self) {
        let closers = self.shutdown();
        let _ = tokio::task::spawn_blocking(move || {
            for close in closers {
                close();
            }
        })
        .await;
    }

    fn shutdown(&mut self) -> Vec<Box<dyn FnOnce() + Send>> {
        if !self.closed {
            self.closed = true;
            let _ = self.drain_events();
            let splits: Vec<KafkaSplit> = self
                .positions()
                .into_iter()
                .filter(|s| !s.is_finished())
                .collect();
            let _ = self.notices.send(ReaderNotice::Closed {
                reader: self.id,
                splits,
            });
        }
        std::mem::take(&mut self.consumers)
            .into_values()
            .map(|c| Box::new(c.into_closer()) as Box<dyn FnOnce() + Send>)
            .collect()
    }
}

impl<D: Deserializer> Drop for SourceReader<D> {
    fn drop(&mut self) {
        let closers = self.shutdown();
        close_off_runtime(closers);
    }
}

/// Closing a consumer blocks: do it on the blocking pool (or a thread of its own
/// outside a runtime), so async code never stalls on it.
fn close_off_runtime(closers: Vec<Box<dyn FnOnce() + Send>>) {
    if closers.is_empty() {
        return;
    }
    let run = move || {
        for close in closers {
            close();
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(run);
        }
        Err(_) => {
            let _ = std::thread::Builder::new()
                .name("mck-close".into())
                .spawn(run);
        }
    }
}
