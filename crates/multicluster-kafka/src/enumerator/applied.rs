//! The metadata as applied: what the source reads now, per cluster and per stream,
//! the metadata as last read, and what holds changes back (property changes refused,
//! or too soon after the last rebuild).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::time::Instant;

use super::Enumerator;
use crate::base::config::Subscription;
use crate::base::metadata::KafkaStream;
use crate::base::plan::{ClusterView, Plan};
use crate::base::properties::ClientProperties;

/// The metadata the enumerator applied, and what it keeps to apply the next.
#[derive(Default)]
pub(super) struct Applied {
    /// The metadata applied last, per cluster (the input of the next plan).
    views: BTreeMap<String, ClusterView>,
    /// The metadata applied last, per stream (what the change lines compare).
    streams: BTreeMap<String, KafkaStream>,
    /// The metadata as last read, per stream (clusters not read yet included).
    latest: BTreeMap<String, KafkaStream>,
    /// Subscribed stream ids the metadata lacked at the last read.
    missing_streams: Vec<String>,
    /// Consecutive failed metadata reads.
    metadata_failures: u32,
    /// Metadata changes applied so far.
    generation: u64,
    /// Metadata whose properties were refused (librdkafka refused them, or a new
    /// bootstrap list leads to another cluster), per cluster: not tried again until
    /// the cluster's metadata changes.
    refused_properties: BTreeMap<Arc<str>, ClusterView>,
    /// When each cluster's clients were last rebuilt for a property change.
    last_rebuild: BTreeMap<Arc<str>, Instant>,
    /// When to read the metadata again to apply property changes held back by the
    /// rebuild interval.
    held_back_until: Option<Instant>,
    /// The client properties of clusters that left the metadata: a mirror of one of
    /// them reads MirrorMaker's offset syncs there.
    gone_props: BTreeMap<Arc<str>, ClientProperties>,
}

impl Applied {
    /// The metadata applied last, per cluster.
    pub(super) fn views(&self) -> &BTreeMap<String, ClusterView> {
        &self.views
    }

    /// The metadata applied last of `cluster`.
    pub(super) fn view(&self, cluster: &str) -> Option<&ClusterView> {
        self.views.get(cluster)
    }

    /// The metadata applied last, per stream.
    pub(super) fn streams(&self) -> &BTreeMap<String, KafkaStream> {
        &self.streams
    }

    /// The metadata as last read, per stream.
    pub(super) fn latest(&self) -> &BTreeMap<String, KafkaStream> {
        &self.latest
    }

    /// The client properties `cluster` was read with before it left the metadata.
    pub(super) fn gone_props(&self, cluster: &str) -> Option<&ClientProperties> {
        self.gone_props.get(cluster)
    }

    /// When to read the metadata again for a held-back property change.
    pub(super) fn held_back_until(&self) -> Option<Instant> {
        self.held_back_until
    }

    /// The metadata as read now, per stream.
    pub(super) fn set_latest(&mut self, latest: BTreeMap<String, KafkaStream>) {
        self.latest = latest;
    }

    /// The metadata applied now, per stream.
    pub(super) fn set_streams(&mut self, streams: BTreeMap<String, KafkaStream>) {
        self.streams = streams;
    }

    /// `cluster` is read with `view` from now.
    pub(super) fn read(&mut self, cluster: &str, view: ClusterView) {
        self.views.insert(cluster.to_string(), view);
    }

    /// `cluster` is not read any more (it is read afresh once it answers).
    pub(super) fn unread(&mut self, cluster: &str) {
        self.views.remove(cluster);
    }

    /// `cluster` left the metadata; `props`: those it was read with, if it was read.
    pub(super) fn removed(&mut self, cluster: &Arc<str>, props: Option<ClientProperties>) {
        self.last_rebuild.remove(cluster);
        if let Some(props) = props {
            self.gone_props.insert(cluster.clone(), props);
        }
        self.views.remove(&**cluster);
    }

    /// `cluster`'s clients were rebuilt for a property change now.
    pub(super) fn rebuilt(&mut self, cluster: &Arc<str>) {
        self.last_rebuild.insert(cluster.clone(), Instant::now());
    }

    /// `cluster`'s new properties were taken: refused ones before are forgotten.
    pub(super) fn accepted(&mut self, cluster: &Arc<str>) {
        self.refused_properties.remove(cluster);
    }

