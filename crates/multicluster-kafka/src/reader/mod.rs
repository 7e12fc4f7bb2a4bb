//! Readers: the parallel workers that own splits, fetch from each cluster they have
//! splits on, and hand records out in order while tracking positions.

pub(crate) mod cluster_consumer;
mod fetcher;
mod native;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::checkpoint::Checkpoint;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::metrics as m;
use crate::properties::ClientProperties;
use crate::record::{Record, RecordBatch};
use crate::split::{KafkaSplit, SplitId};
use cluster_consumer::{Failed, Polled};
use fetcher::{Answer, Fetcher, FetcherSettings};

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
    /// The latest high watermark a poll reported (-1: none yet).
    high_watermark: i64,
    /// This split's `mck_split_lag` series, once it has a value, and that value.
    lag: Option<(metrics::Gauge, i64)>,
}

impl SplitState {
    fn new(id: SplitId, next_offset: i64, stop: Option<i64>, finished: bool) -> Self {
        Self {
            id,
            next_offset,
            stop,
            finished,
            high_watermark: -1,
            lag: None,
        }
    }

    /// Sets `mck_split_lag` to what is left to hand out: the latest high watermark
    /// (capped at the stop offset) minus the next position. Nothing before the first
    /// watermark is known.
    fn report_lag(&mut self) {
        if self.high_watermark < 0 {
            return;
        }
        let end = match self.stop {
            Some(stop) => self.high_watermark.min(stop),
            None => self.high_watermark,
        };
        let lag = if self.finished {
            0
        } else {
            (end - self.next_offset).max(0)
        };
        match &mut self.lag {
            Some((_, last)) if *last == lag => {}
            Some((gauge, last)) => {
                gauge.set(lag as f64);
                *last = lag;
            }
            None => {
                let id = &self.id;
                let gauge = metrics::gauge!(m::SPLIT_LAG, "cluster" => id.cluster.to_string(), "topic" => id.topic.to_string(), "partition" => id.partition.to_string());
                gauge.set(lag as f64);
                self.lag = Some((gauge, lag));
            }
        }
    }

    /// The split leaves this reader: its lag series is marked removed (NaN, see
    /// [`crate::metrics::SPLIT_LAG`]).
    fn drop_lag(&mut self) {
        if let Some((gauge, _)) = self.lag.take() {
            gauge.set(f64::NAN);
        }
    }
}

/// Records polled from one cluster's consumer, handed out by `next` one at a time or
/// by `next_batch` all at once.
struct Buffered<V> {
    records: Option<crate::record::IntoIter<V>>,
    /// A record of that cluster that failed to deserialize, handed out (as an error)
    /// after the records.
    failed: Option<(Arc<str>, Failed)>,
    /// Records and bytes handed out, added to the metrics of `cluster` once
    /// everything is handed out.
    counts: (u64, u64),
    cluster: Option<Arc<str>>,
    /// Splits whose consumer saw their stop, finished once everything is handed out.
    finish_after: Vec<SplitId>,
}

impl<V> Default for Buffered<V> {
    fn default() -> Self {
        Self {
            records: None,
            failed: None,
            counts: (0, 0),
            cluster: None,
            finish_after: Vec::new(),
        }
    }
}

struct ClusterInfo {
    kafka_cluster_id: Option<String>,
    initial_discovery_done: bool,
}

