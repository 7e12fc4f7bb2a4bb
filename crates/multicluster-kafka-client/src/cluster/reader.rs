//! One reader's fetching of a cluster ([`ClusterFetch`]): the partitions it adds,
//! seeks, pauses, stops and removes, and the answers it takes from its queue.

use std::collections::VecDeque;
use std::sync::Arc;

use super::fetches::Core;
use super::state::{Part, Queue, Shared, State};
use super::{Arrival, PartKey};

/// One reader's fetching of a cluster: its partitions and the queue of their answers.
/// Dropping it stops fetching them; the last reader's drop stops the cluster's tasks
/// and closes their connections.
pub struct ClusterFetch {
    core: Arc<Core>,
    /// This reader's id among the cluster's ([`Part::owner`]).
    id: u64,
}

impl ClusterFetch {
    /// Starts fetching on `runtime` for one reader, sharing with no other; `wake` is
    /// called (from a task) whenever something arrives.
    #[cfg(test)]
    pub fn start(
        runtime: &tokio::runtime::Handle,
        options: super::ClusterOptions,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        Self::on(Core::start(runtime, options), wake)
    }

    /// A new reader of `core`'s cluster.
    pub(super) fn on(core: Arc<Core>, wake: Box<dyn Fn() + Send + Sync>) -> Self {
        let mut state = core.shared.state();
        state.next_reader += 1;
        let id = state.next_reader;
        state.queues.insert(
            id,
            Queue {
                arrivals: VecDeque::new(),
                buffered: 0,
                wake: Arc::from(wake),
            },
        );
        drop(state);
        Self { core, id }
    }

    pub(super) fn shared(&self) -> &Shared {
        &self.core.shared
    }

    /// Starts fetching `key` at `offset`; returns the generation its arrivals carry.
    /// `epoch` is the leader epoch of the record before `offset`, when known (a
    /// restored position): the first fetch validates the position with it, so a
    /// log truncated below it meanwhile comes back as [`Arrival::Truncated`]. A
    /// partition another reader of the source still fetches is taken over.
    pub fn add(&self, key: PartKey, offset: i64, epoch: Option<i32>) -> u64 {
        let mut state = self.shared().state();
        state.next_generation += 1;
        let generation = state.next_generation;
        let part = Part {
            owner: self.id,
            generation,
            offset,
            last_epoch: epoch.filter(|e| *e >= 0).unwrap_or(-1),
            leader: None,
            replica: None,
            in_flight: false,
            parked: false,
            paused: false,
            retry_at: None,
            stop: None,
        };
        if let Some(before) = state.parts.insert(key, part)
            && before.owner != self.id
        {
            tracing::debug!(cluster = %self.shared().options.cluster, "a partition another reader fetched moved to this one");
        }
        state.metadata_due = true;
        drop(state);
        self.shared().changed.notify_waiters();
        generation
    }

    /// Fetches `key` only below `stop`: once its position reaches it, the partition
    /// has nothing more to bring, and a fetch of it would only wait out the
    /// broker's `fetch.wait.max.ms`, holding back the partitions that need a fetch
    /// from the same broker (a paused one resumed, say).
    pub fn stop_at(&self, key: &PartKey, stop: i64) {
        if let Some(part) = self.own(&mut self.shared().state(), key) {
            part.stop = Some(stop);
        }
    }

