//! `mck-bench decode`: what decoding Kafka record batches in place costs per record,
//! beside librdkafka's whole read path, on the same topic in the same run.
//!
//! One single-broker cluster from the test kit; for each value size one topic of one
//! partition, pre-filled uncompressed with the bench's usual records (8 B keys). Then,
//! in rounds:
//!
//! - **capture**: hand-written Fetch v4 requests over a plain [`TcpStream`] read the
//!   whole partition from offset 0, keeping every response's raw bytes in memory (the
//!   "captured Fetch responses"), a new buffer per response;
//! - the **native path** end to end: the same requests reading every response into one
//!   reused buffer, once without and once with each response decoded as it arrives and
//!   the bench's per-record work done (the socket read a native path would pay, and its
//!   whole cost while the response is still in cache);
//! - **decode** the captured responses in place ([`parse_fetch_v4`], [`Batches`],
//!   [`Records`]): the response, its record batches (magic 2) and their records,
//!   yielding borrowed key and value slices with offset and timestamp, four ways: no
//!   per-record work beyond the decode, one `Bytes` per key and value
//!   ([`Bytes::slice_ref`], what a library owning the buffer would hand out), the
//!   bench's usual per-record work (timestamp read, key and value copied into one
//!   reused buffer), and that with each batch's CRC-32C checked;
//! - the **bare librdkafka loop** (`throughput`'s `rd_kafka_consume_batch_queue` side)
//!   reads the same topic with the same per-record work; its CPU is the whole process's
//!   (librdkafka's threads included).
//!
//! Everything is CPU time per record: the decode, the capture and the native path run
//! on this thread (`CLOCK_THREAD_CPUTIME_ID`, user + system), librdkafka's side is the
//! process's (`getrusage`). The order of the measures rotates from round to round;
//! medians over the rounds. The design note built on these figures is
//! `docs/native-fetch.md`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use bytes::Bytes;
use mck_bench::peers::{self, PeerCluster};
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use super::median;
use super::scale::{command_line, header};
use super::throughput::{Peer, plain, touch};
use crate::cpu::process_cpu;

/// Options of `mck-bench decode`.
#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// Value sizes in bytes, one topic each.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1024,10240")]
    sizes: Vec<usize>,
    /// Records per size; by default `--bytes` / size within `--min-records` and
    /// `--max-records`.
    #[arg(long)]
    records: Option<usize>,
    /// Value bytes per size when `--records` is not given.
    #[arg(long, default_value_t = 200_000_000)]
    bytes: usize,
    /// Most records at a size when `--records` is not given.
    #[arg(long, default_value_t = 1_000_000)]
    max_records: usize,
    /// Fewest records at a size when `--records` is not given.
    #[arg(long, default_value_t = 10_000)]
    min_records: usize,
    /// Rounds (each captures once, decodes each way and runs the librdkafka loop once).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// CPU ms each decode variant runs per round, in whole passes over the capture.
    #[arg(long, default_value_t = 200)]
    decode_ms: u64,
    /// The Fetch requests' per-partition byte limit (librdkafka's
    /// `max.partition.fetch.bytes` default).
    #[arg(long, default_value_t = 1_048_576)]
    partition_max_bytes: i32,
}

/// The Fetch requests' whole-response byte limit (librdkafka's `fetch.max.bytes`
/// default).
const FETCH_MAX_BYTES: i32 = 52_428_800;

/// The client id of the hand-written requests.
const CLIENT_ID: &str = "mck-bench-decode";

// ---------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------

/// Why bytes could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The data ended inside a field.
    #[error("truncated")]
    Truncated,
    /// A varint longer than its type allows, or with bits beyond it.
    #[error("malformed varint")]
    Varint,
    /// A length or count out of range.
    #[error("bad length {0}")]
    Length(i64),
    /// A record batch of another format than magic 2.
    #[error("record batch magic {0}, only 2 is decoded")]
    Magic(i8),
    /// A compressed batch (codec id from the attributes), not decoded here.
    #[error("compressed batch (codec {0})")]
    Compressed(u8),
    /// A string that is not UTF-8.
    #[error("string not UTF-8")]
    Utf8,
    /// A batch held fewer records than its count.
    #[error("batch ends before its record count")]
    Count,
}

type Result<T> = std::result::Result<T, DecodeError>;

/// A reading position in borrowed bytes; every read checks bounds.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn i8(&mut self) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned LEB128 varint of at most `max` bytes whose last byte may carry at
    /// most `last_bits` bits (5 and 4 for 32 bits, 10 and 1 for 64).
    #[inline]
    fn uvarint(&mut self, max: usize, last_bits: u32) -> Result<u64> {
        // The usual case in record batches: one byte.
        let &b = self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        if b < 0x80 {
            return Ok(u64::from(b));
        }
        let mut v = u64::from(b & 0x7f);
        for i in 1..max {
            let &b = self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
            self.pos += 1;
            if i == max - 1 && u32::from(b) >> last_bits != 0 {
                return Err(DecodeError::Varint);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError::Varint)
    }

    /// A zigzag varint (Kafka's `varint`, 32 bits).
    #[inline]
    fn varint(&mut self) -> Result<i32> {
        let u = self.uvarint(5, 4)? as u32;
        Ok((u >> 1) as i32 ^ -((u & 1) as i32))
    }

    /// A zigzag varlong (Kafka's `varlong`, 64 bits).
    #[inline]
    fn varlong(&mut self) -> Result<i64> {
        let u = self.uvarint(10, 1)?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }

    /// Bytes whose length is a varint, -1 for null.
    #[inline]
    fn varint_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Length(n.into())),
            n => self.take(n as usize).map(Some),
        }
    }

    fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
}

