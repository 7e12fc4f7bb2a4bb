//! Committing a checkpoint's offsets to each cluster under the group id, off the
//! enumerator's loop: each commit runs as a task of its own (one cluster per blocking
//! thread), so a coordinator that does not answer holds neither metadata changes nor
//! the other clusters. Commits run one after the other, in the order asked, so a
//! group's offsets never go back.

use std::collections::BTreeMap;
use std::future::Future;

use super::Enumerator;
use crate::checkpoint::Checkpoint;
use crate::error::SourceError;
use crate::kafka::client::detached;
use crate::metrics as m;

impl Enumerator {
    /// The commit of `cp`'s offsets, ready to run on its own: it holds the clients it
    /// needs, not the enumerator. Clusters not read (any more) are left out.
    pub(super) fn commit(
        &self,
        cp: &Checkpoint,
    ) -> impl Future<Output = Result<(), SourceError>> + Send + 'static {
        let no_group = self.cfg.group_id.is_none();
        let work: Vec<_> = cp
            .clusters
            .iter()
            .filter_map(|(cluster, saved)| {
                let state = self.clusters.get(cluster.as_str())?;
                let offsets: Vec<(String, i32, i64)> = saved
                    .splits
                    .iter()
                    .filter(|s| s.next_offset >= 0)
                    .map(|s| (s.topic.clone(), s.partition, s.next_offset))
                    .collect();
                Some((cluster.clone(), state.client.clone(), offsets))
            })
            .collect();
        async move {
            if no_group {
                return Err(SourceError::Config(
                    "committing offsets needs a group id".into(),
                ));
            }
            let mut tasks = tokio::task::JoinSet::new();
            for (cluster, client, offsets) in work {
                tasks.spawn(detached(move || (cluster, client.commit(&offsets))));
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
            if failures.is_empty() {
                Ok(())
            } else {
                Err(SourceError::Commit { failures })
            }
        }
    }
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
