//! The records of MirrorMaker 2's internal topics, decoded: offset syncs and
//! checkpoints, field by field in the layouts the table of [`super`] draws, every
//! byte checked.

use std::fmt;

/// Which part of which record failed to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    SyncKey,
    SyncValue,
    CheckpointKey,
    CheckpointValue,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::SyncKey => "offset sync key",
            Part::SyncValue => "offset sync value",
            Part::CheckpointKey => "checkpoint key",
            Part::CheckpointValue => "checkpoint value",
        })
    }
}

/// A record of MirrorMaker 2's internal topics that does not have the layout it must
/// have, with the byte where that showed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// The key or value is null.
    #[error("{part}: missing (null)")]
    Missing { part: Part },
    /// It ends inside a field.
    #[error("{part} at byte {at}: needs {needs} more byte(s), {left} left")]
    Truncated {
        part: Part,
        at: usize,
        needs: usize,
        left: usize,
    },
    /// A string's length is negative (a null string, which these schemas never have).
    #[error("{part} at byte {at}: string length {len}")]
    BadLength { part: Part, at: usize, len: i16 },
    /// A string's bytes are not UTF-8.
    #[error("{part} at byte {at}: a string that is not UTF-8")]
    NotUtf8 { part: Part, at: usize },
    /// Bytes follow the last field.
    #[error("{part} at byte {at}: {left} byte(s) after the last field")]
    TrailingBytes { part: Part, at: usize, left: usize },
    /// A checkpoint of a layout version this reader does not know.
    #[error("{part} at byte 0: version {version}, only 0 is known")]
    UnknownVersion { part: Part, version: i16 },
}

/// One decoded offset sync: the record at `upstream` of the source's
/// `topic`/`partition` is at `downstream` on its copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyncRecord {
    /// The topic's name on the source.
    pub topic: String,
    pub partition: i32,
    pub upstream: i64,
    pub downstream: i64,
}

impl SyncRecord {
    /// Decodes a record of the offset-syncs topic; every byte must be used.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, DecodeError> {
        let mut k = Fields::of(Part::SyncKey, key)?;
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Fields::of(Part::SyncValue, value)?;
        let upstream = v.i64()?;
        let downstream = v.i64()?;
        v.finish()?;
        Ok(Self {
            topic,
            partition,
            upstream,
            downstream,
        })
    }
}

/// One decoded checkpoint: `group` committed `upstream` on the source, which is
/// `downstream` on the copy's `topic`/`partition`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointRecord {
    pub group: String,
    /// The topic's name on the *target* (the copy).
    pub topic: String,
    pub partition: i32,
    pub upstream: i64,
    pub downstream: i64,
    pub metadata: String,
}

impl CheckpointRecord {
    /// Decodes a record of the checkpoints topic; the version must be 0 and every
    /// byte must be used.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, DecodeError> {
        let mut k = Fields::of(Part::CheckpointKey, key)?;
        let group = k.string()?;
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Fields::of(Part::CheckpointValue, value)?;
        let version = v.i16()?;
        if version != 0 {
            return Err(DecodeError::UnknownVersion {
                part: Part::CheckpointValue,
                version,
            });
        }
        let upstream = v.i64()?;
        let downstream = v.i64()?;
        let metadata = v.string()?;
        v.finish()?;
        Ok(Self {
            group,
            topic,
            partition,
            upstream,
            downstream,
            metadata,
        })
    }
}

