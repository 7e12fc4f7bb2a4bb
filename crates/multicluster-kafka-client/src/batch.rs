//! Record batches (magic 2) and their records, decoded in place from borrowed bytes:
//! a partition's `records` field of a Fetch response, or a compressed batch's records
//! once decompressed into a buffer of the caller's ([`Batch::records_in`]).

use crate::codec;
use crate::cursor::{Cursor, DecodeError, Result};

/// Bytes of a batch before its `length` field ends: baseOffset i64, batchLength i32.
pub const LOG_OVERHEAD: usize = 12;
/// Where the CRC-32C's coverage starts in a batch: after baseOffset, batchLength,
/// partitionLeaderEpoch, magic and crc (8 + 4 + 4 + 1 + 4).
const CRC_START: usize = 21;
/// A batch's header, up to its records (61 bytes for magic 2).
pub const BATCH_HEADER: usize = CRC_START + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;

/// One record batch (magic 2), borrowed from the response.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// The offset of its first record.
    pub base_offset: i64,
    /// The leader epoch of the broker that wrote it.
    pub partition_leader_epoch: i32,
    /// The stored CRC-32C of the bytes from the attributes to the end.
    pub crc: u32,
    /// Codec, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Its last record's offset minus the base offset.
    pub last_offset_delta: i32,
    /// The first record's timestamp (records hold deltas from it).
    pub base_timestamp: i64,
    /// The largest timestamp in the batch (every record's in log append time).
    pub max_timestamp: i64,
    /// The producer id, -1 when not idempotent.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The first record's sequence number.
    pub base_sequence: i32,
    /// How many records it holds.
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

    /// Checks the stored CRC-32C against the batch's bytes (what a consumer does
    /// with `check.crcs=true`).
    pub fn check_crc(&self) -> Result<()> {
        let computed = crc32c::crc32c(self.checked);
        if computed == self.crc {
            Ok(())
        } else {
            Err(DecodeError::Crc {
                stored: self.crc,
                computed,
            })
        }
    }

    /// The records of an uncompressed batch, decoded in place; a compressed batch
    /// is [`DecodeError::Decompress`] here (use [`records_in`](Self::records_in)).
    pub fn records(&self) -> Result<Records<'a>> {
        match self.compression() {
            0 => Ok(self.records_of(self.records)),
            id => Err(DecodeError::Decompress {
                codec: codec::name(id)?,
                reason: "a compressed batch needs a buffer to decompress into".into(),
            }),
        }
    }

    /// The records, decoded in place: from the response for an uncompressed batch,
    /// else from `scratch`, which receives the decompressed records (its old content
    /// is dropped, its allocation reused). More than `limit` decompressed bytes is
    /// [`DecodeError::TooLarge`].
    pub fn records_in<'r>(&self, scratch: &'r mut Vec<u8>, limit: usize) -> Result<Records<'r>>
    where
        'a: 'r,
    {
        match self.compression() {
            0 => Ok(self.records_of(self.records)),
            id => {
                scratch.clear();
                codec::decompress(id, self.records, limit, scratch)?;
                Ok(self.records_of(scratch))
            }
        }
    }

    /// The records in `bytes`: the batch's own if uncompressed, else what
    /// [`records_in`](Self::records_in) decompressed them to.
    pub fn records_of<'r>(&self, bytes: &'r [u8]) -> Records<'r> {
        Records {
            cur: Cursor::new(bytes),
            left: self.record_count,
            base_offset: self.base_offset,
            base_timestamp: self.base_timestamp,
            append_time: self.log_append_time().then_some(self.max_timestamp),
        }
    }
}

/// The record batches of a partition's `records` field, in order. A batch cut off at
/// the end (the broker stops at the fetch's byte limit, possibly inside a batch) ends
/// the iteration cleanly, as a consumer skips it to fetch it again from its start;
/// [`Batches::partial`] tells how many bytes were left over. After an error the
/// iteration ends.
pub struct Batches<'a> {
    rest: &'a [u8],
}

impl<'a> Batches<'a> {
    /// The batches of `records`.
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
        if batch.last_offset_delta < 0 {
            return Err(DecodeError::Length(batch.last_offset_delta.into()));
        }
        codec::name(batch.compression())?;
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

/// One record, its key, value and headers borrowed from the response (or from the
/// decompressed records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its offset.
    pub offset: i64,
    /// Its timestamp (ms since the epoch).
    pub timestamp: i64,
    /// Its key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// Its value, `None` for null (a tombstone).
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

    /// How many headers it has.
    pub fn header_count(&self) -> usize {
        self.header_count as usize
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

/// The records of a batch, in offset order.
pub struct Records<'a> {
    cur: Cursor<'a>,
    left: i32,
    base_offset: i64,
    base_timestamp: i64,
    /// The batch's max timestamp when it is in log append time.
    append_time: Option<i64>,
}

impl<'a> Records<'a> {
    #[inline(always)]
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
        // A header takes two bytes at least (its key's and its value's lengths), so
        // a count the rest of the record cannot hold is refused here, before anyone
        // sizes anything by it.
        let rest = c.rest();
        if header_count < 0 || header_count as usize > rest.len() / 2 {
            return Err(DecodeError::Length(header_count.into()));
        }
        Ok(Record {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: self
                .append_time
                .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta)),
            key,
            value,
            header_count,
            // The rest of the record: its headers are not walked unless asked for.
            headers: rest,
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>>;

    #[inline(always)]
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
