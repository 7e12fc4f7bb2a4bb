//! The readers and the splits each holds: handing splits out, taking them back, and
//! what the readers are told.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Enumerator;
use crate::base::assignment::{AssignmentStrategy, assign};
use crate::base::protocol::ReaderEvent;
use crate::base::split::{KafkaSplit, SplitId};

/// The source's live readers, and which splits each holds.
pub(super) struct Readers {
    /// The channel to each live reader.
    senders: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>,
    /// The reader each split handed out went to.
    owners: BTreeMap<SplitId, usize>,
    /// Splits no live reader took (there was none).
    unassigned: Vec<KafkaSplit>,
}

impl Readers {
    /// The readers at the other ends of `senders`, holding no split yet.
    pub(super) fn new(senders: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>) -> Self {
        Readers {
            senders,
            owners: BTreeMap::new(),
            unassigned: Vec::new(),
        }
    }

    /// Sends every live reader the event `event` makes.
    pub(super) fn tell_all(&self, event: impl Fn() -> ReaderEvent) {
        for tx in self.senders.values() {
            let _ = tx.send(event());
        }
    }

    /// Sends `event` to `reader`, if it is live.
    pub(super) fn tell(&self, reader: usize, event: ReaderEvent) {
        if let Some(tx) = self.senders.get(&reader) {
            let _ = tx.send(event);
        }
    }

    /// Whether `reader` is live.
    pub(super) fn is_live(&self, reader: usize) -> bool {
        self.senders.contains_key(&reader)
    }

    /// The readers holding a split that `which` matches.
    pub(super) fn owners_of(&self, which: impl Fn(&SplitId) -> bool) -> BTreeSet<usize> {
        self.owners
            .iter()
            .filter(|(id, _)| which(id))
            .map(|(_, r)| *r)
            .collect()
    }

    /// Every split handed out, or waiting for a reader.
    pub(super) fn split_ids(&self) -> impl Iterator<Item = &SplitId> {
        self.owners
            .keys()
            .chain(self.unassigned.iter().map(|s| &s.id))
    }

    /// Takes the splits `which` matches from their readers and from those waiting for
    /// one; returns the ids taken from each reader.
    pub(super) fn take(
        &mut self,
        which: impl Fn(&SplitId) -> bool,
    ) -> BTreeMap<usize, Vec<SplitId>> {
        let mut per_reader: BTreeMap<usize, Vec<SplitId>> = BTreeMap::new();
        for (id, owner) in &self.owners {
            if which(id) {
                per_reader.entry(*owner).or_default().push(id.clone());
            }
        }
        self.owners.retain(|id, _| !which(id));
        self.unassigned.retain(|s| !which(&s.id));
        per_reader
    }

    /// Takes `ids` from their readers and from those waiting for one; returns the ids
    /// taken from each reader, in the order of `ids`.
    pub(super) fn take_ids(&mut self, ids: &[SplitId]) -> BTreeMap<usize, Vec<SplitId>> {
        let mut per_reader: BTreeMap<usize, Vec<SplitId>> = BTreeMap::new();
        for id in ids {
            if let Some(r) = self.owners.remove(id) {
                per_reader.entry(r).or_default().push(id.clone());
            }
        }
        self.unassigned.retain(|s| !ids.contains(&s.id));
        per_reader
    }

    /// Adds the splits waiting for a reader to `splits`.
    fn take_waiting(&mut self, splits: &mut Vec<KafkaSplit>) {
        splits.append(&mut self.unassigned);
    }

    /// Assigns `splits` to the live readers under `strategy`; those no reader took
    /// wait. Returns what each reader gets, by reader and cluster.
    fn assign(
        &mut self,
        splits: Vec<KafkaSplit>,
        strategy: AssignmentStrategy,
    ) -> BTreeMap<(usize, Arc<str>), Vec<KafkaSplit>> {
        let alive: Vec<usize> = self.senders.keys().copied().collect();
        let ids: Vec<SplitId> = splits.iter().map(|s| s.id.clone()).collect();
        let chosen: BTreeMap<SplitId, usize> = assign(&self.owners, &ids, &alive, strategy)
            .into_iter()
            .collect();
        let mut per_reader: BTreeMap<(usize, Arc<str>), Vec<KafkaSplit>> = BTreeMap::new();
        for s in splits {
            match chosen.get(&s.id) {
                Some(r) => {
                    self.owners.insert(s.id.clone(), *r);
                    per_reader
                        .entry((*r, s.id.cluster.clone()))
                        .or_default()
                        .push(s);
                }
                None if self.owners.contains_key(&s.id) => {}
                None => self.unassigned.push(s),
            }
        }
        per_reader
    }

