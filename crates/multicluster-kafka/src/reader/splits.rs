//! The splits a reader owns, found by id (or, for a run of records of one split, by
//! the one found last), the ones whose lag is to be reported, and the facts of their
//! clusters that go into checkpoints. Only this file adds, finds or drops them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::split_state::{ClusterInfo, SplitState};
use crate::base::split::{KafkaSplit, SplitId};

/// The splits of one reader.
#[derive(Default)]
pub(super) struct Splits {
    /// Split states; `index` maps ids to positions in this vector.
    states: Vec<SplitState>,
    index: HashMap<SplitId, usize>,
    /// The split found last: records come in runs per partition, so this saves a
    /// hash lookup per record.
    last: Option<(Arc<str>, i32, usize)>,
    /// Splits (indices into `states`) with records handed out or a new high
    /// watermark since their lag was last reported; reported once the batch is
    /// handed out.
    touched: Vec<usize>,
    clusters: BTreeMap<Arc<str>, ClusterInfo>,
}

impl Splits {
    pub(super) fn len(&self) -> usize {
        self.states.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, SplitState> {
        self.states.iter()
    }

    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, SplitState> {
        self.states.iter_mut()
    }

    pub(super) fn get_mut(&mut self, i: usize) -> &mut SplitState {
        &mut self.states[i]
    }

    /// The index of a record's split, if this reader owns it, counted as touched
    /// when it is not the split found last.
    #[inline]
    pub(super) fn find(
        &mut self,
        cluster: &Arc<str>,
        topic: &Arc<str>,
        partition: i32,
    ) -> Option<usize> {
        match &self.last {
            Some((t, p, i)) if *p == partition && Arc::ptr_eq(t, topic) => Some(*i),
            _ => {
                let id = SplitId {
                    cluster: cluster.clone(),
                    topic: topic.clone(),
                    partition,
                };
                let i = self.index.get(&id).copied()?;
                self.last = Some((topic.clone(), partition, i));
                self.touched.push(i);
                Some(i)
            }
        }
    }

    /// The index of the split found last.
    pub(super) fn found_last(&self) -> Option<usize> {
        self.last.as_ref().map(|(_, _, i)| *i)
    }

    /// The next record is looked up by id (a new batch starts: its first run is
    /// counted as touched even if the previous batch ended on the same split).
    pub(super) fn forget_last(&mut self) {
        self.last = None;
    }

    /// Takes an assigned split: a new one starts where the enumerator says, one
    /// assigned again keeps the position this reader handed out. Returns the split
    /// to fetch, unless it is finished.
    pub(super) fn assign(&mut self, s: KafkaSplit) -> Option<KafkaSplit> {
        let finished = s.is_finished();
        let i = match self.index.get(&s.id) {
            Some(i) => *i,
            None => {
                let mut state =
                    SplitState::new(s.id.clone(), s.next_offset, s.stop_offset, finished);
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
        state.next_offset = state.next_offset.max(s.next_offset);
        let split = state.to_fetch();
        state.finished = split.is_finished();
        (!state.finished).then_some(split)
    }

    /// Forgets splits: their positions leave this reader (their lag series marked
    /// removed).
    pub(super) fn remove(&mut self, gone: &HashSet<&SplitId>) {
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
    }

    /// Finishes a split (its position moves to its stop, if it has one), if this
    /// reader owns it.
    pub(super) fn finish(&mut self, id: &SplitId) {
        let Some(i) = self.index.get(id).copied() else {
            return;
        };
        let s = &mut self.states[i];
        s.finished = true;
        if let Some(stop) = s.stop {
            s.next_offset = s.next_offset.max(stop);
        }
        self.touched.push(i);
    }

    /// Ends the unfinished bounded splits of a topic that is gone, where reading
    /// stopped; returns them.
    pub(super) fn end_gone_topic(&mut self, cluster: &Arc<str>, topic: &str) -> Vec<&SplitState> {
        let mut ended = Vec::new();
        for (i, s) in self.states.iter_mut().enumerate() {
            if !s.finished && s.stop.is_some() && s.id.cluster == *cluster && &*s.id.topic == topic
            {
                s.finished = true;
                ended.push(i);
            }
        }
        self.touched.extend(&ended);
        ended.into_iter().map(|i| &self.states[i]).collect()
    }

    /// Marks a split whose log was truncated below what was fetched (`from`).
    pub(super) fn set_truncated(&mut self, id: &SplitId, from: i64) {
        if let Some(i) = self.index.get(id).copied() {
            self.states[i].truncated = Some(from);
        }
    }

    /// Takes a split's latest high watermark (for its lag).
    pub(super) fn set_high_watermark(&mut self, id: &SplitId, hw: i64) {
        if let Some(i) = self.index.get(id).copied() {
            self.states[i].set_high_watermark(hw);
            self.touched.push(i);
        }
    }

    /// Splits handed to a new fetcher are fetched: not paused.
    pub(super) fn fetched(&mut self, splits: &[KafkaSplit]) {
        for s in splits {
            if let Some(i) = self.index.get(&s.id).copied() {
                self.states[i].pace.set_paused(false);
            }
        }
    }

    /// The cluster's unfinished splits, at the positions handed out, to fetch again.
    pub(super) fn to_fetch_on(&self, cluster: &Arc<str>) -> Vec<KafkaSplit> {
        self.states
            .iter()
            .filter(|s| s.id.cluster == *cluster && !s.finished)
            .map(SplitState::to_fetch)
            .collect()
    }

    /// Whether this reader owns a split of the cluster.
    pub(super) fn any_on(&self, cluster: &Arc<str>) -> bool {
        self.states.iter().any(|s| s.id.cluster == *cluster)
    }

    /// Whether every split is finished.
    pub(super) fn all_finished(&self) -> bool {
        self.states.iter().all(|s| s.finished)
    }

    /// The number of splits not finished.
    pub(super) fn active(&self) -> usize {
        self.states.iter().filter(|s| !s.finished).count()
    }

    /// Every split as it stands: the position after the last record handed out.
    pub(super) fn positions(&self) -> Vec<KafkaSplit> {
        self.states.iter().map(SplitState::split).collect()
    }

    /// Updates the lag of the splits touched since the last report (once per batch,
    /// not per record).
    pub(super) fn report_lag(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        self.touched.sort_unstable();
        self.touched.dedup();
        for i in self.touched.drain(..) {
            if let Some(s) = self.states.get_mut(i) {
                s.report_lag();
            }
        }
    }

    /// Every split leaves this reader: their lag series are marked removed.
    pub(super) fn drop_lags(&mut self) {
        for s in &mut self.states {
            s.drop_lag();
        }
    }

    /// Takes what the enumerator says of a cluster.
    pub(super) fn set_cluster_info(&mut self, cluster: Arc<str>, info: ClusterInfo) {
        self.clusters.insert(cluster, info);
    }

    /// Forgets a cluster that left the metadata.
    pub(super) fn forget_cluster(&mut self, cluster: &Arc<str>) {
        self.clusters.remove(cluster);
    }

    /// The facts of each cluster, for checkpoints.
    pub(super) fn clusters(&self) -> impl Iterator<Item = (&Arc<str>, &ClusterInfo)> {
        self.clusters.iter()
    }

    /// The cluster's Kafka cluster id, if known.
    pub(super) fn kafka_cluster_id(&self, cluster: &Arc<str>) -> Option<String> {
        self.clusters
            .get(cluster)
            .and_then(|c| c.kafka_cluster_id.clone())
    }
}