/// Protocol fields read from the front of a record's key or value.
struct Fields<'a> {
    part: Part,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn of(part: Part, bytes: Option<&'a [u8]>) -> Result<Self, DecodeError> {
        let bytes = bytes.ok_or(DecodeError::Missing { part })?;
        Ok(Self { part, bytes, at: 0 })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(DecodeError::Truncated {
                part: self.part,
                at: self.at,
                needs: n,
                left,
            });
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        self.array().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.array().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_be_bytes)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.at;
        let len = self.i16()?;
        let n = usize::try_from(len).map_err(|_| DecodeError::BadLength {
            part: self.part,
            at,
            len,
        })?;
        let at = self.at;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| DecodeError::NotUtf8 {
                part: self.part,
                at,
            })
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            left => Err(DecodeError::TrailingBytes {
                part: self.part,
                at: self.at,
                left,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::mm2::tests::{cp_key, cp_value, string, sync_key, sync_value};

    #[test]
    fn an_offset_sync_decodes_from_the_bytes_mirror_maker_writes() {
        // What MirrorMaker 2 wrote for orders/2: upstream 9, downstream 4.
        let key = b"\x00\x06orders\x00\x00\x00\x02";
        let value = [0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 4];
        assert_eq!(
            SyncRecord::decode(Some(key), Some(&value)),
            Ok(SyncRecord {
                topic: "orders".into(),
                partition: 2,
                upstream: 9,
                downstream: 4,
            })
        );
        assert_eq!(
            SyncRecord::decode(Some(&sync_key("t.x", -1)), Some(&sync_value(-1, i64::MAX))),
            Ok(SyncRecord {
                topic: "t.x".into(),
                partition: -1,
                upstream: -1,
                downstream: i64::MAX,
            })
        );
    }

    #[test]
    fn a_checkpoint_decodes_with_its_version_and_metadata() {
        let key = b"\x00\x03app\x00\x0asrc.orders\x00\x00\x00\x00";
        let value = cp_value(12, 7, "");
        assert_eq!(value.len(), 2 + 8 + 8 + 2);
        assert_eq!(
            CheckpointRecord::decode(Some(key), Some(&value)),
            Ok(CheckpointRecord {
                group: "app".into(),
                topic: "src.orders".into(),
                partition: 0,
                upstream: 12,
                downstream: 7,
                metadata: String::new(),
            })
        );
        let with = CheckpointRecord::decode(Some(key), Some(&cp_value(1, 1, "ü"))).unwrap();
        assert_eq!(with.metadata, "ü");
    }

    #[test]
    fn truncated_long_and_garbage_records_are_refused_with_the_byte() {
        let key = sync_key("orders", 0);
        let value = sync_value(5, 3);
        let e = SyncRecord::decode(Some(&key), Some(&value[..15])).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                part: Part::SyncValue,
                at: 8,
                needs: 8,
                left: 7
            }
        );
        assert_eq!(
            e.to_string(),
            "offset sync value at byte 8: needs 8 more byte(s), 7 left"
        );
        let mut long = value.clone();
        long.push(0);
        assert_eq!(
            SyncRecord::decode(Some(&key), Some(&long)),
            Err(DecodeError::TrailingBytes {
                part: Part::SyncValue,
                at: 16,
                left: 1
            })
        );
        // A string longer than the key.
        assert!(matches!(
            SyncRecord::decode(Some(b"\x00\x09abc"), Some(&value)),
            Err(DecodeError::Truncated {
                part: Part::SyncKey,
                at: 2,
                needs: 9,
                left: 3
            })
        ));
        assert_eq!(
            SyncRecord::decode(Some(b"\xff\xff"), Some(&value)),
            Err(DecodeError::BadLength {
                part: Part::SyncKey,
                at: 0,
                len: -1
            })
        );
        let mut bad = string("ab");
        bad[3] = 0xff;
        bad.extend(0i32.to_be_bytes());
        assert_eq!(
            SyncRecord::decode(Some(&bad), Some(&value)),
            Err(DecodeError::NotUtf8 {
                part: Part::SyncKey,
                at: 2
            })
        );
        assert_eq!(
            SyncRecord::decode(None, Some(&value)),
            Err(DecodeError::Missing {
                part: Part::SyncKey
            })
        );
        assert_eq!(
            SyncRecord::decode(Some(&key), None),
            Err(DecodeError::Missing {
                part: Part::SyncValue
            })
        );
        assert!(SyncRecord::decode(Some(&[]), Some(&[])).is_err());
        // A checkpoint: an unknown version, a cut metadata string, a sync's bytes.
        let ck = cp_key("g", "t", 0);
        let mut v1 = cp_value(1, 1, "m");
        v1[1] = 1;
        let e = CheckpointRecord::decode(Some(&ck), Some(&v1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "checkpoint value at byte 0: version 1, only 0 is known"
        );
        let v = cp_value(1, 1, "meta");
        assert!(matches!(
            CheckpointRecord::decode(Some(&ck), Some(&v[..v.len() - 1])),
            Err(DecodeError::Truncated {
                part: Part::CheckpointValue,
                at: 20,
                ..
            })
        ));
        assert!(CheckpointRecord::decode(Some(&key), Some(&value)).is_err());
    }

    #[test]
    fn no_bytes_make_the_decoders_panic() {
        use proptest::prelude::*;
        proptest!(|(key in proptest::collection::vec(any::<u8>(), 0..40),
                    value in proptest::collection::vec(any::<u8>(), 0..40))| {
            let _ = SyncRecord::decode(Some(&key), Some(&value));
            let _ = CheckpointRecord::decode(Some(&key), Some(&value));
        });
    }
}
