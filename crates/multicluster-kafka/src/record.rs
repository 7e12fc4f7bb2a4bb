//! Records handed to the user.

use std::sync::Arc;

use bytes::Bytes;

use crate::base::metadata::index::{StreamIds, StreamIndex};
use crate::base::split::SplitId;

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

/// One record of a [`RecordBatch`], without the handles the batch holds once.
#[derive(Clone, Debug)]
pub(crate) struct BatchEntry<V> {
    /// Index into the batch's topics.
    pub topic: u32,
    pub partition: i32,
    pub offset: i64,
    /// The timestamp, [`NO_TIMESTAMP`] for none (an `Option` would add 8 bytes to
    /// every entry).
    timestamp: i64,
    /// [`record_hash`](crate::base::split::record_hash) of key, value and headers: the
    /// record's fingerprint with its timestamp; unset (see `hashed`) for a record
    /// without headers until [`Self::hash`] makes it from the key and value.
    hash: u64,
    /// Whether `hash` is set.
    hashed: bool,
    /// Where the key is in the batch's data: start and length ([`NO_KEY`] without
    /// a key). Two fields, not `Option<(usize, u32)>` (24 bytes, where these take 12
    /// beside `epoch`): an entry is written for every record, and its size showed in
    /// the fetch thread's profile at 100-byte records.
    key_start: usize,
    key_len: u32,
    /// Where the value's bytes as fetched are: in the batch's data, or in one of its
    /// shared buffers ([`shared_span`]); [`NO_KEY`]'s length for a null value.
    value_start: usize,
    value_len: u32,
    /// The leader epoch of the record batch it came in, −1 when not known (a broker
    /// before Kafka 2.1): a checkpoint keeps it with the split's last record, and the
    /// native path validates a restored position against it (KIP-320). In the room
    /// the key + value size took, which [`Self::bytes`] adds up instead.
    epoch: i32,
    pub headers: EntryHeaders,
    pub value: V,
}

impl<V> BatchEntry<V> {
    /// An entry; `at` is its topic index, partition and offset, `mark` its timestamp
    /// and fingerprint hash (`None` for a record without headers: made from the key
    /// and value when needed), `raw` where its key and its value are in the batch's
    /// data (start, length), `epoch` its batch's leader epoch if known.
    pub(crate) fn new(
        at: (u32, i32, i64),
        (timestamp, hash): (Option<i64>, Option<u64>),
        raw: RawSpans,
        epoch: Option<i32>,
        headers: EntryHeaders,
        value: V,
    ) -> Self {
        let (key_start, key_len) = packed(raw.key);
        let (value_start, value_len) = packed(raw.value);
        let (topic, partition, offset) = at;
        Self {
            topic,
            partition,
            offset,
            timestamp: timestamp.unwrap_or(NO_TIMESTAMP),
            hash: hash.unwrap_or(0),
            hashed: hash.is_some(),
            key_start,
            key_len,
            value_start,
            value_len,
            epoch: epoch.filter(|e| *e >= 0).unwrap_or(NO_EPOCH),
            headers,
            value,
        }
    }

    /// Key + value bytes, for the metrics.
    pub(crate) fn bytes(&self) -> u32 {
        let len = |len: u32| if len == NO_KEY { 0 } else { len };
        len(self.key_len).saturating_add(len(self.value_len))
    }

    /// The leader epoch of the record's batch, if known.
    pub(crate) fn epoch(&self) -> Option<i32> {
        (self.epoch != NO_EPOCH).then_some(self.epoch)
    }

    /// The record's timestamp, if it has one.
    pub(crate) fn timestamp(&self) -> Option<i64> {
        (self.timestamp != NO_TIMESTAMP).then_some(self.timestamp)
    }

    /// Where the key is in the batch's data (start, length), if the record has one.
    pub(crate) fn key(&self) -> Option<(usize, u32)> {
        (self.key_len != NO_KEY).then_some((self.key_start, self.key_len))
    }

    /// Where the value as fetched is (in the batch's data or one of its shared
    /// buffers: [`Buffers::place`]), unless it is null.
    pub(crate) fn raw_value(&self) -> Option<(usize, u32)> {
        (self.value_len != NO_KEY).then_some((self.value_start, self.value_len))
    }

