//! The seam between a fetcher and the client that fetches for it: [`FetchPath`], one
//! cluster's splits read in offset order, a batch at a time, never waiting. Everything
//! above it (positions, stops met on the way, hand-out in order, checkpoints) belongs
//! to the reader and does not change with the path; the path only adds and removes
//! splits, copies and deserializes what arrived, and says which bounded splits reached
//! their stop.
//!
//! Two paths: librdkafka's consumer (`cluster_consumer`), shared with the
//! enumerator's lookups through the source's client share, and the source's own Fetch
//! requests (`native_fetch`). The fetch thread chooses one per cluster when it opens a
//! fetcher (`fetcher::thread::open`, by `fetch.backend`). The seam knows no
//! implementation.

use std::sync::Arc;

use crate::base::config::ReadPolicy;
use crate::base::hooks::ClientHooks;
use crate::base::properties::ClientProperties;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::{DeserializeError, Deserializer};
use crate::error::SourceError;
use crate::kafka::shared::ClientShare;
use crate::record::RecordBatch;

/// Where one fetcher's records come from: one cluster's splits.
///
/// Called from the fetcher's thread only, one call at a time.
pub(crate) trait FetchPath<D: Deserializer>: Send {
    /// Starts reading `splits` at their positions (each split's start, or its
    /// restored position). Returns the ids of those that are already at their stop
    /// (nothing to read). An error leaves none of them read: the reader makes a new
    /// fetcher for all of the cluster's splits.
    fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError>;

    /// Stops reading these splits; records of theirs already taken are not handed out
    /// by the path again.
    fn remove(&mut self, ids: &[SplitId]);

    /// Stops (`paused`) or resumes fetching these splits, leaving the cluster's other
    /// splits alone (watermark alignment). Records of theirs already fetched still
    /// come out of [`poll`](Self::poll); a resumed split goes on right after the last
    /// record that did, so nothing is skipped or fetched twice.
    fn pause(&mut self, ids: &[SplitId], paused: bool);

    /// Takes what already arrived (never waits), up to `max` records, into `out` (an
    /// empty batch of this cluster), keys and values deserialized with `deserializer`.
    /// A fatal error (a position outside the log, by the read policy) comes after the
    /// records before it, at the next call; a record that fails to deserialize ends
    /// the batch.
    fn poll(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
    ) -> Result<Polled, SourceError>;

    /// Stops reading. Closing what the path holds must not block the fetch thread on
    /// a cluster that does not answer: it happens on a thread of its own, and `closed`
    /// is dropped once it is done.
    fn close(self: Box<Self>, closed: std::sync::mpsc::Sender<()>);
}

/// What a path is opened with.
pub(crate) struct Opening<'a> {
    pub cluster: Arc<str>,
    pub props: &'a ClientProperties,
    /// Woken whenever records arrive.
    pub wake: Arc<Wake>,
    pub include_headers: bool,
    pub policy: ReadPolicy,
    pub hooks: Option<Arc<dyn ClientHooks>>,
    pub clients: &'a ClientShare,
    /// The runtime the reader runs on, where the native path's tasks go.
    pub runtime: Option<tokio::runtime::Handle>,
    /// The reader holds what is fetched for a merge in time order: the native path
    /// then shares values of every size from the answers they came in, unless
    /// `fetch.share.min.bytes` is set (a copy made now would be read long after,
    /// from memory gone cold).
    pub held: bool,
}

/// A record whose value could not be deserialized: handed out as an error after the
/// records fetched before it.
#[derive(Debug)]
pub(crate) struct Failed {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// Its timestamp and fingerprint hash (it is handed out, as an error).
    pub timestamp: Option<i64>,
    pub hash: u64,
    /// Key + value bytes, for the metrics.
    pub bytes: u32,
    pub error: DeserializeError,
}

/// What one non-blocking poll found.
#[derive(Default)]
pub(crate) struct Polled {
    /// Records added to the batch.
    pub records: usize,
    /// Their keys' and values' bytes.
    pub bytes: usize,
    /// A record after those that failed to deserialize (the batch stopped there;
    /// boxed: it is rare, and keeps every answer small).
    pub failed: Option<Box<Failed>>,
    /// Splits that reached their stop offset.
    pub finished: Vec<SplitId>,
    /// `(topic, partition, high watermark)` of every assigned partition, about once a
    /// second (empty in between).
    pub high_watermarks: Vec<(Arc<str>, i32, i64)>,
    /// Splits whose log was truncated below what was fetched (KIP-320), each with
    /// the offset fetched up to: the records of the log as it is now start below
    /// what was handed out, after any left over from before (all below that
    /// offset).
    pub truncated: Vec<(SplitId, i64)>,
    /// In time order, when event time is the Kafka timestamp: the batch's times and
    /// runs, noted by the fetch thread ([`FetcherSettings::shape`](super::fetcher::FetcherSettings::shape)).
    pub shape: Option<Box<super::time_order::shape::Shape>>,
}

/// What wakes a fetcher: its thread, and a flag that says this fetcher (not another
/// of the thread's) has something to do.
pub(crate) struct Wake {
    thread: std::thread::Thread,
    ready: std::sync::atomic::AtomicBool,
}

impl Wake {
    pub fn new(thread: std::thread::Thread) -> Self {
        Self {
            thread,
            ready: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// Marks the fetcher ready and wakes its thread.
    pub fn wake(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
        self.thread.unpark();
    }

    /// Marks the fetcher ready without waking the thread (which is awake).
    pub fn again(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the fetcher was woken since the last call.
    pub fn take(&self) -> bool {
        self.ready.swap(false, std::sync::atomic::Ordering::AcqRel)
    }
}

/// Says that a split's log was truncated below its position (KIP-320, after an
/// unclean leader election), as both fetch paths do: fetched up to `from`, read on
/// from `to`, the last epoch both logs share being `epoch`.
pub(crate) fn warn_truncated(id: &SplitId, from: i64, to: i64, epoch: i32) {
    tracing::warn!(
        split = %id,
        offset = from,
        to,
        epoch,
        "log truncated below the position (an unclean leader election?): the records fetched from `to` on are no longer in the log; reading on from there"
    );
}
