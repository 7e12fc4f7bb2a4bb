//! Building a batch, taking it apart and putting records back in, and reading it.

use std::sync::Arc;

use bytes::Bytes;

use crate::base::metadata::index::{StreamIds, StreamIndex};
use crate::base::split::SplitId;

use super::entry::*;
use super::*;

impl<V> RecordBatch<V> {
    /// An empty batch of `cluster`'s records.
    pub(crate) fn new(cluster: Arc<str>) -> Self {
        Self {
            cluster,
            topics: Vec::new(),
            streams: Vec::new(),
            no_streams: StreamIds::from(Vec::new()),
            data: Bytes::new(),
            shared: Vec::new(),
            entries: Vec::new(),
            watermark: None,
        }
    }

    /// With [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks): the
    /// reader's watermark (milliseconds since the epoch) right after this batch was
    /// handed out; see [`SourceReader::watermark`](crate::SourceReader::watermark).
    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    /// Names the streams of each of the batch's topics, as `index` has them now.
    pub(crate) fn set_streams(&mut self, index: &StreamIndex) {
        self.streams = self
            .topics
            .iter()
            .map(|t| index.get(&self.cluster, t))
            .collect();
    }

    fn streams_of(&self, topic: u32) -> &StreamIds {
        self.streams.get(topic as usize).unwrap_or(&self.no_streams)
    }

    /// Drops the records of these splits (splits of other clusters are ignored).
    pub(crate) fn drop_splits(&mut self, ids: &[SplitId]) {
        let topics = &self.topics;
        let cluster = &self.cluster;
        self.entries.retain(|e| {
            !ids.iter().any(|id| {
                id.partition == e.partition
                    && *id.cluster == **cluster
                    && *id.topic == *topics[e.topic as usize]
            })
        });
    }

    /// Takes the entries out, apart from the bytes they name, so that they can go
    /// into other batches ([`Self::extend_from`]) in another order.
    pub(crate) fn into_parts(self) -> (BatchBytes, Vec<BatchEntry<V>>) {
        let bytes = BatchBytes {
            topics: self.topics,
            data: self.data,
            shared: self.shared,
        };
        (bytes, self.entries)
    }

    /// Adds entries taken by [`Self::into_parts`] from a batch whose bytes are
    /// `from`: their keys and values stay where they are (`from`'s data or its
    /// shared buffers), those buffers shared by this batch too. A span that does not
    /// fit a shared one (see [`shared_span`]) is copied to the end of `data`, which
    /// becomes the batch's data with [`Self::set_data`]. Returns their key + value
    /// bytes.
    ///
    /// A run of one partition's records, as the time order releases them, looks up
    /// its topic and buffers once, not per record.
    pub(crate) fn extend_from(
        &mut self,
        from: &BatchBytes,
        entries: impl ExactSizeIterator<Item = BatchEntry<V>>,
        data: &mut Vec<u8>,
    ) -> usize {
        self.entries.reserve(entries.len());
        let mut copy = |bytes: &[u8]| {
            let start = data.len();
            data.extend_from_slice(bytes);
            (start, u32::try_from(bytes.len()).unwrap_or(NO_KEY - 1))
        };
        // (`from`'s index, this batch's) of the last topic, data and shared buffer.
        let mut topic: Option<(u32, u32)> = None;
        let mut own: Option<usize> = None;
        let mut shared: Option<(usize, usize)> = None;
        let mut total = 0;
        for mut entry in entries {
            total += entry.bytes() as usize;
            entry.topic = match topic {
                Some((f, t)) if f == entry.topic => t,
                _ => {
                    let t = self.topic_index(&from.topics[entry.topic as usize]);
                    topic = Some((entry.topic, t));
                    t
                }
            };
            let mut keep = |(start, len): (usize, u32)| {
                let span = if start & SHARED == 0 {
                    let at = *own.get_or_insert_with(|| self.share(&from.data));
                    shared_span(at, start, len)
                } else {
                    let j = (start & !SHARED) >> INDEX_SHIFT;
                    let at = match shared {
                        Some((f, t)) if f == j => t,
                        _ => {
                            let t = self.share(&from.shared[j]);
                            shared = Some((j, t));
                            t
                        }
                    };
                    shared_span(at, start & OFFSET_MASK, len)
                };
                span.unwrap_or_else(|| copy(from.buffers().span((start, len))))
            };
            if let Some(k) = entry.key() {
                (entry.key_start, entry.key_len) = keep(k);
            }
            if let Some(v) = entry.raw_value() {
                (entry.value_start, entry.value_len) = keep(v);
            }
            self.entries.push(entry);
        }
        total
    }

    /// The index of `buffer` in this batch's shared buffers, added if new.
    fn share(&mut self, buffer: &Bytes) -> usize {
        let same = |b: &Bytes| b.as_ptr() == buffer.as_ptr() && b.len() == buffer.len();
        match self.shared.iter().rposition(same) {
            Some(i) => i,
            None => {
                self.shared.push(buffer.clone());
                self.shared.len() - 1
            }
        }
    }