    /// This reader's partition `key`, if it is still this reader's.
    fn own<'a>(&self, state: &'a mut State, key: &PartKey) -> Option<&'a mut Part> {
        state.parts.get_mut(key).filter(|p| p.owner == self.id)
    }

    /// Fetches `key` from `offset` on, as a new generation (what arrived for it
    /// before is not to be used); returns the generation.
    pub fn seek(&self, key: &PartKey, offset: i64) -> u64 {
        let mut state = self.shared().state();
        state.next_generation += 1;
        let generation = state.next_generation;
        if let Some(part) = self.own(&mut state, key) {
            part.generation = generation;
            part.offset = offset;
            part.last_epoch = -1;
            part.parked = false;
            part.retry_at = None;
        }
        drop(state);
        self.shared().changed.notify_waiters();
        generation
    }

    /// Stops fetching these partitions.
    pub fn remove(&self, keys: &[PartKey]) {
        let mut state = self.shared().state();
        for key in keys {
            if self.own(&mut state, key).is_some() {
                state.parts.remove(key);
                state.high_watermarks.remove(key);
            }
        }
        drop(state);
        self.shared().changed.notify_waiters();
    }

    /// Stops or resumes fetching these partitions. A paused partition's next fetch,
    /// once resumed, starts where its last answer ended.
    pub fn pause(&self, keys: &[PartKey], paused: bool) {
        let mut state = self.shared().state();
        for key in keys {
            if let Some(part) = self.own(&mut state, key) {
                part.paused = paused;
            }
        }
        drop(state);
        if !paused {
            self.shared().changed.notify_waiters();
        }
    }

    /// The oldest arrival for this reader, if any, of a partition it still reads
    /// as it was then: arrivals of an assignment since removed, added again or
    /// sought ([`Self::add`], [`Self::seek`], [`Self::remove`]) are dropped here, so
    /// the fetch thread never sees a stale one. Its records leave the budget: the
    /// thread takes an answer only when it decodes it, so what waits, queued or
    /// taken, stays within the budget.
    pub fn take(&self) -> Option<Arrival> {
        let shared = self.shared();
        let budget = shared.options.budget;
        let mut state = shared.state();
        let was_full = state.buffered >= budget;
        let mut bytes = 0;
        let mut emptied = false;
        let arrival = loop {
            let state_ = &mut *state;
            let Some(queue) = state_.queues.get_mut(&self.id) else {
                break None;
            };
            let Some(arrival) = queue.arrivals.pop_front() else {
                break None;
            };
            if let Arrival::Records { answer, .. } = &arrival {
                let n = answer.records.len();
                queue.buffered = queue.buffered.saturating_sub(n);
                bytes += n;
                // A reader with nothing queued may fetch whatever the others hold.
                emptied = bytes > 0 && queue.buffered == 0;
            }
            let (key, generation) = arrival.assignment();
            let current = state_
                .parts
                .get(key)
                .is_some_and(|p| p.owner == self.id && p.generation == generation);
            if current {
                break Some(arrival);
            }
        };
        state.buffered = state.buffered.saturating_sub(bytes);
        shared.options.shared_budget.release(bytes);
        let room = state.buffered < budget;
        drop(state);
        if (was_full && room) || emptied {
            shared.changed.notify_waiters();
        }
        arrival
    }

    /// The high watermark of each of this reader's partitions that had an answer.
    pub fn high_watermarks(&self) -> Vec<(PartKey, i64)> {
        let state = self.shared().state();
        state
            .high_watermarks
            .iter()
            .filter(|(k, _)| state.parts.get(*k).is_some_and(|p| p.owner == self.id))
            .map(|(k, h)| (k.clone(), *h))
            .collect()
    }

    /// Bytes of answers the source's native fetches hold queued, all clusters'.
    pub fn source_buffered(&self) -> usize {
        self.shared().options.shared_budget.used()
    }

    /// Says the records came through (a new error is warned about again).
    pub fn records_flow(&self) {
        self.shared().state().streak = None;
    }
}

impl Drop for ClusterFetch {
    fn drop(&mut self) {
        let shared = self.shared();
        let mut state = shared.state();
        let state_ = &mut *state;
        state_.parts.retain(|_, p| p.owner != self.id);
        let parts = &state_.parts;
        state_.high_watermarks.retain(|k, _| parts.contains_key(k));
        // What is still queued for this reader leaves the budgets with it.
        let queued = state.queues.remove(&self.id).map_or(0, |q| q.buffered);
        state.buffered = state.buffered.saturating_sub(queued);
        drop(state);
        shared.options.shared_budget.release(queued);
        shared.changed.notify_waiters();
    }
}
