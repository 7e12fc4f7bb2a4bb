//! Applying what the enumerator sends: assignments, removals, rebuilds of a
//! cluster's consumer, cluster facts; and starting the fetchers of new splits.

use std::sync::Arc;

use super::SourceReader;
use super::fetcher::FetcherSettings;
use super::split_state::ClusterInfo;
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
                self.splits.set_cluster_info(
                    cluster,
                    ClusterInfo {
                        kafka_cluster_id,
                        initial_discovery_done,
                    },
                );
            }
            ReaderEvent::NoMoreSplits => self.links.set_no_more_splits(),
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
                        let kafka_id = self.splits.kafka_cluster_id(&s.id.cluster);
                        self.links.retained().keep(s, until, kafka_id);
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
                self.splits.forget_cluster(&cluster);
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
                let to_fetch: Vec<KafkaSplit> = splits
                    .into_iter()
                    .filter_map(|s| self.splits.assign(s))
                    .collect();
                if !to_fetch.is_empty() {
                    self.fetchers.queue(cluster, properties, to_fetch, sent);
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
        self.splits.remove(&gone);
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
        let splits = &self.splits;
        self.fetchers.remove(ids, |cluster| splits.any_on(cluster));
        self.report_active();
    }

    /// Replaces a cluster's consumer; its splits restart at their current positions
    /// (records the old consumer had fetched but not handed out are read again, and
    /// positions drop any duplicate).
    pub(super) fn rebuild(&mut self, cluster: Arc<str>, properties: ClientProperties) {
        // The old fetcher closes its consumer on its own thread; what it fetched and
        // was not handed out is read again.
        if let Some(order) = &mut self.time_order {
            order.drop_held(&cluster);
        }
        let active = self.splits.to_fetch_on(&cluster);
        self.fetchers.restart(cluster, properties, active);
    }

    /// Starts fetchers for clusters that have none, and hands queued splits to them.
    pub(super) fn start_pending(&mut self) -> Result<(), SourceError> {
        let settings = &self.settings;
        let clients = self.links.clients();
        let held = self.time_order.is_some();
        let fetcher_settings = |cluster: &Arc<str>, reader| FetcherSettings {
            max_batch: settings.max_batch,
            include_headers: settings.include_headers,
            policy: settings.policy,
            idle: settings.poll_timeout,
            reader,
            hooks: settings
                .client_hooks
                .as_ref()
                .and_then(|f| f.for_cluster(cluster)),
            clients: clients.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            held,
            shape: held && settings.event_timestamps.is_none(),
        };
        // A split handed to a fetcher is fetched: not paused (alignment).
        let splits = &mut self.splits;
        self.fetchers
            .start_pending(&settings.deserializer, fetcher_settings, |handed| {
                splits.fetched(handed)
            })
    }

    pub(super) fn mark_finished(&mut self, id: &SplitId) {
        self.splits.finish(id);
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
        let ended = self.splits.end_gone_topic(cluster, topic);
        if ended.is_empty() {
            return Ok(());
        }
        let ids: Vec<SplitId> = ended.iter().map(|s| s.id.clone()).collect();
        let mut first = None;
        for s in ended {
            let id = &s.id;
            let split = format!("{}/{}/{}", id.cluster, id.topic, id.partition);
            let stop = s.stop.unwrap_or_default();
            if self.settings.policy.allow_missing_topics {
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
        if let Some(f) = self.fetchers.get_mut(cluster) {
            f.remove(ids);
        }
        self.report_active();
        first.map_or(Ok(()), Err)
    }

    /// Applies every event the enumerator has already sent (assignments in flight), so
    /// a checkpoint taken now includes them.
    pub(super) fn drain_events(&mut self) -> Result<(), SourceError> {
        while let Some(e) = self.links.try_event() {
            self.apply(e)?;
        }
        Ok(())
    }
}
