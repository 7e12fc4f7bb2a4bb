//! Records handed to the user.

use std::sync::Arc;

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
    /// Key bytes.
    pub key: Option<Vec<u8>>,
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
}
