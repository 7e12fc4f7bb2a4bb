//! The records MirrorMaker 2 writes to its internal topics, decoded (and encoded) byte
//! for byte, independently of any Kafka library.
//!
//! Both use the fixed-layout schemas of Kafka's own protocol (not Connect's converters
//! and not JSON): fields one after another, no field names, no tags, big-endian
//! integers, and each string an `INT16` byte length followed by that many bytes of
//! UTF-8 (never null).
//!
//! - An offset sync (MirrorMaker's `OffsetSync`, in `mm2-offset-syncs.<alias>.internal`,
//!   always partition 0): key `topic: STRING, partition: INT32` (the *source* topic and
//!   partition); value `upstreamOffset: INT64, offset: INT64`, the source offset and
//!   the target offset of the same record.
//! - A checkpoint (`Checkpoint`, in `<source alias>.checkpoints.internal` on the
//!   target): key `group: STRING, topic: STRING, partition: INT32` (the consumer group
//!   and the *target* topic's name and partition); value a header `version: INT16`
//!   (0), then `upstreamOffset: INT64, offset: INT64, metadata: STRING`: the group's
//!   committed offset on the source and its translation on the target.

use std::fmt;

/// A record of an internal MirrorMaker 2 topic that does not have the expected layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// What was being read (`"offset sync key"`, …).
    pub what: &'static str,
    /// The byte at which it went wrong.
    pub at: usize,
    /// What was wrong there.
    pub reason: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: {}", self.what, self.at, self.reason)
    }
}

impl std::error::Error for DecodeError {}

/// One offset sync: record `upstream_offset` of the source's `topic`/`partition` is
/// record `downstream_offset` of its copy on the target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OffsetSync {
    /// The source topic (its name on the source cluster).
    pub topic: String,
    /// The partition, the same on both sides.
    pub partition: i32,
    /// The record's offset on the source.
    pub upstream_offset: i64,
    /// The same record's offset on the target.
    pub downstream_offset: i64,
}

impl OffsetSync {
    /// Decodes a record of the offset-syncs topic. Every byte must be used.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, DecodeError> {
        let mut k = Reader::new("offset sync key", key);
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Reader::new("offset sync value", value);
        let upstream_offset = v.i64()?;
        let downstream_offset = v.i64()?;
        v.finish()?;
        Ok(Self {
            topic,
            partition,
            upstream_offset,
            downstream_offset,
        })
    }

    /// The record key MirrorMaker 2 writes for this sync.
    pub fn encode_key(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, &self.topic);
        out.extend(self.partition.to_be_bytes());
        out
    }

    /// The record value MirrorMaker 2 writes for this sync.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend(self.upstream_offset.to_be_bytes());
        out.extend(self.downstream_offset.to_be_bytes());
        out
    }
}

/// The only checkpoint value version MirrorMaker 2 writes (and reads).
pub const CHECKPOINT_VERSION: i16 = 0;

/// One checkpoint: `group` committed `upstream_offset` on the source, which is
/// `downstream_offset` on the target's `topic`/`partition`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// The consumer group.
    pub group: String,
    /// The topic's name on the target (`<source alias>.<topic>` with the default
    /// replication policy).
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The group's committed offset on the source.
    pub upstream_offset: i64,
    /// Its translation on the target: where the group would resume there.
    pub downstream_offset: i64,
    /// The commit's metadata string (empty when the group committed none).
    pub metadata: String,
}

impl Checkpoint {
    /// Decodes a record of the checkpoints topic. The version must be
    /// [`CHECKPOINT_VERSION`] and every byte must be used.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, DecodeError> {
        let mut k = Reader::new("checkpoint key", key);
        let group = k.string()?;
        let topic = k.string()?;
        let partition = k.i32()?;
        k.finish()?;
        let mut v = Reader::new("checkpoint value", value);
        let version = v.i16()?;
        if version != CHECKPOINT_VERSION {
            return Err(v.error(0, format!("version {version}, not {CHECKPOINT_VERSION}")));
        }
        let upstream_offset = v.i64()?;
        let downstream_offset = v.i64()?;
        let metadata = v.string()?;
        v.finish()?;
        Ok(Self {
            group,
            topic,
            partition,
            upstream_offset,
            downstream_offset,
            metadata,
        })
    }

    /// The record key MirrorMaker 2 writes for this checkpoint.
    pub fn encode_key(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, &self.group);
        put_string(&mut out, &self.topic);
        out.extend(self.partition.to_be_bytes());
        out
    }

    /// The record value MirrorMaker 2 writes for this checkpoint.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(CHECKPOINT_VERSION.to_be_bytes());
        out.extend(self.upstream_offset.to_be_bytes());
        out.extend(self.downstream_offset.to_be_bytes());
        put_string(&mut out, &self.metadata);
        out
    }
}

