//! The enumerator: the single coordinator. It reads the metadata service, discovers
//! partitions on every cluster, resolves where new splits start, assigns splits to
//! readers, rediscovers partitions on an interval, reassigns the splits of readers
//! that went away, and commits checkpointed offsets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::base::checkpoint::Checkpoint;
use crate::base::config::SourceConfig;
use crate::base::metadata::{KafkaMetadataService, KafkaStream};
use crate::base::protocol::{ReaderEvent, ReaderNotice};
use crate::error::SourceError;
use crate::metrics as m;

mod applied;
mod changes;
mod clients;
mod cluster;
mod commit;
mod connect;
mod discovery;
mod failover;
mod group;
mod group_stop;
mod links;
mod lookups;
mod mirror_carry;
mod readers;
mod reconcile;
mod removal;
mod restore;
mod shard;
mod spare;
mod start;
mod subscription;
#[cfg(test)]
mod tests;

use changes::{CHANGES_TARGET, change_lines};
use cluster::ClusterState;

/// Requests from the source handles.
pub(crate) enum Command {
    Commit(Checkpoint, oneshot::Sender<Result<(), SourceError>>),
    /// Group mode: the program durably processed what the checkpoint covers (no
    /// commit asked).
    Acknowledge(Checkpoint),
    /// Group mode: leave every cluster's group (the source closes); answered once
    /// left.
    LeaveGroups(oneshot::Sender<()>),
}

/// The coordinator of one source. Its state is split into parts, each changed only
/// by the file that defines it.
pub(crate) struct Enumerator {
    /// The source's configuration.
    cfg: Arc<SourceConfig>,
    /// The clusters being read.
    clusters: BTreeMap<Arc<str>, ClusterState>,
    /// Clusters of the metadata not read yet, and the attempts to connect them.
    connecting: connect::Connecting,
    /// The discoveries running in the background, and what they said.
    discovery: discovery::Discovering,
    /// The readers, and the splits each holds.
    readers: readers::Readers,
    /// What the readers say: one closed, or finished a split.
    notices: mpsc::UnboundedReceiver<ReaderNotice>,
    /// Requests from the source's handles.
    commands: mpsc::Receiver<Command>,
    /// The metadata applied, and what holds changes of it back.
    applied: applied::Applied,
    /// The metadata service, what is shared with the readers, and the commit queue.
    links: links::Links,
    /// Removals not confirmed by their readers yet, and removed clusters waiting for
    /// their last commit.
    removals: removal::Removals,
    /// A sharded source's membership, and word of its loss.
    shard: Option<(
        crate::kafka::shard_lock::ShardKeeper,
        oneshot::Receiver<SourceError>,
    )>,
    /// Group mode's members and assignments.
    group: Option<group::GroupState>,
    /// Sources failed over to their mirrors, and the probes that watch them.
    failover: failover::Failover,
}

/// What the enumerator shares with the readers of its source.
pub(crate) struct Shared {
    /// Positions of removed splits.
    pub retained: crate::base::retention::Retained,
    /// The clusters the metadata service calls active.
    pub active: crate::base::active::ActiveClusters,
    /// The streams of each cluster's topic.
    pub stream_index: crate::base::metadata::index::StreamIndex,
    /// Group mode: set while a revocation waits for the program's acknowledgement.
    pub ack_wanted: crate::base::ack::AckRequests,
    /// The librdkafka clients of the source, which its enumerator and readers share.
    pub clients: Arc<crate::kafka::shared::ClientShare>,
}

/// How long closing a group-mode source waits for its groups to be left.
pub(crate) const LEAVE_GROUPS_WAIT: Duration = Duration::from_secs(6);

/// How often a bounded run checks that the topics it reads still exist.
const BOUNDED_TOPIC_CHECK: Duration = Duration::from_secs(5);

/// In a follow run, how long start-up waits for the other clusters once one cluster
/// answered; those that did not are taken up later, like clusters added to the
/// metadata.
const START_GRACE: Duration = Duration::from_secs(5);

