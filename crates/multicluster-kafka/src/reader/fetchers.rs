//! The reader's fetchers: one per cluster it has splits on, the splits waiting for
//! theirs, the answers taken from them and not handed out yet, and the backoff of
//! those that ended. Only this file changes them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tokio::sync::Notify;

use super::fetcher::{self, Answer, Closed, FetchPool, Fetcher, FetcherSettings};
use super::reopen::Reopening;
use crate::base::properties::ClientProperties;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;

/// A cluster's splits waiting for its fetcher.
struct ToStart {
    /// The consumer properties of the cluster.
    properties: ClientProperties,
    splits: Vec<KafkaSplit>,
    /// When the enumerator sent the first of these splits (none for splits started
    /// again after a rebuild).
    sent: Option<std::time::Instant>,
}

/// The fetchers of one reader.
pub(super) struct Fetchers<D: Deserializer> {
    /// One fetcher (a thread with the cluster's consumer) per cluster this reader
    /// has splits on.
    consumers: BTreeMap<Arc<str>, Fetcher<D::Value>>,
    /// The threads the fetchers run on.
    pool: FetchPool<D>,
    /// Splits assigned but not yet handed to their cluster's fetcher, by cluster.
    to_start: BTreeMap<Arc<str>, ToStart>,
    /// Answers of the fetchers not handed out yet, oldest first (a fetcher has at
    /// most two answered or being made; another is asked for when one is handed
    /// out).
    ready: VecDeque<(Arc<str>, Answer<D::Value>)>,
    /// Woken by the fetchers when they answer.
    notify: Arc<Notify>,
    /// Clusters whose fetcher ended and starts again after a backoff.
    reopening: Reopening,
}

impl<D: Deserializer> Fetchers<D> {
    pub(super) fn new() -> Self {
        Self {
            consumers: BTreeMap::new(),
            pool: FetchPool::new(),
            to_start: BTreeMap::new(),
            ready: VecDeque::new(),
            notify: Arc::new(Notify::new()),
            reopening: Reopening::default(),
        }
    }

    /// The cluster's fetcher, if it has one.
    pub(super) fn get(&self, cluster: &Arc<str>) -> Option<&Fetcher<D::Value>> {
        self.consumers.get(cluster)
    }

    /// The cluster's fetcher, to tell it of splits (removed, paused).
    pub(super) fn get_mut(&mut self, cluster: &Arc<str>) -> Option<&mut Fetcher<D::Value>> {
        self.consumers.get_mut(cluster)
    }

    /// Whether splits wait for a fetcher to start.
    pub(super) fn any_to_start(&self) -> bool {
        !self.to_start.is_empty()
    }

    /// Answers waiting to be handed out.
    #[cfg(test)]
    pub(super) fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Woken when a fetcher answers.
    pub(super) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Queues assigned splits for the cluster's fetcher.
    pub(super) fn queue(
        &mut self,
        cluster: Arc<str>,
        properties: ClientProperties,
        splits: Vec<KafkaSplit>,
        sent: std::time::Instant,
    ) {
        let entry = self.to_start.entry(cluster).or_insert_with(|| ToStart {
            properties: properties.clone(),
            splits: Vec::new(),
            sent: None,
        });
        entry.properties = properties;
        entry.splits.extend(splits);
        entry.sent = Some(entry.sent.map_or(sent, |s| s.min(sent)));
    }

    /// Replaces a cluster's fetcher: the old one closes its consumer on its own
    /// thread, its answers not handed out are dropped, and `active` (its splits at
    /// the positions handed out) are queued for the next.
    pub(super) fn restart(
        &mut self,
        cluster: Arc<str>,
        properties: ClientProperties,
        active: Vec<KafkaSplit>,
    ) {
        self.consumers.remove(&cluster);
        self.ready.retain(|(c, _)| *c != cluster);
        if active.is_empty() && !self.to_start.contains_key(&cluster) {
            return; // nothing of the cluster left to read
        }
        let entry = self.to_start.entry(cluster).or_insert_with(|| ToStart {
            properties: properties.clone(),
            splits: Vec::new(),
            sent: None,
        });
        entry.properties = properties;
        for s in active {
            if !entry.splits.iter().any(|x| x.id == s.id) {
                entry.splits.push(s);
            }
        }
    }

