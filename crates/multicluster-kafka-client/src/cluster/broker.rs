//! A broker task: fetches the partitions fetched from one broker on one of its lanes
//! (a connection of their own), one request at a time, and backs off when it fails.

use std::sync::Arc;

use uuid::Uuid;

use super::round::fetch_round;
use super::state::{Shared, State};
use super::{BACKOFF_MAX, BACKOFF_MIN, PartKey};
use crate::conn::Connection;
use crate::session::FetchSession;

/// Which of a broker's `lanes` (connections, each with a fetch in flight) fetches
/// the partition `key`.
pub(super) fn lane(key: &PartKey, lanes: usize) -> usize {
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
pub(super) type Want = (PartKey, Uuid, i64, i32, i32);

/// A partition this broker task fetches, as sent.
pub(super) struct Sent {
    pub(super) key: PartKey,
    pub(super) generation: u64,
    pub(super) offset: i64,
    /// Sent to a preferred read replica rather than to the leader.
    pub(super) to_replica: bool,
}

/// A broker task: fetches the partitions fetched from `node` (those it leads and
/// those it is the preferred read replica of), one request at a time, until there
/// are none or the fetch is closed.
pub(super) async fn fetch_from(shared: Arc<Shared>, node: i32, lane_: usize) {
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
        let Some(Round {
            sent,
            wants: wants_owned,
            addr,
            wake_at,
        }) = next_round(&shared, node, lane_)
        else {
            return;
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

/// What a broker task fetches next, and what it needs to fetch it.
struct Round {
    /// The partitions, as sent (each now in flight).
    sent: Vec<Sent>,
    /// The partitions, as asked for.
    wants: Vec<Want>,
    /// The broker's address, once known.
    addr: Option<String>,
    /// When the first partition waiting out an error of its own may be fetched.
    wake_at: Option<tokio::time::Instant>,
}

/// What the task of `node`'s lane `lane_` fetches next (maybe nothing for now), or
/// none when it is to end: the fetch is closed, or no partition is fetched there.
fn next_round(shared: &Shared, node: i32, lane_: usize) -> Option<Round> {
    let lanes = shared.options.lanes;
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
        return None;
    }
    // A reader with nothing queued may always fetch: it may be waiting for
    // these records while the others' fill the budgets.
    let room = state.buffered < shared.options.budget && shared.options.shared_budget.has_room();
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
    Some(Round {
        sent,
        wants,
        addr,
        wake_at,
    })
}
