//! Positions that come back: from a checkpoint at start (with this run's stops), and
//! retained positions of splits whose cluster and topic are read again.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Enumerator;
use super::discovery::stops_blocking;
use super::lookups::{Lookup, key_of};
use crate::base::protocol::ReaderEvent;
use crate::base::split::{KafkaSplit, SplitId};
use crate::error::SourceError;

impl Enumerator {
    /// Positions from the checkpoint, for clusters and topics still subscribed.
    pub(super) fn restore(&mut self) -> Result<Vec<KafkaSplit>, SourceError> {
        let Some(cp) = self.cfg.restore.clone() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let retain_until = crate::base::retention::now_ms() + self.cfg.retention.as_millis() as i64;
        for (cluster, saved) in &cp.clusters {
            let mut retain_later = Vec::new();
            let Some(state) = self.clusters.get_mut(cluster.as_str()) else {
                // No longer subscribed: keep the positions for the retention window.
                for sc in &saved.splits {
                    self.retain_saved(cluster, sc, saved, retain_until);
                }
                continue;
            };
            if let (Some(expected), Some(actual)) =
                (&saved.kafka_cluster_id, state.kafka_cluster_id())
                && expected != actual
            {
                if self
                    .applied
                    .view(cluster.as_str())
                    .and_then(|v| v.replaces.as_deref())
                    == Some(expected.as_str())
                {
                    tracing::info!(
                        cluster,
                        expected,
                        actual,
                        "the metadata says this cluster replaces the one of the checkpoint; starting it fresh"
                    );
                    continue;
                }
                if self.cfg.discard_mismatched_positions {
                    tracing::warn!(
                        cluster,
                        expected,
                        actual,
                        "cluster identity changed; starting this cluster fresh as configured"
                    );
                    continue;
                }
                return Err(SourceError::ClusterIdentity {
                    cluster: cluster.clone(),
                    expected: expected.clone(),
                    actual: actual.clone(),
                });
            }
            state.set_discovered(saved.initial_discovery_done);
            for s in &saved.splits {
                if !state.topics().contains(&s.topic) {
                    retain_later.push(s.clone());
                    continue;
                }
                state.know(s.topic.clone(), s.partition);
                // Where to stop is this run's choice (`stops_for_this_run`), not the
                // checkpointed run's: a bounded run after a follow run ends, and a
                // re-run export reads what is new since.
                out.push(KafkaSplit {
                    id: SplitId::new(cluster, &s.topic, s.partition),
                    next_offset: s.next_offset,
                    stop_offset: None,
                    last: s.last.clone(),
                });
            }
            // Topics no longer subscribed on a subscribed cluster: retained too.
            for sc in &retain_later {
                self.retain_saved(cluster, sc, saved, retain_until);
            }
        }
        Ok(out)
    }

    /// Gives restored splits the stops of this run's stopping offsets (per cluster, else
    /// the source's), looked up on every cluster concurrently, as discovery does for
    /// new splits. Without stopping offsets the splits stay unbounded.
    pub(super) async fn stops_for_this_run(
        &self,
        mut splits: Vec<KafkaSplit>,
    ) -> Result<Vec<KafkaSplit>, SourceError> {
        let stops = self
            .per_cluster(&splits, "a stop lookup task", |cluster, state| {
                let stop = state.stop().clone()?;
                let (cluster, client) = (cluster.clone(), state.client().clone());
                Some(Box::new(move |partitions: &[(String, i32)]| {
                    let stops = stops_blocking(&cluster, &client, &stop, partitions)?;
                    Ok(partitions.iter().cloned().zip(stops).collect())
                }) as Lookup<i64>)
            })
            .await?;
        for s in &mut splits {
            s.stop_offset = stops.get(&key_of(s)).copied();
        }
        Ok(splits)
    }

    /// Keeps a checkpointed position of a split that is not read now, for the
    /// retention window (the checkpoint's own window if it had one).
    pub(super) fn retain_saved(
        &self,
        cluster: &str,
        s: &crate::base::checkpoint::SplitCheckpoint,
        saved: &crate::base::checkpoint::ClusterCheckpoint,
        default_until: i64,
    ) {
        if self.cfg.retention.is_zero() {
            return;
        }
        let split = KafkaSplit {
            id: SplitId::new(cluster, &s.topic, s.partition),
            next_offset: s.next_offset,
            stop_offset: None,
            last: s.last.clone(),
        };
        let until = s.retained_until_ms.unwrap_or(default_until);
        self.links
            .retained()
            .keep(&split, until, saved.kafka_cluster_id.clone());
    }

    /// Takes back retained positions of splits whose cluster and topic are read again,
    /// so they resume where they were rather than at their starting offsets. Positions
    /// recorded for another physical cluster are refused (reported to the readers), or
    /// dropped when the user chose fresh starts. In group mode only the partitions the
    /// group gives this instance are read: a position kept of one it took back stays
    /// kept, as the program's checkpoints carry it to the revocation and the commit.
    pub(super) fn resume_retained(&mut self) -> Vec<KafkaSplit> {
        let mut out = Vec::new();
        let mut refused: BTreeSet<Arc<str>> = BTreeSet::new();
        let group = self.group.as_ref();
        for (cluster, state) in self.clusters.iter_mut() {
            let back = self.links.retained().take(|id| {
                id.cluster == *cluster
                    && state.topics().contains(&*id.topic)
                    && group.is_none_or(|g| g.holds(id))
            });
            for (id, r) in back {
                if let (Some(expected), Some(actual)) =
                    (&r.kafka_cluster_id, state.kafka_cluster_id())
                    && expected != actual
                {
                    let replaced = self
                        .applied
                        .view(cluster)
                        .and_then(|v| v.replaces.as_deref())
                        == Some(expected.as_str());
                    if !replaced
                        && !self.cfg.discard_mismatched_positions
                        && refused.insert(cluster.clone())
                    {
                        self.readers.tell_all(|| ReaderEvent::IdentityMismatch {
                            cluster: cluster.clone(),
                            expected: expected.clone(),
                            actual: actual.clone(),
                        });
                    }
                    continue;
                }
                state.know(id.topic.to_string(), id.partition);
                out.push(KafkaSplit {
                    id,
                    next_offset: r.next_offset,
                    stop_offset: r.stop_offset,
                    last: r.last,
                });
            }
        }
        if !out.is_empty() {
            tracing::info!(count = out.len(), "resuming retained positions");
        }
        out
    }
}
