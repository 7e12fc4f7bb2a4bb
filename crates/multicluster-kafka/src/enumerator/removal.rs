//! Removed splits until their readers confirm, and removed clusters until their last
//! positions are committed.
//!
//! A reader learns of a removal when it next looks at its events, and only then
//! records the positions it handed out (see `retention`). Until it confirms, a split
//! added again (a topic removed and re-added in quick succession) waits here, so it
//! resumes at that position rather than at its starting offsets. A removed cluster's
//! client stays open until its readers confirmed and the next commit carried its last
//! positions, or [`LEAVE_TIMEOUT`] passed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Enumerator;
use super::cluster::ClusterState;
use crate::base::protocol::ReaderEvent;
use crate::base::split::{KafkaSplit, SplitId};
use crate::kafka::client::close_detached;

/// How long a removed cluster's client waits for a commit of its last positions.
pub(super) const LEAVE_TIMEOUT: Duration = Duration::from_secs(30);

/// A removed cluster whose last positions are not committed yet.
pub(super) struct Leaving {
    /// What the enumerator kept of the cluster, its client among it.
    state: ClusterState,
    /// The positions its readers handed out last, as they confirm the removal.
    positions: BTreeMap<(String, i32), i64>,
    /// When its client is closed even if no commit came.
    close_at: Instant,
}

impl Leaving {
    /// The cluster's state, and the positions its readers handed out last.
    pub(super) fn into_parts(self) -> (ClusterState, BTreeMap<(String, i32), i64>) {
        (self.state, self.positions)
    }
}

/// What the enumerator keeps of removals in flight.
#[derive(Default)]
pub(super) struct Removals {
    /// Splits whose reader has not confirmed their removal yet.
    unconfirmed: BTreeSet<SplitId>,
    /// The readers' confirmations: the splits removed, at the positions handed out.
    confirmations: tokio::task::JoinSet<(Vec<SplitId>, Vec<KafkaSplit>)>,
    /// Splits added again before their removal was confirmed.
    deferred: Vec<KafkaSplit>,
    /// Removed clusters waiting for the commit of their last positions.
    leaving: BTreeMap<Arc<str>, Leaving>,
}

impl Removals {
    /// The event that removes `ids` from a reader, remembering them until it confirms.
    pub(super) fn event(&mut self, ids: Vec<SplitId>, retain_until_ms: Option<i64>) -> ReaderEvent {
        let (tx, rx) = oneshot::channel();
        self.unconfirmed.extend(ids.iter().cloned());
        let waited = ids.clone();
        // A reader that is gone confirms by dropping the event: its splits come back
        // through its closing notice.
        self.confirmations
            .spawn(async move { (waited, rx.await.unwrap_or_default()) });
        ReaderEvent::Remove {
            ids,
            retain_until_ms,
            confirm: Some(tx),
        }
    }

    /// Splits whose removal is confirmed go on; the others wait.
    pub(super) fn defer_unconfirmed(&mut self, splits: &mut Vec<KafkaSplit>) {
        if self.unconfirmed.is_empty() {
            return;
        }
        let (wait, go): (Vec<_>, Vec<_>) = std::mem::take(splits)
            .into_iter()
            .partition(|s| self.unconfirmed.contains(&s.id));
        if !wait.is_empty() {
            tracing::debug!(
                count = wait.len(),
                "splits added again wait for their removal to be confirmed"
            );
        }
        self.deferred.extend(wait);
        *splits = go;
    }

    /// Splits removed again while they waited are not handed out.
    pub(super) fn drop_deferred(&mut self, which: impl Fn(&SplitId) -> bool) {
        self.deferred.retain(|s| !which(&s.id));
    }

    pub(super) fn waiting(&self) -> bool {
        !self.confirmations.is_empty()
    }

    /// The next confirmation (pending forever when none is awaited).
    pub(super) async fn next_confirmation(&mut self) -> Option<(Vec<SplitId>, Vec<KafkaSplit>)> {
        match self.confirmations.join_next().await {
            Some(Ok(done)) => Some(done),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "removal confirmation task failed");
                None
            }
            None => std::future::pending().await,
        }
    }

    /// The earliest time a leaving cluster gives up waiting for a commit.
    pub(super) fn next_close(&self) -> Option<Instant> {
        self.leaving.values().map(|l| l.close_at).min()
    }
}

impl Removals {
    /// Whether a reader has yet to confirm the removal of `id`.
    pub(super) fn unconfirmed(&self, id: &SplitId) -> bool {
        self.unconfirmed.contains(id)
    }

    /// Takes every removed cluster still waiting for its last commit (the enumerator
    /// closes).
    pub(super) fn take_leaving(&mut self) -> BTreeMap<Arc<str>, Leaving> {
        std::mem::take(&mut self.leaving)
    }

    /// The positions the readers of the removed `cluster` handed out last, while it
    /// waits for its last commit.
    #[cfg(test)]
    pub(super) fn leaving_positions(&self, cluster: &str) -> Option<&BTreeMap<(String, i32), i64>> {
        self.leaving.get(cluster).map(|l| &l.positions)
    }