/// One of the source's parallel readers: a stream of records from the splits it owns.
///
/// Records are handed out one at a time by [`SourceReader::next`], or a polled batch
/// at a time by [`SourceReader::next_batch`] (cheaper per record); the two can be
/// mixed. Positions count only the records handed out; a
/// [`checkpoint`](SourceReader::checkpoint) resumes each split at exactly the record
/// after the last one handed out. Dropping a reader returns its splits (at those
/// positions) to the enumerator, which gives them to the other readers.
pub struct SourceReader<D: Deserializer> {
    id: usize,
    deserializer: Arc<D>,
    events: mpsc::UnboundedReceiver<ReaderEvent>,
    notices: mpsc::UnboundedSender<ReaderNotice>,
    /// One fetcher (a thread with the cluster's consumer) per cluster this reader has
    /// splits on.
    consumers: BTreeMap<Arc<str>, Fetcher<D::Value>>,
    /// Splits assigned but not yet handed to their cluster's fetcher, with the
    /// consumer properties of the cluster.
    to_start: BTreeMap<Arc<str>, (ClientProperties, Vec<KafkaSplit>)>,
    /// Answers of the fetchers not handed out yet, oldest first (a fetcher has at
    /// most two answered or being made; another is asked for when one is handed out).
    ready: VecDeque<(Arc<str>, Answer<D::Value>)>,
    /// Woken by the fetchers when they answer.
    notify: Arc<Notify>,
    /// Split states; `index` maps ids to positions in this vector.
    states: Vec<SplitState>,
    index: HashMap<SplitId, usize>,
    /// The split of the previous record handed out: records come in runs per
    /// partition, so this saves a hash lookup per record.
    last: Option<(Arc<str>, i32, usize)>,
    /// Splits (indices into `states`) with records handed out or a new high watermark
    /// since their lag was last reported; reported once the batch is handed out.
    touched: Vec<usize>,
    clusters: BTreeMap<Arc<str>, ClusterInfo>,
    /// What the last poll found and is not handed out yet (boxed: it is touched once
    /// per batch, and keeps the reader small to move).
    handout: Box<Buffered<D::Value>>,
    no_more_splits: bool,
    enumerator_gone: bool,
    max_batch: usize,
    poll_timeout: Duration,
    include_headers: bool,
    /// The program's hooks for each cluster's librdkafka clients.
    client_hooks: Option<crate::client_context::ClientHooksFactory>,
    retained: crate::retention::Retained,
    /// Clusters whose errors count (the others are leaving the metadata).
    active: crate::active::ActiveClusters,
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
    pub client_hooks: Option<crate::client_context::ClientHooksFactory>,
    pub retained: crate::retention::Retained,
    pub active: crate::active::ActiveClusters,
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
            ready: VecDeque::new(),
            notify: Arc::new(Notify::new()),
            states: Vec::new(),
            index: HashMap::new(),
            last: None,
            touched: Vec::new(),
            clusters: BTreeMap::new(),
            handout: Box::default(),
            no_more_splits: false,
            enumerator_gone: false,
            max_batch: parts.max_batch,
            poll_timeout: parts.poll_timeout,
            include_headers: parts.include_headers,
            client_hooks: parts.client_hooks,
            retained: parts.retained,
            active: parts.active,
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

    /// Records an event. Splits to start are queued; [`Self::start_pending`] hands them
    /// to their clusters' fetchers (starting fetchers as needed) in `next`.
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
                            self.states.push(SplitState::new(
                                s.id.clone(),
                                s.next_offset,
                                s.stop_offset,
                                finished,
                            ));
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
        let (records, bytes) = std::mem::take(&mut self.handout.counts);
        if records == 0 {
            return;
        }
        let Some(cluster) = self.handout.cluster.clone() else {
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
            && self.handout.records.is_none()
            && self.handout.failed.is_none()
            && self.to_start.is_empty()
            && self.states.iter().all(|s| s.finished)
    }

