//! Positions of splits whose topic or cluster left the metadata, kept for a window so a
//! flapping metadata service does not reset them.
//!
//! Readers write a split's position here when they drop it; every checkpoint carries
//! the entries still within their window; the enumerator takes them back when the
//! topic or cluster returns and resumes the splits there.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::base::split::{KafkaSplit, SplitId};

/// One retained split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RetainedSplit {
    pub next_offset: i64,
    pub stop_offset: Option<i64>,
    /// Wall-clock ms since the epoch after which the position is dropped.
    pub until_ms: i64,
    /// The Kafka `cluster.id` the position belongs to.
    pub kafka_cluster_id: Option<String>,
    /// The last record handed out (what a mirror continues after).
    pub last: Option<crate::base::split::LastRecord>,
}

/// Shared between the enumerator and the readers of one source.
#[derive(Clone, Debug, Default)]
pub(crate) struct Retained(Arc<Mutex<BTreeMap<SplitId, RetainedSplit>>>);

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

impl Retained {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SplitId, RetainedSplit>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a split's position until `until_ms`.
    pub fn keep(&self, split: &KafkaSplit, until_ms: i64, kafka_cluster_id: Option<String>) {
        self.lock().insert(
            split.id.clone(),
            RetainedSplit {
                next_offset: split.next_offset,
                stop_offset: split.stop_offset,
                until_ms,
                kafka_cluster_id,
                last: split.last.clone(),
            },
        );
    }

    /// Entries still within their window (expired ones are dropped).
    pub fn live(&self) -> Vec<(SplitId, RetainedSplit)> {
        let now = now_ms();
        let mut map = self.lock();
        map.retain(|_, r| r.until_ms > now);
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Takes back the live entries that `which` selects.
    pub fn take(&self, which: impl Fn(&SplitId) -> bool) -> Vec<(SplitId, RetainedSplit)> {
        let now = now_ms();
        let mut map = self.lock();
        map.retain(|_, r| r.until_ms > now);
        let ids: Vec<SplitId> = map.keys().filter(|id| which(id)).cloned().collect();
        ids.into_iter()
            .filter_map(|id| map.remove(&id).map(|r| (id, r)))
            .collect()
    }
}
