//! Committing a checkpoint's offsets to each cluster under the group id, off the
//! enumerator's loop: each commit runs as a task of its own (one cluster per blocking
//! thread), so a coordinator that does not answer holds neither metadata changes nor
//! the other clusters. Commits run one after the other, in the order asked, so a
//! group's offsets never go back.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use super::Enumerator;
use crate::base::checkpoint::Checkpoint;
use crate::error::SourceError;
use crate::kafka::client::{close_detached, detached};
use crate::metrics as m;

impl Enumerator {
    /// The commit of `cp`'s offsets, ready to run on its own: it holds the clients it
    /// needs, not the enumerator. Clusters not read (any more) are left out.
    ///
    /// Removed clusters whose readers confirmed their removal are committed here one
    /// last time (the checkpoint's positions, else those the readers handed out
    /// last), and their clients closed after.
    pub(super) fn commit(
        &mut self,
        cp: &Checkpoint,
    ) -> impl Future<Output = Result<(), SourceError>> + Send + 'static {
        let no_group = self.cfg.group_id.is_none();
        let offsets_of =
            |saved: &crate::base::checkpoint::ClusterCheckpoint| -> Vec<(String, i32, i64)> {
                saved
                    .splits
                    .iter()
                    .filter(|s| s.next_offset >= 0)
                    .map(|s| (s.topic.clone(), s.partition, s.next_offset))
                    .collect()
            };
        let mut work: Vec<(String, Via)> = cp
            .clusters
            .iter()
            .filter_map(|(cluster, saved)| {
                let state = self.clusters.get(cluster.as_str())?;
                match &self.group {
                    // A group accepts commits from its members only, for the
                    // partitions they hold.
                    Some(group) => {
                        let member = group.committer(cluster)?;
                        let held: Vec<_> = offsets_of(saved)
                            .into_iter()
                            .filter_map(|(t, p, o)| {
                                let id = crate::base::split::SplitId::new(cluster, &t, p);
                                group.committable(&id, o).map(|o| (t, p, o))
                            })
                            .collect();
                        // Stamped now: the commit may run after the partition went
                        // and came back (commits queue behind slower ones).
                        let stamped = member.stamp(held);
                        Some((cluster.clone(), Via::Member(member, stamped)))
                    }
                    None => Some((
                        cluster.clone(),
                        Via::Client(state.client().clone(), offsets_of(saved)),
                    )),
                }
            })
            .collect();
        let mut closing = Vec::new();
        for (cluster, l) in self.take_confirmed_leaving() {
            let (state, positions) = l.into_parts();
            if self.clusters.contains_key(&cluster) {
                // Added back meanwhile: its new client commits the checkpoint's positions.
                closing.push(state);
                continue;
            }
            let offsets = match cp.clusters.get(&*cluster) {
                Some(saved) if !saved.splits.is_empty() => offsets_of(saved),
                _ => positions
                    .iter()
                    .filter(|(_, o)| **o >= 0)
                    .map(|((t, p), o)| (t.clone(), *p, *o))
                    .collect(),
            };
            tracing::info!(cluster = %cluster, partitions = offsets.len(), "committing a removed cluster's last positions");
            work.push((
                cluster.to_string(),
                Via::Client(state.client().clone(), offsets),
            ));
            closing.push(state);
        }
        async move {
            if no_group {
                return Err(SourceError::Config(crate::error::ConfigError::new(
                    "group_id",
                    "committing offsets needs a group id",
                )));
            }
            let mut tasks = tokio::task::JoinSet::new();
            for (cluster, via) in work {
                tasks.spawn(detached(move || {
                    let done = match via {
                        Via::Client(client, offsets) => client.commit(&offsets),
                        Via::Member(member, stamped) => member.commit(&stamped),
                    };
                    (cluster, done)
                }));
            }
            let mut failures = BTreeMap::new();
            while let Some(joined) = tasks.join_next().await {
                let (cluster, result) = match joined {
                    Ok(done) => done,
                    Err(e) => {
                        failures.insert("?".to_string(), format!("commit task failed: {e}"));
                        continue;
                    }
                };
                match result {
                    Ok(()) => {
                        metrics::counter!(m::COMMITS_SUCCEEDED, "cluster" => cluster).increment(1)
                    }
                    Err(e) => {
                        metrics::counter!(m::COMMITS_FAILED, "cluster" => cluster.clone())
                            .increment(1);
                        failures.insert(cluster, e.to_string());
                    }
                }
            }
            // Closing a client blocks.
            for state in closing {
                close_detached(state);
            }
            if failures.is_empty() {
                Ok(())
            } else {
                Err(SourceError::Commit { failures })
            }
        }
    }
}

/// A cluster's offsets to commit: topic, partition, next offset.
type Offsets = Vec<(String, i32, i64)>;

/// What commits a cluster's offsets, with them: its lookup client, or in group mode
/// its group member.
enum Via {
    Client(Arc<crate::kafka::client::ClusterClient>, Offsets),
    /// With the offsets, stamped with the partitions' stays.
    Member(
        crate::kafka::group_member::MemberCommitter,
        Vec<crate::kafka::group_member::StampedOffset>,
    ),
}

/// A commit to run, and where its result goes.
pub(super) type QueuedCommit = (
    std::pin::Pin<Box<dyn Future<Output = Result<(), SourceError>> + Send>>,
    tokio::sync::oneshot::Sender<Result<(), SourceError>>,
);

/// Runs queued commits one after the other, in the order asked; ends when the
/// enumerator drops the queue.
pub(super) fn commit_worker() -> tokio::sync::mpsc::UnboundedSender<QueuedCommit> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<QueuedCommit>();
    tokio::spawn(async move {
        while let Some((commit, reply)) = rx.recv().await {
            let _ = reply.send(commit.await);
        }
    });
    tx
}
