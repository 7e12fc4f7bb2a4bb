//! Reading Kafka's wire format with every count bounded: the native path's own
//! response decoders ([`crate::fetch_response`], [`crate::responses`]) read arrays,
//! strings, bytes and tagged fields through [`Reader`], which refuses a count that
//! cannot fit in the bytes left before anything is allocated for it.

use bytes::Bytes;

use crate::cursor::{Cursor, DecodeError, Result};

/// Elements preallocated at most for any array; more grow as they decode.
pub const PREALLOCATED: usize = 64;

pub struct Reader<'a> {
    pub c: Cursor<'a>,
    pub body: &'a Bytes,
    pub flexible: bool,
}

impl<'a> Reader<'a> {
    /// An array's element count (`None` for null), refused when that many elements
    /// of at least `min` bytes cannot fit in what is left.
    pub fn count(&mut self, min: usize) -> Result<Option<usize>> {
        let n: i64 = if self.flexible {
            i64::from(self.c.uvarint(5, 4)? as u32) - 1
        } else {
            i64::from(self.c.i32()?)
        };
        if n == -1 {
            return Ok(None);
        }
        let left = self.c.rest().len() as i64;
        if n < 0 || n.saturating_mul(min as i64) > left {
            return Err(DecodeError::Length(n));
        }
        Ok(Some(n as usize))
    }

    /// A (compact) nullable string.
    pub fn string(&mut self) -> Result<Option<String>> {
        let n: i64 = if self.flexible {
            i64::from(self.c.uvarint(5, 4)? as u32) - 1
        } else {
            i64::from(self.c.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Length(n)),
            n => {
                let s = self.c.take(n as usize)?;
                Ok(Some(
                    std::str::from_utf8(s)
                        .map_err(|_| DecodeError::Utf8)?
                        .to_string(),
                ))
            }
        }
    }

    /// (Compact) nullable bytes, as a slice of the response.
    pub fn bytes(&mut self) -> Result<Bytes> {
        let n: i64 = if self.flexible {
            i64::from(self.c.uvarint(5, 4)? as u32) - 1
        } else {
            i64::from(self.c.i32()?)
        };
        match n {
            -1 => Ok(Bytes::new()),
            n if n < 0 => Err(DecodeError::Length(n)),
            n => Ok(self.body.slice_ref(self.c.take(n as usize)?)),
        }
    }

    /// A struct's tagged fields (flexible versions): `each` gets a tag and a cursor
    /// over exactly its bytes.
    pub fn tagged(&mut self, mut each: impl FnMut(u32, Cursor<'a>) -> Result<()>) -> Result<()> {
        if !self.flexible {
            return Ok(());
        }
        let fields = self.c.uvarint(5, 4)?;
        for _ in 0..fields {
            let tag = self.c.uvarint(5, 4)? as u32;
            let size = self.c.uvarint(5, 4)? as usize;
            each(tag, Cursor::new(self.c.take(size)?))?;
        }
        Ok(())
    }
}