/// Bytes of a batch before its `length` field ends: baseOffset i64, batchLength i32.
const LOG_OVERHEAD: usize = 12;
/// Where the CRC-32C's coverage starts in a batch: after baseOffset, batchLength,
/// partitionLeaderEpoch, magic and crc (8 + 4 + 4 + 1 + 4).
const CRC_START: usize = 21;
/// A batch's header, up to its records (61 bytes for magic 2).
const BATCH_HEADER: usize = CRC_START + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;

/// One record batch (magic 2), borrowed from the response.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
    /// From the attributes to the batch's end: what the CRC covers.
    checked: &'a [u8],
    /// The records (compressed when the attributes name a codec).
    records: &'a [u8],
}

impl<'a> Batch<'a> {
    /// The codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> u8 {
        (self.attributes & 0x07) as u8
    }

    /// Whether the timestamps are the broker's log append time (then every record's
    /// timestamp is the batch's max timestamp).
    pub fn log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    /// Whether this is a control batch (a transaction marker): no application records.
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    /// The offset after the batch's last record.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta) + 1
    }

    /// Whether the CRC-32C over attributes … end matches the stored one.
    pub fn crc_ok(&self) -> bool {
        crc32c::crc32c(self.checked) == self.crc
    }

    /// The records, decoded in place; a compressed batch is an error here.
    pub fn records(&self) -> Result<Records<'a>> {
        match self.compression() {
            0 => Ok(Records {
                cur: Cursor::new(self.records),
                left: self.record_count,
                base_offset: self.base_offset,
                base_timestamp: self.base_timestamp,
                append_time: self.log_append_time().then_some(self.max_timestamp),
            }),
            codec => Err(DecodeError::Compressed(codec)),
        }
    }
}

/// The record batches of a partition's `records` field, in order. A batch cut off at
/// the end (the broker stops at the fetch's byte limit, possibly inside a batch) ends
/// the iteration cleanly, as a consumer skips it to fetch it again from its start;
/// [`Batches::partial`] tells how many bytes were left over.
pub struct Batches<'a> {
    rest: &'a [u8],
}

impl<'a> Batches<'a> {
    pub fn new(records: &'a [u8]) -> Self {
        Self { rest: records }
    }

    /// Bytes left after the last whole batch (a partial batch), once iterated.
    pub fn partial(&self) -> usize {
        self.rest.len()
    }

    fn batch(buf: &'a [u8]) -> Result<Batch<'a>> {
        let mut c = Cursor::new(buf);
        let base_offset = c.i64()?;
        let _length = c.i32()?;
        let partition_leader_epoch = c.i32()?;
        let magic = c.i8()?;
        if magic != 2 {
            return Err(DecodeError::Magic(magic));
        }
        let crc = c.u32()?;
        debug_assert_eq!(c.pos, CRC_START);
        let batch = Batch {
            base_offset,
            partition_leader_epoch,
            crc,
            attributes: c.i16()?,
            last_offset_delta: c.i32()?,
            base_timestamp: c.i64()?,
            max_timestamp: c.i64()?,
            producer_id: c.i64()?,
            producer_epoch: c.i16()?,
            base_sequence: c.i32()?,
            record_count: c.i32()?,
            checked: &buf[CRC_START..],
            records: c.rest(),
        };
        if batch.record_count < 0 {
            return Err(DecodeError::Length(batch.record_count.into()));
        }
        Ok(batch)
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<Batch<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < LOG_OVERHEAD {
            return None;
        }
        let length = i32::from_be_bytes(self.rest[8..12].try_into().expect("4 bytes"));
        if length < (BATCH_HEADER - LOG_OVERHEAD) as i32 {
            self.rest = &[];
            return Some(Err(DecodeError::Length(length.into())));
        }
        let size = LOG_OVERHEAD + length as usize;
        if self.rest.len() < size {
            // Cut off by the fetch's byte limit: not an error, the rest comes with the
            // next fetch from this batch's base offset.
            return None;
        }
        let (buf, rest) = self.rest.split_at(size);
        let batch = Self::batch(buf);
        self.rest = if batch.is_ok() { rest } else { &[] };
        Some(batch)
    }
}

/// One record, its key, value and headers borrowed from the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    header_count: i32,
    headers: &'a [u8],
}

impl<'a> Record<'a> {
    /// The headers, decoded when asked for.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            cur: Cursor::new(self.headers),
            left: self.header_count,
        }
    }
}

/// The headers of a record: (key, value or null).
pub struct Headers<'a> {
    cur: Cursor<'a>,
    left: i32,
}