    /// Forgets splits: their positions leave this reader's state and checkpoints, and
    /// buffered records of them are never handed out.
    fn remove(&mut self, ids: &[SplitId]) {
        let gone: std::collections::HashSet<&SplitId> = ids.iter().collect();
        // Indices change below: what was handed out so far is reported first.
        self.report_lag();
        for s in self.states.iter_mut().filter(|s| gone.contains(&s.id)) {
            s.drop_lag();
        }
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
        self.to_start.retain(|_, (_, splits)| !splits.is_empty());
        // Records of these splits waiting to be handed out never are, even if the
        // splits are assigned again before that.
        if let Some(rest) = self.handout.records.take() {
            let mut batch = rest.into_batch();
            batch.drop_splits(ids);
            self.handout.records = Some(batch.into_iter());
        }
        if let Some((cluster, f)) = &self.handout.failed
            && gone.contains(&SplitId {
                cluster: cluster.clone(),
                topic: f.topic.clone(),
                partition: f.partition,
            })
        {
            self.handout.failed = None;
        }
        self.handout.finish_after.retain(|id| !gone.contains(id));
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
                for (c, answer) in &mut self.ready {
                    if *c == cluster
                        && let Answer::Batch(batch, polled) = answer
                    {
                        fetcher::drop_splits(batch, polled, &ids);
                    }
                }
                if let Some(c) = self.consumers.get_mut(&cluster) {
                    c.remove(ids);
                }
            } else {
                // The fetcher thread closes the consumer by itself.
                self.consumers.remove(&cluster);
                self.ready.retain(|(c, _)| *c != cluster);
            }
        }
        self.report_active();
    }

    /// Replaces a cluster's consumer; its splits restart at their current positions
    /// (records the old consumer had fetched but not handed out are read again, and
    /// positions drop any duplicate).
    fn rebuild(&mut self, cluster: Arc<str>, properties: ClientProperties) {
        // The old fetcher closes its consumer on its own thread; what it fetched and
        // was not handed out is read again.
        self.consumers.remove(&cluster);
        self.ready.retain(|(c, _)| *c != cluster);
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
        if active.is_empty() && !self.to_start.contains_key(&cluster) {
            return; // nothing of the cluster left to read
        }
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

    /// Starts fetchers for clusters that have none, and hands queued splits to them.
    fn start_pending(&mut self) -> Result<(), SourceError> {
        let waiting: Vec<Arc<str>> = self.to_start.keys().cloned().collect();
        for cluster in waiting {
            let (props, splits) = self.to_start.remove(&cluster).expect("listed");
            if !self.consumers.contains_key(&cluster) {
                let settings = FetcherSettings {
                    max_batch: self.max_batch,
                    include_headers: self.include_headers,
                    idle: self.poll_timeout,
                    reader: self.notify.clone(),
                    hooks: self
                        .client_hooks
                        .as_ref()
                        .and_then(|f| f.for_cluster(&cluster)),
                };
                match Fetcher::spawn(
                    cluster.clone(),
                    props.clone(),
                    self.deserializer.clone(),
                    settings,
                ) {
                    Ok(mut f) => {
                        f.ask();
                        self.consumers.insert(cluster.clone(), f);
                    }
                    Err(e) => {
                        self.to_start.insert(cluster, (props, splits));
                        return Err(e);
                    }
                }
            }
            let fetcher = self.consumers.get_mut(&cluster).expect("started");
            fetcher.add(splits);
        }
        Ok(())
    }

    fn mark_finished(&mut self, id: &SplitId) {
        if let Some(i) = self.index.get(id).copied() {
            let s = &mut self.states[i];
            s.finished = true;
            if let Some(stop) = s.stop {
                s.next_offset = s.next_offset.max(stop);
            }
            self.touched.push(i);
        }
        self.report_active();
    }

    /// Updates the lag of the splits touched since the last report (once per batch,
    /// not per record).
    fn report_lag(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        self.touched.sort_unstable();
        self.touched.dedup();
        for i in self.touched.drain(..) {
            if let Some(s) = self.states.get_mut(i) {
                s.report_lag();
            }
        }
    }

    /// Collects the fetchers' answers, then makes the oldest one the buffer (empty
    /// when this is called) and asks its fetcher for the next. Returns the number of
    /// records buffered (a failed record counts).
    fn take_answers(&mut self) -> Result<usize, SourceError> {
        for (cluster, fetcher) in &mut self.consumers {
            if let Some(answer) = fetcher.answer() {
                self.ready.push_back((cluster.clone(), answer));
            }
        }
        while let Some((cluster, answer)) = self.ready.pop_front() {
            let (batch, polled) = match answer {
                Answer::Batch(batch, polled) => (batch, polled),
                Answer::Failed(e) | Answer::Gone(e) if !self.active.is_active(&cluster) => {
                    tracing::debug!(cluster = %cluster, error = %e, "ignoring an error of a cluster the metadata no longer calls active");
                    self.ask_again(&cluster);
                    continue;
                }
                Answer::Failed(e) | Answer::Gone(e) => {
                    self.ask_again(&cluster);
                    return Err(e);
                }
                Answer::Panicked(payload) => {
                    // A later call starts a new fetcher for the cluster's splits, at
                    // the positions handed out.
                    self.ask_again(&cluster);
                    std::panic::resume_unwind(payload);
                }
            };
            self.ask_again(&cluster);
            if let Some(found) = self.buffer(cluster, batch, polled) {
                return Ok(found);
            }
        }
        Ok(0)
    }

    /// Asks the cluster's fetcher for its next batch; a fetcher whose thread has ended
    /// is replaced by a new one the next time round.
    fn ask_again(&mut self, cluster: &Arc<str>) {
        let Some(fetcher) = self.consumers.get_mut(cluster) else {
            return;
        };
        if fetcher.is_gone() {
            let properties = fetcher.properties.clone();
            self.rebuild(cluster.clone(), properties);
        } else {
            fetcher.ask();
        }
    }

    /// Makes a fetcher's batch the buffer. `None` when it holds nothing to hand out.
    fn buffer(
        &mut self,
        cluster: Arc<str>,
        batch: RecordBatch<D::Value>,
        polled: Polled,
    ) -> Option<usize> {
        for id in polled.finished {
            // Records of the split polled before the stop are still handed out
            // first (handing out the one just before the stop finishes it too).
            let pending = batch.entries.iter().any(|e| {
                e.partition == id.partition && *batch.topics[e.topic as usize] == *id.topic
            }) || polled
                .failed
                .as_ref()
                .is_some_and(|f| f.partition == id.partition && *f.topic == *id.topic);
            if pending {
                self.handout.finish_after.push(id);
            } else {
                self.mark_finished(&id);
            }
        }
        for (topic, partition, hw) in polled.high_watermarks {
            let id = SplitId {
                cluster: cluster.clone(),
                topic,
                partition,
            };
            if let Some(i) = self.index.get(&id).copied() {
                self.states[i].high_watermark = hw;
                self.touched.push(i);
            }
        }
        // The batch's first run of records finds its split by lookup, so it is
        // counted as touched even if the previous batch ended on the same split.
        self.last = None;
        let found = polled.records + usize::from(polled.failed.is_some());
        if found == 0 {
            // Watermarks (or finished splits) without records: reported now.
            self.report_lag();
            return None;
        }
        self.handout.records = Some(batch.into_iter());
        self.handout.failed = polled.failed.map(|f| (cluster.clone(), f));
        self.handout.cluster = Some(cluster);
        Some(found)
    }

    /// Whether a polled record is handed out (a split this reader owns, not finished,
    /// not handed out before); if so, its split's position moves past it.
    fn accept(
        &mut self,
        cluster: &Arc<str>,
        topic: &Arc<str>,
        partition: i32,
        offset: i64,
    ) -> bool {
        let i = match &self.last {
            Some((t, p, i)) if *p == partition && Arc::ptr_eq(t, topic) => *i,
            _ => {
                let id = SplitId {
                    cluster: cluster.clone(),
                    topic: topic.clone(),
                    partition,
                };
                let Some(i) = self.index.get(&id).copied() else {
                    return false; // a split this reader no longer owns
                };
                self.last = Some((topic.clone(), partition, i));
                self.touched.push(i);
                i
            }
        };
        let state = &mut self.states[i];
        if state.finished || offset < state.next_offset {
            return false; // already handed out (a rebuilt consumer re-fetched it)
        }
        if let Some(stop) = state.stop
            && offset >= stop
        {
            state.finished = true;
            self.report_active();
            return false;
        }
        state.next_offset = offset + 1;
        if state.stop.is_some_and(|stop| state.next_offset >= stop) {
            state.finished = true;
            self.report_active();
        }
        true
    }

    /// Hands out the next buffered record, if any, advancing its split's position.
    fn pop(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        while let Some((record, bytes)) =
            self.handout.records.as_mut().and_then(|b| b.next_counted())
        {
            if self.accept(
                &record.cluster,
                &record.topic,
                record.partition,
                record.offset,
            ) {
                self.handout.counts.0 += 1;
                self.handout.counts.1 += u64::from(bytes);
                return Some(Ok(record));
            }
        }
        self.handout.records = None;
        let failed = self.take_failed();
        self.buffer_done();
        failed.map(Err)
    }

    /// The deserialization failure after the buffered records, if its split still
    /// wants it (its position moves past it).
    fn take_failed(&mut self) -> Option<SourceError> {
        let (cluster, f) = self.handout.failed.take()?;
        if !self.accept(&cluster, &f.topic, f.partition, f.offset) {
            return None;
        }
        self.handout.counts.0 += 1;
        self.handout.counts.1 += u64::from(f.bytes);
        Some(SourceError::from(f.error))
    }

    /// Hands out the buffered records as one batch, advancing their splits'
    /// positions; then the deserialization failure after them, if any.
    fn take_batch(&mut self) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        if let Some(rest) = self.handout.records.take() {
            let mut batch = rest.into_batch();
            self.accept_batch(&mut batch);
            if !batch.is_empty() {
                if self.handout.failed.is_none() {
                    self.buffer_done();
                } else {
                    self.report_lag();
                }
                return Some(Ok(batch));
            }
        }
        let failed = self.take_failed();
        self.buffer_done();
        failed.map(Err)
    }

    /// Everything polled has been handed out: counts go to the metrics, and splits
    /// whose stop was seen are finished.
    fn buffer_done(&mut self) {
        self.flush_counts();
        for id in std::mem::take(&mut self.handout.finish_after) {
            self.mark_finished(&id);
        }
        self.report_lag();
    }

    /// [`Self::accept`] for every record of `batch`, dropping those not handed out.
    fn accept_batch(&mut self, batch: &mut RecordBatch<D::Value>) {
        let mut rejected: Vec<usize> = Vec::new();
        let mut bytes = 0u64;
        for (k, e) in batch.entries.iter().enumerate() {
            let topic = &batch.topics[e.topic as usize];
            if self.accept(&batch.cluster, topic, e.partition, e.offset) {
                bytes += u64::from(e.bytes);
            } else {
                rejected.push(k);
            }
        }
        if !rejected.is_empty() {
            let mut k = 0;
            let mut next = rejected.iter().peekable();
            batch.entries.retain(|_| {
                let drop = next.next_if_eq(&&k).is_some();
                k += 1;
                !drop
            });
        }
        self.handout.counts.0 += batch.entries.len() as u64;
        self.handout.counts.1 += bytes;
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
            match self.fill().await {
                Ok(true) => return None,
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next batch of records: what one poll of a cluster's consumer found (at most
    /// [`max_batch_size`](crate::SourceBuilder::max_batch_size) records, all of one
    /// cluster), or `None` once the input has ended. A record that fails to
    /// deserialize ends its batch and is handed out alone as an error by the next
    /// call.
    ///
    /// Positions advance when the batch is handed out: a checkpoint taken after this
    /// returns resumes each split right after its last record in the batch. Records
    /// left over from [`next`](Self::next) come first. Cheaper per record than
    /// `next`: no per-record call, queue or reference counting of the cluster and
    /// topic.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        loop {
            if self.closed {
                return None;
            }
            if let Some(r) = self.take_batch() {
                return Some(r);
            }
            match self.fill().await {
                Ok(true) => return None,
                Ok(false) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Buffers the next records, waiting for them if none are there. `Ok(true)` when
    /// the input has ended.
    async fn fill(&mut self) -> Result<bool, SourceError> {
        self.drain_events()?;
        self.start_pending()?;
        if self.take_answers()? > 0 {
            return Ok(false);
        }
        if self.is_done() {
            return Ok(true);
        }
        tokio::select! {
            biased;
            event = self.events.recv(), if !self.enumerator_gone => match event {
                Some(e) => self.apply(e)?,
                None => {
                    self.enumerator_gone = true;
                    if self.states.is_empty() {
                        self.closed = true;
                        return Err(SourceError::Closed);
                    }
                }
            },
            _ = self.notify.notified() => {}
            // A safety net: the fetchers wake the reader with every answer, this covers
            // anything else.
            _ = tokio::time::sleep(self.poll_timeout) => {}
        }
        Ok(false)
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

    /// Stops reading and closes every consumer (waiting for their fetcher threads,
    /// on the blocking pool), returning unfinished splits to the enumerator.
    pub async fn close(mut self) {
        let threads = self.shutdown();
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }

    /// Returns unfinished splits to the enumerator and stops the fetchers (each closes
    /// its consumer on its own thread).
    fn shutdown(&mut self) -> Vec<std::thread::JoinHandle<()>> {
        if !self.closed {
            self.closed = true;
            let _ = self.drain_events();
            // The splits leave this reader (to another, or with the source): their
            // series are marked removed before anyone else reports them.
            for s in &mut self.states {
                s.drop_lag();
            }
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
        self.ready.clear();
        std::mem::take(&mut self.consumers)
            .into_values()
            .filter_map(Fetcher::stop)
            .collect()
    }
}

impl<D: Deserializer> Drop for SourceReader<D> {
    fn drop(&mut self) {
        // The fetcher threads close their consumers and end by themselves.
        drop(self.shutdown());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::BatchEntry;

    fn reader() -> SourceReader<crate::deserializer::Utf8> {
        let (_events_tx, events) = mpsc::unbounded_channel();
        let (notices, _notices_rx) = mpsc::unbounded_channel();
        SourceReader::new(ReaderParts {
            id: 0,
            deserializer: Arc::new(crate::deserializer::Utf8),
            events,
            notices,
            max_batch: 1024,
            poll_timeout: Duration::from_millis(100),
            include_headers: false,
            client_hooks: None,
            retained: Default::default(),
            active: Default::default(),
        })
    }

    fn assign(partitions: &[(i32, i64)]) -> ReaderEvent {
        ReaderEvent::Assign {
            cluster: "a".into(),
            properties: ClientProperties::default(),
            splits: partitions
                .iter()
                .map(|(p, next_offset)| KafkaSplit {
                    id: SplitId::new("a", "t", *p),
                    next_offset: *next_offset,
                    stop_offset: None,
                })
                .collect(),
        }
    }

    #[test]
    fn records_waiting_for_a_removed_split_never_come_out_even_if_it_is_assigned_again() {
        let mut r = reader();
        r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
        // A polled batch waiting to be handed out: offsets 0..3 of both partitions.
        let mut batch = RecordBatch::new("a".into());
        let t: Arc<str> = "t".into();
        let k = batch.topic_index(&t);
        for offset in 0..3 {
            for partition in [0, 1] {
                let value = format!("{partition}/{offset}");
                batch
                    .entries
                    .push(BatchEntry::bare(k, partition, offset, 0, value));
            }
        }
        r.handout.records = Some(batch.into_iter());
        assert_eq!(r.pop().unwrap().unwrap().value, "0/0");
        // Partition 1 is removed, then assigned again from offset 0 (its retained
        // position was gone, say): the old batch's records of it are not its records.
        r.apply(ReaderEvent::Remove {
            ids: vec![SplitId::new("a", "t", 1)],
            retain_until_ms: None,
        })
        .unwrap();
        r.apply(assign(&[(1, 0)])).unwrap();
        let mut rest = Vec::new();
        while let Some(record) = r.pop() {
            rest.push(record.unwrap().value);
        }
        assert_eq!(rest, ["0/1", "0/2"]);
        let p1 = r.states.iter().find(|s| s.id.partition == 1).unwrap();
        assert_eq!(p1.next_offset, 0, "partition 1 starts over at 0");
    }

    /// `mck_split_lag` per partition of `a`/`t` set since the last snapshot (the
    /// debugging recorder's snapshots reset gauges to 0).
    fn lags(snapshotter: &metrics_util::debugging::Snapshotter) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (k, _, _, v) in snapshotter.snapshot().into_vec() {
            if let (true, metrics_util::debugging::DebugValue::Gauge(g)) =
                (k.key().name() == m::SPLIT_LAG, v)
                && let Some(p) = k.key().labels().find(|l| l.key() == "partition")
            {
                out.insert(p.value().to_string(), g.into_inner());
            }
        }
        out
    }

    #[test]
    fn lag_is_the_latest_watermark_minus_what_was_handed_out_and_nan_once_removed() {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let lag = |p: &str| lags(&snapshotter).get(p).copied();
        let t: Arc<str> = "t".into();
        let polled = |records: usize, hws: &[(i32, i64)]| Polled {
            records,
            high_watermarks: hws.iter().map(|(p, h)| (t.clone(), *p, *h)).collect(),
            ..Polled::default()
        };
        let batch_of = |offsets: std::ops::Range<i64>| {
            let mut batch = RecordBatch::new("a".into());
            let k = batch.topic_index(&t);
            for offset in offsets {
                batch
                    .entries
                    .push(BatchEntry::bare(k, 0, offset, 0, offset.to_string()));
            }
            batch
        };
        let mut r = reader();
        metrics::with_local_recorder(&recorder, || {
            r.apply(assign(&[(0, 0), (1, 0)])).unwrap();
            // Offsets 0..3 of partition 0; watermarks 10 (partition 0) and 5
            // (partition 1, nothing fetched of it yet).
            let found = r.buffer("a".into(), batch_of(0..3), polled(3, &[(0, 10), (1, 5)]));
            assert_eq!(found, Some(3));
            assert_eq!(lags(&snapshotter), BTreeMap::new(), "not handed out yet");
            assert_eq!(r.take_batch().unwrap().unwrap().len(), 3);
            let both = lags(&snapshotter);
            assert_eq!((both["0"], both["1"]), (7.0, 5.0));
            // The next batch (no new watermark) handed out one record at a time: the
            // lag falls when the batch is done.
            assert_eq!(
                r.buffer("a".into(), batch_of(3..9), polled(6, &[])),
                Some(6)
            );
            while r.pop().is_some() {}
            assert_eq!(lag("0"), Some(1.0));
            // A poll with a watermark and no record: reported at once.
            let empty = RecordBatch::new("a".into());
            assert_eq!(r.buffer("a".into(), empty, polled(0, &[(0, 12)])), None);
            assert_eq!(lag("0"), Some(3.0));
            // Caught up.
            assert_eq!(
                r.buffer("a".into(), batch_of(9..12), polled(3, &[])),
                Some(3)
            );
            assert_eq!(r.take_batch().unwrap().unwrap().len(), 3);
            assert_eq!(lag("0"), Some(0.0));
            // A removed split's series is marked removed.
            r.apply(ReaderEvent::Remove {
                ids: vec![SplitId::new("a", "t", 1)],
                retain_until_ms: None,
            })
            .unwrap();
            assert!(lag("1").is_some_and(f64::is_nan));
            // A closing reader gives its splits away: their series too.
            drop(r);
            assert!(lag("0").is_some_and(f64::is_nan));
        });
    }
}
