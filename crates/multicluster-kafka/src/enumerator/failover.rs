//! Failover to a standby mirror: a source cluster read while a mirror of it with
//! `failoverAfter` waits behind it is probed; once it has not answered for that long,
//! the stream moves onto the mirror by itself, as if the metadata had taken the source
//! out. It stays there until the metadata changes the pair (no flapping back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Enumerator;
use crate::base::checkpoint::Checkpoint;
use crate::base::metadata::KafkaStream;
use crate::kafka::client::detached;
use crate::metrics as m;

/// How often a guarded source is probed.
pub(super) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What the enumerator keeps of failovers.
#[derive(Default)]
pub(super) struct Failover {
    /// Sources the stream moved off by itself: not read while a mirror of them is in
    /// the stream, their mirror read instead.
    taken_over: BTreeSet<String>,
    /// When each guarded source last answered a probe, or when it began to be
    /// guarded. A source is unreachable for as long
    /// as no probe got an answer since, whether the probes fail or hang.
    answered: BTreeMap<Arc<str>, Instant>,
    /// Probes under way: the source, whether it answered.
    probes: tokio::task::JoinSet<(Arc<str>, bool)>,
    probing: BTreeSet<Arc<str>>,
}

impl Failover {
    /// Sources the stream moved off by itself (their mirrors are read instead).
    pub(super) fn taken_over(&self) -> &BTreeSet<String> {
        &self.taken_over
    }

    /// At start, the sources `checkpoint` shows the stream had moved off (see
    /// [`taken_over_in`]) stay failed over; each is said.
    pub(super) fn restore(
        &mut self,
        checkpoint: &Checkpoint,
        streams: &BTreeMap<String, KafkaStream>,
    ) {
        self.taken_over = taken_over_in(checkpoint, streams);
        for source in &self.taken_over {
            tracing::info!(cluster = %source, "the checkpoint was taken on this cluster's mirror after a failover: the stream stays on the mirror");
        }
    }

    /// Waits for the next probe's answer (pending for ever without probes).
    pub(super) async fn next_probe(&mut self) -> Option<(Arc<str>, bool)> {
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
fn taken_over_in(
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
        for stream in self.applied.latest().values() {
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

    /// Starts a probe of every guarded source that has none running, and fails over
    /// a source that has not answered for its mirror's `failoverAfter`: checked on
    /// every tick, so a probe that hangs (a cluster whose packets are dropped) does not
    /// hold the failover back until the client's timeout.
    pub(super) async fn probe_sources(&mut self) {
        let guarded = self.guarded();
        let now = Instant::now();
        self.failover
            .answered
            .retain(|s, _| guarded.iter().any(|(g, _, _)| g == s));
        for (source, _, _) in &guarded {
            self.failover.answered.entry(source.clone()).or_insert(now);
            if self.failover.probing.contains(source) {
                continue;
            }
            let Some(state) = self.clusters.get(source) else {
                continue;
            };
            let client = state.client().clone();
            self.failover.probing.insert(source.clone());
            let name = source.clone();
            self.failover.probes.spawn(detached(move || {
                let ok = client.first_contact().is_ok();
                (name, ok)
            }));
        }
        self.fail_over_silent(guarded).await;
    }

    /// Takes a probe's answer.
    pub(super) fn probed(&mut self, source: Arc<str>, ok: bool) {
        self.failover.probing.remove(&source);
        if !ok {
            return;
        }
        if let Some(last) = self.failover.answered.get_mut(&source) {
            if last.elapsed() > 3 * PROBE_EVERY {
                tracing::info!(cluster = %source, "the cluster answers again; no failover");
            }
            *last = Instant::now();
        }
    }

    /// Fails over each guarded source that has not answered for its mirror's
    /// `failoverAfter` (the shortest, when several mirrors guard it).
    async fn fail_over_silent(&mut self, mut guarded: Vec<(Arc<str>, String, Duration)>) {
        guarded.sort_by_key(|(_, _, after)| *after);
        let mut failed_over = false;
        for (source, mirror, after) in guarded {
            if self.failover.taken_over.contains(source.as_ref()) {
                continue;
            }
            let Some(last) = self.failover.answered.get(&source) else {
                continue;
            };
            let down = last.elapsed();
            if down < after {
                continue;
            }
            tracing::warn!(cluster = %source, mirror = %mirror, down_for = ?down, "the cluster has been unreachable for longer than its mirror's failoverAfter ({after:?}): failing over to the mirror, which the stream stays on until the metadata changes");
            metrics::counter!(m::MIRROR_FAILOVERS, "cluster" => source.to_string(), "mirror" => mirror)
                .increment(1);
            self.failover.answered.remove(&source);
            self.failover.taken_over.insert(source.to_string());
            failed_over = true;
        }
        if failed_over {
            self.refresh_metadata().await;
        }
    }
}