impl<'a> Iterator for Headers<'a> {
    type Item = Result<(&'a [u8], Option<&'a [u8]>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left <= 0 {
            return None;
        }
        self.left -= 1;
        let header = (|| {
            let key = self.cur.varint_bytes()?.ok_or(DecodeError::Length(-1))?;
            Ok((key, self.cur.varint_bytes()?))
        })();
        if header.is_err() {
            self.left = 0;
        }
        Some(header)
    }
}

/// The records of an uncompressed batch.
pub struct Records<'a> {
    cur: Cursor<'a>,
    left: i32,
    base_offset: i64,
    base_timestamp: i64,
    /// The batch's max timestamp when it is in log append time.
    append_time: Option<i64>,
}

impl<'a> Records<'a> {
    #[inline]
    fn record(&mut self) -> Result<Record<'a>> {
        let length = self.cur.varint()?;
        if length < 0 {
            return Err(DecodeError::Length(length.into()));
        }
        let mut c = Cursor::new(self.cur.take(length as usize)?);
        let _attributes = c.i8()?;
        let timestamp_delta = c.varlong()?;
        let offset_delta = c.varint()?;
        let key = c.varint_bytes()?;
        let value = c.varint_bytes()?;
        let header_count = c.varint()?;
        if header_count < 0 {
            return Err(DecodeError::Length(header_count.into()));
        }
        Ok(Record {
            offset: self.base_offset + i64::from(offset_delta),
            timestamp: self
                .append_time
                .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta)),
            key,
            value,
            header_count,
            // The rest of the record: its headers are not walked unless asked for.
            headers: c.rest(),
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left <= 0 {
            return None;
        }
        self.left -= 1;
        let r = self.record().map_err(|e| match e {
            DecodeError::Truncated => DecodeError::Count,
            e => e,
        });
        if r.is_err() {
            self.left = 0;
        }
        Some(r)
    }
}

