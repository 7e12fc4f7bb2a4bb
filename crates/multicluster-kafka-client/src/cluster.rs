//! One cluster fetched natively: the partitions a source's readers read there, fetched
//! from their leaders on the source's tokio runtime, each reader's answers queued for
//! its fetch thread.
//!
//! The readers of one cluster in one source share its fetching ([`ClusterFetches`]):
//! a task that keeps the cluster's metadata (leaders, their epochs, topic ids, broker
//! addresses) and one task per broker fetched from, each with one connection that
//! fetches all the partitions read there, for every reader, in one request at a
//! time, in a fetch session ([`FetchSession`]). Each reader holds a [`ClusterFetch`]:
//! its partitions, and the queue their answers go to. A partition is read from
//! its leader, or from the replica its leader points to when the client names its
//! rack (KIP-392) until that replica answers an error or five minutes pass. An answer's partitions go to the queue as they came, their
//! record batches still encoded ([`Arrival::Records`]); the fetch thread decodes them
//! with a [`PartitionReader`](crate::partition::PartitionReader) per partition. The
//! next fetch of a partition starts after the last whole batch of its last answer, so
//! a broker is asked again while the thread decodes.
//!
//! Memory: once the readers' queues of the cluster hold `budget` bytes, or the
//! source's fetches together hold their shared budget ([`Budget`]), no broker task
//! fetches for a reader whose queue holds something until a thread takes some; it takes an answer when it decodes it,
//! so the answers waiting stay within the budget. Each partition has at most one fetch in flight, and an answer
//! is applied only if the partition is still at the offset and the assignment
//! (generation) it was fetched for: a partition removed, moved or read again from
//! elsewhere never gets the old answer.
//!
//! Errors of the cluster (a broker down, an answer that cannot be decoded) are
//! warned about once per streak and retried with backoff, as the librdkafka path
//! does; a partition's errors move it: a new leader (NOT_LEADER_OR_FOLLOWER, fenced
//! or unknown epochs, the KIP-951 hint), or the log's start or end when its position
//! is outside the log and the read policy says so ([`OutOfRange`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use uuid::Uuid;

use crate::batch::Batches;
use crate::budget::Budget;
use crate::calls::{FetchSettings, FetchWant};
use crate::conn::{ConnectOptions, Connection};
use crate::error::Listener;
use crate::error::NativeError;
use crate::fetch_response::FetchPartitionData;
use crate::partition::{PartitionIssue, issue};
use crate::session::FetchSession;

/// A partition: its topic and number.
pub type PartKey = (Arc<str>, i32);

/// What a position outside the log becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutOfRange {
    /// An error for the reader to return ([`Arrival::OutOfRange`]).
    Fail,
    /// The log's first offset.
    Earliest,
    /// The log's end.
    Latest,
}

/// How a cluster is fetched.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The cluster's name, for logs.
    pub cluster: Arc<str>,
    /// `host:port` of the brokers to ask for the metadata first.
    pub bootstrap: Vec<String>,
    pub connect: ConnectOptions,
    pub fetch: FetchSettings,
    /// The most bytes one partition answers in one fetch (`max.partition.fetch.bytes`).
    pub partition_max_bytes: i32,
    /// Bytes of answers queued for the thread before fetching pauses.
    pub budget: usize,
    /// The source's budget, shared by all its native fetches ([`Budget`]).
    pub shared_budget: Arc<Budget>,
    pub out_of_range: OutOfRange,
    /// Fetches in flight to each broker, each on a connection of its own, the
    /// broker's partitions split between them.
    pub lanes: usize,
    /// The program's listener, told of the cluster's connection errors.
    pub errors: Listener,
}

/// What the broker tasks queue for the fetch thread.
#[derive(Debug)]
pub enum Arrival {
    /// A partition's answer with records (whole batches from `offset` on, maybe a
    /// partial one at the end).
    Records {
        key: PartKey,
        generation: u64,
        answer: FetchPartitionData,
    },
    /// The position was outside the log and moved, as the read policy says.
    Reset {
        key: PartKey,
        generation: u64,
        from: i64,
        to: i64,
        log_start: i64,
        log_end: i64,
    },
    /// The log was truncated below the position (KIP-320: its leader's log no
    /// longer holds the epoch of the last batch fetched up to `from`, as after an
    /// unclean leader election): fetching goes on at `to`, where the logs part.
    Truncated {
        key: PartKey,
        generation: u64,
        from: i64,
        to: i64,
        /// The last epoch both logs share.
        epoch: i32,
    },
    /// The position is outside the log and the policy is to fail: the partition is
    /// not fetched until it is sought or removed.
    OutOfRange {
        key: PartKey,
        generation: u64,
        offset: i64,
        log_start: Option<i64>,
        log_end: Option<i64>,
    },
}