    /// Whether the removed `cluster` waits for its last commit.
    #[cfg(test)]
    pub(super) fn is_leaving(&self, cluster: &str) -> bool {
        self.leaving.contains_key(cluster)
    }

    /// Whether no removed cluster waits for its last commit.
    #[cfg(test)]
    pub(super) fn none_leaving(&self) -> bool {
        self.leaving.is_empty()
    }
}

impl Enumerator {
    /// Records a reader's confirmation, and hands out the splits that waited for it,
    /// at the positions the reader retained for them.
    pub(super) fn removal_confirmed(&mut self, ids: Vec<SplitId>, handed_out: Vec<KafkaSplit>) {
        for id in &ids {
            self.removals.unconfirmed.remove(id);
        }
        self.released(&handed_out);
        for s in handed_out {
            if let Some(l) = self.removals.leaving.get_mut(&s.id.cluster) {
                l.positions
                    .insert((s.id.topic.to_string(), s.id.partition), s.next_offset);
            }
        }
        // A mirror whose discovery waited for its source's last positions.
        if self.applied.views().values().any(|v| {
            v.mirror_of
                .as_ref()
                .is_some_and(|m| ids.iter().any(|id| *id.cluster == *m.cluster))
        }) {
            self.discover_in_background();
        }
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.removals.deferred)
            .into_iter()
            .partition(|s| !self.removals.unconfirmed.contains(&s.id));
        self.removals.deferred = wait;
        if ready.is_empty() {
            return;
        }
        let mut resumed = Vec::with_capacity(ready.len());
        for s in ready {
            if self.clusters.contains_key(&s.id.cluster) {
                resumed.push(self.resume_at_retained(s));
            }
        }
        let ready = resumed;
        self.hand_out(ready);
    }

    /// A split added again resumes at its retained position, if it has one from the
    /// same physical cluster.
    fn resume_at_retained(&mut self, split: KafkaSplit) -> KafkaSplit {
        let Some((_, r)) = self.links.retained().take(|id| *id == split.id).pop() else {
            return split;
        };
        let actual = self
            .clusters
            .get(&split.id.cluster)
            .and_then(|c| c.kafka_cluster_id().as_ref());
        if let (Some(expected), Some(actual)) = (&r.kafka_cluster_id, actual)
            && expected != actual
        {
            // Another physical cluster (refused or replaced by `resume_retained`'s
            // rules): the split starts as configured.
            return split;
        }
        tracing::debug!(split = %split.id, offset = r.next_offset, "resuming a split added again at its retained position");
        KafkaSplit {
            next_offset: r.next_offset,
            stop_offset: split.stop_offset.or(r.stop_offset),
            last: r.last,
            id: split.id,
        }
    }

    /// A removed cluster's client waits for the commit of its last positions, when
    /// there is a group to commit to; it is closed at once otherwise. In group mode
    /// the cluster's member commits them as it leaves the group (which takes commits
    /// from its members only).
    pub(super) fn leave(&mut self, cluster: Arc<str>, state: ClusterState) {
        if self.cfg.group_id.is_none() || self.group.is_some() {
            close_detached(state);
            return;
        }
        let old = self.removals.leaving.insert(
            cluster,
            Leaving {
                state,
                positions: BTreeMap::new(),
                close_at: Instant::now() + LEAVE_TIMEOUT,
            },
        );
        if let Some(old) = old {
            close_detached(old.state);
        }
    }

    /// Closes the leaving clusters whose wait is over, saying what was not committed.
    pub(super) fn close_overdue(&mut self) {
        let now = Instant::now();
        let overdue: Vec<Arc<str>> = self
            .removals
            .leaving
            .iter()
            .filter(|(_, l)| l.close_at <= now)
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in overdue {
            if let Some(l) = self.removals.leaving.remove(&cluster) {
                tracing::info!(cluster = %cluster, "no checkpoint was committed within {LEAVE_TIMEOUT:?} of the cluster's removal; its group offsets keep the last commit before it");
                close_detached(l.state);
            }
        }
    }

    /// Takes the removed clusters whose readers all confirmed their removal: their
    /// last positions are committed now.
    pub(super) fn take_confirmed_leaving(&mut self) -> Vec<(Arc<str>, Leaving)> {
        let last: Vec<Arc<str>> = self
            .removals
            .leaving
            .keys()
            .filter(|c| self.confirmed(c))
            .cloned()
            .collect();
        last.into_iter()
            .filter_map(|cluster| {
                let l = self.removals.leaving.remove(&cluster)?;
                Some((cluster, l))
            })
            .collect()
    }

    /// Whether the leaving cluster's readers all confirmed its removal.
    pub(super) fn confirmed(&self, cluster: &str) -> bool {
        !self
            .removals
            .unconfirmed
            .iter()
            .any(|id| &*id.cluster == cluster)
    }
}
