//! Turning record bytes into values.
//!
//! A [`Deserializer`] sees the whole [`RawRecord`] (cluster id included) and returns the
//! value the user gets in [`Record::value`](crate::record::Record). Ready-made ones:
//! [`RawValue`] (the bytes, without a copy), [`NullableValue`] (the same, tombstones
//! as `None`), [`InBatch`] (none: the bytes stay in the batch), [`Utf8`], [`Json`]; [`ValueOnly`] gathers
//! them under the names used in the design (`ValueOnly::<String>::utf8()`).

use std::marker::PhantomData;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::record::RawRecord;

/// A record that could not be deserialized.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot deserialize {cluster}/{topic}/{partition} offset {offset}: {reason}")]
pub struct DeserializeError {
    /// Logical cluster id.
    pub cluster: String,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// What was wrong.
    pub reason: String,
}

impl DeserializeError {
    /// An error about `record`.
    pub fn at(record: &RawRecord<'_>, reason: impl Into<String>) -> Self {
        Self {
            cluster: record.cluster.to_string(),
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            reason: reason.into(),
        }
    }
}

/// Turns a raw record into a value. Called for each record on a fetch thread of its
/// reader (a plain thread: no tokio runtime context, no caller's span), a
/// batch at a time, so it must be `Send + Sync`; it should not block. A panic in it
/// reaches the caller of the reader's `next` or `next_batch`.
///
/// A closure is a deserializer. This one reads the value by the record's
/// `content-type` header:
///
/// ```
/// use multicluster_kafka::deserializer::{DeserializeError, Deserializer};
/// use multicluster_kafka::record::RawRecord;
/// let by_type = |r: &RawRecord<'_>| -> Result<String, DeserializeError> {
///     let kind = r.headers.iter().find(|(k, _)| k == "content-type");
///     let bytes = r.value.unwrap_or_default();
///     match kind.and_then(|(_, v)| v.as_deref()) {
///         Some(b"text/plain") | None => String::from_utf8(bytes.to_vec())
///             .map_err(|e| DeserializeError::at(r, e.to_string())),
///         Some(other) => Err(DeserializeError::at(r, format!(
///             "unsupported content type {}", String::from_utf8_lossy(other)))),
///     }
/// };
/// let headers = [("content-type".to_string(), Some(b"text/plain".to_vec()))];
/// let raw = RawRecord { cluster: "c", topic: "t", partition: 0, offset: 0,
///     timestamp: None, key: None, value: Some(b"hi"), headers: &headers, shared: None };
/// assert_eq!(by_type.deserialize(&raw).unwrap(), "hi");
/// let headers = [("content-type".to_string(), Some(b"application/avro".to_vec()))];
/// let raw = RawRecord { headers: &headers, ..raw };
/// assert!(by_type.deserialize(&raw).is_err());
/// ```
pub trait Deserializer: Send + Sync + 'static {
    /// The value type.
    type Value: Send + 'static;

    /// Deserializes one record.
    fn deserialize(&self, record: &RawRecord<'_>) -> Result<Self::Value, DeserializeError>;

    /// The value of every record, when this deserializer does not look at the
    /// record ([`InBatch`]); `None` (the default) otherwise. With one, a fetch path
    /// puts each record straight into its batch instead of staging it for
    /// [`deserialize`](Self::deserialize), which must then give the same value.
    fn without_record(&self) -> Option<Self::Value> {
        None
    }
}

