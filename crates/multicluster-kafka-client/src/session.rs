//! Fetch sessions (KIP-227): after a first, full fetch the broker keeps the
//! partitions asked for and their positions, and each later request names only the
//! partitions whose position (or leader epoch, or byte limit) changed and those to
//! forget. The broker answers likewise with only the partitions that have something
//! new: records, moved watermarks, an error. With many partitions of which few move,
//! requests and answers stay small.
//!
//! The session is the client's to keep in step: a request carries the session's id
//! and the next epoch. A broker that lost the session (restarted, evicted it from
//! its cache) or saw another epoch says so in the answer's top-level error; the
//! session then starts again with a full fetch, at once and without an error for the
//! caller. A broker that keeps no session for this client (its cache is full, or
//! Fetch below v7) is fetched in full every time. A session this side gave up on
//! (its connection failed, an answer was in error) is named by the next full fetch,
//! which closes it on the broker rather than leaving it to be evicted.

use std::collections::HashMap;

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use uuid::Uuid;

use crate::calls::{FetchSettings, FetchWant, fetch_request, topic_name};
use crate::conn::Connection;
use crate::error::NativeError;
use crate::fetch_response::FetchResponseData;

/// The first Fetch version with sessions.
const SESSIONS_FROM: i16 = 7;

/// The epoch that asks the broker for a new session (with session id 0).
const NEW_SESSION: i32 = 0;

/// Kafka's error codes that end a session on the broker's side.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// What the broker holds of one partition: as last sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    offset: i64,
    leader_epoch: i32,
    max_bytes: i32,
    topic_id: Uuid,
    last_fetched_epoch: i32,
    /// The request that last named it (or kept it).
    round: u64,
}

/// One connection's fetch session with one broker. A new connection starts a new
/// session ([`reset`](Self::reset) it when the connection is made again).
#[derive(Debug, Default)]
pub struct FetchSession {
    /// The broker's id for the session; 0: none yet.
    id: i32,
    /// A session given up on this side (its connection failed, an answer was in
    /// error) that the broker may still hold: the next full fetch names it, which
    /// closes it there (as the Java client does), instead of leaving it in the
    /// broker's session cache until evicted.
    stale: i32,
    /// The epoch of the next incremental request.
    epoch: i32,
    /// Whether the session's topics are named by id (Fetch v13 up).
    by_id: bool,
    /// Topic → partition → what the broker holds.
    held: HashMap<String, HashMap<i32, Held>>,
    round: u64,
    /// Full fetches after the first: sessions the broker lost or refused.
    restarts: u64,
    /// Incremental requests sent.
    incremental: u64,
}

impl FetchSession {
    /// No session: the next fetch is full and asks for a new one.
    pub fn new() -> Self {
        Self::default()
    }

    /// The broker's id for the session (0: none).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The epoch the next incremental request carries.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// How many times the session started again after the broker lost or refused
    /// it.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// How many incremental requests were sent.
    pub fn incremental_requests(&self) -> u64 {
        self.incremental
    }

    /// Forgets the session: the next fetch is full, and closes the session on the
    /// broker.
    pub fn reset(&mut self) {
        if self.id != 0 {
            self.stale = self.id;
        }
        self.id = 0;
        self.epoch = NEW_SESSION;
        self.held.clear();
    }

    /// The session the next full fetch closes on the broker (0: none).
    pub fn to_close(&self) -> i32 {
        self.stale
    }

    /// Sets the next epoch (for tests of a client out of step with its broker).
    #[doc(hidden)]
    pub fn set_epoch(&mut self, epoch: i32) {
        self.epoch = epoch;
    }

    /// Sets the session's id (for tests of a session the broker does not know).
    #[doc(hidden)]
    pub fn set_id(&mut self, id: i32) {
        self.id = id;
    }