    /// The record's fingerprint hash (`bytes` are its batch's): as it was fetched
    /// with, or for a record without headers, made from its key and value now.
    pub(crate) fn hash(&self, bytes: Buffers<'_>) -> u64 {
        if self.hashed {
            return self.hash;
        }
        let key = self.key().map(|k| &bytes.data[span_range(k)]);
        let value = self.raw_value().map(|v| bytes.value(v));
        crate::base::split::record_hash(key, value, &[])
    }

    /// The hash when it is already known (see [`Self::hash`]).
    pub(crate) fn known_hash(&self) -> Option<u64> {
        self.hashed.then_some(self.hash)
    }
}

/// Where a record's key and value are in its batch's data, or for a value, in one
/// of its shared buffers (start, length; `None` when null).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawSpans {
    pub key: Option<(usize, u32)>,
    pub value: Option<(usize, u32)>,
}

/// A span as an entry keeps it: a null one has the length [`NO_KEY`].
fn packed(span: Option<(usize, u32)>) -> (usize, u32) {
    match span {
        Some((start, len)) if len != NO_KEY => (start, len),
        _ => (0, NO_KEY),
    }
}

/// A batch's bytes: its data, where keys and most values are, and the buffers its
/// large values are shared from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Buffers<'a> {
    pub data: &'a Bytes,
    pub shared: &'a [Bytes],
}

impl<'a> Buffers<'a> {
    /// The buffer a value's span is in, and where in it.
    #[inline]
    pub(crate) fn place(self, (start, len): (usize, u32)) -> (&'a Bytes, std::ops::Range<usize>) {
        if start & SHARED == 0 {
            (self.data, span_range((start, len)))
        } else {
            self.shared_place((start, len))
        }
    }

    /// [`Self::place`] of a shared value: out of the way of the loops over small
    /// records, which never come here.
    #[cold]
    #[inline(never)]
    fn shared_place(self, (start, len): (usize, u32)) -> (&'a Bytes, std::ops::Range<usize>) {
        let offset = start & OFFSET_MASK;
        (
            &self.shared[(start & !SHARED) >> INDEX_SHIFT],
            span_range((offset, len)),
        )
    }

    /// A value's bytes.
    #[inline]
    pub(crate) fn value(self, span: (usize, u32)) -> &'a [u8] {
        let (buffer, range) = self.place(span);
        &buffer[range]
    }
}

/// A value span's start with this bit set is in a batch's shared buffers.
const SHARED: usize = !(usize::MAX >> 1);
/// Which shared buffer: the bits from here up (below [`SHARED`]).
const INDEX_SHIFT: u32 = usize::BITS / 8 * 5;
/// Where in the shared buffer: the bits below [`INDEX_SHIFT`].
const OFFSET_MASK: usize = (1 << INDEX_SHIFT) - 1;

/// The span of `len` bytes at `offset` in a batch's shared buffer `index`, as an
/// entry's value span keeps it; `None` when the index or offset does not fit (the
/// value is then copied).
pub(crate) fn shared_span(index: usize, offset: usize, len: u32) -> Option<(usize, u32)> {
    (offset <= OFFSET_MASK && index < (SHARED >> INDEX_SHIFT) && len != NO_KEY)
        .then_some((SHARED | index << INDEX_SHIFT | offset, len))
}

/// A batch's bytes apart from its entries ([`RecordBatch::into_parts`]): its topics,
/// its data and the buffers its large values are shared from.
#[derive(Debug)]
pub(crate) struct BatchBytes {
    pub topics: Vec<Arc<str>>,
    pub data: Bytes,
    pub shared: Vec<Bytes>,
}

impl BatchBytes {
    fn buffers(&self) -> Buffers<'_> {
        Buffers {
            data: &self.data,
            shared: &self.shared,
        }
    }
}

/// A [`BatchEntry`]'s timestamp when the record has none (Kafka's own "no
/// timestamp" is -1, which a record may still carry; this one it cannot).
const NO_TIMESTAMP: i64 = i64::MIN;