/// A partition as the tasks fetch it.
#[derive(Debug)]
struct Part {
    /// The reader ([`ClusterFetch`]) it is fetched for, whose queue its answers go to.
    owner: u64,
    generation: u64,
    /// Where its next fetch starts.
    offset: i64,
    /// The leader epoch of the last batch fetched before `offset` (−1: none yet),
    /// which the broker checks its log against (KIP-320).
    last_epoch: i32,
    /// Its leader's node id and epoch, once known.
    leader: Option<(i32, i32)>,
    /// The replica its leader said to fetch it from (KIP-392) and until when; it is
    /// fetched from its leader when there is none, once it expires, and after any
    /// error of the replica's.
    replica: Option<(i32, tokio::time::Instant)>,
    /// A fetch of it is on its way.
    in_flight: bool,
    /// Not fetched (outside the log, waiting for the reader).
    parked: bool,
    /// Not fetched while the reader says so (watermark alignment).
    paused: bool,
    /// Not fetched before this time: its last answer was an error that fetching
    /// again at once would only repeat (an authorization failure, say).
    retry_at: Option<tokio::time::Instant>,
    /// Not fetched from here on: the reader reads it up to here (its stop).
    stop: Option<i64>,
}

impl Part {
    /// The broker this partition is fetched from now: its preferred read replica
    /// while that holds, else its leader.
    fn source(&self, now: tokio::time::Instant) -> Option<i32> {
        match self.replica {
            Some((node, until)) if until > now => Some(node),
            _ => self.leader.map(|l| l.0),
        }
    }
}