impl Drop for Enumerator {
    /// Closing a consumer blocks: rust-rdkafka's `BaseConsumer` waits for librdkafka
    /// to say it is closed by polling its queue 100 ms at a time, so every close took
    /// 100 ms however fast librdkafka was. The clients go to a thread of their own and
    /// the source's `close` (which waits for this drop) does not wait for them.
    fn drop(&mut self) {
        let clusters = std::mem::take(&mut self.clusters);
        let leaving = self.removals.take_leaving();
        if !clusters.is_empty() || !leaving.is_empty() {
            crate::kafka::client::close_detached((clusters, leaving));
        }
    }
}

impl Enumerator {
    /// An enumerator reading no cluster yet, with nothing applied.
    fn new(
        cfg: Arc<SourceConfig>,
        service: Arc<dyn KafkaMetadataService>,
        readers: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>,
        notices: mpsc::UnboundedReceiver<ReaderNotice>,
        commands: mpsc::Receiver<Command>,
        retained: crate::base::retention::Retained,
        active: crate::base::active::ActiveClusters,
    ) -> Enumerator {
        Enumerator {
            cfg,
            clusters: BTreeMap::new(),
            connecting: connect::Connecting::default(),
            discovery: discovery::Discovering::default(),
            readers: readers::Readers::new(readers),
            notices,
            commands,
            applied: applied::Applied::default(),
            links: links::Links::new(service, retained, active),
            removals: removal::Removals::default(),
            shard: None,
            group: None,
            failover: Default::default(),
        }
    }

    /// A command from the coordinator's handles; `None` once they are all gone.
    fn command(&mut self, cmd: Option<Command>, handles_open: &mut bool) {
        match cmd {
            Some(Command::Commit(cp, reply)) => {
                self.acknowledged(&cp);
                let commit = self.commit(&cp);
                self.links.queue_commit((Box::pin(commit), reply));
            }
            Some(Command::Acknowledge(cp)) => self.acknowledged(&cp),
            Some(Command::LeaveGroups(reply)) => self.leave_groups(reply),
            // The coordinator is gone; keep discovering for the readers.
            None => *handles_open = false,
        }
    }

    /// A cluster that answered after the source started is read: its retained
    /// positions resume, its partitions are discovered, and the change is said.
    async fn took_up(&mut self, cluster: Arc<str>) {
        let views = self.applied.views().clone();
        self.refresh_active(&views).await;
        let resumed = self.resume_retained();
        self.hand_out(resumed);
        let _ = self
            .discover_now(Some(&BTreeSet::from([cluster.clone()])), false)
            .await;
        let mut now_read = self.applied.streams().clone();
        for (id, s) in self.applied.latest() {
            if let Some(meta) = s.clusters.get(&*cluster) {
                now_read
                    .entry(id.clone())
                    .or_insert_with(|| KafkaStream::new(id.clone()))
                    .clusters
                    .insert(cluster.to_string(), meta.clone());
            }
        }
        for line in change_lines(self.applied.streams(), &now_read, &self.split_counts()) {
            tracing::info!(target: CHANGES_TARGET, "{line}");
        }
        self.apply_streams(now_read);
    }

