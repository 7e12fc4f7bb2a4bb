//! Records handed to the user.
//!
//! The parts: the records and the batch a program receives (here), what a batch
//! keeps per record and where its bytes are (`entry.rs`), building, taking apart and
//! reading a batch (`batch.rs`), and reading it record by record (`iter.rs`).

use std::sync::Arc;

use bytes::Bytes;

use crate::base::metadata::index::StreamIds;
use crate::base::split::SplitId;

mod batch;
mod entry;
mod iter;

pub(crate) use entry::{BatchBytes, BatchEntry, Buffers, RawSpans, shared_span};
pub use iter::{IntoIter, Iter, RecordRef};

/// One record, with where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<V> {
    /// The subscribed streams the record belongs to: the ids of the streams that read
    /// its topic on its cluster (usually one; several when streams share the topic).
    pub streams: Arc<[Arc<str>]>,
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
    /// Headers in order, a header value may be null (empty when the source was built
    /// with `include_headers(false)`). A deserializer can use them to pick a schema
    /// or a content type.
    pub headers: &'a [(String, Option<Vec<u8>>)],
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

/// Records handed out together by [`SourceReader::next_batch`](crate::SourceReader::next_batch):
/// consecutive records fetched from one cluster, in the order the cluster gave them
/// (each partition's records in offset order).
///
/// A batch holds its cluster id and topic names once, not per record; iterate it by
/// reference ([`RecordBatch::iter`], borrowed [`RecordRef`]s) to read records without
/// any reference counting, or by value (`for record in batch`) to get owned
/// [`Record`]s.
///
/// Positions advance when a batch is handed out: a checkpoint taken after
/// `next_batch` returns resumes each split right after its last record in the batch.
///
/// ```no_run
/// # async fn run(mut reader: multicluster_kafka::SourceReader<multicluster_kafka::deserializer::RawValue>)
/// # -> Result<(), multicluster_kafka::error::SourceError> {
/// while let Some(batch) = reader.next_batch().await {
///     let batch = batch?;
///     for record in batch.iter() {
///         println!("{}/{}@{}: {} bytes", record.topic, record.partition, record.offset, record.value.len());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RecordBatch<V> {
    pub(crate) cluster: Arc<str>,
    /// Topics of the batch; entries name theirs by index.
    pub(crate) topics: Vec<Arc<str>>,
    /// The streams of each topic, by the same index (set when the batch is handed
    /// out; `no_streams` for a topic without).
    pub(crate) streams: Vec<StreamIds>,
    pub(crate) no_streams: StreamIds,
    /// The keys (and usually the values) of the records, one after the other.
    pub(crate) data: Bytes,
    /// Buffers the batch's large values are shared from instead of copied into
    /// `data` (the native path's fetch answers); an entry's value span names one
    /// ([`shared_span`]).
    pub(crate) shared: Vec<Bytes>,
    pub(crate) entries: Vec<BatchEntry<V>>,
    /// The reader's watermark once the batch was handed out (with watermarks on).
    pub(crate) watermark: Option<i64>,
}

#[cfg(test)]
mod tests;
