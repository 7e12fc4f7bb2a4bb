//! Records handed to the user.

use std::sync::Arc;

use bytes::Bytes;

use crate::split::SplitId;

/// One record, with where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<V> {
    /// Logical cluster id.
    pub cluster: Arc<str>,
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in ms since the epoch (create or log-append time), if any.
    pub timestamp: Option<i64>,
    /// Key bytes (shared with the fetched batch: cloning is cheap).
    pub key: Option<Bytes>,
    /// Headers in order; a header value may be null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The deserialized value.
    pub value: V,
}

impl<V> Record<V> {
    /// The split this record belongs to.
    pub fn split_id(&self) -> SplitId {
        SplitId {
            cluster: self.cluster.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }
}

/// What a deserializer sees of a record: everything but the value, plus the raw value.
#[derive(Debug)]
pub struct RawRecord<'a> {
    /// Logical cluster id.
    pub cluster: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in ms, if any.
    pub timestamp: Option<i64>,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes (`None` for a tombstone).
    pub value: Option<&'a [u8]>,
    /// The buffer `value` lives in, when it is shared (records fetched by the source):
    /// lets a deserializer keep the value without copying it (`shared.slice_ref(value)`).
    pub shared: Option<&'a Bytes>,
}

impl RawRecord<'_> {
    /// The value as [`Bytes`], without a copy when the buffer is shared.
    pub fn value_bytes(&self) -> Bytes {
        match (self.value, self.shared) {
            (Some(v), Some(shared)) => shared.slice_ref(v),
            (Some(v), None) => Bytes::copy_from_slice(v),
            (None, _) => Bytes::new(),
        }
    }
}
