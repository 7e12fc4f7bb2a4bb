//! Readers: the parallel workers that own splits, fetch from each cluster they have
//! splits on, and hand records out in order while tracking positions.

pub(crate) mod fetcher;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::checkpoint::Checkpoint;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::metrics as m;
use crate::properties::ClientProperties;
use crate::record::Record;
use crate::split::{KafkaSplit, SplitId};
use fetcher::{FetchCommand, FetchSettings, Fetched, Fetcher, Item};

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
}

/// What a reader tells the enumerator.
#[derive(Debug)]
pub(crate) enum ReaderNotice {
    /// The reader is gone; these splits (at the positions handed out) need a new owner.
    Closed { reader: usize, splits: Vec<KafkaSplit> },
}

#[derive(Debug)]
struct SplitState {
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
    fetched_tx: mpsc::Sender<Fetched<D::Value>>,
    fetched_rx: mpsc::Receiver<Fetched<D::Value>>,
    fetchers: HashMap<Arc<str>, Fetcher>,
    next_generation: u64,
    splits: HashMap<SplitId, SplitState>,
    clusters: BTreeMap<Arc<str>, ClusterInfo>,
    buffer: VecDeque<Item<D::Value>>,
    buffer_cluster: Option<Arc<str>>,
    no_more_splits: bool,
    enumerator_gone: bool,
    max_batch: usize,
    poll_timeout: std::time::Duration,
    counters: HashMap<Arc<str>, (metrics::Counter, metrics::Counter)>,
    closed: bool,
}

impl<D: Deserializer> std::fmt::Debug for SourceReader<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceReader")
            .field("id", &self.id)
            .field("splits", &self.splits.len())
            .finish()
    }
}

pub(crate) struct ReaderParts<D: Deserializer> {
    pub id: usize,
    pub deserializer: Arc<D>,
    pub events: mpsc::UnboundedReceiver<ReaderEvent>,
    pub notices: mpsc::UnboundedSender<ReaderNotice>,
    pub channel_capacity: usize,
    pub max_batch: usize,
    pub poll_timeout: std::time::Duration,
}