    /// Forgets removed splits: they are not started, their records in waiting
    /// answers are dropped, and their fetchers told. The fetcher of a cluster with no
    /// split left (`still_used` false) goes.
    pub(super) fn remove(&mut self, ids: &[SplitId], still_used: impl Fn(&Arc<str>) -> bool) {
        let gone: std::collections::HashSet<&SplitId> = ids.iter().collect();
        for waiting in self.to_start.values_mut() {
            waiting.splits.retain(|s| !gone.contains(&s.id));
        }
        self.to_start
            .retain(|_, waiting| !waiting.splits.is_empty());
        let mut by_cluster: BTreeMap<Arc<str>, Vec<SplitId>> = BTreeMap::new();
        for id in ids {
            by_cluster
                .entry(id.cluster.clone())
                .or_default()
                .push(id.clone());
        }
        for (cluster, ids) in by_cluster {
            if still_used(&cluster) {
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
    }

    /// Starts fetchers for clusters that have none (unless one ended and its backoff
    /// runs), and hands queued splits to them. A new fetcher gets `settings` for
    /// its cluster (given what it wakes when it answers); `handed` hears of each
    /// cluster's splits handed over.
    pub(super) fn start_pending(
        &mut self,
        deserializer: &Arc<D>,
        settings: impl Fn(&Arc<str>, Arc<Notify>) -> FetcherSettings,
        mut handed: impl FnMut(&[KafkaSplit]),
    ) -> Result<(), SourceError> {
        let waiting: Vec<Arc<str>> = self.to_start.keys().cloned().collect();
        for cluster in waiting {
            if !self.consumers.contains_key(&cluster) && !self.reopening.may_start(&cluster) {
                continue; // its last fetcher ended: the next waits for its backoff
            }
            let waiting = self.to_start.remove(&cluster).expect("listed");
            if !self.consumers.contains_key(&cluster) {
                let settings = settings(&cluster, self.notify.clone());
                match self.pool.start(
                    cluster.clone(),
                    waiting.properties.clone(),
                    deserializer.clone(),
                    settings,
                ) {
                    Ok(mut f) => {
                        f.ask();
                        self.consumers.insert(cluster.clone(), f);
                    }
                    Err(e) => {
                        self.to_start.insert(cluster, waiting);
                        return Err(e);
                    }
                }
            }
            handed(&waiting.splits);
            let fetcher = self.consumers.get_mut(&cluster).expect("started");
            fetcher.add(waiting.splits, waiting.sent);
        }
        Ok(())
    }

    /// Takes an answer from each fetcher with none waiting, then the oldest waiting
    /// answer.
    ///
    /// At most one answer per cluster waits here: a fetcher is asked again only when
    /// its answer is taken from the queue, so taking another of its answers while
    /// one waits would let the queue grow by a batch per call for every cluster but
    /// one, without bound, whenever the fetchers are ahead of the program.
    pub(super) fn next_answer(&mut self) -> Option<(Arc<str>, Answer<D::Value>)> {
        for (cluster, fetcher) in &mut self.consumers {
            if self.ready.iter().any(|(c, _)| c == cluster) {
                continue;
            }
            if let Some(answer) = fetcher.answer() {
                self.ready.push_back((cluster.clone(), answer));
            }
        }
        self.ready.pop_front()
    }

    /// Asks the cluster's fetcher for its next batch. A fetcher whose thread has
    /// ended is not asked: its properties are returned, for a new one.
    pub(super) fn ask_again(&mut self, cluster: &Arc<str>) -> Option<ClientProperties> {
        let fetcher = self.consumers.get_mut(cluster)?;
        if fetcher.is_gone() {
            return Some(fetcher.properties.clone());
        }
        fetcher.ask();
        None
    }

    /// `cluster`'s fetcher ended with `error`: the next starts after a backoff. True
    /// when the error is to be said (it is not the one said last).
    pub(super) fn ended(&mut self, cluster: &Arc<str>, error: &SourceError) -> bool {
        self.reopening.ended(cluster, error)
    }

    /// `cluster`'s fetcher answered: its next one starts at once.
    pub(super) fn answered(&mut self, cluster: &Arc<str>) {
        self.reopening.answered(cluster);
    }

    /// When the next fetcher due to start again may start.
    pub(super) fn next_start(&self) -> Option<tokio::time::Instant> {
        self.reopening.next_start()
    }

    /// Stops every fetcher (each closes its consumer on its own thread) and drops
    /// their answers; what is returned says when they are closed.
    pub(super) fn stop(&mut self) -> Vec<Closed> {
        self.ready.clear();
        std::mem::take(&mut self.consumers)
            .into_values()
            .filter_map(Fetcher::stop)
            .collect()
    }

    /// Stops the fetch threads; they end once their fetchers have.
    pub(super) fn stop_threads(&mut self) -> Vec<std::thread::JoinHandle<()>> {
        self.pool.stop()
    }
}