// ---------------------------------------------------------------------------------
// Fetch v4
// ---------------------------------------------------------------------------------

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
fn put_string(b: &mut Vec<u8>, s: &str) {
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
fn round_trip(stream: &mut TcpStream, request: &[u8], frame: &mut Vec<u8>) -> std::io::Result<()> {
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

/// How [`fetch_all`] treats the response buffers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buffers {
    /// A new buffer per response, kept and returned (the capture).
    Keep,
    /// One buffer, read into again for every response.
    Reuse,
}

/// Fetches partition 0 of `topic` from offset 0 up to `end` (its high watermark) with
/// Fetch v4 requests on one connection, each from the offset after the last whole batch
/// of the previous response, and hands every response frame to `f`; returns the frames
/// when `buffers` is [`Buffers::Keep`].
fn fetch_all(
    addr: &str,
    topic: &str,
    end: i64,
    partition_max_bytes: i32,
    buffers: Buffers,
    mut f: impl FnMut(&[u8]),
) -> Vec<Bytes> {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let mut responses = Vec::new();
    let mut frame = Vec::new();
    let mut offset = 0;
    let mut correlation_id = 0;
    while offset < end {
        correlation_id += 1;
        let request = FetchV4 {
            correlation_id,
            topic,
            partition: 0,
            fetch_offset: offset,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: FETCH_MAX_BYTES,
            partition_max_bytes,
            isolation_level: 0,
        }
        .encode();
        round_trip(&mut stream, &request, &mut frame).expect("a Fetch response");
        let response = parse_fetch_v4(&frame).expect("a Fetch v4 response");
        assert_eq!(response.correlation_id, correlation_id, "correlation id");
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch error at offset {offset}");
        let mut next = offset;
        for batch in Batches::new(p.records.unwrap_or_default()) {
            next = batch.expect("a record batch").next_offset();
        }
        assert!(next > offset, "no whole batch at offset {offset}");
        offset = next;
        f(&frame);
        if buffers == Buffers::Keep {
            responses.push(Bytes::from(std::mem::take(&mut frame)));
        }
    }
    responses
}

/// Calls `f` with each data record of one response (control batches skipped, as a
/// consumer does); with `crc`, checks every batch's CRC-32C first. Returns the records
/// seen.
#[inline(always)]
fn walk_frame(frame: &[u8], crc: bool, mut f: impl FnMut(&Record<'_>)) -> u64 {
    let mut n = 0;
    let response = parse_fetch_v4(frame).expect("a Fetch v4 response");
    for topic in &response.topics {
        for p in &topic.partitions {
            for batch in Batches::new(p.records.unwrap_or_default()) {
                let batch = batch.expect("a record batch");
                assert!(
                    !crc || batch.crc_ok(),
                    "CRC-32C of batch {}",
                    batch.base_offset
                );
                if batch.is_control() {
                    continue;
                }
                for r in batch.records().expect("uncompressed") {
                    f(&r.expect("a record"));
                    n += 1;
                }
            }
        }
    }
    n
}

/// [`walk_frame`] over every captured response, `f` also given the response.
#[inline(always)]
fn walk(responses: &[Bytes], crc: bool, mut f: impl FnMut(&Bytes, &Record<'_>)) -> u64 {
    responses
        .iter()
        .map(|frame| walk_frame(frame, crc, |r| f(frame, r)))
        .sum()
}

/// The native path end to end with one reused buffer: fetch every response and, with
/// `decode`, decode it at once and do the bench's per-record work. Returns the records
/// decoded.
fn native_pass(
    addr: &str,
    topic: &str,
    end: i64,
    partition_max_bytes: i32,
    decode: bool,
    scratch: &mut Vec<u8>,
) -> u64 {
    let mut n = 0;
    fetch_all(
        addr,
        topic,
        end,
        partition_max_bytes,
        Buffers::Reuse,
        |frame| {
            if decode {
                n += walk_frame(frame, false, |r| {
                    std::hint::black_box(touch(
                        scratch,
                        r.key,
                        r.value.unwrap_or_default(),
                        Some(r.timestamp),
                    ));
                });
            }
        },
    );
    n
}

/// The decode variants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Decode only: offset, timestamp, key and value slices, nothing else.
    Bare,
    /// One `Bytes` for the key and one for the value, sharing the response buffer.
    Owned,
    /// The bench's per-record work: timestamp read, key and value copied.
    Copy,
    /// CRC-32C checked per batch, then the same work as `Copy`.
    CrcCopy,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Bare,
        Variant::Owned,
        Variant::Copy,
        Variant::CrcCopy,
    ];
}

/// One pass of a variant over the capture; returns the records seen.
fn pass(responses: &[Bytes], variant: Variant, scratch: &mut Vec<u8>) -> u64 {
    use std::hint::black_box;
    match variant {
        Variant::Bare => walk(responses, false, |_, r| {
            black_box((r.offset, r.timestamp, r.key, r.value));
        }),
        Variant::Owned => walk(responses, false, |frame, r| {
            let key = r.key.map(|k| frame.slice_ref(k));
            let value = r.value.map(|v| frame.slice_ref(v));
            black_box((r.offset, r.timestamp, key, value));
        }),
        Variant::Copy | Variant::CrcCopy => walk(responses, variant == Variant::CrcCopy, |_, r| {
            black_box(touch(
                scratch,
                r.key,
                r.value.unwrap_or_default(),
                Some(r.timestamp),
            ));
        }),
    }
}

/// CPU seconds used by this thread so far (user + system).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Checks once, untimed, that the capture decodes to exactly the pre-filled records:
/// offsets 0.. in order, keys `{i:08}`, values of `size` bytes, batches of the
/// idempotent producer, no transactions. Returns how many responses ended in a batch
/// cut off by the byte limit.
fn verify(responses: &[Bytes], records: usize, size: usize) -> usize {
    let mut cut = 0;
    for frame in responses {
        let response = parse_fetch_v4(frame).expect("a Fetch v4 response");
        let mut batches =
            Batches::new(response.topics[0].partitions[0].records.unwrap_or_default());
        for batch in batches.by_ref() {
            let b = batch.expect("a record batch");
            assert!(b.producer_id >= 0 && b.producer_epoch >= 0 && b.base_sequence >= 0);
            assert!(b.partition_leader_epoch >= 0, "a leader epoch");
            assert!(!b.is_transactional() && !b.is_control(), "no transaction");
        }
        cut += usize::from(batches.partial() > 0);
    }
    let mut next = 0i64;
    let n = walk(responses, true, |_, r| {
        assert_eq!(r.offset, next, "offsets in order");
        let key = format!("{next:08}");
        assert_eq!(r.key, Some(key.as_bytes()), "key of offset {next}");
        assert_eq!(r.value.map(<[u8]>::len), Some(size), "value size");
        assert_eq!(r.headers().count(), 0, "no headers");
        next += 1;
    });
    assert_eq!(n, records as u64, "every record decoded");
    cut
}

/// What a round measures, in an order that rotates from round to round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The bare librdkafka loop over the topic.
    Librdkafka,
    /// A new capture (a new buffer per response, all kept), then the decode variants
    /// over it.
    CaptureAndDecode,
    /// The native path reading into one reused buffer, without and with the decode.
    Native,
}

impl Step {
    const ALL: [Step; 3] = [Step::Librdkafka, Step::CaptureAndDecode, Step::Native];
}

/// Per-size figures over the rounds, CPU ns per record.
#[derive(Default)]
struct Figures {
    responses: usize,
    /// Responses ending in a cut batch.
    cut: usize,
    captured_mib: f64,
    /// Reading the responses, a new buffer each, all kept.
    capture: Vec<f64>,
    /// Reading the responses into one reused buffer.
    read: Vec<f64>,
    /// Reading into one reused buffer, each response decoded at once with the bench's
    /// per-record work.
    native: Vec<f64>,
    /// The decode variants over the captured responses.
    decode: [Vec<f64>; 4],
    librdkafka: Vec<f64>,
}

