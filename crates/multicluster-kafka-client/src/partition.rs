//! One partition read forward through its fetch answers: what the native fetch path
//! keeps per partition between fetches. It hands out each data record once, in
//! offset order, from the position on; skips control batches, records below the
//! position (a fetch answers with whole batches) and, for `read_committed`, the
//! records of aborted transactions; moves the position over all of them; and turns
//! the partition's error codes into what the path must do next.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use bytes::Bytes;

use crate::batch::{Batch, Batches, Record};
use crate::cursor::{Cursor, DecodeError};
use crate::fetch_response::{DivergingEpoch, FetchPartitionData, LeaderHint};

/// Kafka's error codes a fetch or lookup answer may carry for a partition, as far as
/// the path acts on them.
pub mod code {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const REPLICA_NOT_AVAILABLE: i16 = 9;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const OFFSET_NOT_AVAILABLE: i16 = 78;
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const INCONSISTENT_TOPIC_ID: i16 = 103;
}

/// Why a partition's answer gave no records, and what comes next.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionIssue {
    /// The position is outside the log: the source's read policy decides.
    #[error("offset {offset} is out of range")]
    OutOfRange {
        /// The position fetched.
        offset: i64,
    },
    /// The broker is not (or no longer, or not yet) the partition's leader, or its
    /// epoch differs: refresh the metadata (the hint, when given, names the new
    /// leader) and fetch again from the same position.
    #[error("leadership moved or unknown (error code {code})")]
    LeaderMoved {
        /// Kafka's error code.
        code: i16,
        /// The new leader, when the broker said (KIP-951).
        hint: Option<LeaderHint>,
    },
    /// The log diverged from the epoch fetched with (an unclean election truncated
    /// it): the position must be validated before reading on (KIP-320).
    #[error("the log diverged at epoch {} (its end offset {})", .0.epoch, .0.end_offset)]
    Diverged(DivergingEpoch),
    /// The topic is gone or unknown here (it may have been deleted, or metadata is
    /// stale): look it up again.
    #[error("unknown topic or partition (error code {code})")]
    Unknown {
        /// Kafka's error code.
        code: i16,
    },
    /// Any other error code: the partition cannot be read.
    #[error("error code {code}")]
    Failed {
        /// Kafka's error code.
        code: i16,
    },
    /// The records could not be decoded (corrupt, a bad CRC with `check.crcs`, or
    /// more than the bound once decompressed).
    #[error("batch at offset {base_offset}: {error}")]
    Corrupt {
        /// The batch's base offset.
        base_offset: i64,
        /// What was wrong.
        error: DecodeError,
    },
}

/// How a partition is read.
#[derive(Clone, Copy, Debug)]
pub struct PartitionOptions {
    /// Skip aborted transactions' records (`isolation.level=read_committed`).
    pub read_committed: bool,
    /// Check each batch's CRC-32C (`check.crcs=true`).
    pub check_crcs: bool,
    /// The most bytes one batch may decompress to.
    pub max_decompressed: usize,
}

impl Default for PartitionOptions {
    fn default() -> Self {
        Self {
            read_committed: false,
            check_crcs: false,
            max_decompressed: 64 << 20,
        }
    }
}

/// A partition's reading position and what it keeps between fetches.
#[derive(Debug)]
pub struct PartitionReader {
    next_offset: i64,
    options: PartitionOptions,
    /// Decompressed records of the batch being handed out.
    scratch: Vec<u8>,
}

impl PartitionReader {
    /// Reads from `next_offset` on.
    pub fn new(next_offset: i64, options: PartitionOptions) -> Self {
        Self {
            next_offset,
            options,
            scratch: Vec::new(),
        }
    }

    /// The offset the next fetch asks for: after everything handed out or skipped.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Moves the position (a seek, or the read policy's answer to an out-of-range).
    pub fn seek(&mut self, offset: i64) {
        self.next_offset = offset;
    }