    /// Sets the batch's own data (where the entries' unshared spans are).
    pub(crate) fn set_data(&mut self, data: Vec<u8>) {
        self.data = Bytes::from(data);
    }

    /// The entries from `at` on, as a batch of their own sharing this one's data;
    /// `None` when there are none.
    pub(crate) fn split_off(&mut self, at: usize) -> Option<Self> {
        (self.entries.len() > at).then(|| Self {
            cluster: self.cluster.clone(),
            topics: self.topics.clone(),
            streams: self.streams.clone(),
            no_streams: self.no_streams.clone(),
            data: self.data.clone(),
            shared: self.shared.clone(),
            entries: self.entries.split_off(at),
            watermark: None,
        })
    }

    /// Logical id of the cluster every record of the batch comes from.
    pub fn cluster(&self) -> &Arc<str> {
        &self.cluster
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the batch has no record.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The record at `index`, if any.
    pub fn get(&self, index: usize) -> Option<RecordRef<'_, V>> {
        self.entries.get(index).map(|e| self.view(e))
    }

    /// The records in order, borrowed.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter {
            batch: self,
            entries: self.entries.iter(),
        }
    }

    /// The buffers the batch's keys and values are in, shared rather than copied:
    /// its own data first, then the fetch answers large values are shared from (and,
    /// in time order, the data of the batches its records were fetched in). With
    /// [`key_span`](Self::key_span) and [`value_span`](Self::value_span), for
    /// programs that lay columns over the bytes as fetched (Arrow's view arrays).
    pub fn byte_buffers(&self) -> impl Iterator<Item = &Bytes> {
        std::iter::once(&self.data).chain(self.shared.iter())
    }

    /// Where the key of the record at `index` is: which of
    /// [`byte_buffers`](Self::byte_buffers), and where in it; `None` without a key
    /// (or record).
    pub fn key_span(&self, index: usize) -> Option<(usize, std::ops::Range<usize>)> {
        Some(numbered(self.entries.get(index)?.key()?))
    }

    /// Where the value of the record at `index` is, as fetched (see
    /// [`key_span`](Self::key_span)); `None` for a tombstone (or no record).
    pub fn value_span(&self, index: usize) -> Option<(usize, std::ops::Range<usize>)> {
        Some(numbered(self.entries.get(index)?.raw_value()?))
    }

    /// The batch's bytes.
    pub(crate) fn buffers(&self) -> Buffers<'_> {
        Buffers {
            data: &self.data,
            shared: &self.shared,
        }
    }

    #[inline]
    pub(super) fn view<'a>(&'a self, e: &'a BatchEntry<V>) -> RecordRef<'a, V> {
        let key = e.key().map(|k| self.buffers().place(k));
        let value = e.raw_value().map(|v| self.buffers().place(v));
        RecordRef {
            streams: self.streams_of(e.topic),
            cluster: &self.cluster,
            topic: &self.topics[e.topic as usize],
            partition: e.partition,
            offset: e.offset,
            timestamp: e.timestamp(),
            key: key.clone().map(|(buffer, range)| &buffer[range]),
            headers: e.headers.as_slice(),
            value: &e.value,
            raw_value: value.clone().map(|(buffer, range)| &buffer[range]),
            key_data: key.map_or(&self.data, |(buffer, _)| buffer),
            value_data: value.map_or(&self.data, |(buffer, _)| buffer),
        }
    }

    pub(super) fn owned(
        cluster: &Arc<str>,
        topics: &[Arc<str>],
        streams: &StreamIds,
        buffers: Buffers<'_>,
        e: BatchEntry<V>,
    ) -> Record<V> {
        Record {
            streams: streams.clone(),
            cluster: cluster.clone(),
            topic: topics[e.topic as usize].clone(),
            partition: e.partition,
            offset: e.offset,
            timestamp: e.timestamp(),
            key: e.key().map(|k| {
                let (buffer, range) = buffers.place(k);
                buffer.slice(range)
            }),
            headers: e.headers.into_vec(),
            value: e.value,
        }
    }

    /// The index of `topic` in this batch's topics, added if new.
    pub(crate) fn topic_index(&mut self, topic: &Arc<str>) -> u32 {
        match self.topics.iter().position(|t| Arc::ptr_eq(t, topic)) {
            Some(i) => i as u32,
            None => {
                self.topics.push(topic.clone());
                (self.topics.len() - 1) as u32
            }
        }
    }
}

/// A key's or value's span as (which of [`RecordBatch::byte_buffers`], where in it).
fn numbered((start, len): (usize, u32)) -> (usize, std::ops::Range<usize>) {
    if start & SHARED == 0 {
        (0, span_range((start, len)))
    } else {
        let buffer = 1 + ((start & !SHARED) >> INDEX_SHIFT);
        (buffer, span_range((start & OFFSET_MASK, len)))
    }
}
