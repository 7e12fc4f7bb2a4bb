//! Reading Kafka's wire encoding from borrowed bytes: [`Cursor`], and what can be
//! wrong with those bytes, [`DecodeError`].

/// Why bytes could not be decoded as record batches.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// A record batch of another format than magic 2 (Kafka 4 brokers store no
    /// other).
    #[error("record batch magic {0}, only 2 is decoded")]
    Magic(i8),
    /// A codec id outside Kafka's (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    #[error("unknown compression codec {0}")]
    Codec(u8),
    /// The compressed records could not be decompressed.
    #[error("{codec} records cannot be decompressed: {reason}")]
    Decompress {
        /// The codec's name.
        codec: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// The records of one batch decompress to more bytes than allowed (a bound
    /// against decompression bombs; nothing beyond it was kept).
    #[error("{codec} records decompress to more than the limit of {limit} bytes")]
    TooLarge {
        /// The codec's name.
        codec: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A batch's stored CRC-32C does not match its bytes.
    #[error("CRC-32C {computed:#010x} does not match the stored {stored:#010x}")]
    Crc {
        /// The batch's `crc` field.
        stored: u32,
        /// What its bytes give.
        computed: u32,
    },
    /// A response version this decoder does not read.
    #[error("version {0} is not decoded here")]
    Version(i16),
    /// A string that is not UTF-8.
    #[error("string not UTF-8")]
    Utf8,
    /// A batch held fewer records than its count.
    #[error("batch ends before its record count")]
    Count,
}

/// A decode result.
pub type Result<T> = std::result::Result<T, DecodeError>;

/// A reading position in borrowed bytes; every read checks bounds. Integers are big
/// endian, as on Kafka's wire.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    /// Bytes read so far.
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// An `int8`.
    pub fn i8(&mut self) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    /// An `int16`.
    pub fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    /// An `int32`.
    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    /// A `uint32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    /// An `int64`.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned LEB128 varint of at most `max` bytes whose last byte may carry at
    /// most `last_bits` bits (5 and 4 for 32 bits, 10 and 1 for 64).
    #[inline]
    pub fn uvarint(&mut self, max: usize, last_bits: u32) -> Result<u64> {
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
    pub fn varint(&mut self) -> Result<i32> {
        let u = self.uvarint(5, 4)? as u32;
        Ok((u >> 1) as i32 ^ -((u & 1) as i32))
    }

    /// A zigzag varlong (Kafka's `varlong`, 64 bits).
    #[inline]
    pub fn varlong(&mut self) -> Result<i64> {
        let u = self.uvarint(10, 1)?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }

    /// Bytes whose length is a varint, -1 for null.
    #[inline]
    pub fn varint_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Length(n.into())),
            n => self.take(n as usize).map(Some),
        }
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
}
