//! Record batches (magic 2) built byte by byte, for the tests of decoders: every
//! codec Kafka has, snappy in both forms producers write, and a correct CRC-32C.

use std::io::Write;

/// A record of a test batch.
#[derive(Clone, Debug, Default)]
pub struct TestRecord {
    /// Its timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Its offset minus the batch's base offset.
    pub offset_delta: i32,
    /// Its key, `None` for null.
    pub key: Option<Vec<u8>>,
    /// Its value, `None` for null.
    pub value: Option<Vec<u8>>,
    /// Its headers: (key, value or null).
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl TestRecord {
    /// A record with key `k`, the given value, at offset delta and timestamp delta
    /// `delta`.
    pub fn plain(delta: i32, value: &[u8]) -> Self {
        TestRecord {
            timestamp_delta: delta.into(),
            offset_delta: delta,
            key: Some(b"k".to_vec()),
            value: Some(value.to_vec()),
            headers: Vec::new(),
        }
    }
}

/// How a snappy batch's records are framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnappyForm {
    /// One raw snappy block (librdkafka's producer).
    Raw,
    /// Xerial's framing around raw blocks of at most `block` input bytes (Kafka's
    /// Java producer, 32 KiB blocks).
    Xerial {
        /// Input bytes per block.
        block: usize,
    },
}

/// The base timestamp of every test batch; the max timestamp is 5 000.
pub const BASE_TIMESTAMP: i64 = 1_000;

/// A record batch at `base_offset` with `attributes` (the low three bits name the
/// codec the records are compressed with: 0 none, 1 gzip, 2 snappy raw, 3 lz4, 4
/// zstd), partition leader epoch 3, producer id 7.
pub fn record_batch(base_offset: i64, attributes: i16, records: &[TestRecord]) -> Vec<u8> {
    record_batch_with(base_offset, attributes, SnappyForm::Raw, records)
}

/// [`record_batch`] with snappy in the given form.
pub fn record_batch_with(
    base_offset: i64,
    attributes: i16,
    snappy: SnappyForm,
    records: &[TestRecord],
) -> Vec<u8> {
    let body = compress(attributes & 0x07, snappy, &encode_records(records));
    let last = records.last().map_or(0, |r| r.offset_delta);
    let mut checked = Vec::new();
    checked.extend_from_slice(&attributes.to_be_bytes());
    checked.extend_from_slice(&last.to_be_bytes());
    checked.extend_from_slice(&BASE_TIMESTAMP.to_be_bytes());
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

/// `batch` (one from [`record_batch`]) written by producer `producer_id` instead, its
/// CRC-32C made right again.
pub fn with_producer(mut batch: Vec<u8>, producer_id: i64) -> Vec<u8> {
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// A control batch at `offset` of producer `producer_id`: a transaction's commit or
/// abort marker.
pub fn marker(offset: i64, producer_id: i64, commit: bool) -> Vec<u8> {
    let record = TestRecord {
        key: Some(vec![0, 0, 0, u8::from(commit)]),
        value: Some(vec![0, 0, 0, 0, 0, 0]),
        ..TestRecord::default()
    };
    with_producer(record_batch(offset, 0x30, &[record]), producer_id)
}

/// The records' encoding inside a batch, before compression.
pub fn encode_records(records: &[TestRecord]) -> Vec<u8> {
    let mut body = Vec::new();
    for r in records {
        let mut e = vec![0u8]; // attributes
        put_varlong(&mut e, r.timestamp_delta);
        put_varlong(&mut e, r.offset_delta.into());
        put_bytes(&mut e, r.key.as_deref());
        put_bytes(&mut e, r.value.as_deref());
        put_varlong(&mut e, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut e, Some(k));
            put_bytes(&mut e, v.as_deref());
        }
        put_varlong(&mut body, e.len() as i64);
        body.extend_from_slice(&e);
    }
    body
}

/// `data` compressed with codec `id` (0 leaves it as it is).
pub fn compress(id: i16, snappy: SnappyForm, data: &[u8]) -> Vec<u8> {
    match id {
        0 => data.to_vec(),
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).expect("gzip into memory");
            e.finish().expect("gzip into memory")
        }
        2 => match snappy {
            SnappyForm::Raw => snap::raw::Encoder::new()
                .compress_vec(data)
                .expect("snappy into memory"),
            SnappyForm::Xerial { block } => {
                let mut out = b"\x82SNAPPY\x00".to_vec();
                out.extend_from_slice(&1i32.to_be_bytes());
                out.extend_from_slice(&1i32.to_be_bytes());
                for chunk in data.chunks(block.max(1)) {
                    let c = snap::raw::Encoder::new()
                        .compress_vec(chunk)
                        .expect("snappy into memory");
                    out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                    out.extend_from_slice(&c);
                }
                out
            }
        },
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).expect("lz4 into memory");
            e.finish().expect("lz4 into memory")
        }
        4 => zstd::encode_all(data, 3).expect("zstd into memory"),
        other => panic!("no codec {other}"),
    }
}

/// Kafka's zigzag varlong.
pub fn put_varlong(b: &mut Vec<u8>, v: i64) {
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