    /// Runs until every handle is gone.
    pub async fn run(mut self) {
        // A bounded run looks at its clusters only to notice deleted topics.
        let interval = if self.cfg.bounded() {
            Some(BOUNDED_TOPIC_CHECK)
        } else {
            self.cfg.partition_discovery
        };
        let mut ticker = interval.map(|d| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let mut meta_ticker = (!self.cfg.bounded())
            .then_some(self.cfg.metadata_discovery)
            .flatten()
            .map(|d| {
                let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                t
            });
        let mut changes = if meta_ticker.is_some() {
            self.links.service().changes()
        } else {
            None
        };
        let mut handles_open = true;
        let waiting = metrics::gauge!(m::CLUSTERS_WAITING);
        let mut probe_ticker = tokio::time::interval(failover::PROBE_EVERY);
        probe_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let follow = !self.cfg.bounded();
        loop {
            waiting.set(self.connecting.waiting() as f64);
            self.sync_group();
            // Acknowledgements that queued while the loop was busy elsewhere count
            // before a revocation's wait is judged over.
            while handles_open && self.group.as_ref().is_some_and(|g| g.revoking()) {
                match self.commands.try_recv() {
                    Ok(cmd) => self.command(Some(cmd), &mut handles_open),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        self.command(None, &mut handles_open)
                    }
                }
            }
            self.revocations_due();
            let retry_at = self.next_retry();
            let leave_at = self.removals.next_close();
            let stops = self.group.as_ref().and_then(|g| g.stops());
            let stop_check_at = stops.and_then(|s| s.due());
            let held_back_until = self.applied.held_back_until();
            // A revocation is answered when its readers confirm (the group's `next`
            // wakes for that) and the program's commit acknowledges it (a command),
            // or at its deadline.
            let ack_deadline = self.group.as_ref().and_then(|g| g.ack_deadline());
            tokio::select! {
                _ = async { meta_ticker.as_mut().expect("guarded").tick().await }, if meta_ticker.is_some() => {
                    self.refresh_metadata().await;
                }
                changed = async { changes.as_mut().expect("guarded").changed().await }, if changes.is_some() => {
                    if changed.is_err() {
                        changes = None; // the service stopped notifying; the interval remains
                    } else {
                        self.refresh_metadata().await;
                    }
                }
                _ = tokio::time::sleep_until(held_back_until.unwrap_or_else(tokio::time::Instant::now)), if held_back_until.is_some() => {
                    self.applied.clear_held_back();
                    self.refresh_metadata().await;
                }
                joined = self.discovery.next_answer(), if self.discovery.running() => match joined {
                    Some(Ok((cluster, result))) => {
                        let _ = self.take_discovery(cluster, result, false).await;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "discovery task failed"),
                    None => {}
                },
                joined = self.connecting.next_answer(), if self.connecting.attempting() => match joined {
                    Some(Ok((cluster, connected))) => {
                        if let Ok(true) = self.connected(cluster.clone(), connected, |_| false) {
                            self.took_up(cluster).await;
                        }
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "cluster connect task failed"),
                    None => {}
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)), if retry_at.is_some() => {
                    self.retry_due();
                }
                cmd = self.commands.recv(), if handles_open => self.command(cmd, &mut handles_open),
                confirmed = self.removals.next_confirmation(), if self.removals.waiting() => {
                    if let Some((ids, handed_out)) = confirmed {
                        self.removal_confirmed(ids, handed_out);
                    }
                }
                _ = tokio::time::sleep_until(leave_at.unwrap_or_else(tokio::time::Instant::now)), if leave_at.is_some() => {
                    self.close_overdue();
                }
                notice = self.notices.recv() => match notice {
                    Some(ReaderNotice::Closed { reader, splits }) => self.reader_closed(reader, splits),
                    Some(ReaderNotice::Finished) => self.split_finished(),
                    None => break,
                },
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    self.discover_in_background();
                }
                _ = probe_ticker.tick(), if follow => self.probe_sources().await,
                probed = self.failover.next_probe() => {
                    if let Some((source, ok)) = probed {
                        self.probed(source, ok);
                    }
                }
                woke = async { self.group.as_mut().expect("guarded").next().await }, if self.group.is_some() => match woke {
                    Some(group::Woke::Member(event)) => self.member_event(event).await,
                    Some(group::Woke::StopsChecked(checked)) => self.group_stops_checked(checked),
                    Some(group::Woke::Looked(looked)) => self.assigned(looked),
                    // Answered at the top of the loop (`revocations_due`).
                    Some(group::Woke::Confirmed) | None => {}
                },
                _ = tokio::time::sleep_until(ack_deadline.unwrap_or_else(tokio::time::Instant::now)), if ack_deadline.is_some() => {}
                _ = tokio::time::sleep_until(stop_check_at.unwrap_or_else(tokio::time::Instant::now)), if stop_check_at.is_some() => {
                    self.check_group_stops();
                }

                lost = async { (&mut self.shard.as_mut().expect("guarded").1).await }, if self.shard.is_some() => {
                    self.shard_ended(lost);
                }
            }
        }
        self.release_shard();
        let _ = self.links.service().close().await;
    }
}