pub fn decode(args: &DecodeArgs) {
    let started = Instant::now();
    header(&command_line());
    let cluster = KafkaCluster::start(ClusterOptions::new("bench-decode").jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .expect("the cluster starts");
    let bootstrap = cluster.bootstrap_servers();
    let addr = bootstrap.split(',').next().expect("a broker").to_string();
    let peer = [PeerCluster::of(&cluster)];
    let mut scratch: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut results: Vec<(usize, usize, Figures)> = Vec::new();
    let per_record = |secs: f64, n: u64| secs / n as f64 * 1e9;
    for &size in &args.sizes {
        let records = args.records.unwrap_or_else(|| {
            (args.bytes / size.max(1)).clamp(args.min_records, args.max_records)
        });
        let end = records as i64;
        let pmb = args.partition_max_bytes;
        let topic = format!("decode-{size}");
        let t = Instant::now();
        peers::prefill(&cluster, &topic, 1, records, size).expect("pre-fill");
        eprintln!(
            "{size} B: pre-filled {records} records in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // Warms the broker's page cache and checks the decoder on real data.
        let mut responses = fetch_all(&addr, &topic, end, pmb, Buffers::Keep, |_| {});
        let cut = verify(&responses, records, size);
        let mut figs = Figures {
            responses: responses.len(),
            cut,
            captured_mib: responses.iter().map(Bytes::len).sum::<usize>() as f64 / 1048576.0,
            ..Figures::default()
        };
        for round in 0..args.rounds {
            for k in 0..Step::ALL.len() {
                match Step::ALL[(k + round) % Step::ALL.len()] {
                    Step::Librdkafka => {
                        let cpu0 = process_cpu();
                        let pass = plain(&peer, &topic, 1, Peer::Batch);
                        let cpu = process_cpu() - cpu0;
                        assert_eq!(pass.records, records as u64, "the librdkafka loop read all");
                        figs.librdkafka.push(per_record(cpu, pass.records));
                    }
                    Step::CaptureAndDecode => {
                        drop(std::mem::take(&mut responses));
                        let cpu0 = thread_cpu();
                        responses = fetch_all(&addr, &topic, end, pmb, Buffers::Keep, |_| {});
                        figs.capture
                            .push(per_record(thread_cpu() - cpu0, records as u64));
                        for j in 0..Variant::ALL.len() {
                            let variant = Variant::ALL[(j + round) % Variant::ALL.len()];
                            let (mut n, mut passes) = (0u64, 0);
                            let cpu0 = thread_cpu();
                            while passes == 0 || thread_cpu() - cpu0 < args.decode_ms as f64 / 1e3 {
                                n += pass(&responses, variant, &mut scratch);
                                passes += 1;
                            }
                            figs.decode[variant as usize].push(per_record(thread_cpu() - cpu0, n));
                        }
                    }
                    Step::Native => {
                        let cpu0 = thread_cpu();
                        native_pass(&addr, &topic, end, pmb, false, &mut scratch);
                        figs.read
                            .push(per_record(thread_cpu() - cpu0, records as u64));
                        let cpu0 = thread_cpu();
                        let n = native_pass(&addr, &topic, end, pmb, true, &mut scratch);
                        assert_eq!(n, records as u64, "the native pass decoded all");
                        figs.native.push(per_record(thread_cpu() - cpu0, n));
                    }
                }
            }
            eprintln!(
                "{size} B round {round}: capture {:.0}, read {:.0}, native {:.0}, \
                 decode {:.0} / {:.0} / {:.0} / {:.0}, librdkafka loop {:.0} ns/record",
                figs.capture[round],
                figs.read[round],
                figs.native[round],
                figs.decode[0][round],
                figs.decode[1][round],
                figs.decode[2][round],
                figs.decode[3][round],
                figs.librdkafka[round],
            );
        }
        drop(responses);
        results.push((size, records, figs));
    }
    drop(cluster);

    println!(
        "- workload: 1 real single-broker cluster (Kafka {} from the test kit, JVM -Xms1g \
         -Xmx1g), one topic of 1 partition per value size, pre-filled uncompressed with 8 B keys \
         (idempotent producer, 1 MB batches); Fetch v4 requests of up to {} B per partition, one \
         TCP connection; each round, in an order that rotates: the bare librdkafka loop reads \
         the topic once; a capture fetches it with a new buffer per response, all kept, then \
         each decode variant runs over the capture for at least {} ms of CPU (whole passes); \
         the native path fetches it into one reused buffer, once without and once with the \
         decode and copy of each response as it arrives; medians of {} rounds; CPU ns per \
         record: ours on this thread, librdkafka's loop the whole process (its threads \
         included, the broker not)",
        mck_testkit::KAFKA_VERSION,
        args.partition_max_bytes,
        args.decode_ms,
        args.rounds
    );
    println!();
    println!(
        "| value size | records | Fetch responses (MiB; ending in a cut batch) | read, new buffer \
         per response | read, one reused buffer | native: read + decode + copy | decode only | \
         decode + `Bytes` per key and value | decode + copy | decode + CRC-32C + copy | bare \
         librdkafka loop | librdkafka ÷ native |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (size, records, f) in &results {
        let med = |v: &Vec<f64>| median(v.clone());
        let d = |v: Variant| med(&f.decode[v as usize]);
        let native = med(&f.native);
        let rd = med(&f.librdkafka);
        println!(
            "| {size} B | {records} | {} ({:.0}; {}) | {:.1} | {:.1} | {native:.1} | {:.1} | \
             {:.1} | {:.1} | {:.1} | {rd:.0} | {:.1}× |",
            f.responses,
            f.captured_mib,
            f.cut,
            med(&f.capture),
            med(&f.read),
            d(Variant::Bare),
            d(Variant::Owned),
            d(Variant::Copy),
            d(Variant::CrcCopy),
            rd / native,
        );
    }
    println!();
    println!(
        "- load average after: {}; total time {:.0} s",
        super::load_average(),
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's zigzag varint, for building test data.
    fn put_varlong(b: &mut Vec<u8>, v: i64) {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        while u >= 0x80 {
            b.push((u as u8) | 0x80);
            u >>= 7;
        }
        b.push(u as u8);
    }

    fn put_bytes(b: &mut Vec<u8>, s: Option<&[u8]>) {
        match s {
            None => put_varlong(b, -1),
            Some(s) => {
                put_varlong(b, s.len() as i64);
                b.extend_from_slice(s);
            }
        }
    }

    /// A test record: timestamp delta, offset delta, key, value, headers.
    type TestRecord<'a> = (
        i64,
        i32,
        Option<&'a [u8]>,
        Option<&'a [u8]>,
        Vec<(&'a [u8], Option<&'a [u8]>)>,
    );

    /// A record batch (magic 2) with a correct CRC-32C.
    fn batch(base_offset: i64, attributes: i16, records: &[TestRecord<'_>]) -> Vec<u8> {
        let mut body = Vec::new();
        for (ts, od, key, value, headers) in records {
            let mut r = vec![0u8]; // attributes
            put_varlong(&mut r, *ts);
            put_varlong(&mut r, (*od).into());
            put_bytes(&mut r, *key);
            put_bytes(&mut r, *value);
            put_varlong(&mut r, headers.len() as i64);
            for (k, v) in headers {
                put_bytes(&mut r, Some(k));
                put_bytes(&mut r, *v);
            }
            put_varlong(&mut body, r.len() as i64);
            body.extend_from_slice(&r);
        }
        let last = records.last().map_or(0, |r| r.1);
        let mut checked = Vec::new();
        checked.extend_from_slice(&attributes.to_be_bytes());
        checked.extend_from_slice(&last.to_be_bytes());
        checked.extend_from_slice(&1_000i64.to_be_bytes()); // base timestamp
        checked.extend_from_slice(&5_000i64.to_be_bytes()); // max timestamp
        checked.extend_from_slice(&7i64.to_be_bytes()); // producer id
        checked.extend_from_slice(&0i16.to_be_bytes());
        checked.extend_from_slice(&0i32.to_be_bytes());
        checked.extend_from_slice(&(records.len() as i32).to_be_bytes());
        checked.extend_from_slice(&body);
        let mut b = Vec::new();
        b.extend_from_slice(&base_offset.to_be_bytes());
        b.extend_from_slice(&((4 + 1 + 4 + checked.len()) as i32).to_be_bytes());
        b.extend_from_slice(&3i32.to_be_bytes()); // partition leader epoch
        b.push(2);
        b.extend_from_slice(&crc32c::crc32c(&checked).to_be_bytes());
        b.extend_from_slice(&checked);
        b
    }

    fn plain_record(od: i32, value: &[u8]) -> TestRecord<'_> {
        (od.into(), od, s(b"k"), Some(value), vec![])
    }

    fn s(b: &[u8]) -> Option<&[u8]> {
        Some(b)
    }

    fn decode_all(buf: &[u8]) -> Vec<(Batch<'_>, Vec<Record<'_>>)> {
        Batches::new(buf)
            .map(|b| {
                let b = b.unwrap();
                (b, b.records().unwrap().map(|r| r.unwrap()).collect())
            })
            .collect()
    }

    #[test]
    fn the_crc32c_crate_gives_the_castagnoli_check_value() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn varints_decode_at_their_edges() {
        let cases: &[(&[u8], i64)] = &[
            (&[0x00], 0),
            (&[0x01], -1),
            (&[0x02], 1),
            (&[0x7f], -64),
            (&[0x80, 0x01], 64),
            (&[0xd8, 0x04], 300),
            (&[0xfe, 0xff, 0xff, 0xff, 0x0f], i32::MAX.into()),
            (&[0xff, 0xff, 0xff, 0xff, 0x0f], i32::MIN.into()),
        ];
        for (bytes, v) in cases {
            let mut c = Cursor::new(bytes);
            assert_eq!(c.varint().map(i64::from), Ok(*v), "{bytes:02x?}");
            assert_eq!(c.pos, bytes.len());
            assert_eq!(
                Cursor::new(bytes).varlong(),
                Ok(*v),
                "{bytes:02x?} as varlong"
            );
        }
        for v in [i64::MIN, i64::MAX, i64::MIN + 1, 1 << 35, -(1 << 35)] {
            let mut b = Vec::new();
            put_varlong(&mut b, v);
            assert_eq!(Cursor::new(&b).varlong(), Ok(v));
        }
        let mut max = Vec::new();
        put_varlong(&mut max, i64::MAX);
        assert_eq!(max.len(), 10);
        // Truncated, too long, and bits beyond 32 / 64.
        assert_eq!(Cursor::new(&[0x80]).varint(), Err(DecodeError::Truncated));
        assert_eq!(Cursor::new(&[]).varint(), Err(DecodeError::Truncated));
        assert_eq!(
            Cursor::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).varint(),
            Err(DecodeError::Varint)
        );
        assert_eq!(
            Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0x1f]).varint(),
            Err(DecodeError::Varint)
        );
        assert_eq!(
            Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03]).varlong(),
            Err(DecodeError::Varint)
        );
    }

    #[test]
    fn records_give_offsets_timestamps_keys_values_and_headers() {
        let big = vec![b'v'; 300]; // a length of two varint bytes
        let buf = batch(
            100,
            0,
            &[
                (0, 0, s(b"a"), s(b"x"), vec![]),
                (-5, 1, None, s(&big), vec![]),
                (
                    70,
                    2,
                    s(b""),
                    None,
                    vec![(&b"h1"[..], s(b"one")), (b"h2", None), (b"", s(b""))],
                ),
            ],
        );
        let all = decode_all(&buf);
        assert_eq!(all.len(), 1);
        let (b, records) = &all[0];
        assert!(b.crc_ok());
        assert_eq!(
            (b.base_offset, b.partition_leader_epoch, b.producer_id),
            (100, 3, 7)
        );
        assert_eq!(b.next_offset(), 103);
        assert!(!b.is_control() && !b.is_transactional() && !b.log_append_time());
        let offsets: Vec<_> = records.iter().map(|r| (r.offset, r.timestamp)).collect();
        assert_eq!(offsets, [(100, 1000), (101, 995), (102, 1070)]);
        assert_eq!(records[0].key, Some(b"a".as_slice()));
        assert_eq!(records[0].value, Some(b"x".as_slice()));
        assert_eq!(records[1].key, None, "null key (-1)");
        assert_eq!(records[1].value, Some(big.as_slice()));
        assert_eq!(records[2].key, Some(b"".as_slice()), "empty, not null");
        assert_eq!(records[2].value, None, "null value (-1)");
        let headers: Vec<_> = records[2].headers().map(|h| h.unwrap()).collect();
        assert_eq!(
            headers,
            [
                (b"h1".as_slice(), Some(b"one".as_slice())),
                (b"h2".as_slice(), None),
                (b"".as_slice(), Some(b"".as_slice())),
            ]
        );
        assert_eq!(records[0].headers().count(), 0);
    }

    #[test]
    fn log_append_time_gives_every_record_the_max_timestamp() {
        let buf = batch(0, 0x08, &[plain_record(0, b"a"), plain_record(1, b"b")]);
        let all = decode_all(&buf);
        let ts: Vec<_> = all[0].1.iter().map(|r| r.timestamp).collect();
        assert_eq!(ts, [5000, 5000]);
    }

    #[test]
    fn a_batch_cut_off_at_the_end_is_skipped_cleanly() {
        let first = batch(0, 0, &[plain_record(0, b"a"), plain_record(1, b"b")]);
        let second = batch(2, 0, &[plain_record(0, b"c")]);
        for cut in [1, 11, 12, 30, second.len() - 1] {
            let mut buf = first.clone();
            buf.extend_from_slice(&second[..cut]);
            let mut batches = Batches::new(&buf);
            let b = batches.next().unwrap().unwrap();
            assert_eq!(b.records().unwrap().count(), 2);
            assert!(batches.next().is_none(), "cut at {cut}: no partial batch");
            assert_eq!(batches.partial(), cut);
        }
        let mut whole = first.clone();
        whole.extend_from_slice(&second);
        assert_eq!(decode_all(&whole).len(), 2);
        assert!(Batches::new(&[]).next().is_none());
    }

    #[test]
    fn control_batches_are_reported_and_skipped_by_the_walk() {
        // A commit marker: control key (version 0, type 1), value (version, epoch).
        let marker = batch(
            1,
            0x30,
            &[(0, 0, s(&[0, 0, 0, 1]), s(&[0, 0, 0, 0, 0, 0]), vec![])],
        );
        let mut records = batch(0, 0x10, &[plain_record(0, b"data")]);
        records.extend_from_slice(&marker);
        records.extend_from_slice(&batch(2, 0, &[plain_record(0, b"after")]));
        let all = decode_all(&records);
        assert!(all[0].0.is_transactional() && !all[0].0.is_control());
        assert!(all[1].0.is_control() && all[1].0.is_transactional());
        let frame = Bytes::from(response(&[("t", vec![(0, 0, Some(records.clone()))])]));
        let mut seen = Vec::new();
        let n = walk(&[frame], true, |_, r| {
            seen.push((r.offset, r.value.map(<[u8]>::to_vec)))
        });
        assert_eq!(n, 2);
        assert_eq!(
            seen,
            [(0, Some(b"data".to_vec())), (2, Some(b"after".to_vec()))]
        );
    }

    #[test]
    fn bad_batches_are_errors() {
        let good = batch(0, 0, &[plain_record(0, b"a")]);
        let mut bad_crc = good.clone();
        let value_byte = bad_crc.len() - 2; // the value "a"; the last byte is the header count
        bad_crc[value_byte] ^= 1;
        assert!(!decode_all(&bad_crc)[0].0.crc_ok());
        let mut magic1 = good.clone();
        magic1[16] = 1;
        assert_eq!(
            Batches::new(&magic1).next().unwrap().unwrap_err(),
            DecodeError::Magic(1)
        );
        let mut gzip = good.clone();
        gzip[22] |= 1;
        let b = Batches::new(&gzip).next().unwrap().unwrap();
        assert_eq!(b.records().err(), Some(DecodeError::Compressed(1)));
        let mut short = good.clone();
        short[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            Batches::new(&short).next(),
            Some(Err(DecodeError::Length(10)))
        ));
        // A record count above the records there are.
        let mut count = good.clone();
        count[57..61].copy_from_slice(&2i32.to_be_bytes());
        let b = Batches::new(&count).next().unwrap().unwrap();
        let r: Vec<_> = b.records().unwrap().collect();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], Err(DecodeError::Count));
    }

    /// A Fetch v4 response frame (without its size) with one topic per entry:
    /// (partition, error code, records).
    #[allow(clippy::type_complexity)]
    fn response(topics: &[(&str, Vec<(i32, i16, Option<Vec<u8>>)>)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&42i32.to_be_bytes());
        b.extend_from_slice(&9i32.to_be_bytes()); // throttle
        b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (name, partitions) in topics {
            put_string(&mut b, name);
            b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for (p, err, records) in partitions {
                b.extend_from_slice(&p.to_be_bytes());
                b.extend_from_slice(&err.to_be_bytes());
                b.extend_from_slice(&1000i64.to_be_bytes()); // high watermark
                b.extend_from_slice(&990i64.to_be_bytes()); // last stable offset
                if *p == 1 {
                    // Two aborted transactions.
                    b.extend_from_slice(&2i32.to_be_bytes());
                    for (pid, first) in [(5i64, 10i64), (6, 20)] {
                        b.extend_from_slice(&pid.to_be_bytes());
                        b.extend_from_slice(&first.to_be_bytes());
                    }
                } else {
                    b.extend_from_slice(&(-1i32).to_be_bytes());
                }
                match records {
                    None => b.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(r) => {
                        b.extend_from_slice(&(r.len() as i32).to_be_bytes());
                        b.extend_from_slice(r);
                    }
                }
            }
        }
        b
    }

    #[test]
    fn a_fetch_v4_response_parses() {
        let records = batch(0, 0, &[plain_record(0, b"a")]);
        let frame = response(&[
            (
                "orders",
                vec![(0, 0, Some(records.clone())), (1, 0, None), (2, 6, None)],
            ),
            ("empty", vec![]),
        ]);
        let r = parse_fetch_v4(&frame).unwrap();
        assert_eq!((r.correlation_id, r.throttle_time_ms), (42, 9));
        assert_eq!(r.topics.len(), 2);
        assert_eq!(r.topics[0].name, "orders");
        let p = &r.topics[0].partitions;
        assert_eq!(
            p[0],
            FetchPartition {
                partition: 0,
                error_code: 0,
                high_watermark: 1000,
                last_stable_offset: 990,
                aborted_transactions: None,
                records: Some(records.as_slice()),
            }
        );
        assert_eq!(p[1].aborted_transactions, Some(vec![(5, 10), (6, 20)]));
        assert_eq!(p[1].records, None);
        assert_eq!(p[2].error_code, 6, "NOT_LEADER_OR_FOLLOWER");
        assert!(r.topics[1].partitions.is_empty());
        // Every truncation is an error, never a panic.
        for cut in 0..frame.len() {
            assert!(parse_fetch_v4(&frame[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_fetch_v4_request_encodes_the_schema_fields_in_order() {
        let req = FetchV4 {
            correlation_id: 7,
            topic: "t",
            partition: 2,
            fetch_offset: 300,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1024,
            partition_max_bytes: 512,
            isolation_level: 1,
        }
        .encode();
        let mut want = Vec::new();
        let client = CLIENT_ID.as_bytes();
        let size = 2 + 2 + 4 + 2 + client.len() + 4 + 4 + 4 + 4 + 1 + 4 + 3 + 4 + 4 + 8 + 4;
        want.extend_from_slice(&(size as i32).to_be_bytes());
        want.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 7]);
        want.extend_from_slice(&(client.len() as i16).to_be_bytes());
        want.extend_from_slice(client);
        want.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // replica id -1
        want.extend_from_slice(&500i32.to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&1024i32.to_be_bytes());
        want.push(1);
        want.extend_from_slice(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2]);
        want.extend_from_slice(&300i64.to_be_bytes());
        want.extend_from_slice(&512i32.to_be_bytes());
        assert_eq!(req, want);
    }

    #[test]
    fn the_variants_see_the_same_records() {
        let mut records = batch(0, 0, &[plain_record(0, b"aa"), plain_record(1, b"bbb")]);
        records.extend_from_slice(&batch(2, 0, &[plain_record(0, b"c")]));
        let frame = Bytes::from(response(&[("t", vec![(0, 0, Some(records))])]));
        let mut scratch = Vec::new();
        for v in Variant::ALL {
            assert_eq!(pass(std::slice::from_ref(&frame), v, &mut scratch), 3);
        }
        assert_eq!(scratch, b"kc", "the last record's key and value");
    }
}