    /// Hands each data record of a fetch answer at or after the position to `each`,
    /// in offset order, and moves the position past every whole batch. Returns how
    /// many records were handed out. An answer with an error code hands out nothing;
    /// a corrupt batch ends the answer there (the records before it were handed out
    /// and the position is at the corrupt batch).
    pub fn absorb(
        &mut self,
        answer: &FetchPartitionData,
        each: impl FnMut(&Record<'_>),
    ) -> Result<usize, PartitionIssue> {
        self.absorb_up_to(answer, usize::MAX, each)
            .map(|(handed, _)| handed)
    }

    /// [`absorb`](Self::absorb), stopping before the next record batch once `limit`
    /// records were handed out (a batch is never handed out in part). Returns how
    /// many were, and whether it stopped before the end: the same answer absorbed
    /// again then goes on from there, the batches handed out being below the
    /// position.
    pub fn absorb_up_to(
        &mut self,
        answer: &FetchPartitionData,
        limit: usize,
        mut each: impl FnMut(&Record<'_>),
    ) -> Result<(usize, bool), PartitionIssue> {
        self.absorb_in(answer, limit, false, |r, _, _| each(r))
    }

    /// [`absorb_up_to`](Self::absorb_up_to), handing `each` with every record the
    /// buffer its bytes are in, so that it may keep a part without copying it
    /// ([`Bytes::slice_ref`]): the answer's records, or a compressed batch's records
    /// decompressed into a buffer of their own (the reader's scratch buffer is then
    /// taken back only when nothing kept a part of it); and the leader epoch of its
    /// batch (what a later fetch from after it validates the position with, KIP-320).
    pub fn absorb_shared(
        &mut self,
        answer: &FetchPartitionData,
        limit: usize,
        each: impl FnMut(&Record<'_>, &Bytes, i32),
    ) -> Result<(usize, bool), PartitionIssue> {
        self.absorb_in(answer, limit, true, each)
    }

    fn absorb_in(
        &mut self,
        answer: &FetchPartitionData,
        limit: usize,
        shared: bool,
        mut each: impl FnMut(&Record<'_>, &Bytes, i32),
    ) -> Result<(usize, bool), PartitionIssue> {
        issue(answer, self.next_offset)?;
        let mut aborted = Aborted::new(
            self.options
                .read_committed
                .then_some(answer.aborted_transactions.as_deref())
                .flatten()
                .unwrap_or_default(),
        );
        let mut handed = 0;
        for batch in Batches::new(&answer.records) {
            let batch = batch.map_err(|error| PartitionIssue::Corrupt {
                base_offset: self.next_offset,
                error,
            })?;
            let corrupt = |error| PartitionIssue::Corrupt {
                base_offset: batch.base_offset,
                error,
            };
            if batch.next_offset() <= self.next_offset {
                // Below the position, yet its markers end aborted transactions
                // listed again (an answer absorbed again after a stop).
                if self.options.read_committed {
                    aborted.skips(&batch).map_err(corrupt)?;
                }
                continue;
            }
            if handed >= limit {
                return Ok((handed, true));
            }
            if self.options.check_crcs {
                batch.check_crc().map_err(corrupt)?;
            }
            // The aborted transactions see every batch, markers included.
            let aborted_skip =
                self.options.read_committed && aborted.skips(&batch).map_err(corrupt)?;
            let skip = batch.is_control() || aborted_skip;
            if !skip {
                // To be shared, a compressed batch is decompressed into a buffer that
                // can outlive the reader's scratch.
                let decompressed = if shared && batch.compression() != 0 {
                    let mut scratch = std::mem::take(&mut self.scratch);
                    batch
                        .records_in(&mut scratch, self.options.max_decompressed)
                        .map_err(corrupt)?;
                    // A value kept keeps the whole buffer: not the room a larger
                    // batch before it needed.
                    if scratch.capacity() > 2 * scratch.len().max(4096) {
                        scratch.shrink_to_fit();
                    }
                    Some(Bytes::from(scratch))
                } else {
                    None
                };
                // Uncompressed, the records are the answer's (compressed, without
                // `shared`, they are the scratch buffer's, and `each` ignores the
                // buffer it is handed). One loop for all: a second copy of the
                // record decoder inlined made the compiler leave it out of line.
                let (records, buffer) = match &decompressed {
                    Some(buffer) => (batch.records_of(buffer), buffer),
                    None => (
                        batch
                            .records_in(&mut self.scratch, self.options.max_decompressed)
                            .map_err(corrupt)?,
                        &answer.records,
                    ),
                };
                for r in records {
                    let r = r.map_err(corrupt)?;
                    if r.offset >= self.next_offset {
                        each(&r, buffer, batch.partition_leader_epoch);
                        handed += 1;
                    }
                }
                // Unless `each` kept a part of it, the buffer is decompressed into
                // again.
                if let Some(Ok(buffer)) = decompressed.map(Bytes::try_into_mut) {
                    self.scratch = buffer.into();
                }
            }
            self.next_offset = batch.next_offset();
        }
        Ok((handed, false))
    }
}

/// The partition's error code as what to do.
pub fn issue(answer: &FetchPartitionData, offset: i64) -> Result<(), PartitionIssue> {
    if let Some(d) = answer.diverging_epoch {
        return Err(PartitionIssue::Diverged(d));
    }
    match answer.error_code {
        code::NONE => Ok(()),
        code::OFFSET_OUT_OF_RANGE => Err(PartitionIssue::OutOfRange { offset }),
        code @ (code::NOT_LEADER_OR_FOLLOWER
        | code::LEADER_NOT_AVAILABLE
        | code::FENCED_LEADER_EPOCH
        | code::UNKNOWN_LEADER_EPOCH
        | code::KAFKA_STORAGE_ERROR
        | code::OFFSET_NOT_AVAILABLE) => Err(PartitionIssue::LeaderMoved {
            code,
            hint: answer.current_leader.filter(|l| l.leader_id >= 0),
        }),
        code @ (code::UNKNOWN_TOPIC_OR_PARTITION
        | code::UNKNOWN_TOPIC_ID
        | code::INCONSISTENT_TOPIC_ID) => Err(PartitionIssue::Unknown { code }),
        code => Err(PartitionIssue::Failed { code }),
    }
}

/// `read_committed`: the aborted transactions an answer listed, taken in order of
/// their first offsets as the batches reach them; a producer's records are skipped
/// from its aborted transaction's first offset to its abort marker.
struct Aborted {
    pending: BinaryHeap<Reverse<(i64, i64)>>,
    producers: BTreeSet<i64>,
}

impl Aborted {
    fn new(listed: &[crate::fetch_response::AbortedTransaction]) -> Self {
        Self {
            pending: listed
                .iter()
                .map(|a| Reverse((a.first_offset, a.producer_id)))
                .collect(),
            producers: BTreeSet::new(),
        }
    }

    /// Whether `batch` is skipped: a data batch of an aborted transaction, or an abort
    /// marker (which also ends that producer's aborted transaction).
    fn skips(&mut self, batch: &Batch<'_>) -> Result<bool, DecodeError> {
        if batch.producer_id < 0 {
            return Ok(false);
        }
        let last = batch.next_offset() - 1;
        while let Some(Reverse((first, producer))) = self.pending.peek().copied() {
            if first > last {
                break;
            }
            self.pending.pop();
            self.producers.insert(producer);
        }
        if batch.is_control() {
            if abort_marker(batch)? {
                self.producers.remove(&batch.producer_id);
            }
            return Ok(true);
        }
        Ok(batch.is_transactional() && self.producers.contains(&batch.producer_id))
    }
}

/// Whether a control batch is an abort marker: its record's key is (version, type)
/// with type 0 for ABORT, 1 for COMMIT.
fn abort_marker(batch: &Batch<'_>) -> Result<bool, DecodeError> {
    let mut scratch = Vec::new();
    let Some(first) = batch.records_in(&mut scratch, 1 << 16)?.next() else {
        return Ok(false);
    };
    let key = first?.key.ok_or(DecodeError::Length(-1))?;
    let mut c = Cursor::new(key);
    let _version = c.i16()?;
    Ok(c.i16()? == 0)
}
