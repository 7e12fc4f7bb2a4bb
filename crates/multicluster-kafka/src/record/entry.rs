//! What a batch keeps per record, and where its bytes are: in the batch's data or in
//! the buffers of the answers its large values are shared from.

use std::sync::Arc;

use bytes::Bytes;

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
    pub(super) hashed: bool,
    /// Where the key is: start and length ([`NO_KEY`] without a key), in the
    /// batch's data or, as a value may be, in one of its shared buffers (the time
    /// order leaves keys where they were fetched). Two fields, not `Option<(usize, u32)>` (24 bytes, where these take 12
    /// beside `epoch`): an entry is written for every record, and its size showed in
    /// the fetch thread's profile at 100-byte records.
    pub(super) key_start: usize,
    pub(super) key_len: u32,
    /// Where the value's bytes as fetched are: in the batch's data, or in one of its
    /// shared buffers ([`shared_span`]); [`NO_KEY`]'s length for a null value.
    pub(super) value_start: usize,
    pub(super) value_len: u32,
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

    /// Where the key is (in the batch's data or one of its shared buffers:
    /// [`Buffers::place`]), if the record has one.
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
        let key = self.key().map(|k| bytes.span(k));
        let value = self.raw_value().map(|v| bytes.span(v));
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
pub(super) fn packed(span: Option<(usize, u32)>) -> (usize, u32) {
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
    /// The buffer a key's or value's span is in, and where in it.
    #[inline]
    pub(crate) fn place(self, (start, len): (usize, u32)) -> (&'a Bytes, std::ops::Range<usize>) {
        if start & SHARED == 0 {
            (self.data, span_range((start, len)))
        } else {
            self.shared_place((start, len))
        }
    }

    /// [`Self::place`] of a shared value: out of the way of the loops over small
    /// records, which come here only in time order.
    #[inline(never)]
    fn shared_place(self, (start, len): (usize, u32)) -> (&'a Bytes, std::ops::Range<usize>) {
        let offset = start & OFFSET_MASK;
        (
            &self.shared[(start & !SHARED) >> INDEX_SHIFT],
            span_range((offset, len)),
        )
    }

    /// A key's or value's bytes.
    #[inline]
    pub(crate) fn span(self, span: (usize, u32)) -> &'a [u8] {
        let (buffer, range) = self.place(span);
        &buffer[range]
    }
}

/// A value span's start with this bit set is in a batch's shared buffers.
pub(super) const SHARED: usize = !(usize::MAX >> 1);
/// Which shared buffer: the bits from here up (below [`SHARED`]).
pub(super) const INDEX_SHIFT: u32 = usize::BITS / 8 * 5;
/// Where in the shared buffer: the bits below [`INDEX_SHIFT`].
pub(super) const OFFSET_MASK: usize = (1 << INDEX_SHIFT) - 1;

/// The span of `len` bytes at `offset` in a batch's shared buffer `index`, as an
/// entry's key or value span keeps it; `None` when the index or offset does not fit (the
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
    pub(super) fn buffers(&self) -> Buffers<'_> {
        Buffers {
            data: &self.data,
            shared: &self.shared,
        }
    }
}

/// A [`BatchEntry`]'s timestamp when the record has none (Kafka's own "no
/// timestamp" is -1, which a record may still carry; this one it cannot).
pub(super) const NO_TIMESTAMP: i64 = i64::MIN;

/// What [`IntoIter::next_counted`] tells of a record besides itself: its key + value
/// size, fingerprint hash and batch's leader epoch.
pub(crate) type Counted = (u32, u64, Option<i32>);

/// A [`BatchEntry`]'s epoch when it is not known (Kafka's own "no epoch").
pub(super) const NO_EPOCH: i32 = -1;

/// No record's key or value is this long ([`BatchEntry`]'s length of a null key or
/// value).
pub(super) const NO_KEY: u32 = u32::MAX;

/// A record's headers, boxed: most records have none (and a source built with
/// `include_headers(false)` keeps none), so an entry holds one pointer, not a `Vec`.
#[derive(Clone, Debug, Default)]
pub(crate) struct EntryHeaders(Option<Box<HeaderList>>);

/// A record's headers in order.
pub(super) type HeaderList = Vec<(String, Option<Vec<u8>>)>;

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

/// The bytes a span covers.
pub(super) fn span_range((start, len): (usize, u32)) -> std::ops::Range<usize> {
    start..start + len as usize
}