    /// Forgets `reader`, which closed, and the splits it held.
    fn closed(&mut self, reader: usize) {
        self.senders.remove(&reader);
        self.owners.retain(|_, r| *r != reader);
    }

    /// The reader each split handed out went to.
    #[cfg(test)]
    pub(super) fn owners(&self) -> &BTreeMap<SplitId, usize> {
        &self.owners
    }

    /// Records `id` as handed out to `reader`.
    #[cfg(test)]
    pub(super) fn set_owner(&mut self, id: SplitId, reader: usize) {
        self.owners.insert(id, reader);
    }
}

impl Enumerator {
    /// Tells every reader each cluster's Kafka cluster.id and whether its partitions
    /// were discovered.
    pub(super) fn broadcast_cluster_info(&self) {
        for (cluster, state) in &self.clusters {
            self.readers.tell_all(|| ReaderEvent::ClusterInfo {
                cluster: cluster.clone(),
                kafka_cluster_id: state.kafka_cluster_id().clone(),
                initial_discovery_done: state.initial_discovery_done(),
            });
        }
    }

    /// Assigns splits to live readers and sends them, grouped by reader and cluster.
    /// A sharded source keeps only its shard's splits.
    pub(super) fn hand_out(&mut self, mut splits: Vec<KafkaSplit>) {
        if let Some(shard) = self.cfg.shard {
            splits.retain(|s| shard.owns(&s.id.cluster, &s.id.topic, s.id.partition));
        }
        if let Some(group) = &mut self.group {
            // Only what the clusters' group coordinators gave this instance.
            splits.retain(|s| group.holds(&s.id));
            group.handing_out(&splits);
        }
        self.readers.take_waiting(&mut splits);
        self.removals.defer_unconfirmed(&mut splits);
        if splits.is_empty() {
            return;
        }
        let per_reader = self.readers.assign(splits, self.cfg.strategy);
        for ((reader, cluster), splits) in per_reader {
            let Some(state) = self.clusters.get(&cluster) else {
                continue;
            };
            if self.readers.is_live(reader) {
                tracing::debug!(reader, cluster = %cluster, count = splits.len(), "assigning splits");
                self.readers.tell(
                    reader,
                    ReaderEvent::Assign {
                        cluster: cluster.clone(),
                        properties: state.reader_props().clone(),
                        splits,
                        sent: std::time::Instant::now(),
                    },
                );
            }
        }
    }

    /// A reader closed: its splits, at the positions it handed out, go to the other
    /// readers (those of clusters still read).
    pub(super) fn reader_closed(&mut self, reader: usize, splits: Vec<KafkaSplit>) {
        self.readers.closed(reader);
        tracing::info!(
            reader,
            splits = splits.len(),
            "reader closed; reassigning its splits"
        );
        let live: Vec<KafkaSplit> = splits
            .into_iter()
            .filter(|s| self.clusters.contains_key(&s.id.cluster))
            .collect();
        self.hand_out(live);
    }

    /// Tells each owner to forget the splits matching `which`; forgets them here too.
    /// With `retain`, their positions are kept for the retention window.
    pub(super) fn remove_splits(&mut self, which: impl Fn(&SplitId) -> bool, retain: bool) {
        let per_reader = self.readers.take(&which);
        self.removals.drop_deferred(&which);
        // Group mode keeps them at least until the group's revocation of the splits
        // (which follows) can see the program acknowledge them in its checkpoints.
        let window = match self.group {
            Some(_) => self.cfg.retention.max(super::group::ACK_WAIT * 4),
            None => self.cfg.retention,
        };
        let retain_until_ms = (retain && !window.is_zero())
            .then(|| crate::base::retention::now_ms() + window.as_millis() as i64);
        for (reader, ids) in per_reader {
            if self.readers.is_live(reader) {
                self.readers
                    .tell(reader, self.removals.event(ids, retain_until_ms));
            }
        }
    }
}
