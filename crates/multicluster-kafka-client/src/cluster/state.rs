//! What a cluster's tasks and readers share, under one lock: the partitions fetched,
//! each reader's queue of answers, and what the metadata said.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use uuid::Uuid;

use super::{Arrival, ClusterOptions, PartKey};
use crate::budget::Budget;
use crate::error::NativeError;

/// A partition as the tasks fetch it.
#[derive(Debug)]
pub(super) struct Part {
    /// The reader ([`ClusterFetch`](super::ClusterFetch)) it is fetched for, whose
    /// queue its answers go to.
    pub(super) owner: u64,
    pub(super) generation: u64,
    /// Where its next fetch starts.
    pub(super) offset: i64,
    /// The leader epoch of the last batch fetched before `offset` (−1: none yet),
    /// which the broker checks its log against (KIP-320).
    pub(super) last_epoch: i32,
    /// Its leader's node id and epoch, once known.
    pub(super) leader: Option<(i32, i32)>,
    /// The replica its leader said to fetch it from (KIP-392) and until when; it is
    /// fetched from its leader when there is none, once it expires, and after any
    /// error of the replica's.
    pub(super) replica: Option<(i32, tokio::time::Instant)>,
    /// A fetch of it is on its way.
    pub(super) in_flight: bool,
    /// Not fetched (outside the log, waiting for the reader).
    pub(super) parked: bool,
    /// Not fetched while the reader says so (watermark alignment).
    pub(super) paused: bool,
    /// Not fetched before this time: its last answer was an error that fetching
    /// again at once would only repeat (an authorization failure, say).
    pub(super) retry_at: Option<tokio::time::Instant>,
    /// Not fetched from here on: the reader reads it up to here (its stop).
    pub(super) stop: Option<i64>,
}

impl Part {
    /// The broker this partition is fetched from now: its preferred read replica
    /// while that holds, else its leader.
    pub(super) fn source(&self, now: tokio::time::Instant) -> Option<i32> {
        match self.replica {
            Some((node, until)) if until > now => Some(node),
            _ => self.leader.map(|l| l.0),
        }
    }
}

/// What arrived for one reader, waiting for its fetch thread.
pub(super) struct Queue {
    pub(super) arrivals: VecDeque<Arrival>,
    /// Bytes of records in `arrivals`.
    pub(super) buffered: usize,
    /// Wakes the reader's fetch thread.
    pub(super) wake: Arc<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) parts: HashMap<PartKey, Part>,
    /// Each reader's queue, by its id.
    pub(super) queues: HashMap<u64, Queue>,
    /// Bytes of records in all the queues.
    pub(super) buffered: usize,
    /// Each partition's high watermark from its last answer.
    pub(super) high_watermarks: HashMap<PartKey, i64>,
    /// Node id → `host:port`.
    pub(super) brokers: HashMap<i32, String>,
    pub(super) topic_ids: HashMap<Arc<str>, Uuid>,
    /// Node ids and lanes with a fetching task.
    pub(super) fetching: Vec<(i32, usize)>,
    pub(super) next_generation: u64,
    pub(super) next_reader: u64,
    /// The leaders must be looked up again.
    pub(super) metadata_due: bool,
    pub(super) closed: bool,
    /// The error being retried, said once.
    pub(super) streak: Option<String>,
}

impl State {
    /// Queues `arrival` for the reader `owner` (none when that reader is gone) and
    /// returns what wakes it.
    pub(super) fn queue(
        &mut self,
        budget: &Budget,
        owner: u64,
        arrival: Arrival,
    ) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let queue = self.queues.get_mut(&owner)?;
        if let Arrival::Records { answer, .. } = &arrival {
            let bytes = answer.records.len();
            queue.buffered += bytes;
            self.buffered += bytes;
            budget.add(bytes);
        }
        queue.arrivals.push_back(arrival);
        Some(queue.wake.clone())
    }
}

pub(super) struct Shared {
    pub(super) options: ClusterOptions,
    pub(super) state: Mutex<State>,
    /// Woken when parts, leaders, the queue's room or `closed` change.
    pub(super) changed: Notify,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says a connection error once per streak; the listener hears of each.
    pub(super) fn failed(&self, error: &NativeError) {
        self.options.errors.tell(error);
        self.trouble(error);
    }

    /// Says a cluster error once per streak.
    pub(super) fn trouble(&self, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        let mut state = self.state();
        if state.streak.as_deref() != Some(text.as_str()) {
            tracing::warn!(cluster = %self.options.cluster, error = %text, "fetch error; retrying");
            state.streak = Some(text);
        }
    }
}
