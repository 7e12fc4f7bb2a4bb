//! Reading a batch record by record: borrowed ([`RecordRef`]) or owned.

use std::sync::Arc;

use bytes::Bytes;

use crate::base::metadata::index::StreamIds;
use crate::base::split::SplitId;

use super::entry::*;
use super::*;

/// A record of a [`RecordBatch`], borrowed from it.
#[derive(Debug)]
pub struct RecordRef<'a, V> {
    /// The subscribed streams the record belongs to (see [`Record::streams`]).
    pub streams: &'a Arc<[Arc<str>]>,
    /// Logical cluster id.
    pub cluster: &'a Arc<str>,
    /// Topic.
    pub topic: &'a Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in ms since the epoch (create or log-append time), if any.
    pub timestamp: Option<i64>,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Headers in order (empty when the source was built with `include_headers(false)`).
    pub headers: &'a [(String, Option<Vec<u8>>)],
    /// The deserialized value.
    pub value: &'a V,
    /// The value's bytes as fetched, in the batch's buffer.
    pub(super) raw_value: Option<&'a [u8]>,
    /// The buffer `key` is part of: the batch's data, or a buffer it shares.
    pub(super) key_data: &'a Bytes,
    /// The buffer `raw_value` is part of: `data`, or a fetch answer it is shared from.
    pub(super) value_data: &'a Bytes,
}

impl<V> Clone for RecordRef<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for RecordRef<'_, V> {}

impl<'a, V> RecordRef<'a, V> {
    /// The key as shared [`Bytes`] (no copy).
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.key.map(|k| self.key_data.slice_ref(k))
    }

    /// The value's bytes as they were fetched, before the deserializer saw them
    /// (`None` for a tombstone), borrowed from the batch: whatever the deserializer.
    /// A reader that only needs the bytes can skip per-record values altogether with
    /// [`InBatch`](crate::deserializer::InBatch):
    ///
    /// ```no_run
    /// # async fn run(mut stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::InBatch>)
    /// # -> Result<(), multicluster_kafka::error::SourceError> {
    /// // built with .deserializer(InBatch)
    /// while let Some(batch) = stream.next_batch().await {
    ///     for record in batch?.iter() {
    ///         let bytes = record.raw_value().unwrap_or_default();
    ///         println!("{} bytes", bytes.len());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn raw_value(&self) -> Option<&'a [u8]> {
        self.raw_value
    }

    /// The value's bytes as fetched, as shared [`Bytes`] (no copy).
    pub fn raw_value_bytes(&self) -> Option<Bytes> {
        self.raw_value.map(|v| self.value_data.slice_ref(v))
    }

    /// The split this record belongs to.
    pub fn split_id(&self) -> SplitId {
        SplitId {
            cluster: self.cluster.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    /// An owned copy of the record.
    pub fn to_record(&self) -> Record<V>
    where
        V: Clone,
    {
        Record {
            streams: self.streams.clone(),
            cluster: self.cluster.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key_bytes(),
            headers: self.headers.to_vec(),
            value: self.value.clone(),
        }
    }
}

/// Borrowing iterator over a [`RecordBatch`]; see [`RecordBatch::iter`].
#[derive(Debug)]
pub struct Iter<'a, V> {
    pub(super) batch: &'a RecordBatch<V>,
    pub(super) entries: std::slice::Iter<'a, BatchEntry<V>>,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = RecordRef<'a, V>;

    // Inlined into the caller's loop, a record's view stays in registers; returned
    // through memory, its fields were read back before their stores had landed.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.entries.next().map(|e| self.batch.view(e))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.entries.next_back().map(|e| self.batch.view(e))
    }
}

impl<'a, V> IntoIterator for &'a RecordBatch<V> {
    type Item = RecordRef<'a, V>;
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

/// Owning iterator over a [`RecordBatch`]: its records as [`Record`]s.
#[derive(Debug)]
pub struct IntoIter<V> {
    cluster: Arc<str>,
    topics: Vec<Arc<str>>,
    streams: Vec<StreamIds>,
    no_streams: StreamIds,
    data: Bytes,
    shared: Vec<Bytes>,
    entries: std::vec::IntoIter<BatchEntry<V>>,
}

impl<V> Iterator for IntoIter<V> {
    type Item = Record<V>;

    fn next(&mut self) -> Option<Record<V>> {
        let e = self.entries.next()?;
        let streams = self
            .streams
            .get(e.topic as usize)
            .unwrap_or(&self.no_streams);
        let buffers = Buffers {
            data: &self.data,
            shared: &self.shared,
        };
        Some(RecordBatch::owned(
            &self.cluster,
            &self.topics,
            streams,
            buffers,
            e,
        ))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<V> ExactSizeIterator for IntoIter<V> {}

impl<V> IntoIterator for RecordBatch<V> {
    type Item = Record<V>;
    type IntoIter = IntoIter<V>;

    fn into_iter(self) -> IntoIter<V> {
        IntoIter {
            cluster: self.cluster,
            topics: self.topics,
            streams: self.streams,
            no_streams: self.no_streams,
            data: self.data,
            shared: self.shared,
            entries: self.entries.into_iter(),
        }
    }
}

impl<V> IntoIter<V> {
    /// The records not yet iterated, as a batch.
    pub(crate) fn into_batch(self) -> RecordBatch<V> {
        RecordBatch {
            cluster: self.cluster,
            topics: self.topics,
            streams: self.streams,
            no_streams: self.no_streams,
            data: self.data,
            shared: self.shared,
            entries: self.entries.collect(),
            watermark: None,
        }
    }

    /// The next record with its key + value size, fingerprint hash and batch's
    /// leader epoch.
    pub(crate) fn next_counted(&mut self) -> Option<(Record<V>, Counted)> {
        let e = self.entries.next()?;
        let buffers = Buffers {
            data: &self.data,
            shared: &self.shared,
        };
        let counted = (e.bytes(), e.hash(buffers), e.epoch());
        let streams = self
            .streams
            .get(e.topic as usize)
            .unwrap_or(&self.no_streams);
        Some((
            RecordBatch::owned(&self.cluster, &self.topics, streams, buffers, e),
            counted,
        ))
    }
}