    /// The wants the broker does not hold as they are, and what it holds that is
    /// no longer wanted.
    fn delta<'w, 'a>(
        &self,
        wants: &'w [FetchWant<'a>],
    ) -> (Vec<FetchWant<'a>>, Vec<ForgottenTopic>) {
        let changed: Vec<FetchWant<'a>> = wants
            .iter()
            .filter(|w| {
                let held = self.held.get(w.topic).and_then(|t| t.get(&w.partition));
                held.is_none_or(|h| {
                    h.offset != w.offset
                        || h.leader_epoch != w.leader_epoch
                        || h.max_bytes != w.max_bytes
                        || h.topic_id != w.topic_id
                        || h.last_fetched_epoch != w.last_fetched_epoch
                })
            })
            .copied()
            .collect();
        let wanted: std::collections::HashSet<(&str, i32)> =
            wants.iter().map(|w| (w.topic, w.partition)).collect();
        let mut forgotten = Vec::new();
        let mut topics: Vec<(&String, &HashMap<i32, Held>)> = self.held.iter().collect();
        topics.sort_unstable_by_key(|(name, _)| name.as_str());
        for (name, parts) in topics {
            let mut gone: Vec<(i32, Uuid)> = parts
                .iter()
                .filter(|(p, _)| !wanted.contains(&(name.as_str(), **p)))
                .map(|(p, h)| (*p, h.topic_id))
                .collect();
            if gone.is_empty() {
                continue;
            }
            gone.sort_unstable_by_key(|(p, _)| *p);
            let mut topic = ForgottenTopic::default();
            if self.by_id {
                topic.topic_id = gone[0].1;
            } else {
                topic.topic = topic_name(name);
            }
            topic.partitions = gone.iter().map(|(p, _)| *p).collect();
            forgotten.push(topic);
        }
        (changed, forgotten)
    }

    /// After an answer without error: the broker holds `wants` as sent.
    fn hold(&mut self, wants: &[FetchWant<'_>]) {
        self.round += 1;
        let round = self.round;
        for w in wants {
            let held = Held {
                offset: w.offset,
                leader_epoch: w.leader_epoch,
                max_bytes: w.max_bytes,
                topic_id: w.topic_id,
                last_fetched_epoch: w.last_fetched_epoch,
                round,
            };
            match self.held.get_mut(w.topic) {
                Some(parts) => {
                    parts.insert(w.partition, held);
                }
                None => {
                    self.held
                        .insert(w.topic.to_string(), HashMap::from([(w.partition, held)]));
                }
            }
        }
        for parts in self.held.values_mut() {
            parts.retain(|_, h| h.round == round);
        }
        self.held.retain(|_, parts| !parts.is_empty());
    }
}

/// The epoch after `epoch` (it wraps to 1: 0 asks for a new session, −1 ends one).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

