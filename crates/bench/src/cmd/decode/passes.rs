//! The measured passes: fetching a partition whole, walking the captured responses
//! and the decode variants, each timed in CPU.

use std::net::TcpStream;

use bytes::Bytes;

use super::fetch::{FetchV4, parse_fetch_v4, round_trip};
use crate::cmd::throughput::touch;
use multicluster_kafka_client::{Batches, Record};

/// The Fetch requests' whole-response byte limit (librdkafka's `fetch.max.bytes`
/// default).
pub(super) const FETCH_MAX_BYTES: i32 = 52_428_800;

/// How [`fetch_all`] treats the response buffers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Buffers {
    /// A new buffer per response, kept and returned (the capture).
    Keep,
    /// One buffer, read into again for every response.
    Reuse,
}

/// Fetches partition 0 of `topic` from offset 0 up to `end` (its high watermark) with
/// Fetch v4 requests on one connection, each from the offset after the last whole batch
/// of the previous response, and hands every response frame to `f`; returns the frames
/// when `buffers` is [`Buffers::Keep`].
pub(super) fn fetch_all(
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
pub(super) fn walk_frame(frame: &[u8], crc: bool, mut f: impl FnMut(&Record<'_>)) -> u64 {
    let mut n = 0;
    let response = parse_fetch_v4(frame).expect("a Fetch v4 response");
    for topic in &response.topics {
        for p in &topic.partitions {
            for batch in Batches::new(p.records.unwrap_or_default()) {
                let batch = batch.expect("a record batch");
                if crc {
                    batch
                        .check_crc()
                        .unwrap_or_else(|e| panic!("batch {}: {e}", batch.base_offset));
                }
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
pub(super) fn walk(responses: &[Bytes], crc: bool, mut f: impl FnMut(&Bytes, &Record<'_>)) -> u64 {
    responses
        .iter()
        .map(|frame| walk_frame(frame, crc, |r| f(frame, r)))
        .sum()
}

/// The native path end to end with one reused buffer: fetch every response and, with
/// `decode`, decode it at once and do the bench's per-record work. Returns the records
/// decoded.
pub(super) fn native_pass(
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
pub(super) enum Variant {
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
    pub(super) const ALL: [Variant; 4] = [
        Variant::Bare,
        Variant::Owned,
        Variant::Copy,
        Variant::CrcCopy,
    ];
}

/// One pass of a variant over the capture; returns the records seen.
pub(super) fn pass(responses: &[Bytes], variant: Variant, scratch: &mut Vec<u8>) -> u64 {
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
pub(super) fn thread_cpu() -> f64 {
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
pub(super) fn verify(responses: &[Bytes], records: usize, size: usize) -> usize {
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