/// What [`IntoIter::next_counted`] tells of a record besides itself: its key + value
/// size, fingerprint hash and batch's leader epoch.
pub(crate) type Counted = (u32, u64, Option<i32>);

/// A [`BatchEntry`]'s epoch when it is not known (Kafka's own "no epoch").
const NO_EPOCH: i32 = -1;

/// No record's key or value is this long ([`BatchEntry`]'s length of a null key or
/// value).
const NO_KEY: u32 = u32::MAX;

/// A record's headers, boxed: most records have none (and a source built with
/// `include_headers(false)` keeps none), so an entry holds one pointer, not a `Vec`.
#[derive(Clone, Debug, Default)]
pub(crate) struct EntryHeaders(Option<Box<HeaderList>>);

/// A record's headers in order.
type HeaderList = Vec<(String, Option<Vec<u8>>)>;

impl EntryHeaders {
    pub(crate) fn as_slice(&self) -> &[(String, Option<Vec<u8>>)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    pub(crate) fn into_vec(self) -> HeaderList {
        self.0.map_or_else(Vec::new, |h| *h)
    }
}

impl From<HeaderList> for EntryHeaders {
    fn from(headers: HeaderList) -> Self {
        Self((!headers.is_empty()).then(|| Box::new(headers)))
    }
}

#[cfg(test)]
impl<V> BatchEntry<V> {
    /// An entry without timestamp, key or headers.
    pub(crate) fn bare(topic: u32, partition: i32, offset: i64, value: V) -> Self {
        Self::new(
            (topic, partition, offset),
            (None, Some(0)),
            RawSpans::default(),
            None,
            EntryHeaders::default(),
            value,
        )
    }

    /// An entry with a timestamp, without key or headers.
    pub(crate) fn timed(topic: u32, partition: i32, offset: i64, timestamp: i64, value: V) -> Self {
        Self::new(
            (topic, partition, offset),
            (Some(timestamp), Some(0)),
            RawSpans::default(),
            None,
            EntryHeaders::default(),
            value,
        )
    }
}

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
    /// into other batches ([`Self::push_from`]) in another order.
    pub(crate) fn into_parts(self) -> (BatchBytes, Vec<BatchEntry<V>>) {
        let bytes = BatchBytes {
            topics: self.topics,
            data: self.data,
            shared: self.shared,
        };
        (bytes, self.entries)
    }

    /// Adds an entry taken by [`Self::into_parts`] from a batch whose bytes are
    /// `from`: its key, and a value in `from`'s data, go to the end of `data` (which
    /// becomes the batch's data with [`Self::set_data`]); a value in one of `from`'s
    /// shared buffers stays there, the buffer shared by this batch too.
    pub(crate) fn push_from(
        &mut self,
        from: &BatchBytes,
        mut entry: BatchEntry<V>,
        data: &mut Vec<u8>,
    ) {
        entry.topic = self.topic_index(&from.topics[entry.topic as usize]);
        let mut copy = |bytes: &[u8]| {
            let start = data.len();
            data.extend_from_slice(bytes);
            (start, u32::try_from(bytes.len()).unwrap_or(NO_KEY - 1))
        };
        if let Some(k) = entry.key() {
            (entry.key_start, entry.key_len) = copy(&from.data[span_range(k)]);
        }
        if let Some((start, len)) = entry.raw_value() {
            let span = if start & SHARED == 0 {
                None
            } else {
                let buffer = &from.shared[(start & !SHARED) >> INDEX_SHIFT];
                shared_span(self.share(buffer), start & OFFSET_MASK, len)
            };
            (entry.value_start, entry.value_len) = span.unwrap_or_else(|| {
                let (buffer, range) = from.buffers().place((start, len));
                copy(&buffer[range])
            });
        }
        self.entries.push(entry);
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

    /// Sets the bytes the entries' keys are in.
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
    /// its own data first, then the fetch answers large values are shared from. With
    /// [`key_span`](Self::key_span) and [`value_span`](Self::value_span), for
    /// programs that lay columns over the bytes as fetched (Arrow's view arrays).
    pub fn byte_buffers(&self) -> impl Iterator<Item = &Bytes> {
        std::iter::once(&self.data).chain(self.shared.iter())
    }

    /// Where the key of the record at `index` is: which of
    /// [`byte_buffers`](Self::byte_buffers), and where in it; `None` without a key
    /// (or record).
    pub fn key_span(&self, index: usize) -> Option<(usize, std::ops::Range<usize>)> {
        let key = self.entries.get(index)?.key()?;
        Some((0, span_range(key)))
    }

    /// Where the value of the record at `index` is, as fetched (see
    /// [`key_span`](Self::key_span)); `None` for a tombstone (or no record).
    pub fn value_span(&self, index: usize) -> Option<(usize, std::ops::Range<usize>)> {
        let (start, len) = self.entries.get(index)?.raw_value()?;
        if start & SHARED == 0 {
            Some((0, span_range((start, len))))
        } else {
            let buffer = 1 + ((start & !SHARED) >> INDEX_SHIFT);
            Some((buffer, span_range((start & OFFSET_MASK, len))))
        }
    }

    /// The batch's bytes.
    pub(crate) fn buffers(&self) -> Buffers<'_> {
        Buffers {
            data: &self.data,
            shared: &self.shared,
        }
    }

