//! Taking in what the cluster's fetch delivers for the fetch thread: records decoded
//! in place from the answers (values shared from them or copied), positions reset,
//! logs truncated, positions out of range.

use bytes::Bytes;

use super::NativeFetch;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::reader::staging::{Slot, copy_into};
use crate::record::{BatchEntry, RawSpans, RecordBatch, shared_span};
use multicluster_kafka_client::cluster::{Arrival, PartKey};
use multicluster_kafka_client::{DecodeError, Record};

/// `bytes`, part of `buffer`, as a span of a batch's `shared` buffers (`buffer`
/// added unless it was the last one added); `None` when it cannot be.
fn share(shared: &mut Vec<Bytes>, buffer: &Bytes, bytes: &[u8]) -> Option<(usize, u32)> {
    let offset = (bytes.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
    if offset.checked_add(bytes.len())? > buffer.len() {
        return None;
    }
    let len = u32::try_from(bytes.len()).ok()?;
    let last = shared
        .last()
        .is_some_and(|b| b.as_ptr() == buffer.as_ptr() && b.len() == buffer.len());
    let index = if last { shared.len() - 1 } else { shared.len() };
    // Checked before the buffer is kept: a value that cannot be named is copied,
    // and keeps nothing alive.
    let span = shared_span(index, offset, len)?;
    if !last {
        shared.push(buffer.clone());
    }
    Some(span)
}

impl NativeFetch {
    /// Moves a partition's reader to `to` (its position was reset, or its log
    /// truncated) and counts the reset. Returns the partition's stop, or `None` when
    /// the partition is no longer read.
    fn reset_to(&mut self, key: &PartKey, to: i64) -> Option<Option<i64>> {
        let part = self.parts.get_mut(key)?;
        part.reader.seek(to);
        metrics::counter!(
            crate::metrics::OFFSET_RESETS,
            "cluster" => self.cluster.to_string(),
            "topic" => key.0.to_string()
        )
        .increment(1);
        Some(part.stop)
    }

    /// Takes one arrival's records (keys and values into `data`): into `slots`, or
    /// straight into `out`'s entries when the deserializer's value does not depend
    /// on the record (`direct`); after `limit` records, at the end of a record
    /// batch, the rest waits in the staging. Returns a fatal error, if the arrival is
    /// one, and whether the split reached its stop.
    pub(super) fn absorb<D: Deserializer>(
        &mut self,
        arrival: Arrival,
        (deserializer, direct, limit): (&D, bool, usize),
        out: &mut RecordBatch<D::Value>,
        data: &mut Vec<u8>,
        finished: &mut Vec<PartKey>,
    ) -> Option<SourceError> {
        match arrival {
            Arrival::Records {
                key,
                generation,
                answer,
            } => {
                let part = self.parts.get_mut(&key)?;
                let topic = out.topic_index(&key.0);
                let stop = part.stop;
                let include_headers = self.include_headers;
                let slots = &mut self.slots;
                let share_from = self.share_from;
                let shared = &mut out.shared;
                let entries = &mut out.entries;
                let mut bad_header = None;
                let absorbed = part
                    .reader
                    .absorb_shared(&answer, limit, |r, buffer, epoch| {
                        if stop.is_some_and(|s| r.offset >= s) {
                            return;
                        }
                        // Without headers the hash is made from the key and value when it
                        // is needed (most records handed out never need theirs).
                        let hash = if r.header_count() == 0 {
                            None
                        } else {
                            match record_hash(r) {
                                Ok(h) => Some(h),
                                Err(e) => {
                                    bad_header.get_or_insert((r.offset, e));
                                    return;
                                }
                            }
                        };
                        let headers = if include_headers {
                            r.headers()
                                .filter_map(Result::ok)
                                .map(|(k, v)| {
                                    (
                                        String::from_utf8_lossy(k).into_owned(),
                                        v.map(<[u8]>::to_vec),
                                    )
                                })
                                .collect()
                        } else {
                            Vec::new()
                        };
                        let timestamp = (r.timestamp >= 0).then_some(r.timestamp);
                        let k = r.key.map(|k| copy_into(data, k));
                        let v = r.value.map(|v| {
                            (v.len() >= share_from)
                                .then(|| share(shared, buffer, v))
                                .flatten()
                                .unwrap_or_else(|| copy_into(data, v))
                        });
                        if direct && let Some(value) = deserializer.without_record() {
                            entries.push(BatchEntry::new(
                                (topic, key.1, r.offset),
                                (timestamp, hash),
                                RawSpans { key: k, value: v },
                                Some(epoch),
                                headers.into(),
                                value,
                            ));
                            return;
                        }
                        slots.push(Slot {
                            topic,
                            partition: key.1,
                            offset: r.offset,
                            timestamp,
                            key: k,
                            value: v,
                            headers,
                            hash,
                            epoch: Some(epoch),
                        });
                    });
                let corrupt = match (absorbed, bad_header) {
                    (Err(issue), _) => Some(issue.to_string()),
                    (Ok(_), Some((offset, e))) => Some(format!("record at offset {offset}: {e}")),
                    (Ok((_, more)), None) => {
                        if more {
                            self.staging.keep_untaken(
                                key.0.clone(),
                                key.1,
                                Arrival::Records {
                                    key: key.clone(),
                                    generation,
                                    answer,
                                },
                            );
                        }
                        None
                    }
                };
                if part.stop.is_some_and(|s| part.reader.next_offset() >= s) {
                    finished.push(key.clone());
                }
                corrupt.map(|what| {
                    // Read again from where the reader stands: nothing after the
                    // corruption is handed out before it.
                    let at = part.reader.next_offset();
                    self.fetch.seek(&key, at);
                    SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!("{}/{}: {what}", key.0, key.1),
                    }
                })
            }
            Arrival::Reset {
                key,
                from,
                to,
                log_start,
                log_end,
                ..
            } => {
                let stop = self.reset_to(&key, to)?;
                let split = format!("{}/{}/{}", self.cluster, key.0, key.1);
                tracing::warn!(
                    split = %split,
                    offset = from,
                    log_start,
                    log_end,
                    to,
                    "position outside the log (records deleted, or the topic re-created); resetting as the out-of-range policy says"
                );
                if stop.is_some_and(|s| to >= s) {
                    finished.push(key);
                }
                None
            }
            Arrival::Truncated {
                key,
                from,
                to,
                epoch,
                ..
            } => {
                self.reset_to(&key, to)?;
                let id = self.split_id(&key);
                crate::reader::fetch_path::warn_truncated(&id, from, to, epoch);
                self.truncated.push((id, from));
                None
            }
            Arrival::OutOfRange {
                key,
                offset,
                log_start,
                log_end,
                ..
            } => {
                self.parts.get(&key)?;
                Some(SourceError::OffsetOutOfRange {
                    split: format!("{}/{}/{}", self.cluster, key.0, key.1),
                    offset,
                    log_start,
                    log_end,
                })
            }
        }
    }
}
/// The hash mirrors match a record by ([`record_hash`](crate::split::record_hash) of
/// the same record read through librdkafka), made from the headers as they are
/// decoded: nothing is allocated for them.
fn record_hash(r: &Record<'_>) -> Result<u64, DecodeError> {
    let mut failed = None;
    let headers = r
        .headers()
        .map_while(|h| h.map_err(|e| failed = Some(e)).ok());
    let hash = crate::base::fingerprint::hash_parts(r.key, r.value, headers);
    match failed {
        Some(e) => Err(e),
        None => Ok(hash),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Buffers;

    #[test]
    fn the_native_hash_is_the_one_of_the_librdkafka_path() {
        use mck_testkit::record_batch::{TestRecord, record_batch};
        let rec = |od: i32,
                   key: Option<&[u8]>,
                   value: Option<&[u8]>,
                   headers: &[(&[u8], Option<&[u8]>)]| TestRecord {
            timestamp_delta: 0,
            offset_delta: od,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
        };
        let buf = record_batch(
            0,
            0,
            &[
                rec(
                    0,
                    Some(b"k"),
                    Some(b"v"),
                    &[(b"h", Some(b"1")), (b"n", None)],
                ),
                rec(1, None, None, &[]),
                rec(2, Some(b""), Some(b""), &[]),
            ],
        );
        let batch = multicluster_kafka_client::Batches::new(&buf)
            .next()
            .unwrap()
            .unwrap();
        let hashes: Vec<u64> = batch
            .records()
            .unwrap()
            .map(|r| record_hash(&r.unwrap()).unwrap())
            .collect();
        use crate::base::split::record_hash as librdkafka_hash;
        assert_eq!(
            hashes,
            [
                librdkafka_hash(
                    Some(b"k"),
                    Some(b"v"),
                    &[("h".into(), Some(b"1".to_vec())), ("n".into(), None)]
                ),
                librdkafka_hash(None, None, &[]),
                librdkafka_hash(Some(b""), Some(b""), &[]),
            ]
        );
        assert_ne!(hashes[1], hashes[2], "null apart from empty");
    }

    #[test]
    fn a_shared_value_names_its_answer_once_and_reads_back_from_it() {
        let answers = [
            Bytes::from_static(b"..one..two.."),
            Bytes::from_static(b"three"),
        ];
        let mut shared = Vec::new();
        let spans = [
            share(&mut shared, &answers[0], &answers[0][2..5]),
            share(&mut shared, &answers[0], &answers[0][7..10]),
            share(&mut shared, &answers[1], &answers[1][..]),
            // Not a part of the buffer named: refused, the value is copied.
            share(&mut shared, &answers[1], &answers[0][..1]),
            share(&mut shared, &answers[0], &answers[1][..1]),
        ];
        assert_eq!(shared.len(), 2, "each answer once");
        assert_eq!((spans[3], spans[4]), (None, None));
        let data = Bytes::new();
        let bytes = Buffers {
            data: &data,
            shared: &shared,
        };
        let read: Vec<&[u8]> = spans[..3].iter().map(|s| bytes.span(s.unwrap())).collect();
        assert_eq!(read, [&b"one"[..], b"two", b"three"]);
        let (buffer, _) = bytes.place(spans[1].unwrap());
        assert_eq!(buffer.as_ptr(), answers[0].as_ptr(), "not copied");
    }
}
