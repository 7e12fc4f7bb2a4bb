//! One cluster fetched natively: the partitions a source's readers read there, fetched
//! from their leaders on the source's tokio runtime, each reader's answers queued for
//! its fetch thread.
//!
//! The readers of one cluster in one source share its fetching ([`ClusterFetches`]):
//! a task that keeps the cluster's metadata (leaders, their epochs, topic ids, broker
//! addresses) and one task per broker fetched from, each with one connection that
//! fetches all the partitions read there, for every reader, in one request at a
//! time, in a fetch session ([`FetchSession`](crate::session::FetchSession)). Each
//! reader holds a [`ClusterFetch`]: its partitions, and the queue their answers go to. A partition is read from
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
//!
//! The parts: the state the tasks and readers share (`state`), the source's fetches
//! that readers join (`fetches`), a reader's handle (`reader`), the metadata task
//! (`metadata`), the broker tasks (`broker`), one fetch of theirs (`round`) and what
//! its answer does (`answer`).

use std::sync::Arc;
use std::time::Duration;

use crate::budget::Budget;
use crate::calls::FetchSettings;
use crate::conn::ConnectOptions;
use crate::error::Listener;
use crate::fetch_response::FetchPartitionData;

mod answer;
mod broker;
mod fetches;
mod metadata;
mod reader;
mod round;
mod state;

pub use fetches::{ClusterFetches, FetchKey};
pub use reader::ClusterFetch;

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

impl Arrival {
    /// The partition and the assignment (generation) it came for.
    pub fn assignment(&self) -> (&PartKey, u64) {
        match self {
            Arrival::Records {
                key, generation, ..
            }
            | Arrival::Reset {
                key, generation, ..
            }
            | Arrival::Truncated {
                key, generation, ..
            }
            | Arrival::OutOfRange {
                key, generation, ..
            } => (key, *generation),
        }
    }
}

/// How long a broker task waits after a failure before it tries again (doubling up
/// to [`BACKOFF_MAX`]).
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;