    #[inline]
    fn view<'a>(&'a self, e: &'a BatchEntry<V>) -> RecordRef<'a, V> {
        let value = e.raw_value().map(|v| self.buffers().place(v));
        RecordRef {
            streams: self.streams_of(e.topic),
            cluster: &self.cluster,
            topic: &self.topics[e.topic as usize],
            partition: e.partition,
            offset: e.offset,
            timestamp: e.timestamp(),
            key: e.key().map(|k| &self.data[span_range(k)]),
            headers: e.headers.as_slice(),
            value: &e.value,
            raw_value: value.clone().map(|(buffer, range)| &buffer[range]),
            data: &self.data,
            value_data: value.map_or(&self.data, |(buffer, _)| buffer),
        }
    }

    fn owned(
        cluster: &Arc<str>,
        topics: &[Arc<str>],
        streams: &StreamIds,
        data: &Bytes,
        e: BatchEntry<V>,
    ) -> Record<V> {
        Record {
            streams: streams.clone(),
            cluster: cluster.clone(),
            topic: topics[e.topic as usize].clone(),
            partition: e.partition,
            offset: e.offset,
            timestamp: e.timestamp(),
            key: e.key().map(|k| data.slice(span_range(k))),
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

fn span_range((start, len): (usize, u32)) -> std::ops::Range<usize> {
    start..start + len as usize
}

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
    raw_value: Option<&'a [u8]>,
    /// The batch's buffer, which `key` is part of.
    data: &'a Bytes,
    /// The buffer `raw_value` is part of: `data`, or a fetch answer it is shared from.
    value_data: &'a Bytes,
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
        self.key.map(|k| self.data.slice_ref(k))
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
    batch: &'a RecordBatch<V>,
    entries: std::slice::Iter<'a, BatchEntry<V>>,
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
        Some(RecordBatch::owned(
            &self.cluster,
            &self.topics,
            streams,
            &self.data,
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
            RecordBatch::owned(&self.cluster, &self.topics, streams, &self.data, e),
            counted,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        topic: u32,
        partition: i32,
        offset: i64,
        raw: RawSpans,
        value: &str,
    ) -> BatchEntry<String> {
        BatchEntry::new(
            (topic, partition, offset),
            (Some(offset * 10), Some(0)),
            raw,
            Some(7),
            EntryHeaders::default(),
            value.to_string(),
        )
    }

    /// Two topics; keys "k1" and "k2" and raw values "X" and "Z" in the shared data,
    /// one record without either.
    fn batch() -> RecordBatch<String> {
        let mut b = RecordBatch::new(Arc::from("east"));
        let (a, t) = (Arc::from("a"), Arc::from("b"));
        assert_eq!(b.topic_index(&a), 0);
        assert_eq!(b.topic_index(&t), 1);
        assert_eq!(b.topic_index(&a), 0, "a topic is added once");
        b.data = Bytes::from_static(b"k1k2XZ");
        let spans = |key, value| RawSpans { key, value };
        b.entries = vec![
            entry(0, 0, 5, spans(Some((0, 2)), Some((4, 1))), "x"),
            entry(1, 3, 9, spans(None, None), "y"),
            entry(0, 0, 6, spans(Some((2, 2)), Some((5, 1))), "z"),
        ];
        b
    }

    #[test]
    fn borrowed_and_owned_records_agree() {
        let b = batch();
        assert_eq!((b.len(), b.is_empty(), &**b.cluster()), (3, false, "east"));
        let borrowed: Vec<Record<String>> = b.iter().map(|r| r.to_record()).collect();
        let owned: Vec<Record<String>> = b.clone().into_iter().collect();
        assert_eq!(borrowed, owned);
        let r = &owned[2];
        assert_eq!(
            (&*r.cluster, &*r.topic, r.partition, r.offset, r.timestamp),
            ("east", "a", 0, 6, Some(60))
        );
        assert_eq!(r.key.as_deref(), Some(&b"k2"[..]));
        assert_eq!(owned[1].key, None);
        assert_eq!(&*owned[1].topic, "b");
    }

    #[test]
    fn a_borrowed_record_shares_its_key_and_names_its_split() {
        let b = batch();
        let first = b.get(0).unwrap();
        assert_eq!(first.key, Some(&b"k1"[..]));
        assert_eq!(first.key_bytes().as_deref(), Some(&b"k1"[..]));
        assert_eq!(first.raw_value(), Some(&b"X"[..]));
        assert_eq!(first.raw_value_bytes().as_deref(), Some(&b"X"[..]));
        assert_eq!(b.get(1).unwrap().raw_value(), None, "a null value");
        assert_eq!(
            first.split_id().to_string(),
            b.iter().next().unwrap().split_id().to_string()
        );
        assert!(b.get(3).is_none());
        assert_eq!(
            b.iter().rev().map(|r| r.offset).collect::<Vec<_>>(),
            [6, 9, 5]
        );
        assert_eq!(b.iter().len(), 3);
    }

    #[test]
    fn a_shared_value_is_read_from_its_buffer_and_moves_and_hashes_like_a_copied_one() {
        // Record 0's value is copied into the data, record 1's and 2's are shared
        // from two answers.
        let answers = [
            Bytes::from_static(b"..header..LARGE-ONE.."),
            Bytes::from_static(b"LARGE-TWO"),
        ];
        let mut b = batch();
        b.shared = answers.to_vec();
        let at = |index, offset, len| shared_span(index, offset, len).expect("it fits");
        b.entries[1] = entry(
            1,
            3,
            9,
            RawSpans {
                key: None,
                value: Some(at(0, 10, 9)),
            },
            "y",
        );
        b.entries[2] = entry(
            0,
            0,
            6,
            RawSpans {
                key: Some((2, 2)),
                value: Some(at(1, 0, 9)),
            },
            "z",
        );
        let raw: Vec<Option<&[u8]>> = b.iter().map(|r| r.raw_value()).collect();
        assert_eq!(
            raw,
            [
                Some(&b"X"[..]),
                Some(&b"LARGE-ONE"[..]),
                Some(&b"LARGE-TWO"[..])
            ]
        );
        // The spans name the same bytes: the data first, then the shared buffers.
        let buffers: Vec<&Bytes> = b.byte_buffers().collect();
        assert_eq!(buffers.len(), 3);
        let at_span = |(i, range): (usize, std::ops::Range<usize>)| &buffers[i][range];
        for (i, want) in raw.iter().enumerate() {
            assert_eq!(b.value_span(i).map(at_span), *want, "value {i}");
            assert_eq!(b.key_span(i).map(at_span), b.get(i).unwrap().key, "key {i}");
        }
        assert_eq!(b.value_span(3), None);
        let second = b.get(1).unwrap();
        let shared = second.raw_value_bytes().unwrap();
        assert_eq!(shared.as_ptr(), answers[0][10..].as_ptr(), "no copy");
        assert_eq!(
            b.get(2).unwrap().key,
            Some(&b"k2"[..]),
            "keys stay in the data"
        );
        // A hash from the shared bytes is the hash of the same bytes copied.
        let copied = |e: &BatchEntry<String>, value: &'static [u8]| {
            let mut plain = RecordBatch::<String>::new(Arc::from("east"));
            plain.data = Bytes::from_static(value);
            let mut e = e.clone();
            (e.value_start, e.value_len) = (0, value.len() as u32);
            e.hash(plain.buffers())
        };
        let mut unhashed = b.entries[1].clone();
        unhashed.hashed = false;
        assert_eq!(unhashed.hash(b.buffers()), copied(&unhashed, b"LARGE-ONE"));
        // Split off and moved, the values come along.
        let rest = b.split_off(1).unwrap();
        assert_eq!(rest.get(1).unwrap().raw_value(), Some(&b"LARGE-TWO"[..]));
        let (bytes, entries) = rest.into_parts();
        let mut moved = RecordBatch::<String>::new(Arc::from("east"));
        let mut data = Vec::new();
        for e in entries.into_iter().rev() {
            moved.push_from(&bytes, e, &mut data);
        }
        moved.set_data(data);
        let values: Vec<Option<Bytes>> = moved.iter().map(|r| r.raw_value_bytes()).collect();
        assert_eq!(
            values,
            [Some(answers[1].clone()), Some(answers[0].slice(10..19))]
        );
        assert_eq!(moved.shared.len(), 2, "each answer once, not copied");
        assert_eq!(moved.get(0).unwrap().key, Some(&b"k2"[..]));
        // What does not fit is refused (the value is then copied).
        assert_eq!(shared_span(0, OFFSET_MASK + 1, 1), None);
        assert_eq!(shared_span(SHARED >> INDEX_SHIFT, 0, 1), None);
        assert_eq!(shared_span(0, 0, NO_KEY), None);
        assert!(shared_span(0, OFFSET_MASK, 1).is_some());
    }

    #[test]
    fn a_partly_iterated_batch_gives_back_the_rest() {
        let mut it = batch().into_iter();
        let (first, _) = it.next_counted().unwrap();
        assert_eq!(first.value, "x");
        let rest = it.into_batch();
        assert_eq!(
            rest.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(),
            ["y", "z"]
        );
        assert_eq!(rest.get(1).unwrap().key, Some(&b"k2"[..]));
        assert_eq!(rest.get(1).unwrap().raw_value(), Some(&b"Z"[..]));
    }

    #[test]
    fn an_entry_of_a_shared_value_stays_small_and_keeps_keys_and_headers() {
        // 136 bytes with the key and value spans as `Option<(usize, u32)>` and
        // headers as a `Vec`.
        let size = std::mem::size_of::<BatchEntry<Bytes>>();
        assert!(size <= 104, "{size} bytes");
        let with_key = |key| {
            BatchEntry::new(
                (0, 0, 0),
                (None, Some(0)),
                RawSpans { key, value: None },
                None,
                EntryHeaders::default(),
                Bytes::new(),
            )
        };
        // The epoch took the room of the key + value size, which is added up now.
        let sized = BatchEntry::new(
            (0, 0, 0),
            (None, None),
            RawSpans {
                key: Some((0, 3)),
                value: Some((3, 40)),
            },
            Some(12),
            EntryHeaders::default(),
            (),
        );
        assert_eq!((sized.bytes(), sized.epoch()), (43, Some(12)));
        assert_eq!((with_key(None).bytes(), with_key(None).epoch()), (0, None));
        assert_eq!(with_key(Some((7, 5))).bytes(), 5);
        assert_eq!(with_key(Some((7, 0))).key(), Some((7, 0)));
        assert_eq!(with_key(Some((usize::MAX, 3))).key(), Some((usize::MAX, 3)));
        assert_eq!(with_key(None).key(), None);
        let h = vec![
            ("h".to_string(), Some(b"v".to_vec())),
            ("n".to_string(), None),
        ];
        let e = EntryHeaders::from(h.clone());
        assert_eq!(e.as_slice(), &h[..]);
        assert_eq!(e.into_vec(), h);
        assert!(EntryHeaders::from(Vec::new()).as_slice().is_empty());
    }
}
