//! Failover to a standby mirror: a source cluster read while a mirror of it with
//! `failoverAfter` waits behind it is probed; once it has not answered for that long,
//! the stream moves onto the mirror by itself, as if the metadata had taken the source
//! out. It stays there until the metadata changes the pair (no flapping back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Enumerator;
use crate::base::metadata::KafkaStream;
use crate::checkpoint::Checkpoint;
use crate::kafka::client::detached;
use crate::metrics as m;

/// How often a guarded source is probed.
pub(super) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What the enumerator keeps of failovers.
#[derive(Default)]
pub(super) struct Failover {
    /// Sources the stream moved off by itself: not read while a mirror of them is in
    /// the stream, their mirror read instead.
    pub(super) taken_over: BTreeSet<String>,
    /// Since when each guarded source has not answered (from the start of the first
    /// probe that failed).
    down_since: BTreeMap<Arc<str>, Instant>,
    /// Probes under way: the source, when the probe began, whether it answered.
    probes: tokio::task::JoinSet<(Arc<str>, Instant, bool)>,
    probing: BTreeSet<Arc<str>>,
}

impl Failover {
    /// Waits for the next probe's answer (pending for ever without probes).
    pub(super) async fn next_probe(&mut self) -> Option<(Arc<str>, Instant, bool)> {
        if self.probes.is_empty() {
            return std::future::pending().await;
        }
        self.probes.join_next().await?.ok()
    }

    /// Keeps only the failovers the metadata still has a pair for.
    pub(super) fn prune(&mut self, streams: &BTreeMap<String, KafkaStream>) {
        self.taken_over.retain(|source| {
            let kept = streams.values().any(|s| {
                s.clusters.contains_key(source) && crate::base::plan::has_mirror_of(s, source)
            });
            if !kept {
                tracing::info!(cluster = %source, "the metadata no longer pairs this cluster with a mirror: its failover is over");
            }
            kept
        });
    }
}

/// Sources a checkpoint shows the stream had moved off: a mirror that is a standby in
/// `streams` but has positions of its own (not retained ones) in the checkpoint was
/// being read, so its source had been failed over.
pub(super) fn taken_over_in(
    checkpoint: &Checkpoint,
    streams: &BTreeMap<String, KafkaStream>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for stream in streams.values() {
        for (cluster, meta) in &stream.clusters {
            let Some(mirror) = &meta.mirror_of else {
                continue;
            };
            let read = checkpoint
                .clusters
                .get(cluster)
                .is_some_and(|c| c.splits.iter().any(|s| s.retained_until_ms.is_none()));
            if stream.clusters.contains_key(&mirror.cluster) && read {
                out.insert(mirror.cluster.clone());
            }
        }
    }
    out
}

impl Enumerator {
    /// Sources read now behind which a mirror with `failoverAfter` waits: the source,
    /// its mirror and how long it may be unreachable.
    fn guarded(&self) -> Vec<(Arc<str>, String, Duration)> {
        let mut out = Vec::new();
        for stream in self.latest.values() {
            for (mirror_id, meta) in &stream.clusters {
                let Some(mirror) = &meta.mirror_of else {
                    continue;
                };
                let Some(after) = mirror.failover_after else {
                    continue;
                };
                if !stream.clusters.contains_key(&mirror.cluster)
                    || self.failover.taken_over.contains(&mirror.cluster)
                {
                    continue;
                }
                if let Some((source, _)) = self.clusters.get_key_value(mirror.cluster.as_str()) {
                    out.push((source.clone(), mirror_id.clone(), after));
                }
            }
        }
        out
    }

    /// Starts a probe of every guarded source that has none running.
    pub(super) fn probe_sources(&mut self) {
        for (source, _, _) in self.guarded() {
            if self.failover.probing.contains(&source) {
                continue;
            }
            let Some(state) = self.clusters.get(&source) else {
                continue;
            };
            let client = state.client.clone();
            let began = Instant::now();
            self.failover.probing.insert(source.clone());
            let name = source.clone();
            self.failover.probes.spawn(detached(move || {
                let ok = client.first_contact().is_ok();
                (name, began, ok)
            }));
        }
    }

    /// Takes a probe's answer; a source down for its mirror's `failoverAfter` is
    /// failed over.
    pub(super) async fn probed(&mut self, source: Arc<str>, began: Instant, ok: bool) {
        self.failover.probing.remove(&source);
        if ok {
            if self.failover.down_since.remove(&source).is_some() {
                tracing::info!(cluster = %source, "the cluster answers again; no failover");
            }
            return;
        }
        let since = *self
            .failover
            .down_since
            .entry(source.clone())
            .or_insert(began);
        let down = since.elapsed();
        let Some((_, mirror, after)) = self
            .guarded()
            .into_iter()
            .filter(|(s, _, _)| *s == source)
            .min_by_key(|(_, _, after)| *after)
        else {
            return;
        };
        if down < after {
            return;
        }
        tracing::warn!(cluster = %source, mirror = %mirror, down_for = ?down, "the cluster has been unreachable for longer than its mirror's failoverAfter ({after:?}): failing over to the mirror, which the stream stays on until the metadata changes");
        metrics::counter!(m::MIRROR_FAILOVERS, "cluster" => source.to_string(), "mirror" => mirror)
            .increment(1);
        self.failover.down_since.remove(&source);
        self.failover.taken_over.insert(source.to_string());
        self.refresh_metadata().await;
    }
}
