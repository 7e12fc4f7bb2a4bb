//! A Fetch v4 codec: the request as sent and the response parsed in place, and one
//! round trip over a plain socket.

use std::io::{Read, Write};
use std::net::TcpStream;

use multicluster_kafka_client::{Cursor, DecodeError};

type Result<T> = std::result::Result<T, DecodeError>;

/// The client id of the hand-written requests.
pub(super) const CLIENT_ID: &str = "mck-bench-decode";

/// A Fetch request, version 4: the oldest Kafka 4.x accepts (`FetchRequest.json`
/// in kafka-clients 4.1.1: `"validVersions": "4-18"`, `"flexibleVersions": "12+"`, so
/// v4 is not flexible and has no fetch session fields, which came in v7).
#[derive(Clone, Debug)]
pub struct FetchV4<'a> {
    pub correlation_id: i32,
    pub topic: &'a str,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
}

impl FetchV4<'_> {
    /// The request as sent: its size (i32), then request header v1
    /// (`RequestHeader.json`: api key i16, api version i16, correlation id i32, client
    /// id nullable string, header v1 for non-flexible requests), then the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + self.topic.len());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&1i16.to_be_bytes()); // api key: Fetch
        b.extend_from_slice(&4i16.to_be_bytes()); // api version
        b.extend_from_slice(&self.correlation_id.to_be_bytes());
        put_string(&mut b, CLIENT_ID);
        // Body, fields of FetchRequest v4 in schema order.
        b.extend_from_slice(&(-1i32).to_be_bytes()); // ReplicaId (v0-14): a consumer
        b.extend_from_slice(&self.max_wait_ms.to_be_bytes());
        b.extend_from_slice(&self.min_bytes.to_be_bytes());
        b.extend_from_slice(&self.max_bytes.to_be_bytes()); // MaxBytes (v3+)
        b.push(self.isolation_level as u8); // IsolationLevel (v4+)
        b.extend_from_slice(&1i32.to_be_bytes()); // Topics: one
        put_string(&mut b, self.topic); // Topic (v0-12: by name)
        b.extend_from_slice(&1i32.to_be_bytes()); // Partitions: one
        b.extend_from_slice(&self.partition.to_be_bytes());
        b.extend_from_slice(&self.fetch_offset.to_be_bytes());
        b.extend_from_slice(&self.partition_max_bytes.to_be_bytes());
        let size = (b.len() - 4) as i32;
        b[..4].copy_from_slice(&size.to_be_bytes());
        b
    }
}

/// A non-nullable string: i16 length, bytes.
pub(super) fn put_string(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as i16).to_be_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// A Fetch response, version 4, borrowed from its bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct FetchResponse<'a> {
    pub correlation_id: i32,
    pub throttle_time_ms: i32,
    pub topics: Vec<FetchTopic<'a>>,
}

/// One topic of a Fetch response.
#[derive(Debug, PartialEq, Eq)]
pub struct FetchTopic<'a> {
    pub name: &'a str,
    pub partitions: Vec<FetchPartition<'a>>,
}

/// One partition of a Fetch response.
#[derive(Debug, PartialEq, Eq)]
pub struct FetchPartition<'a> {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// (producer id, first offset) of the aborted transactions, null unless
    /// read_committed.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// The record batches, null when there are none.
    pub records: Option<&'a [u8]>,
}

/// Parses a Fetch v4 response (after its i32 size): response header v0 (correlation id;
/// `ResponseHeader.json`, v0 for non-flexible responses), then `FetchResponse.json`'s
/// v4 fields: ThrottleTimeMs (v1+), Responses [Topic (v0-12), Partitions
/// [PartitionIndex, ErrorCode, HighWatermark, LastStableOffset (v4+),
/// AbortedTransactions (v4+, nullable) [ProducerId, FirstOffset], Records (nullable)]].
/// ErrorCode and SessionId (v7+), LogStartOffset (v5+) and PreferredReadReplica (v11+)
/// are not in v4.
pub fn parse_fetch_v4(frame: &[u8]) -> Result<FetchResponse<'_>> {
    let mut c = Cursor::new(frame);
    let correlation_id = c.i32()?;
    let throttle_time_ms = c.i32()?;
    let count = |n: i32| usize::try_from(n).map_err(|_| DecodeError::Length(n.into()));
    let topic_count = count(c.i32()?)?;
    let mut topics = Vec::with_capacity(topic_count.min(1024));
    for _ in 0..topic_count {
        let len = c.i16()?;
        let name =
            std::str::from_utf8(c.take(count(len.into())?)?).map_err(|_| DecodeError::Utf8)?;
        let partition_count = count(c.i32()?)?;
        let mut partitions = Vec::with_capacity(partition_count.min(1024));
        for _ in 0..partition_count {
            let partition = c.i32()?;
            let error_code = c.i16()?;
            let high_watermark = c.i64()?;
            let last_stable_offset = c.i64()?;
            let aborted_transactions = match c.i32()? {
                -1 => None,
                n => {
                    let n = count(n)?;
                    let mut v = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        v.push((c.i64()?, c.i64()?));
                    }
                    Some(v)
                }
            };
            let records = match c.i32()? {
                -1 => None,
                n => Some(c.take(count(n)?)?),
            };
            partitions.push(FetchPartition {
                partition,
                error_code,
                high_watermark,
                last_stable_offset,
                aborted_transactions,
                records,
            });
        }
        topics.push(FetchTopic { name, partitions });
    }
    Ok(FetchResponse {
        correlation_id,
        throttle_time_ms,
        topics,
    })
}

/// Sends one request and reads its response frame (without the size) into `frame`,
/// which is cleared first (so a reused buffer is not allocated again).
pub(super) fn round_trip(
    stream: &mut TcpStream,
    request: &[u8],
    frame: &mut Vec<u8>,
) -> std::io::Result<()> {
    stream.write_all(request)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let size = u32::from_be_bytes(size) as usize;
    frame.clear();
    frame.reserve(size);
    (&mut *stream).take(size as u64).read_to_end(frame)?;
    if frame.len() != size {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}
