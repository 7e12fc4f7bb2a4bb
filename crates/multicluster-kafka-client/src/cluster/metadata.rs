//! The metadata task of a cluster's fetching: the leaders looked up, and a broker task
//! started for every broker fetched from.

use std::collections::HashMap;
use std::sync::Arc;

use super::broker::{fetch_from, lane};
use super::state::Shared;
use super::{BACKOFF_MAX, BACKOFF_MIN, PartKey};
use crate::conn::Connection;
use crate::error::NativeError;

/// The metadata task: looks the leaders up whenever a partition has none (or a
/// fetch said they moved), and starts a fetching task for every broker fetched
/// from (leaders and preferred read replicas).
/// Ends (with its broker tasks) when the [`ClusterFetch`](super::ClusterFetch) goes.
pub(super) async fn keep_leaders(shared: Arc<Shared>) {
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