impl<F, V> Deserializer for F
where
    F: Fn(&RawRecord<'_>) -> Result<V, DeserializeError> + Send + Sync + 'static,
    V: Send + 'static,
{
    type Value = V;

    fn deserialize(&self, record: &RawRecord<'_>) -> Result<V, DeserializeError> {
        self(record)
    }
}

/// The value bytes as they are, shared with the fetched batch rather than copied (a
/// tombstone gives empty bytes).
///
/// ```
/// use multicluster_kafka::deserializer::{Deserializer, RawValue};
/// use multicluster_kafka::record::RawRecord;
/// let raw = RawRecord { cluster: "c", topic: "t", partition: 0, offset: 0,
///     timestamp: None, key: None, value: Some(b"hi"), headers: &[], shared: None };
/// assert_eq!(&RawValue.deserialize(&raw).unwrap()[..], b"hi");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct RawValue;

impl Deserializer for RawValue {
    type Value = Bytes;

    fn deserialize(&self, record: &RawRecord<'_>) -> Result<Bytes, DeserializeError> {
        Ok(record.value_bytes())
    }
}

/// The value bytes as they are, or `None` for a tombstone (a record whose value is
/// null, as a compacted topic's deletes are), so a tombstone and an empty value stay
/// apart. Shared with the fetched batch like [`RawValue`].
///
/// ```
/// use multicluster_kafka::deserializer::{Deserializer, NullableValue};
/// use multicluster_kafka::record::RawRecord;
/// let tombstone = RawRecord { cluster: "c", topic: "t", partition: 0, offset: 0,
///     timestamp: None, key: Some(b"k"), value: None, headers: &[], shared: None };
/// assert_eq!(NullableValue.deserialize(&tombstone).unwrap(), None);
/// let empty = RawRecord { value: Some(b""), ..tombstone };
/// assert_eq!(NullableValue.deserialize(&empty).unwrap().as_deref(), Some(&b""[..]));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NullableValue;

impl Deserializer for NullableValue {
    type Value = Option<Bytes>;

    fn deserialize(&self, record: &RawRecord<'_>) -> Result<Option<Bytes>, DeserializeError> {
        Ok(record.value.map(|_| record.value_bytes()))
    }
}

/// No value per record: the bytes stay where they were fetched, in the batch, and
/// [`RecordRef::raw_value`](crate::record::RecordRef::raw_value) reads them, with
/// no handle or reference count per record. For readers of whole batches
/// ([`next_batch`](crate::KafkaSourceStream::next_batch)) that only pass the bytes
/// on; a record taken on its own (`next`) has no value to give, so readers of
/// single records want [`NullableValue`].
///
/// ```
/// use multicluster_kafka::deserializer::{Deserializer, InBatch};
/// use multicluster_kafka::record::RawRecord;
/// let raw = RawRecord { cluster: "c", topic: "t", partition: 0, offset: 0,
///     timestamp: None, key: None, value: Some(b"hi"), headers: &[], shared: None };
/// assert_eq!(InBatch.deserialize(&raw), Ok(()));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct InBatch;

impl Deserializer for InBatch {
    type Value = ();

    fn deserialize(&self, _: &RawRecord<'_>) -> Result<(), DeserializeError> {
        Ok(())
    }

    fn without_record(&self) -> Option<()> {
        Some(())
    }
}

/// The value as UTF-8 text; invalid UTF-8 is an error naming the record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Utf8;

impl Deserializer for Utf8 {
    type Value = String;

    fn deserialize(&self, record: &RawRecord<'_>) -> Result<String, DeserializeError> {
        let bytes = record.value.unwrap_or_default();
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| DeserializeError::at(record, format!("value is not UTF-8: {e}")))
    }
}

/// The value as JSON, deserialized with serde into `T`.
///
/// ```
/// use multicluster_kafka::deserializer::{Deserializer, Json};
/// use multicluster_kafka::record::RawRecord;
/// #[derive(serde::Deserialize, PartialEq, Debug)]
/// struct Order { id: u32 }
/// let raw = RawRecord { cluster: "c", topic: "t", partition: 0, offset: 7,
///     timestamp: None, key: None, value: Some(br#"{"id": 5}"#), headers: &[], shared: None };
/// assert_eq!(Json::<Order>::new().deserialize(&raw).unwrap(), Order { id: 5 });
/// ```
pub struct Json<T>(PhantomData<fn() -> T>);

impl<T> Json<T> {
    /// A JSON deserializer for `T`.
    pub fn new() -> Self {
        Json(PhantomData)
    }
}

impl<T> Default for Json<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Json<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Json")
    }
}

impl<T: DeserializeOwned + Send + 'static> Deserializer for Json<T> {
    type Value = T;

    fn deserialize(&self, record: &RawRecord<'_>) -> Result<T, DeserializeError> {
        let bytes = record.value.unwrap_or_default();
        serde_json::from_slice(bytes)
            .map_err(|e| DeserializeError::at(record, format!("invalid JSON: {e}")))
    }
}

/// Constructors for deserializers that look only at the value.
///
/// ```
/// use multicluster_kafka::deserializer::ValueOnly;
/// let _utf8 = ValueOnly::<String>::utf8();
/// let _bytes = ValueOnly::<multicluster_kafka::Bytes>::bytes();
/// ```
#[derive(Debug)]
pub struct ValueOnly<T>(PhantomData<fn() -> T>);

impl ValueOnly<String> {
    /// UTF-8 text values.
    pub fn utf8() -> Utf8 {
        Utf8
    }
}

impl ValueOnly<Bytes> {
    /// Raw byte values (no copy).
    pub fn bytes() -> RawValue {
        RawValue
    }
}

impl<T: DeserializeOwned + Send + 'static> ValueOnly<T> {
    /// JSON values deserialized into `T`.
    pub fn json() -> Json<T> {
        Json::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(value: &[u8]) -> RawRecord<'_> {
        RawRecord {
            cluster: "east",
            topic: "t",
            partition: 2,
            offset: 9,
            timestamp: None,
            key: None,
            value: Some(value),
            headers: &[],
            shared: None,
        }
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_the_record() {
        let err = Utf8.deserialize(&raw(&[0xff, 0xfe])).unwrap_err();
        assert_eq!(
            (err.cluster.as_str(), err.partition, err.offset),
            ("east", 2, 9)
        );
        assert!(
            err.to_string()
                .starts_with("cannot deserialize east/t/2 offset 9")
        );
    }

    #[test]
    fn a_closure_can_use_the_cluster_id() {
        let d =
            |r: &RawRecord<'_>| Ok::<_, DeserializeError>(format!("{}:{}", r.cluster, r.offset));
        assert_eq!(d.deserialize(&raw(b"x")).unwrap(), "east:9");
    }
}
