//! One fetch of a broker task: the request sent on its connection, the answer applied
//! ([`apply_answer`]), the readers woken, and the positions outside the log moved as
//! the read policy says.

use std::sync::Arc;
use std::time::Duration;

use super::answer::{Applied, apply_answer};
use super::broker::{Sent, Want};
use super::state::Shared;
use super::{Arrival, OutOfRange, PartKey};
use crate::calls::FetchWant;
use crate::conn::{ConnectOptions, Connection};
use crate::error::NativeError;
use crate::session::FetchSession;

/// One fetch from `node` and what its answer does. Returns how long the broker
/// asked the client to wait (KIP-219).
pub(super) async fn fetch_round(
    shared: &Shared,
    node: i32,
    addr: Option<String>,
    (conn, session): (&mut Option<Connection>, &mut FetchSession),
    sent: &[Sent],
    wants: &[Want],
) -> Result<Duration, NativeError> {
    let c = connected(&shared.options.connect, node, addr, conn, session).await?;
    let list = fetch_wants(shared, wants);
    let (response, by_id) = c
        .fetch_in_session(&list, &shared.options.fetch, session)
        .await?;
    let throttle = Duration::from_millis(u64::try_from(response.throttle_time_ms).unwrap_or(0));
    let Applied {
        out_of_range,
        mut troubles,
        mut woken,
    } = apply_answer(shared, node, sent, response.topics, by_id);
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
    reset_all(shared, c, out_of_range, &mut woken).await?;
    wake(woken);
    Ok(throttle)
}

/// The connection to `node`, connected to `addr` (with a new fetch session) when
/// there is none.
async fn connected<'c>(
    connect: &ConnectOptions,
    node: i32,
    addr: Option<String>,
    conn: &'c mut Option<Connection>,
    session: &mut FetchSession,
) -> Result<&'c mut Connection, NativeError> {
    if conn.is_none() {
        let addr = addr.ok_or_else(|| NativeError::Closed {
            addr: format!("(node {node}: no address in the metadata)"),
        })?;
        *conn = Some(Connection::connect(&addr, connect).await?);
        session.reset();
    }
    Ok(conn.as_mut().expect("connected"))
}

/// The partitions of `wants` as the request asks for them, in order.
fn fetch_wants<'a>(shared: &Shared, wants: &'a [Want]) -> Vec<FetchWant<'a>> {
    let mut sorted: Vec<&Want> = wants.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
        .into_iter()
        .map(|(key, id, offset, epoch, last_epoch)| FetchWant {
            topic: &key.0,
            topic_id: *id,
            partition: key.1,
            offset: *offset,
            leader_epoch: *epoch,
            max_bytes: shared.options.partition_max_bytes,
            last_fetched_epoch: *last_epoch,
        })
        .collect()
}

/// Looks up the log's range of each partition whose position was outside the log
/// (key, generation, offset), and queues what it becomes ([`reset`]) for its
/// reader, whose wake joins `woken`.
async fn reset_all(
    shared: &Shared,
    c: &mut Connection,
    out_of_range: Vec<(PartKey, u64, i64)>,
    woken: &mut Vec<Arc<dyn Fn() + Send + Sync>>,
) -> Result<(), NativeError> {
    let budget = &*shared.options.shared_budget;
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
    Ok(())
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
