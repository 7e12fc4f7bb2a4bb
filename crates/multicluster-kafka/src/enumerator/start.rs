//! Start-up: the first metadata read, the clusters connected (waiting for all of them,
//! or for those that answer soon), positions restored and partitions discovered, and
//! the first assignment handed out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::connect::Connected;
use super::subscription::subscribed_streams;
use super::{Command, Enumerator, START_GRACE, Shared, group, group_stop};
use crate::base::config::SourceConfig;
use crate::base::metadata::KafkaMetadataService;
use crate::base::plan::clusters_of_streams_with;
use crate::base::protocol::{ReaderEvent, ReaderNotice};
use crate::error::SourceError;
use crate::metrics as m;

impl Enumerator {
    /// Reads metadata, connects to every cluster, restores and discovers splits, and
    /// hands out the first assignment. Fails when a stream is unknown. A cluster that
    /// does not answer fails a bounded run (it could never end); a follow run starts
    /// with the clusters that answered (waiting up to [`START_GRACE`] for the others
    /// once one did) and takes the others up at later metadata reads, their
    /// checkpointed positions kept meanwhile.
    pub async fn start(
        cfg: Arc<SourceConfig>,
        service: Arc<dyn KafkaMetadataService>,
        readers: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>,
        notices: mpsc::UnboundedReceiver<ReaderNotice>,
        commands: mpsc::Receiver<Command>,
        shared: Shared,
    ) -> Result<Enumerator, SourceError> {
        let Shared {
            retained,
            active,
            stream_index,
            ack_wanted,
            clients,
        } = shared;
        let streams = subscribed_streams(&cfg, service.as_ref(), true).await?;
        let mut e = Enumerator::new(
            cfg.clone(),
            service,
            readers,
            notices,
            commands,
            retained,
            active,
        );
        e.links.share(stream_index, clients);
        e.applied.set_latest(streams.clone());
        e.hold_shard(&streams).await?;
        if cfg.group_mode {
            e.group = Some(group::GroupState::new(ack_wanted));
        }
        if let Some(cp) = &cfg.restore {
            e.failover.restore(cp, &streams);
        }
        for (cluster, view) in clusters_of_streams_with(streams.values(), e.failover.taken_over()) {
            e.want_cluster(Arc::from(cluster.as_str()), view);
        }
        e.connect_at_start().await?;
        metrics::gauge!(m::CLUSTERS).set(e.clusters.len() as f64);
        metrics::gauge!(m::CLUSTERS_WAITING).set(e.connecting.waiting() as f64);
        let streams = streams
            .into_iter()
            .map(|(id, mut s)| {
                s.clusters.retain(|c, _| e.applied.views().contains_key(c));
                (id, s)
            })
            .collect();
        e.apply_streams(streams);
        let views = e.applied.views().clone();
        e.refresh_active(&views).await;
        // In group mode positions come from the group's committed offsets.
        let restored = if cfg.group_mode {
            Vec::new()
        } else {
            e.restore()?
        };
        let restored = e.resharded(restored).await?;
        let restored = e.stops_for_this_run(restored).await?;
        e.broadcast_cluster_info();
        let discovered = e.discover_now(None, true).await?;
        if cfg.bounded()
            && let Some(group) = e.group.as_mut()
        {
            group.set_stops(group_stop::GroupStops::of(&discovered));
        }
        let mut splits = restored;
        splits.extend(discovered);
        e.sync_group();
        e.hand_out(splits);
        // Now that the readers have the splits, the clusters count as discovered.
        e.broadcast_cluster_info();
        // In group mode, splits keep coming until the group is at its stops.
        if cfg.bounded() && !cfg.group_mode {
            e.readers.tell_all(|| ReaderEvent::NoMoreSplits);
        }
        Ok(e)
    }

    /// [`Self::connect_at_start`]'s loop.
    pub(super) async fn connect_all_at_start(
        &mut self,
        wait_all: bool,
        give_up: Option<Instant>,
    ) -> Result<(), SourceError> {
        let mut grace: Option<Instant> = None;
        // A start that waits for every cluster says which ones it still waits for
        // (a first attempt at a cluster that does not answer ends only with the client
        // timeout, 30 s by default).
        let mut notice: Option<Instant> = wait_all.then(|| Instant::now() + START_GRACE);
        let far = || Instant::now() + Duration::from_secs(86_400);
        while self.connecting.waiting() > 0 {
            if !wait_all && !self.connecting.attempting() {
                // Every cluster answered or failed once: the failed ones are tried
                // again in the background.
                break;
            }
            let retry_at = self.next_retry().filter(|_| wait_all);
            tokio::select! {
                joined = self.connecting.next_answer(), if self.connecting.attempting() => {
                    let Some(joined) = joined else { continue };
                    let (cluster, connected) = joined
                        .map_err(|e| SourceError::internal("a cluster connect task", e))?;
                    // A client librdkafka refuses is a configuration error; a cluster
                    // that refuses the client (credentials, certificates) fails a
                    // start that waits for every cluster at once.
                    let read = self.connected(cluster, connected, |c| {
                        matches!(c, Connected::Refused(_))
                            || (wait_all && matches!(c, Connected::Rejected(_)))
                    })?;
                    if read && !wait_all && grace.is_none() {
                        grace = Some(Instant::now() + START_GRACE);
                    }
                }
                _ = sleep_until(retry_at.unwrap_or_else(far)), if retry_at.is_some() => self.retry_due(),
                _ = sleep_until(notice.unwrap_or_else(far)), if notice.is_some() => {
                    notice = None;
                    let until = self.start_wait_words();
                    self.connecting.say_no_answer_yet(&until);
                }
                _ = sleep_until(grace.unwrap_or_else(far)), if grace.is_some() => {
                    self.connecting.say_left_behind();
                    break;
                }
                _ = sleep_until(give_up.unwrap_or_else(far)), if give_up.is_some() => {
                    return Err(self.connecting.no_answer_within(self.cfg.startup_timeout.unwrap_or_default()));
                }
            }
        }
        Ok(())
    }
}