impl<D: Deserializer> SourceReader<D> {
    pub(crate) fn new(parts: ReaderParts<D>) -> Self {
        let (fetched_tx, fetched_rx) = mpsc::channel(parts.channel_capacity.max(1));
        Self {
            id: parts.id,
            deserializer: parts.deserializer,
            events: parts.events,
            notices: parts.notices,
            fetched_tx,
            fetched_rx,
            fetchers: HashMap::new(),
            next_generation: 1,
            splits: HashMap::new(),
            clusters: BTreeMap::new(),
            buffer: VecDeque::new(),
            buffer_cluster: None,
            no_more_splits: false,
            enumerator_gone: false,
            max_batch: parts.max_batch,
            poll_timeout: parts.poll_timeout,
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
        self.splits.len()
    }

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
            ReaderEvent::Assign {
                cluster,
                properties,
                splits,
            } => {
                let mut to_fetch = Vec::new();
                for s in splits {
                    let finished = s.is_finished();
                    let state = self.splits.entry(s.id.clone()).or_insert(SplitState {
                        next_offset: s.next_offset,
                        stop: s.stop_offset,
                        finished,
                    });
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
                    if !self.fetchers.contains_key(&cluster) {
                        let generation = self.next_generation;
                        self.next_generation += 1;
                        let f = fetcher::spawn(
                            cluster.clone(),
                            &properties,
                            generation,
                            self.deserializer.clone(),
                            self.fetched_tx.clone(),
                            FetchSettings {
                                max_batch: self.max_batch,
                                poll_timeout: self.poll_timeout,
                            },
                        )?;
                        self.fetchers.insert(cluster.clone(), f);
                    }
                    if let Some(f) = self.fetchers.get(&cluster) {
                        f.send(FetchCommand::Add(to_fetch));
                    }
                }
                self.report_active();
            }
        }
        Ok(())
    }

    fn report_active(&self) {
        let active = self.splits.values().filter(|s| !s.finished).count();
        metrics::gauge!(m::ACTIVE_SPLITS, "reader" => self.id.to_string()).set(active as f64);
    }

    fn counters(&mut self, cluster: &Arc<str>) -> &(metrics::Counter, metrics::Counter) {
        self.counters.entry(cluster.clone()).or_insert_with(|| {
            (
                metrics::counter!(m::RECORDS, "cluster" => cluster.to_string()),
                metrics::counter!(m::BYTES, "cluster" => cluster.to_string()),
            )
        })
    }

    fn is_done(&self) -> bool {
        self.no_more_splits && self.buffer.is_empty() && self.splits.values().all(|s| s.finished)
    }

    fn take_fetched(&mut self, fetched: Fetched<D::Value>) -> Result<(), SourceError> {
        match fetched {
            Fetched::Batch {
                cluster,
                generation,
                items,
                high_watermarks,
            } => {
                if self.fetchers.get(&cluster).map(|f| f.generation) != Some(generation) {
                    return Ok(()); // from a fetcher that was replaced: its splits moved on
                }
                for (topic, partition, hw) in high_watermarks {
                    let id = SplitId {
                        cluster: cluster.clone(),
                        topic: topic.clone(),
                        partition,
                    };
                    if let Some(s) = self.splits.get(&id) {
                        let last = items
                            .iter()
                            .rev()
                            .find(|i| i.partition == partition && i.topic == topic)
                            .map(|i| i.offset + 1)
                            .unwrap_or(s.next_offset);
                        metrics::gauge!(m::SPLIT_LAG, "cluster" => cluster.to_string(), "topic" => topic.to_string(), "partition" => partition.to_string())
                            .set((hw - last).max(0) as f64);
                    }
                }
                self.buffer_cluster = Some(cluster);
                self.buffer.extend(items);
            }
            Fetched::Finished { id, generation } => {
                // The buffer is empty here (`next` drains it before receiving), and the
                // fetcher sent every record of the split before this notice.
                let current = self.fetchers.get(&id.cluster).map(|f| f.generation);
                if current == Some(generation)
                    && let Some(s) = self.splits.get_mut(&id)
                {
                    s.finished = true;
                    if let Some(stop) = s.stop {
                        s.next_offset = s.next_offset.max(stop);
                    }
                    self.report_active();
                }
            }
            Fetched::Failed { cluster, error } => {
                tracing::error!(reader = self.id, cluster = %cluster, %error, "fetcher failed");
                self.fetchers.remove(&cluster);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Hands out the next buffered record, if any, advancing its split's position.
    fn pop(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        while let Some(item) = self.buffer.pop_front() {
            let Some(cluster) = self.buffer_cluster.clone() else {
                continue;
            };
            let id = SplitId {
                cluster: cluster.clone(),
                topic: item.topic.clone(),
                partition: item.partition,
            };
            let Some(state) = self.splits.get_mut(&id) else {
                continue; // a split this reader no longer owns
            };
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
            if let Some(stop) = state.stop
                && state.next_offset >= stop
            {
                state.finished = true;
                self.report_active();
            }
            let bytes = item.bytes as u64;
            let (records, bytes_counter) = self.counters(&cluster);
            records.increment(1);
            bytes_counter.increment(bytes);
            return Some(item.value.map_err(SourceError::from));
        }
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
                        if self.splits.is_empty() {
                            self.closed = true;
                            return Some(Err(SourceError::Closed));
                        }
                    }
                },
                fetched = self.fetched_rx.recv() => {
                    if let Some(f) = fetched
                        && let Err(e) = self.take_fetched(f)
                    {
                        return Some(Err(e));
                    }
                }
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
        for (cluster, info) in &self.clusters {
            let c = cp.clusters.entry(cluster.to_string()).or_default();
            c.kafka_cluster_id = info.kafka_cluster_id.clone();
            c.initial_discovery_done = info.initial_discovery_done;
        }
        Ok(cp)
    }

    fn positions(&self) -> Vec<KafkaSplit> {
        self.splits
            .iter()
            .map(|(id, s)| KafkaSplit {
                id: id.clone(),
                next_offset: s.next_offset,
                stop_offset: s.stop,
            })
            .collect()
    }

    /// Stops the fetch threads and waits for them (consumers closed), returning the
    /// splits to the enumerator.
    pub async fn close(mut self) {
        let handles: Vec<_> = self.shutdown().into_iter().flatten().collect();
        let _ = tokio::task::spawn_blocking(move || {
            for h in handles {
                let _ = h.join();
            }
        })
        .await;
    }

    fn shutdown(&mut self) -> Vec<Option<std::thread::JoinHandle<()>>> {
        if !self.closed {
            self.closed = true;
            let _ = self.drain_events();
            let splits: Vec<KafkaSplit> = self.positions().into_iter().filter(|s| !s.is_finished()).collect();
            let _ = self.notices.send(ReaderNotice::Closed {
                reader: self.id,
                splits,
            });
        }
        self.fetchers.drain().map(|(_, f)| f.stop()).collect()
    }
}

impl<D: Deserializer> Drop for SourceReader<D> {
    fn drop(&mut self) {
        // Fetch threads end on their own once told; not joined here to keep drop
        // non-blocking (use `close` to wait for them).
        let _ = self.shutdown();
    }
}
