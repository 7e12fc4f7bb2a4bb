//! The record batch decoder: magic 2 batches and their records, read in place from
//! borrowed bytes.

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

pub(super) type Result<T> = std::result::Result<T, DecodeError>;

/// A reading position in borrowed bytes; every read checks bounds.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub(super) fn i8(&mut self) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    pub(super) fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    pub(super) fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(super) fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned LEB128 varint of at most `max` bytes whose last byte may carry at
    /// most `last_bits` bits (5 and 4 for 32 bits, 10 and 1 for 64).
    #[inline]
    pub(super) fn uvarint(&mut self, max: usize, last_bits: u32) -> Result<u64> {
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
    pub(super) fn varint(&mut self) -> Result<i32> {
        let u = self.uvarint(5, 4)? as u32;
        Ok((u >> 1) as i32 ^ -((u & 1) as i32))
    }

    /// A zigzag varlong (Kafka's `varlong`, 64 bits).
    #[inline]
    pub(super) fn varlong(&mut self) -> Result<i64> {
        let u = self.uvarint(10, 1)?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }

    /// Bytes whose length is a varint, -1 for null.
    #[inline]
    pub(super) fn varint_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Length(n.into())),
            n => self.take(n as usize).map(Some),
        }
    }

    pub(super) fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
}

/// Bytes of a batch before its `length` field ends: baseOffset i64, batchLength i32.
pub(super) const LOG_OVERHEAD: usize = 12;
/// Where the CRC-32C's coverage starts in a batch: after baseOffset, batchLength,
/// partitionLeaderEpoch, magic and crc (8 + 4 + 4 + 1 + 4).
pub(super) const CRC_START: usize = 21;
/// A batch's header, up to its records (61 bytes for magic 2).
pub(super) const BATCH_HEADER: usize = CRC_START + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;

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