    /// `cluster`'s new metadata `view` was refused for its properties: it is read on
    /// with the old ones, and `view` is not tried again until the metadata changes.
    pub(super) fn refused(&mut self, cluster: &Arc<str>, view: &ClusterView) {
        self.refused_properties
            .insert(cluster.clone(), view.clone());
        let mut kept = view.clone();
        if let Some(old) = self.views.get(&**cluster) {
            kept.properties = old.properties.clone();
        }
        self.views.insert(cluster.to_string(), kept);
    }

    /// The metadata service answered.
    pub(super) fn metadata_answered(&mut self) {
        if self.metadata_failures > 0 {
            tracing::debug!(
                failures = self.metadata_failures,
                "metadata service answers again"
            );
        }
        self.metadata_failures = 0;
    }

    /// The metadata service failed; returns how many times in a row.
    pub(super) fn metadata_failed(&mut self) -> u32 {
        self.metadata_failures += 1;
        self.metadata_failures
    }

    /// A metadata change was applied; returns how many so far.
    pub(super) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// The held-back read is due: none is scheduled any more.
    pub(super) fn clear_held_back(&mut self) {
        self.held_back_until = None;
    }

    /// When `cluster`'s clients were last rebuilt.
    #[cfg(test)]
    pub(super) fn last_rebuild(&self, cluster: &str) -> Instant {
        self.last_rebuild[cluster]
    }

    /// Records `cluster`'s clients as rebuilt at `at`.
    #[cfg(test)]
    pub(super) fn rebuilt_at(&mut self, cluster: Arc<str>, at: Instant) {
        self.last_rebuild.insert(cluster, at);
    }

    /// Records `view` as refused for `cluster`'s properties, the views unchanged.
    #[cfg(test)]
    pub(super) fn refuse_only(&mut self, cluster: Arc<str>, view: ClusterView) {
        self.refused_properties.insert(cluster, view);
    }
}

impl Enumerator {
    /// The metadata applied now, per stream; the readers' stream index follows it.
    pub(super) fn apply_streams(&mut self, streams: BTreeMap<String, KafkaStream>) {
        self.applied.set_streams(streams);
        self.links.index_streams(self.applied.streams());
    }

    /// Takes out of `p` the property changes of clusters rebuilt less than the rebuild
    /// interval ago (dropping a cluster's entry when nothing else of it changed), keeps
    /// their old properties in `new_views` (so the views recorded as applied still
    /// differ from the metadata, and the next plan finds the change again), and
    /// schedules a metadata read for when the first of them may be applied.
    /// Returns the clusters whose property change was held back.
    pub(super) fn hold_back(
        &mut self,
        p: &mut Plan,
        new_views: &mut BTreeMap<String, ClusterView>,
    ) -> BTreeSet<String> {
        let now = tokio::time::Instant::now();
        let mut held = BTreeSet::new();
        for (cluster, change) in p.clusters_changed.iter_mut() {
            if !change.properties_changed {
                continue;
            }
            // Properties librdkafka refused are not tried again until they change.
            if let (Some(refused), Some(new)) = (
                self.applied.refused_properties.get(cluster.as_str()),
                new_views.get_mut(cluster),
            ) && *refused == *new
            {
                change.properties_changed = false;
                if let Some(old) = self.applied.views.get(cluster) {
                    new.properties = old.properties.clone();
                }
                held.insert(cluster.clone());
                continue;
            }
            let Some(due) = self
                .applied
                .last_rebuild
                .get(cluster.as_str())
                .map(|at| *at + self.cfg.rebuild_interval)
                .filter(|due| *due > now)
            else {
                continue;
            };
            change.properties_changed = false;
            if let (Some(old), Some(new)) =
                (self.applied.views.get(cluster), new_views.get_mut(cluster))
            {
                new.properties = old.properties.clone();
            }
            self.applied.held_back_until =
                Some(self.applied.held_back_until.map_or(due, |h| h.min(due)));
            tracing::debug!(cluster, "property change held back by the rebuild interval");
            held.insert(cluster.clone());
        }
        p.clusters_changed.retain(|_, change| !change.is_empty());
        held
    }

    /// Warns when the subscribed stream ids the metadata lacks change (not at every
    /// read while they stay missing).
    pub(super) fn report_missing(&mut self, found: &BTreeMap<String, KafkaStream>) {
        let Subscription::Ids(ids) = &self.cfg.subscription else {
            return;
        };
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !found.contains_key(*id))
            .cloned()
            .collect();
        if missing != self.applied.missing_streams {
            if !missing.is_empty() {
                tracing::warn!(?missing, "subscribed streams are no longer in the metadata");
            }
            self.applied.missing_streams = missing;
        }
    }
}
