//! A fetch's answer applied to the partitions it was sent for, under the state's lock:
//! records queued for their readers and each partition's position moved past them,
//! and each partition's error followed (a new leader, a preferred read replica
//! followed or left, a truncated log, a position outside the log, a wait).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::broker::Sent;
use super::state::{Part, Shared, State};
use super::{Arrival, PartKey};
use crate::batch::Batches;
use crate::fetch_response::{DivergingEpoch, FetchPartitionData, FetchTopicData};
use crate::partition::{PartitionIssue, issue};

/// How long a partition whose answer was an error of its own waits before it is
/// fetched again (the broker's other partitions go on).
const PARTITION_BACKOFF: Duration = Duration::from_secs(1);

/// How long a preferred read replica is followed before the leader is asked again
/// (the Java client's `metadata.max.age.ms` default).
const REPLICA_EXPIRY: Duration = Duration::from_secs(300);

/// What an answer leaves to do once the state is let go.
#[derive(Default)]
pub(super) struct Applied {
    /// The partitions whose position was outside the log: key, generation, offset.
    pub(super) out_of_range: Vec<(PartKey, u64, i64)>,
    /// The partitions' errors, said once for the round.
    pub(super) troubles: Vec<String>,
    /// What wakes each reader something was queued for.
    pub(super) woken: Vec<Arc<dyn Fn() + Send + Sync>>,
}

/// Applies the answer from `node` (its `topics`, named by id when `by_id`) to the
/// partitions `sent`.
pub(super) fn apply_answer(
    shared: &Shared,
    node: i32,
    sent: &[Sent],
    topics: Vec<FetchTopicData>,
    by_id: bool,
) -> Applied {
    let mut applied = Applied::default();
    let mut state = shared.state();
    let names: HashMap<Uuid, Arc<str>> = state
        .topic_ids
        .iter()
        .map(|(name, id)| (*id, name.clone()))
        .collect();
    for topic in topics {
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
            apply_partition(shared, &mut state, node, s, key, answer, &mut applied);
        }
    }
    applied
}

/// Applies a partition's `answer` from `node`, if the partition is still at the
/// offset and generation it was fetched for (`s`).
fn apply_partition(
    shared: &Shared,
    state: &mut State,
    node: i32,
    s: &Sent,
    key: PartKey,
    answer: FetchPartitionData,
    applied: &mut Applied,
) {
    let budget = &*shared.options.shared_budget;
    let Some(part) = state.parts.get_mut(&key) else {
        return;
    };
    if part.generation != s.generation || part.offset != s.offset {
        return;
    }
    if answer.preferred_read_replica >= 0 && answer.preferred_read_replica != node && !s.to_replica
    {
        // The leader points to a replica in the client's rack (KIP-392).
        let replica = answer.preferred_read_replica;
        if state.brokers.contains_key(&replica) {
            tracing::debug!(cluster = %shared.options.cluster, topic = %key.0, partition = key.1, replica, "fetching from the preferred read replica");
            part.replica = Some((replica, tokio::time::Instant::now() + REPLICA_EXPIRY));
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
        return;
    }
    let arrival = match verdict {
        Ok(()) => records(part, &mut state.high_watermarks, key, s, answer),
        Err(PartitionIssue::LeaderMoved { hint, .. }) => {
            let known = hint.filter(|h| state.brokers.contains_key(&h.leader_id));
            part.leader = known.map(|h| (h.leader_id, h.leader_epoch));
            if part.leader.is_none() {
                state.metadata_due = true;
            }
            None
        }
        Err(PartitionIssue::Diverged(d)) => diverged(part, key, s, d),
        Err(PartitionIssue::OutOfRange { offset }) => {
            part.parked = true;
            applied.out_of_range.push((key, s.generation, offset));
            None
        }
        Err(PartitionIssue::Unknown { .. }) => {
            part.leader = None;
            state.metadata_due = true;
            None
        }
        Err(e) => {
            // Said once per streak, and the partition waits before it is
            // fetched again; the enumerator's lookups decide whether the
            // split goes (an authorization revoked, a topic deleted).
            applied.troubles.push(failed(part, &key, e));
            state.metadata_due = true;
            None
        }
    };
    if let Some(arrival) = arrival {
        let owner = part.owner;
        applied.woken.extend(state.queue(budget, owner, arrival));
    }
}

/// An answer without error: its high watermark kept and, when it has records, the
/// partition's next fetch moved after them; returns the records for its reader.
fn records(
    part: &mut Part,
    high_watermarks: &mut HashMap<PartKey, i64>,
    key: PartKey,
    s: &Sent,
    answer: FetchPartitionData,
) -> Option<Arrival> {
    if answer.high_watermark >= 0 {
        high_watermarks.insert(key.clone(), answer.high_watermark);
    }
    if answer.records.is_empty() {
        return None;
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
    Some(Arrival::Records {
        key,
        generation: s.generation,
        answer,
    })
}

/// The log diverged from the epoch fetched with (KIP-320): the partition reads on
/// where the logs part when records before its position are gone, and returns
/// what tells its reader so.
fn diverged(part: &mut Part, key: PartKey, s: &Sent, d: DivergingEpoch) -> Option<Arrival> {
    if d.end_offset >= 0 && d.end_offset < s.offset {
        // The records fetched from `end_offset` on are no
        // longer in the log: read on where the logs part.
        part.offset = d.end_offset;
        part.last_epoch = d.epoch;
        Some(Arrival::Truncated {
            key,
            generation: s.generation,
            from: s.offset,
            to: d.end_offset,
            epoch: d.epoch,
        })
    } else {
        // Nothing before the position is gone (the broker does
        // not know the epoch): fetch on without the check.
        part.last_epoch = -1;
        None
    }
}

/// Any other error of the partition `key`'s own: it waits before it is fetched
/// again. Returns what to say of it.
fn failed(part: &mut Part, key: &PartKey, e: PartitionIssue) -> String {
    let name = match e {
        PartitionIssue::Failed { code } => crate::error::code_text(code)
            .map(|e| format!(" ({e})"))
            .unwrap_or_default(),
        _ => String::new(),
    };
    part.retry_at = Some(tokio::time::Instant::now() + PARTITION_BACKOFF);
    format!("{}/{}: {e}{name}", key.0, key.1)
}
