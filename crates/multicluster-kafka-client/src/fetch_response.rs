//! Fetch responses (v4 to v18) decoded by the native path itself: every count is
//! checked against the bytes left before anything is allocated for it (a hostile or
//! corrupt answer is an error, never a huge allocation), and each partition's record
//! batches stay a slice of the response's buffer, for [`crate::batch::Batches`].

use bytes::Bytes;
use uuid::Uuid;

use crate::cursor::{Cursor, DecodeError, Result};
use crate::wire::{PREALLOCATED, Reader};

/// The newest Fetch version this decoder reads.
pub const FETCH_RESPONSE_MAX: i16 = 18;
/// The oldest.
pub const FETCH_RESPONSE_MIN: i16 = 4;

/// A Fetch response's body.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FetchResponseData {
    /// How long the broker asks the client to hold its requests (KIP-219), ms.
    pub throttle_time_ms: i32,
    /// The response's own error (a fetch session's), 0 for none (v7+).
    pub error_code: i16,
    /// The fetch session's id, 0 for none (v7+).
    pub session_id: i32,
    /// The topics answered.
    pub topics: Vec<FetchTopicData>,
    /// Brokers named by the partitions' new-leader hints (v16+, KIP-951).
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// One topic of a Fetch response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FetchTopicData {
    /// Its name (v4 to v12).
    pub name: Option<String>,
    /// Its id (v13+), nil below.
    pub topic_id: Uuid,
    /// Its partitions answered.
    pub partitions: Vec<FetchPartitionData>,
}

/// One partition of a Fetch response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FetchPartitionData {
    /// The partition.
    pub partition: i32,
    /// Kafka's error code for it, 0 for none.
    pub error_code: i16,
    /// Its high watermark.
    pub high_watermark: i64,
    /// Its last stable offset (the end for `read_committed`), −1 if unknown.
    pub last_stable_offset: i64,
    /// Its log start offset (v5+), −1 if unknown.
    pub log_start_offset: i64,
    /// Transactions aborted within the records sent (`read_committed`), when listed.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// The replica to fetch from instead (KIP-392, v11+), −1 for none.
    pub preferred_read_replica: i32,
    /// The record batches as sent: a slice of the response (the last may be cut).
    pub records: Bytes,
    /// Where the log diverged from the fetch's epoch (truncation, v12+).
    pub diverging_epoch: Option<DivergingEpoch>,
    /// The partition's new leader, when the broker is no longer it (KIP-951, v12+).
    pub current_leader: Option<LeaderHint>,
}

/// An aborted transaction within a partition's records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// The offset of the transaction's first record.
    pub first_offset: i64,
}

/// Where a partition's log diverged from the epoch the fetch named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DivergingEpoch {
    /// The largest epoch of the leader's log at or below the fetch's.
    pub epoch: i32,
    /// Its end offset.
    pub end_offset: i64,
}

/// A partition's current leader as the broker knows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeaderHint {
    /// The leader's broker id, −1 if unknown.
    pub leader_id: i32,
    /// Its leader epoch, −1 if unknown.
    pub leader_epoch: i32,
}

/// A broker's address, as Fetch v16+ names the new leaders it points at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// The broker's id.
    pub node_id: i32,
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: i32,
    /// Its rack, if set.
    pub rack: Option<String>,
}

/// Decodes a Fetch response body (after its header) of `version`.
pub fn decode_fetch_response(body: &Bytes, version: i16) -> Result<FetchResponseData> {
    if !(FETCH_RESPONSE_MIN..=FETCH_RESPONSE_MAX).contains(&version) {
        return Err(DecodeError::Version(version));
    }
    let mut r = Reader {
        c: Cursor::new(body),
        body,
        flexible: version >= 12,
    };
    let mut out = FetchResponseData {
        throttle_time_ms: r.c.i32()?,
        ..FetchResponseData::default()
    };
    if version >= 7 {
        out.error_code = r.c.i16()?;
        out.session_id = r.c.i32()?;
    }
    let topics = r.count(TOPIC_MIN)?.unwrap_or(0);
    out.topics = Vec::with_capacity(topics.min(PREALLOCATED));
    for _ in 0..topics {
        out.topics.push(r.topic(version)?);
    }
    r.tagged(|tag, c| {
        if tag == 0 && version >= 16 {
            let mut n = Reader {
                c,
                body,
                flexible: true,
            };
            let count = n.count(ENDPOINT_MIN)?.unwrap_or(0);
            out.node_endpoints = Vec::with_capacity(count.min(PREALLOCATED));
            for _ in 0..count {
                let node_id = n.c.i32()?;
                let host = n.string()?.ok_or(DecodeError::Length(-1))?;
                let port = n.c.i32()?;
                let rack = n.string()?;
                n.tagged(|_, _| Ok(()))?;
                out.node_endpoints.push(NodeEndpoint {
                    node_id,
                    host,
                    port,
                    rack,
                });
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// The fewest bytes an element takes on the wire: a topic (a compact name or an id,
/// an empty array, tagged fields), a partition (v4: 4 + 2 + 8 + 8 + 4 + 4), an
/// aborted transaction, a node endpoint.
const TOPIC_MIN: usize = 3;
const PARTITION_MIN: usize = 28;
const ABORTED_MIN: usize = 16;
const ENDPOINT_MIN: usize = 11;

impl<'a> Reader<'a> {
    fn topic(&mut self, version: i16) -> Result<FetchTopicData> {
        let mut t = FetchTopicData::default();
        if version <= 12 {
            t.name = Some(self.string()?.ok_or(DecodeError::Length(-1))?);
        } else {
            t.topic_id = Uuid::from_bytes(self.c.take(16)?.try_into().expect("16 bytes"));
        }
        let partitions = self.count(PARTITION_MIN)?.unwrap_or(0);
        t.partitions = Vec::with_capacity(partitions.min(PREALLOCATED));
        for _ in 0..partitions {
            t.partitions.push(self.partition(version)?);
        }
        self.tagged(|_, _| Ok(()))?;
        Ok(t)
    }

    fn partition(&mut self, version: i16) -> Result<FetchPartitionData> {
        let mut p = FetchPartitionData {
            partition: self.c.i32()?,
            error_code: self.c.i16()?,
            high_watermark: self.c.i64()?,
            last_stable_offset: self.c.i64()?,
            log_start_offset: -1,
            preferred_read_replica: -1,
            ..FetchPartitionData::default()
        };
        if version >= 5 {
            p.log_start_offset = self.c.i64()?;
        }
        if let Some(n) = self.count(ABORTED_MIN)? {
            let mut aborted = Vec::with_capacity(n.min(PREALLOCATED));
            for _ in 0..n {
                aborted.push(AbortedTransaction {
                    producer_id: self.c.i64()?,
                    first_offset: self.c.i64()?,
                });
                self.tagged(|_, _| Ok(()))?;
            }
            p.aborted_transactions = Some(aborted);
        }
        if version >= 11 {
            p.preferred_read_replica = self.c.i32()?;
        }
        p.records = self.bytes()?;
        let (mut diverging, mut leader) = (None, None);
        self.tagged(|tag, mut c| {
            match tag {
                0 => {
                    diverging = Some(DivergingEpoch {
                        epoch: c.i32()?,
                        end_offset: c.i64()?,
                    })
                }
                1 => {
                    leader = Some(LeaderHint {
                        leader_id: c.i32()?,
                        leader_epoch: c.i32()?,
                    })
                }
                _ => {}
            }
            Ok(())
        })?;
        p.diverging_epoch = diverging;
        p.current_leader = leader;
        Ok(p)
    }
}