/// Appends `s` as a protocol `STRING`. Panics past 32767 bytes, which no topic or
/// group name reaches.
fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = i16::try_from(s.len()).expect("a STRING holds at most 32767 bytes");
    out.extend(len.to_be_bytes());
    out.extend(s.as_bytes());
}

/// Reads protocol fields from the front of a buffer.
struct Reader<'a> {
    what: &'static str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, bytes: &'a [u8]) -> Self {
        Self { what, bytes, at: 0 }
    }

    fn error(&self, at: usize, reason: String) -> DecodeError {
        DecodeError {
            what: self.what,
            at,
            reason,
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let end = self.at + N;
        let bytes = self.bytes.get(self.at..end).ok_or_else(|| {
            self.error(
                self.at,
                format!("needs {N} bytes, {} left", self.bytes.len() - self.at),
            )
        })?;
        self.at = end;
        Ok(bytes.try_into().expect("the slice has N bytes"))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.take().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.take().map(i64::from_be_bytes)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let start = self.at;
        let len = self.i16()?;
        let len =
            usize::try_from(len).map_err(|_| self.error(start, format!("string length {len}")))?;
        let bytes = self.bytes.get(self.at..self.at + len).ok_or_else(|| {
            self.error(
                start,
                format!("string of {len} bytes, {} left", self.bytes.len() - self.at),
            )
        })?;
        let s = std::str::from_utf8(bytes)
            .map_err(|e| self.error(self.at, format!("string not UTF-8: {e}")))?;
        self.at += len;
        Ok(s.to_string())
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error(
                self.at,
                format!("{} bytes left over", self.bytes.len() - self.at),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_sync_round_trips_byte_for_byte() {
        let sync = OffsetSync {
            topic: "orders".into(),
            partition: 2,
            upstream_offset: 9,
            downstream_offset: 4,
        };
        let key = sync.encode_key();
        assert_eq!(key, b"\x00\x06orders\x00\x00\x00\x02");
        let value = sync.encode_value();
        assert_eq!(value, [0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 4]);
        assert_eq!(OffsetSync::decode(&key, &value), Ok(sync));
    }

    #[test]
    fn a_checkpoint_round_trips_byte_for_byte() {
        let cp = Checkpoint {
            group: "app".into(),
            topic: "src.orders".into(),
            partition: 0,
            upstream_offset: 12,
            downstream_offset: 7,
            metadata: String::new(),
        };
        let key = cp.encode_key();
        assert_eq!(key, b"\x00\x03app\x00\x0asrc.orders\x00\x00\x00\x00");
        let value = cp.encode_value();
        assert_eq!(value.len(), 2 + 8 + 8 + 2);
        assert_eq!(Checkpoint::decode(&key, &value), Ok(cp));
    }

    #[test]
    fn short_long_and_unknown_records_are_refused_with_the_place() {
        let sync = OffsetSync {
            topic: "t".into(),
            partition: 0,
            upstream_offset: 1,
            downstream_offset: 1,
        };
        let (key, value) = (sync.encode_key(), sync.encode_value());
        let e = OffsetSync::decode(&key, &value[..15]).unwrap_err();
        assert_eq!((e.what, e.at), ("offset sync value", 8));
        let mut long = value.clone();
        long.push(0);
        assert_eq!(OffsetSync::decode(&key, &long).unwrap_err().at, 16);
        assert!(OffsetSync::decode(b"\xff\xff", &value).is_err());
        let cp = Checkpoint {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            upstream_offset: 0,
            downstream_offset: 0,
            metadata: "m".into(),
        };
        let mut v1 = cp.encode_value();
        v1[1] = 1;
        let e = Checkpoint::decode(&cp.encode_key(), &v1).unwrap_err();
        assert!(e.to_string().contains("version 1"), "{e}");
    }
}
