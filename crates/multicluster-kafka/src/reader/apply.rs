//! Applying what the enumerator sends: assignments, removals, rebuilds of a
//! cluster's consumer, cluster facts; and starting the fetchers of new splits.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fetcher::{self, Answer, FetcherSettings};
use super::split_state::{ClusterInfo, SplitState};
use super::{SourceReader, ToStart};
use crate::base::properties::ClientProperties;
use crate::base::protocol::ReaderEvent;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;

impl<D: Deserializer> SourceReader<D> {
    /// Records an event. Splits to start are queued; [`Self::start_pending`] hands them
    /// to their clusters' fetchers (starting fetchers as needed) in `next`.
    pub(super) fn apply(&mut self, event: ReaderEvent) -> Result<(), SourceError> {
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
                confirm,
            } => {
                let removed: Vec<KafkaSplit> = self
                    .positions()
                    .into_iter()
                    .filter(|s| ids.contains(&s.id))
                    .collect();
                if let Some(until) = retain_until_ms {
                    for s in &removed {
                        let kafka_id = self
                            .clusters
                            .get(&s.id.cluster)
                            .and_then(|c| c.kafka_cluster_id.clone());
                        self.retained.keep(s, until, kafka_id);
                    }
                }
                self.remove(&ids);
                if let Some(confirm) = confirm {
                    let _ = confirm.send(removed);
                }
            }
            ReaderEvent::Rebuild {
                cluster,
                properties,
            } => self.rebuild(cluster, properties),
            ReaderEvent::ForgetCluster { cluster } => {
                self.clusters.remove(&cluster);
            }
            ReaderEvent::MetadataFailed(e) => return Err(SourceError::Metadata(e)),
            ReaderEvent::TopicGone {
                cluster,
                topic,
                unauthorized,
            } => return self.topic_gone(&cluster, &topic, unauthorized),
            ReaderEvent::ShardLost {
                shard,
                instance,
                cluster,
                message,
            } => {
                return Err(SourceError::ShardTaken {
                    shard,
                    instance,
                    cluster,
                    message,
                });
            }
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
                sent,
            } => {
                let mut to_fetch = Vec::new();
                for s in splits {
                    let finished = s.is_finished();
                    let i = match self.index.get(&s.id) {
                        Some(i) => *i,
                        None => {
                            let mut state = SplitState::new(
                                s.id.clone(),
                                s.next_offset,
                                s.stop_offset,
                                finished,
                            );
                            state.set_last(s.last.as_ref());
                            if let Some(search) = s.last.as_ref().and_then(|l| l.search.as_ref()) {
                                tracing::info!(split = %s.id, source = %search.cluster, lower_bound = search.lower_bound, found_by = %search.found_by, "reading forward on the mirror to the last record handed out from its source");
                                crate::metrics::mirror_searching(&s.id, true);
                            }
                            self.states.push(state);
                            self.index.insert(s.id.clone(), self.states.len() - 1);
                            self.states.len() - 1
                        }
                    };
                    let state = &mut self.states[i];
                    // A split assigned again keeps the position this reader handed out.
                    state.next_offset = state.next_offset.max(s.next_offset);
                    let split = state.to_fetch();
                    state.finished = split.is_finished();
                    if !state.finished {
                        to_fetch.push(split);
                    }
                }
                if !to_fetch.is_empty() {
                    let entry = self.to_start.entry(cluster).or_insert_with(|| ToStart {
                        properties: properties.clone(),
                        splits: Vec::new(),
                        sent: None,
                    });
                    entry.properties = properties;
                    entry.splits.extend(to_fetch);
                    entry.sent = Some(entry.sent.map_or(sent, |s| s.min(sent)));
                }
                self.report_active();
            }
        }
        Ok(())
    }

    /// Forgets splits: their positions leave this reader's state and checkpoints, and
    /// buffered records of them are never handed out.
    pub(super) fn remove(&mut self, ids: &[SplitId]) {
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
        for waiting in self.to_start.values_mut() {
            waiting.splits.retain(|s| !gone.contains(&s.id));
        }
        self.to_start
            .retain(|_, waiting| !waiting.splits.is_empty());
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
        if let Some(order) = &mut self.time_order {
            order.remove(ids);
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
    pub(super) fn rebuild(&mut self, cluster: Arc<str>, properties: ClientProperties) {
        // The old fetcher closes its consumer on its own thread; what it fetched and
        // was not handed out is read again.
        self.consumers.remove(&cluster);
        self.ready.retain(|(c, _)| *c != cluster);
        if let Some(order) = &mut self.time_order {
            order.drop_held(&cluster);
        }
        let active: Vec<KafkaSplit> = self
            .states
            .iter()
            .filter(|s| s.id.cluster == cluster && !s.finished)
            .map(SplitState::to_fetch)
            .collect();
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

    /// Starts fetchers for clusters that have none, and hands queued splits to them.
    pub(super) fn start_pending(&mut self) -> Result<(), SourceError> {
        let waiting: Vec<Arc<str>> = self.to_start.keys().cloned().collect();
        for cluster in waiting {
            if !self.consumers.contains_key(&cluster) && !self.reopening.may_start(&cluster) {
                continue; // its last fetcher ended: the next waits for its backoff
            }
            let waiting = self.to_start.remove(&cluster).expect("listed");
            let props = waiting.properties.clone();
            if !self.consumers.contains_key(&cluster) {
                let settings = FetcherSettings {
                    max_batch: self.max_batch,
                    include_headers: self.include_headers,
                    policy: self.policy,
                    idle: self.poll_timeout,
                    reader: self.notify.clone(),
                    hooks: self
                        .client_hooks
                        .as_ref()
                        .and_then(|f| f.for_cluster(&cluster)),
                    clients: self.clients.clone(),
                    runtime: tokio::runtime::Handle::try_current().ok(),
                };
                match self.pool.start(
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
                        self.to_start.insert(cluster, waiting);
                        return Err(e);
                    }
                }
            }
            // A split handed to a fetcher is fetched: not paused (alignment).
            for s in &waiting.splits {
                if let Some(i) = self.index.get(&s.id).copied() {
                    self.states[i].paused = false;
                }
            }
            let fetcher = self.consumers.get_mut(&cluster).expect("started");
            fetcher.add(waiting.splits, waiting.sent);
        }
        Ok(())
    }

    pub(super) fn mark_finished(&mut self, id: &SplitId) {
        if let Some(i) = self.index.get(id).copied() {
            let s = &mut self.states[i];
            s.finished = true;
            if let Some(stop) = s.stop {
                s.next_offset = s.next_offset.max(stop);
            }
            self.touched.push(i);
        }
        self.split_finished();
    }

    /// Ends the unfinished bounded splits of a topic that is gone (they cannot reach
    /// their stops; their positions stay where reading stopped): with a warning when
    /// missing topics are allowed, else the first is returned as an error.
    fn topic_gone(
        &mut self,
        cluster: &Arc<str>,
        topic: &str,
        unauthorized: bool,
    ) -> Result<(), SourceError> {
        let ids: Vec<SplitId> = self
            .states
            .iter()
            .filter(|s| {
                !s.finished && s.stop.is_some() && s.id.cluster == *cluster && &*s.id.topic == topic
            })
            .map(|s| s.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        if let Some(f) = self.consumers.get_mut(cluster) {
            f.remove(ids.clone());
        }
        let mut first = None;
        for id in &ids {
            let i = self.index[id];
            let s = &mut self.states[i];
            s.finished = true;
            self.touched.push(i);
            let split = format!("{}/{}/{}", id.cluster, id.topic, id.partition);
            let stop = s.stop.unwrap_or_default();
            if self.policy.allow_missing_topics {
                if unauthorized {
                    tracing::warn!(split = %split, stop, position = s.next_offset, "the cluster no longer authorizes this principal to describe the topic before the split reached its stop; ending the split as missing topics are allowed");
                } else {
                    tracing::warn!(split = %split, stop, position = s.next_offset, "the topic is gone before the split reached its stop; ending the split as missing topics are allowed");
                }
            } else if unauthorized {
                first.get_or_insert(SourceError::TopicNotAuthorized { split, stop });
            } else {
                first.get_or_insert(SourceError::TopicGone {
                    split,
                    stop,
                    reason: "no longer in the cluster's metadata".into(),
                });
            }
        }
        self.report_active();
        first.map_or(Ok(()), Err)
    }

    /// Applies every event the enumerator has already sent (assignments in flight), so
    /// a checkpoint taken now includes them.
    pub(super) fn drain_events(&mut self) -> Result<(), SourceError> {
        while let Ok(e) = self.events.try_recv() {
            self.apply(e)?;
        }
        Ok(())
    }
}