impl Connection {
    /// One fetch of `wants` (each topic's partitions next to each other) in
    /// `session`: full when there is none yet, asking the broker for one; otherwise
    /// only what changed since the last request, and the partitions no longer
    /// wanted. The answer names only partitions with something new when the fetch
    /// was incremental. A session the broker lost or refused starts again with a
    /// full fetch within this call. Returns the answer and whether its topics are
    /// named by id. Any error leaves no session (the next fetch is full).
    pub async fn fetch_in_session(
        &mut self,
        wants: &[FetchWant<'_>],
        settings: &FetchSettings,
        session: &mut FetchSession,
    ) -> Result<(FetchResponseData, bool), NativeError> {
        let version = self.fetch_version(wants)?;
        if version < SESSIONS_FROM {
            return self.fetch(wants, settings).await;
        }
        let by_id = version >= 13;
        if session.id != 0 && session.by_id != by_id {
            session.reset();
        }
        loop {
            let full = session.id == 0;
            let request: FetchRequest = if full {
                let mut request = fetch_request(wants, settings, version);
                // A full fetch naming a session closes it and opens a new one.
                request.session_id = session.stale;
                request.session_epoch = NEW_SESSION;
                request
            } else {
                let (changed, forgotten) = session.delta(wants);
                let mut request = fetch_request(&changed, settings, version);
                request.session_id = session.id;
                request.session_epoch = session.epoch;
                request.forgotten_topics_data = forgotten;
                request
            };
            let response = match self.send_fetch(&request, version).await {
                Ok(response) => response,
                Err(e) => {
                    session.reset();
                    return Err(e);
                }
            };
            match response.error_code {
                0 => {
                    if full {
                        session.stale = 0;
                        session.id = response.session_id;
                        session.epoch = next_epoch(NEW_SESSION);
                        session.by_id = by_id;
                        if session.id == 0 {
                            session.held.clear();
                        } else {
                            session.hold(wants);
                        }
                    } else {
                        session.incremental += 1;
                        session.epoch = next_epoch(session.epoch);
                        session.hold(wants);
                    }
                    return Ok((response, by_id));
                }
                FETCH_SESSION_ID_NOT_FOUND
                | INVALID_FETCH_SESSION_EPOCH
                | FETCH_SESSION_TOPIC_ID_ERROR
                    if !full =>
                {
                    tracing::debug!(broker = %self.addr(), session = session.id, epoch = session.epoch, code = response.error_code, "fetch session lost; starting a new one");
                    session.reset();
                    // The broker holds none: nothing to close.
                    session.stale = 0;
                    session.restarts += 1;
                }
                code => {
                    session.reset();
                    return Err(self.broker_error::<FetchRequest>(code, "fetch"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(topic: &str, partition: i32, offset: i64) -> FetchWant<'_> {
        FetchWant {
            topic,
            topic_id: Uuid::nil(),
            partition,
            offset,
            leader_epoch: 3,
            max_bytes: 1024,
            last_fetched_epoch: -1,
        }
    }

    #[test]
    fn only_changed_partitions_are_sent_and_the_unwanted_forgotten() {
        let mut s = FetchSession::new();
        s.id = 9;
        s.hold(&[want("a", 0, 10), want("a", 1, 20), want("b", 0, 5)]);
        let (changed, forgotten) = s.delta(&[want("a", 0, 10), want("a", 1, 25), want("c", 2, 0)]);
        let changed: Vec<(&str, i32, i64)> = changed
            .iter()
            .map(|w| (w.topic, w.partition, w.offset))
            .collect();
        assert_eq!(changed, [("a", 1, 25), ("c", 2, 0)]);
        assert_eq!(forgotten.len(), 1);
        assert_eq!(forgotten[0].topic.0.as_str(), "b");
        assert_eq!(forgotten[0].partitions, [0]);

        // Another leader epoch or byte limit is a change too.
        let mut moved = want("a", 0, 10);
        moved.leader_epoch = 4;
        let mut smaller = want("a", 1, 20);
        smaller.max_bytes = 10;
        let (changed, _) = s.delta(&[moved, smaller]);
        assert_eq!(changed.len(), 2);
    }

    #[test]
    fn holding_forgets_what_was_not_named() {
        let mut s = FetchSession::new();
        s.hold(&[want("a", 0, 1), want("b", 0, 1)]);
        s.hold(&[want("a", 0, 2)]);
        assert_eq!(s.held.len(), 1);
        assert_eq!(s.held["a"][&0].offset, 2);
        let (changed, forgotten) = s.delta(&[want("a", 0, 2)]);
        assert!(changed.is_empty() && forgotten.is_empty());
    }

    #[test]
    fn a_session_given_up_is_named_once_to_be_closed() {
        let mut s = FetchSession::new();
        s.reset();
        assert_eq!(s.to_close(), 0, "no session yet: nothing to close");
        s.id = 7;
        s.reset();
        s.reset();
        assert_eq!((s.id(), s.to_close()), (0, 7), "a second reset keeps it");
    }

    #[test]
    fn epochs_wrap_past_zero_and_minus_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