/// What arrived for one reader, waiting for its fetch thread.
struct Queue {
    arrivals: VecDeque<Arrival>,
    /// Bytes of records in `arrivals`.
    buffered: usize,
    /// Wakes the reader's fetch thread.
    wake: Arc<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct State {
    parts: HashMap<PartKey, Part>,
    /// Each reader's queue, by its id.
    queues: HashMap<u64, Queue>,
    /// Bytes of records in all the queues.
    buffered: usize,
    /// Each partition's high watermark from its last answer.
    high_watermarks: HashMap<PartKey, i64>,
    /// Node id → `host:port`.
    brokers: HashMap<i32, String>,
    topic_ids: HashMap<Arc<str>, Uuid>,
    /// Node ids and lanes with a fetching task.
    fetching: Vec<(i32, usize)>,
    next_generation: u64,
    next_reader: u64,
    /// The leaders must be looked up again.
    metadata_due: bool,
    closed: bool,
    /// The error being retried, said once.
    streak: Option<String>,
}

impl State {
    /// Queues `arrival` for the reader `owner` (none when that reader is gone) and
    /// returns what wakes it.
    fn queue(
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

struct Shared {
    options: ClusterOptions,
    state: Mutex<State>,
    /// Woken when parts, leaders, the queue's room or `closed` change.
    changed: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says a connection error once per streak; the listener hears of each.
    fn failed(&self, error: &NativeError) {
        self.options.errors.tell(error);
        self.trouble(error);
    }

    /// Says a cluster error once per streak.
    fn trouble(&self, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        let mut state = self.state();
        if state.streak.as_deref() != Some(text.as_str()) {
            tracing::warn!(cluster = %self.options.cluster, error = %text, "fetch error; retrying");
            state.streak = Some(text);
        }
    }
}

/// The fetching of one cluster, shared by the readers that fetch there: its tasks
/// run while one of them holds it.
struct Core {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Core {
    fn start(runtime: &tokio::runtime::Handle, options: ClusterOptions) -> Arc<Self> {
        options.shared_budget.raise_to(options.budget);
        let shared = Arc::new(Shared {
            options,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        });
        let task = runtime.spawn(keep_leaders(shared.clone()));
        Arc::new(Self { shared, task })
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.closed = true;
        // What is still queued leaves the source's budget with it.
        let queued = std::mem::take(&mut state.buffered);
        drop(state);
        self.shared.options.shared_budget.release(queued);
        self.shared.changed.notify_waiters();
        self.task.abort();
    }
}

/// What makes two readers' fetching of a cluster the same: the cluster, its
/// properties (sorted), and the runtime its tasks run on.
pub type FetchKey = (Arc<str>, Vec<(String, String)>, tokio::runtime::Id);

/// The native fetching of a source's clusters, one per cluster (and properties and
/// runtime), shared by its readers while one of them fetches there: one connection
/// per broker per source, one fetch session, one metadata task.
#[derive(Default)]
pub struct ClusterFetches {
    cores: Mutex<HashMap<FetchKey, std::sync::Weak<Core>>>,
}

impl ClusterFetches {
    /// A reader's fetching of `options.cluster`: joins the source's running fetch of
    /// the cluster with the same properties on `runtime`, or starts one. `wake` is
    /// called (from a task) whenever something arrives for this reader.
    pub fn join(
        &self,
        runtime: &tokio::runtime::Handle,
        properties: Vec<(String, String)>,
        options: ClusterOptions,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> ClusterFetch {
        let key = (options.cluster.clone(), properties, runtime.id());
        let mut cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.retain(|_, c| c.strong_count() > 0);
        // A runtime shut down ends the tasks: its fetch is not joined again.
        let core = match cores.get(&key).and_then(std::sync::Weak::upgrade) {
            Some(core) if !core.task.is_finished() => core,
            _ => {
                let core = Core::start(runtime, options);
                cores.insert(key, Arc::downgrade(&core));
                core
            }
        };
        drop(cores);
        ClusterFetch::on(core, wake)
    }

    /// How many clusters are fetched now.
    #[cfg(test)]
    fn running(&self) -> usize {
        let cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.values().filter(|c| c.strong_count() > 0).count()
    }
}

/// One reader's fetching of a cluster: its partitions and the queue of their answers.
/// Dropping it stops fetching them; the last reader's drop stops the cluster's tasks
/// and closes their connections.
pub struct ClusterFetch {
    core: Arc<Core>,
    /// This reader's id among the cluster's ([`Part::owner`]).
    id: u64,
}

/// How long a broker task waits after a failure before it tries again (doubling up
/// to [`BACKOFF_MAX`]).
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How long a partition whose answer was an error of its own waits before it is
/// fetched again (the broker's other partitions go on).
const PARTITION_BACKOFF: Duration = Duration::from_secs(1);

/// How long a preferred read replica is followed before the leader is asked again
/// (the Java client's `metadata.max.age.ms` default).
const REPLICA_EXPIRY: Duration = Duration::from_secs(300);

impl ClusterFetch {
    /// Starts fetching on `runtime` for one reader, sharing with no other; `wake` is
    /// called (from a task) whenever something arrives.
    #[cfg(test)]
    pub fn start(
        runtime: &tokio::runtime::Handle,
        options: ClusterOptions,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        Self::on(Core::start(runtime, options), wake)
    }

    /// A new reader of `core`'s cluster.
    fn on(core: Arc<Core>, wake: Box<dyn Fn() + Send + Sync>) -> Self {
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

    fn shared(&self) -> &Shared {
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

    /// The oldest arrival for this reader, if any. Its records leave the budget: the
    /// thread takes an answer only when it decodes it, so what waits, queued or
    /// taken, stays within the budget.
    pub fn take(&self) -> Option<Arrival> {
        let shared = self.shared();
        let budget = shared.options.budget;
        let mut state = shared.state();
        let was_full = state.buffered >= budget;
        let queue = state.queues.get_mut(&self.id)?;
        let arrival = queue.arrivals.pop_front()?;
        let mut bytes = 0;
        if let Arrival::Records { answer, .. } = &arrival {
            bytes = answer.records.len();
            queue.buffered = queue.buffered.saturating_sub(bytes);
        }
        // A reader with nothing queued may fetch whatever the others hold.
        let emptied = bytes > 0 && queue.buffered == 0;
        state.buffered = state.buffered.saturating_sub(bytes);
        shared.options.shared_budget.release(bytes);
        let room = state.buffered < budget;
        drop(state);
        if (was_full && room) || emptied {
            shared.changed.notify_waiters();
        }
        Some(arrival)
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

/// The metadata task: looks the leaders up whenever a partition has none (or a
/// fetch said they moved), and starts a fetching task for every broker fetched
/// from (leaders and preferred read replicas).
/// Ends (with its broker tasks) when the [`ClusterFetch`] goes.
async fn keep_leaders(shared: Arc<Shared>) {
    let mut brokers: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
    let mut conn: Option<Connection> = None;
    let mut backoff = BACKOFF_MIN;
    loop {
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let (due, topics) = {
            let state = shared.state();
            if state.closed {
                return;
            }
            let leaderless = state
                .parts
                .values()
                .any(|p| p.leader.is_none() && !p.parked);
            let mut topics: Vec<Arc<str>> = state.parts.keys().map(|k| k.0.clone()).collect();
            topics.sort_unstable();
            topics.dedup();
            (state.metadata_due || leaderless, topics)
        };
        if due && !topics.is_empty() {
            match refresh(&shared, &mut conn, &topics).await {
                Ok(()) => backoff = BACKOFF_MIN,
                Err(e) => {
                    conn = None;
                    shared.failed(&e);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
        }
        // A task for every broker fetched from that has none (a leader from the
        // metadata or a fetch answer's hint, or a preferred read replica).
        let (start, leaderless) = {
            let mut state = shared.state();
            let now = tokio::time::Instant::now();
            let lanes = shared.options.lanes;
            let mut leaders: Vec<(i32, usize)> = state
                .parts
                .iter()
                .filter_map(|(k, p)| Some((p.source(now)?, lane(k, lanes))))
                .collect();
            leaders.sort_unstable();
            leaders.dedup();
            leaders.retain(|n| !state.fetching.contains(n));
            state.fetching.extend(&leaders);
            let leaderless = state
                .parts
                .values()
                .any(|p| p.leader.is_none() && !p.parked);
            (leaders, leaderless)
        };
        for (node, lane) in start {
            brokers.spawn(fetch_from(shared.clone(), node, lane));
        }
        if due && leaderless {
            // Some leaders are still unknown (an election under way): look again
            // soon, unless something changes first.
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        // Broker tasks that ended are reaped here (they end when they lead nothing).
        while brokers.try_join_next().is_some() {}
        changed.await;
    }
}

/// Asks for the metadata of `topics` and applies it: brokers, topic ids, leaders.
async fn refresh(
    shared: &Shared,
    conn: &mut Option<Connection>,
    topics: &[Arc<str>],
) -> Result<(), NativeError> {
    if conn.is_none() {
        *conn = Some(connect_any(shared).await?);
    }
    let c = conn.as_mut().expect("connected");
    let names: Vec<&str> = topics.iter().map(|t| &**t).collect();
    let metadata = c.metadata(Some(&names)).await?;
    let mut state = shared.state();
    state.metadata_due = false;
    for b in &metadata.brokers {
        state
            .brokers
            .insert(b.node_id, format!("{}:{}", b.host, b.port));
    }
    let mut leaders: HashMap<PartKey, (i32, i32)> = HashMap::new();
    for t in &metadata.topics {
        let Some(topic) = topics.iter().find(|n| ***n == *t.name) else {
            continue;
        };
        if t.error_code != 0 {
            tracing::debug!(cluster = %shared.options.cluster, topic = %topic, code = t.error_code, "topic not readable in metadata");
            continue;
        }
        if !t.topic_id.is_nil() {
            state.topic_ids.insert(topic.clone(), t.topic_id);
        }
        for p in &t.partitions {
            if p.leader_id >= 0 {
                leaders.insert((topic.clone(), p.partition), (p.leader_id, p.leader_epoch));
            }
        }
    }
    for (key, part) in state.parts.iter_mut() {
        let leader = leaders.get(key).copied();
        if leader.map(|l| l.0) != part.leader.map(|l| l.0) {
            // A new leader may prefer another replica.
            part.replica = None;
        }
        part.leader = leader;
    }
    drop(state);
    shared.changed.notify_waiters();
    Ok(())
}

/// A connection to any broker: the known ones first, then the bootstrap servers.
async fn connect_any(shared: &Shared) -> Result<Connection, NativeError> {
    let mut addrs: Vec<String> = shared.state().brokers.values().cloned().collect();
    addrs.extend(shared.options.bootstrap.iter().cloned());
    let mut last = None;
    for addr in addrs {
        match Connection::connect(&addr, &shared.options.connect).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| NativeError::Closed {
        addr: "(no broker address)".into(),
    }))
}

/// Which of a broker's `lanes` (connections, each with a fetch in flight) fetches
/// the partition `key`.
fn lane(key: &PartKey, lanes: usize) -> usize {
    if lanes <= 1 {
        return 0;
    }
    let topic = key
        .0
        .bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    topic.wrapping_add(key.1 as usize) % lanes
}

/// A partition as a fetch asks for it: topic id, offset, leader epoch, and the
/// epoch of the last batch fetched.
type Want = (PartKey, Uuid, i64, i32, i32);

/// A partition this broker task fetches, as sent.
struct Sent {
    key: PartKey,
    generation: u64,
    offset: i64,
    /// Sent to a preferred read replica rather than to the leader.
    to_replica: bool,
}

/// A broker task: fetches the partitions fetched from `node` (those it leads and
/// those it is the preferred read replica of), one request at a time, until there
/// are none or the fetch is closed.
async fn fetch_from(shared: Arc<Shared>, node: i32, lane_: usize) {
    let lanes = shared.options.lanes;
    let mut conn: Option<Connection> = None;
    let mut session = FetchSession::new();
    let mut backoff = BACKOFF_MIN;
    loop {
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        // Room in the source's budget, made by another cluster's reader.
        let room_freed = shared.options.shared_budget.room();
        tokio::pin!(room_freed);
        room_freed.as_mut().enable();
        let (sent, wants_owned, addr, wake_at) = {
            let mut state = shared.state();
            let now = tokio::time::Instant::now();
            let mut expired = false;
            for part in state.parts.values_mut() {
                if part.replica.is_some_and(|(_, until)| until <= now) {
                    part.replica = None;
                    expired = true;
                }
            }
            if expired {
                // Their leaders may need a task again.
                shared.changed.notify_waiters();
            }
            let leads = state
                .parts
                .iter()
                .any(|(k, p)| p.source(now) == Some(node) && lane(k, lanes) == lane_);
            if state.closed || !leads {
                state.fetching.retain(|n| *n != (node, lane_));
                return;
            }
            // A reader with nothing queued may always fetch: it may be waiting for
            // these records while the others' fill the budgets.
            let room =
                state.buffered < shared.options.budget && shared.options.shared_budget.has_room();
            let addr = state.brokers.get(&node).cloned();
            let mut sent = Vec::new();
            let mut wants = Vec::new();
            let mut wake_at: Option<tokio::time::Instant> = None;
            {
                let State {
                    parts,
                    queues,
                    topic_ids,
                    ..
                } = &mut *state;
                for (key, part) in parts.iter_mut() {
                    if part.source(now) != Some(node)
                        || lane(key, lanes) != lane_
                        || part.in_flight
                        || part.parked
                        || part.paused
                        || part.stop.is_some_and(|stop| part.offset >= stop)
                        || !(room || queues.get(&part.owner).is_some_and(|q| q.buffered == 0))
                    {
                        continue;
                    }
                    if let Some(at) = part.retry_at {
                        if at > now {
                            wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
                            continue;
                        }
                        part.retry_at = None;
                    }
                    part.in_flight = true;
                    sent.push(Sent {
                        key: key.clone(),
                        generation: part.generation,
                        offset: part.offset,
                        to_replica: part.leader.map(|l| l.0) != Some(node),
                    });
                    wants.push((
                        key.clone(),
                        topic_ids.get(&key.0).copied().unwrap_or_default(),
                        part.offset,
                        part.leader.map_or(-1, |l| l.1),
                        part.last_epoch,
                    ));
                }
            }
            (sent, wants, addr, wake_at)
        };
        if sent.is_empty() {
            match wake_at {
                Some(at) => {
                    tokio::select! {
                        () = &mut changed => {}
                        () = &mut room_freed => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => {
                    tokio::select! {
                        () = &mut changed => {}
                        () = &mut room_freed => {}
                    }
                }
            }
            continue;
        }
        let done = fetch_round(
            &shared,
            node,
            addr,
            (&mut conn, &mut session),
            &sent,
            &wants_owned,
        )
        .await;
        // Whatever happened, these partitions are no longer in flight.
        {
            let mut state = shared.state();
            for s in &sent {
                if let Some(p) = state.parts.get_mut(&s.key) {
                    p.in_flight = false;
                }
            }
        }
        match done {
            Ok(throttle) => {
                backoff = BACKOFF_MIN;
                if !throttle.is_zero() {
                    tokio::time::sleep(throttle).await;
                }
            }
            Err(e) => {
                conn = None;
                shared.failed(&e);
                {
                    let mut state = shared.state();
                    state.metadata_due = true;
                    // What this broker served as a replica goes back to its leader.
                    for part in state.parts.values_mut() {
                        if part.replica.is_some_and(|(r, _)| r == node) {
                            part.replica = None;
                        }
                    }
                }
                shared.changed.notify_waiters();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// One fetch from `node` and what its answer does. Returns how long the broker
/// asked the client to wait (KIP-219).
async fn fetch_round(
    shared: &Shared,
    node: i32,
    addr: Option<String>,
    (conn, session): (&mut Option<Connection>, &mut FetchSession),
    sent: &[Sent],
    wants: &[Want],
) -> Result<Duration, NativeError> {
    if conn.is_none() {
        let addr = addr.ok_or_else(|| NativeError::Closed {
            addr: format!("(node {node}: no address in the metadata)"),
        })?;
        *conn = Some(Connection::connect(&addr, &shared.options.connect).await?);
        session.reset();
    }
    let c = conn.as_mut().expect("connected");
    let mut sorted: Vec<&Want> = wants.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let list: Vec<FetchWant<'_>> = sorted
        .iter()
        .map(|(key, id, offset, epoch, last_epoch)| FetchWant {
            topic: &key.0,
            topic_id: *id,
            partition: key.1,
            offset: *offset,
            leader_epoch: *epoch,
            max_bytes: shared.options.partition_max_bytes,
            last_fetched_epoch: *last_epoch,
        })
        .collect();
    let (response, by_id) = c
        .fetch_in_session(&list, &shared.options.fetch, session)
        .await?;
    let throttle = Duration::from_millis(u64::try_from(response.throttle_time_ms).unwrap_or(0));
    let mut out_of_range = Vec::new();
    let mut troubles: Vec<String> = Vec::new();
    let budget = &*shared.options.shared_budget;
    let mut woken: Vec<Arc<dyn Fn() + Send + Sync>> = Vec::new();
    {
        let mut state = shared.state();
        let names: HashMap<Uuid, Arc<str>> = state
            .topic_ids
            .iter()
            .map(|(name, id)| (*id, name.clone()))
            .collect();
        for topic in response.topics {
            let name = if by_id {
                names.get(&topic.topic_id).cloned()
            } else {
                topic.name.as_deref().and_then(|n| {
                    sent.iter()
                        .find(|s| *s.key.0 == *n)
                        .map(|s| s.key.0.clone())
                })
            };
            let Some(name) = name else { continue };
            for answer in topic.partitions {
                let key = (name.clone(), answer.partition);
                let Some(s) = sent.iter().find(|s| s.key == key) else {
                    continue;
                };
                let state = &mut *state;
                let Some(part) = state.parts.get_mut(&key) else {
                    continue;
                };
                if part.generation != s.generation || part.offset != s.offset {
                    continue;
                }
                if answer.preferred_read_replica >= 0
                    && answer.preferred_read_replica != node
                    && !s.to_replica
                {
                    // The leader points to a replica in the client's rack (KIP-392).
                    let replica = answer.preferred_read_replica;
                    if state.brokers.contains_key(&replica) {
                        tracing::debug!(cluster = %shared.options.cluster, topic = %key.0, partition = key.1, replica, "fetching from the preferred read replica");
                        part.replica =
                            Some((replica, tokio::time::Instant::now() + REPLICA_EXPIRY));
                    } else {
                        state.metadata_due = true;
                    }
                }
                let verdict = issue(&answer, s.offset);
                if s.to_replica && verdict.is_err() {
                    // Any error of a replica's (it fell behind, left the replicas,
                    // or does not know the epoch yet): back to the leader, which
                    // says what holds.
                    tracing::debug!(cluster = %shared.options.cluster, topic = %key.0, partition = key.1, replica = node, "the preferred read replica answered an error; fetching from the leader");
                    part.replica = None;
                    continue;
                }
                match verdict {
                    Ok(()) => {
                        if answer.high_watermark >= 0 {
                            state
                                .high_watermarks
                                .insert(key.clone(), answer.high_watermark);
                        }
                        if answer.records.is_empty() {
                            continue;
                        }
                        // After the last whole batch; a corrupt header stops the walk
                        // there, and the reader finds the corruption when it decodes.
                        let mut next = s.offset;
                        for batch in Batches::new(&answer.records) {
                            match batch {
                                Ok(b) if b.next_offset() > next => {
                                    next = b.next_offset();
                                    part.last_epoch = b.partition_leader_epoch;
                                }
                                Ok(_) => {}
                                Err(_) => break,
                            }
                        }
                        part.offset = next;
                        let owner = part.owner;
                        let arrival = Arrival::Records {
                            key,
                            generation: s.generation,
                            answer,
                        };
                        woken.extend(state.queue(budget, owner, arrival));
                    }
                    Err(PartitionIssue::LeaderMoved { hint, .. }) => {
                        let known = hint.filter(|h| state.brokers.contains_key(&h.leader_id));
                        part.leader = known.map(|h| (h.leader_id, h.leader_epoch));
                        if part.leader.is_none() {
                            state.metadata_due = true;
                        }
                    }
                    Err(PartitionIssue::Diverged(d)) => {
                        if d.end_offset >= 0 && d.end_offset < s.offset {
                            // The records fetched from `end_offset` on are no
                            // longer in the log: read on where the logs part.
                            part.offset = d.end_offset;
                            part.last_epoch = d.epoch;
                            let owner = part.owner;
                            let arrival = Arrival::Truncated {
                                key,
                                generation: s.generation,
                                from: s.offset,
                                to: d.end_offset,
                                epoch: d.epoch,
                            };
                            woken.extend(state.queue(budget, owner, arrival));
                        } else {
                            // Nothing before the position is gone (the broker does
                            // not know the epoch): fetch on without the check.
                            part.last_epoch = -1;
                        }
                    }
                    Err(PartitionIssue::OutOfRange { offset }) => {
                        part.parked = true;
                        out_of_range.push((key, s.generation, offset));
                    }
                    Err(PartitionIssue::Unknown { .. }) => {
                        part.leader = None;
                        state.metadata_due = true;
                    }
                    Err(e) => {
                        // Said once per streak, and the partition waits before it is
                        // fetched again; the enumerator's lookups decide whether the
                        // split goes (an authorization revoked, a topic deleted).
                        let name = match e {
                            PartitionIssue::Failed { code } => crate::error::code_text(code)
                                .map(|e| format!(" ({e})"))
                                .unwrap_or_default(),
                            _ => String::new(),
                        };
                        troubles.push(format!("{}/{}: {e}{name}", key.0, key.1));
                        part.retry_at = Some(tokio::time::Instant::now() + PARTITION_BACKOFF);
                        state.metadata_due = true;
                    }
                }
            }
        }
    }
    if !troubles.is_empty() {
        // One text for the round, so the same failing partitions are said once.
        troubles.sort_unstable();
        shared.trouble(&troubles.join("; "));
    }
    shared.changed.notify_waiters();
    if !out_of_range.is_empty() {
        // The readers hear of the records before the resets are looked up.
        wake(std::mem::take(&mut woken));
    }
    for (key, generation, offset) in out_of_range {
        let arrival = reset(shared, c, &key, generation, offset).await?;
        let mut state = shared.state();
        let Some(part) = state
            .parts
            .get_mut(&key)
            .filter(|p| p.generation == generation)
        else {
            // Removed or sought meanwhile: the answer is not wanted.
            continue;
        };
        if let Arrival::Reset { to, .. } = &arrival {
            part.offset = *to;
            part.last_epoch = -1;
            part.parked = false;
        }
        let owner = part.owner;
        woken.extend(state.queue(budget, owner, arrival));
    }
    wake(woken);
    Ok(throttle)
}

/// Wakes each reader something arrived for, once.
fn wake(woken: Vec<Arc<dyn Fn() + Send + Sync>>) {
    for (i, w) in woken.iter().enumerate() {
        if !woken[..i].iter().any(|v| Arc::ptr_eq(v, w)) {
            w();
        }
    }
}

/// What a position outside the log becomes: the log's range, then a reset or an
/// error as the policy says.
async fn reset(
    shared: &Shared,
    c: &mut Connection,
    key: &PartKey,
    generation: u64,
    offset: i64,
) -> Result<Arrival, NativeError> {
    let start = c.list_offsets(&key.0, key.1, -2).await;
    let end = c.list_offsets(&key.0, key.1, -1).await;
    let (log_start, log_end) = (start.ok(), end.ok());
    let to = match (shared.options.out_of_range, log_start, log_end) {
        (OutOfRange::Earliest, Some(s), _) => s,
        (OutOfRange::Latest, _, Some(e)) => e,
        _ => {
            return Ok(Arrival::OutOfRange {
                key: key.clone(),
                generation,
                offset,
                log_start,
                log_end,
            });
        }
    };
    Ok(Arrival::Reset {
        key: key.clone(),
        generation,
        from: offset,
        to,
        log_start: log_start.unwrap_or(-1),
        log_end: log_end.unwrap_or(-1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mck_testkit::TestCluster;

    /// Options to fetch `cluster` from the broker of `kafka`.
    fn options_for(kafka: &dyn TestCluster, cluster: &str, budget: Arc<Budget>) -> ClusterOptions {
        ClusterOptions {
            cluster: Arc::from(cluster),
            bootstrap: vec![kafka.bootstrap_servers()],
            connect: ConnectOptions::default(),
            fetch: FetchSettings::default(),
            partition_max_bytes: 1 << 20,
            budget: 1 << 20,
            shared_budget: budget,
            out_of_range: OutOfRange::Fail,
            lanes: 2,
            errors: Listener::default(),
        }
    }

    /// Partitions of every arrival `fetch` has now, after waiting up to 30 s for one.
    fn arrived(fetch: &ClusterFetch) -> Vec<i32> {
        let patience = std::time::Instant::now();
        let mut partitions = Vec::new();
        while partitions.is_empty() && patience.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
            while let Some(arrival) = fetch.take() {
                if let Arrival::Records { key, .. } = arrival {
                    partitions.push(key.1);
                }
            }
        }
        partitions.sort_unstable();
        partitions.dedup();
        partitions
    }

    /// Two readers joining a cluster share one fetch, on two connections to its
    /// broker; each gets only its own partitions' answers; a partition moved to the other reader is answered to
    /// it, and the first can no longer remove it; the fetch ends with its last reader.
    #[test]
    fn readers_of_a_cluster_share_one_fetch_and_get_their_own_answers() {
        let kafka = mck_testkit::shared_cluster("native-budget")
            .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
        let topic: Arc<str> = Arc::from("share-readers");
        kafka.create_topic(&topic, 3).unwrap();
        mck_testkit::fill_values(kafka, &topic, 3, 10, "v");
        let rt = mck_testkit::runtime();
        let fetches = ClusterFetches::default();
        let budget = Arc::new(Budget::default());
        let join = || {
            fetches.join(
                rt.handle(),
                vec![("bootstrap.servers".into(), kafka.bootstrap_servers())],
                options_for(kafka, "c", budget.clone()),
                Box::new(|| {}),
            )
        };
        let one = join();
        let two = join();
        assert_eq!(fetches.running(), 1, "the two readers share one fetch");
        one.add((topic.clone(), 0), 0, None);
        two.add((topic.clone(), 1), 0, None);
        two.add((topic.clone(), 2), 0, None);
        assert_eq!(arrived(&one), vec![0]);
        assert_eq!(arrived(&two), vec![1, 2]);
        // The broker's three partitions are fetched on two connections (lanes).
        let mut lanes: Vec<usize> = one.shared().state().fetching.iter().map(|f| f.1).collect();
        lanes.sort_unstable();
        assert_eq!(lanes, vec![0, 1], "a fetch in flight per lane");
        // Partition 0 moves to the second reader, which reads it again from 0; the
        // first reader's late removal leaves it alone.
        two.add((topic.clone(), 0), 0, None);
        one.remove(&[(topic.clone(), 0)]);
        assert_eq!(arrived(&two), vec![0]);
        assert!(
            one.take().is_none(),
            "an answer went to the reader it moved from"
        );
        // Other properties: a fetch of their own.
        let other = fetches.join(
            rt.handle(),
            Vec::new(),
            options_for(kafka, "c", budget.clone()),
            Box::new(|| {}),
        );
        assert_eq!(fetches.running(), 2);
        drop(other);
        drop(one);
        assert_eq!(fetches.running(), 1, "the second reader still fetches");
        two.seek(&(topic.clone(), 1), 0);
        assert_eq!(arrived(&two), vec![1]);
        drop(two);
        assert_eq!(fetches.running(), 0);
        assert_eq!(budget.used(), 0, "what was queued left the budget");
    }

    /// A partition fetched up to its stop is not fetched again: a fetch of it would
    /// wait out `fetch.wait.max.ms` at the log's end, and a partition resumed
    /// meanwhile on the same connection would wait with it.
    #[test]
    fn a_partition_at_its_stop_does_not_hold_back_one_resumed_beside_it() {
        let kafka = mck_testkit::shared_cluster("native-budget")
            .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
        let topic: Arc<str> = Arc::from("stop-resume");
        kafka.create_topic(&topic, 2).unwrap();
        mck_testkit::fill_values(kafka, &topic, 2, 10, "v");
        let rt = mck_testkit::runtime();
        let fetches = ClusterFetches::default();
        let mut options = options_for(kafka, "c", Arc::new(Budget::default()));
        // One connection, and a long wait at the log's end.
        options.lanes = 1;
        options.fetch.max_wait_ms = 5_000;
        let fetch = fetches.join(
            rt.handle(),
            vec![("bootstrap.servers".into(), kafka.bootstrap_servers())],
            options,
            Box::new(|| {}),
        );
        let (p0, p1) = ((topic.clone(), 0), (topic.clone(), 1));
        fetch.add(p1.clone(), 0, None);
        fetch.pause(std::slice::from_ref(&p1), true);
        // Ten records a partition: partition 0's log ends at 10, its stop.
        fetch.add(p0.clone(), 0, None);
        fetch.stop_at(&p0, 10);
        assert_eq!(arrived(&fetch), vec![0]);
        // Partition 0 is at its stop; partition 1 resumes and comes at once, not
        // after a fetch of partition 0 waited 5 s at the log's end.
        std::thread::sleep(Duration::from_millis(300));
        let resumed = std::time::Instant::now();
        fetch.pause(std::slice::from_ref(&p1), false);
        assert_eq!(arrived(&fetch), vec![1]);
        assert!(
            resumed.elapsed() < Duration::from_secs(2),
            "partition 1 waited {:?}",
            resumed.elapsed()
        );
    }

    /// Four fetches (of four topics of a real broker: as four clusters would be)
    /// with a backlog each, sharing one budget and never taken from: together they
    /// stop near the budget (each may still queue one answer), where budgets of
    /// their own would each fill theirs.
    #[test]
    fn clusters_sharing_a_budget_stop_at_it_together() {
        const BUDGET: usize = 64 * 1024;
        const ANSWER: i32 = 16 * 1024;
        let kafka = mck_testkit::shared_cluster("native-budget")
            .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
        let topics: Vec<String> = (0..4).map(|i| format!("budget{i}")).collect();
        // Batches of 10 KiB: a broker answers at least one whole batch.
        let producer: rdkafka::producer::BaseProducer = kafka
            .client_config()
            .set("batch.size", "10240")
            .create()
            .unwrap();
        let value = vec![b'x'; 1024];
        for t in &topics {
            kafka.create_topic(t, 1).unwrap();
            for _ in 0..500 {
                let record = rdkafka::producer::BaseRecord::<(), [u8]>::to(t).payload(&value);
                producer.send(record).map_err(|(e, _)| e).unwrap();
            }
        }
        rdkafka::producer::Producer::flush(&producer, Duration::from_secs(60)).unwrap();
        let rt = mck_testkit::runtime();
        let shared_budget = Arc::new(Budget::default());
        let fetches: Vec<ClusterFetch> = topics
            .iter()
            .map(|topic| {
                let options = ClusterOptions {
                    cluster: Arc::from(topic.as_str()),
                    bootstrap: vec![kafka.bootstrap_servers()],
                    connect: ConnectOptions::default(),
                    fetch: FetchSettings {
                        max_bytes: ANSWER,
                        ..FetchSettings::default()
                    },
                    partition_max_bytes: ANSWER,
                    budget: BUDGET,
                    shared_budget: shared_budget.clone(),
                    out_of_range: OutOfRange::Fail,
                    lanes: 1,
                    errors: Listener::default(),
                };
                let fetch = ClusterFetch::start(rt.handle(), options, Box::new(|| {}));
                fetch.add((Arc::from(topic.as_str()), 0), 0, None);
                fetch
            })
            .collect();
        // Until the queued bytes stay put for a second (a guard against hangs, not
        // a timing assertion).
        let patience = std::time::Instant::now();
        let mut last = (usize::MAX, std::time::Instant::now());
        loop {
            let used = shared_budget.used();
            if used != last.0 {
                last = (used, std::time::Instant::now());
            } else if used > 0 && last.1.elapsed() > Duration::from_secs(1) {
                break;
            }
            assert!(
                patience.elapsed() < Duration::from_secs(60),
                "still fetching: {used}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let used = shared_budget.used();
        assert!(used >= BUDGET, "stopped below the budget: {used}");
        // Budgets of their own: at least 4 × BUDGET.
        assert!(
            used <= BUDGET + topics.len() * 2 * ANSWER as usize,
            "{used} bytes queued, over the budget and an answer per cluster"
        );
        // Every cluster got its answers, and taking them gives the bytes back. Taking
        // frees the budget, so the fetches are paused first; an answer still on its
        // way (a fetch that started late on a busy machine) is taken in a second
        // round, once the queued bytes stay put again.
        let mut taken = 0;
        let mut fed = vec![false; fetches.len()];
        for (fetch, topic) in fetches.iter().zip(&topics) {
            fetch.pause(&[(Arc::from(topic.as_str()), 0)], true);
        }
        for round in 0..2 {
            if round > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            for (fetch, fed) in fetches.iter().zip(fed.iter_mut()) {
                while let Some(arrival) = fetch.take() {
                    if let Arrival::Records { answer, .. } = arrival {
                        taken += answer.records.len();
                        *fed = true;
                    }
                }
            }
        }
        assert!(fed.iter().all(|f| *f), "a cluster was starved: {fed:?}");
        assert!(taken >= used, "taken {taken} of the {used} queued");
        assert_eq!(shared_budget.used(), 0, "what was taken left the budget");
        drop(fetches);
    }
}
