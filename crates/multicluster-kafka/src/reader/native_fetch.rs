//! The native fetch path: a cluster's records fetched with the source's own Kafka
//! connections ([`multicluster_kafka_client::cluster`], on the source's tokio runtime) and
//! decoded on the fetch thread, in place from the fetch answers, a partition at a
//! time ([`PartitionReader`]). Chosen per cluster by `fetch.backend`
//! ([`choose`]); docs/native-fetch.md says what it supports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::base::offsets::OffsetReset;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::native::settings::{self, Given};
use crate::record::{BatchEntry, RawSpans, RecordBatch, shared_span};
use multicluster_kafka_client::cluster::{
    Arrival, ClusterFetch, ClusterOptions, OutOfRange, PartKey,
};
use multicluster_kafka_client::{DecodeError, PartitionOptions, PartitionReader, Record};

use super::fetch_path::{FetchPath, Opening, Polled};
use super::staging::{Slot, Staging, copy_into};

/// What the native settings of `opening`'s cluster depend on.
fn given<'a>(opening: &'a Opening<'_>) -> Given<'a> {
    Given {
        cluster: &opening.cluster,
        props: opening.props,
        hooks: opening.hooks.as_ref(),
        runtime: opening.runtime.is_some(),
    }
}

/// Which path a cluster's fetcher takes: `Ok(true)` for the native one
/// ([`settings::choose`]).
pub(crate) fn choose(opening: &Opening<'_>) -> Result<bool, SourceError> {
    settings::choose(&given(opening))
}

/// The cluster's fetch settings from its properties, and the read policy; with the
/// size from which values are shared.
fn options(
    opening: &Opening<'_>,
) -> Result<(ClusterOptions, PartitionOptions, usize), SourceError> {
    let settings = settings::settings(&given(opening))?;
    let out_of_range = match opening.policy.out_of_range {
        OffsetReset::Earliest => OutOfRange::Earliest,
        OffsetReset::Latest => OutOfRange::Latest,
        _ => OutOfRange::Fail,
    };
    let cluster = ClusterOptions {
        cluster: opening.cluster.clone(),
        bootstrap: settings.bootstrap,
        connect: settings.connect,
        partition_max_bytes: settings.partition_max_bytes,
        fetch: settings.fetch,
        budget: settings.budget,
        shared_budget: opening.clients.native_budget(),
        out_of_range,
        lanes: settings.lanes,
        errors: settings.errors,
    };
    Ok((cluster, settings.partition, settings.share_from))
}

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

/// A partition as the fetch thread reads it.
struct Reading {
    reader: PartitionReader,
    generation: u64,
    stop: Option<i64>,
}

/// The native path of one cluster for one fetcher.
pub(crate) struct NativeFetch {
    cluster: Arc<str>,
    fetch: ClusterFetch,
    parts: HashMap<PartKey, Reading>,
    topics: HashMap<String, Arc<str>>,
    options: PartitionOptions,
    include_headers: bool,
    /// Values of this many bytes or more are shared from the answers they came in,
    /// smaller ones copied (`fetch.share.min.bytes`).
    share_from: usize,
    staging: Staging,
    slots: Vec<Slot>,
    /// An answer the last poll took only part of (it stopped at its limit): the next
    /// poll goes on with it.
    pending: Option<Arrival>,
    /// Splits whose log was truncated since the last poll, with the offset fetched
    /// up to then (for [`Polled::truncated`]).
    truncated: Vec<(SplitId, i64)>,
    last_lag_report: Instant,
}

/// How often per-split lag is reported.
const LAG_REPORT_INTERVAL: Duration = Duration::from_secs(1);

impl NativeFetch {
    pub fn open(opening: Opening<'_>) -> Result<Self, SourceError> {
        let (cluster_options, options, share_from) = options(&opening)?;
        if cluster_options.bootstrap.is_empty() {
            return Err(SourceError::Kafka {
                cluster: opening.cluster.to_string(),
                message: "no bootstrap.servers".into(),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
        let runtime = opening
            .runtime
            .clone()
            .ok_or_else(|| SourceError::Cluster {
                cluster: opening.cluster.to_string(),
                message: "the native fetch path needs a tokio runtime".into(),
            })?;
        let wake = opening.wake.clone();
        let properties = opening
            .props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fetch = opening.clients.native_fetches().join(
            &runtime,
            properties,
            cluster_options,
            Box::new(move || wake.wake()),
        );
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => opening.cluster.to_string())
            .increment(1);
        tracing::debug!(cluster = %opening.cluster, "fetching natively");
        Ok(Self {
            cluster: opening.cluster,
            fetch,
            parts: HashMap::new(),
            topics: HashMap::new(),
            options,
            include_headers: opening.include_headers,
            share_from,
            staging: Staging::default(),
            slots: Vec::new(),
            pending: None,
            truncated: Vec::new(),
            last_lag_report: Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(Instant::now),
        })
    }

    fn topic(&mut self, name: &str) -> Arc<str> {
        if let Some(t) = self.topics.get(name) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(name);
        self.topics.insert(name.to_string(), t.clone());
        t
    }

    fn split_id(&self, key: &PartKey) -> SplitId {
        SplitId {
            cluster: self.cluster.clone(),
            topic: key.0.clone(),
            partition: key.1,
        }
    }

    /// Moves a partition's reader to `to` (its position was reset, or its log
    /// truncated) and counts the reset. Returns the partition's stop, or `None` when
    /// the arrival is of an assignment it no longer has.
    fn reset_to(&mut self, key: &PartKey, generation: u64, to: i64) -> Option<Option<i64>> {
        let part = self.parts.get_mut(key)?;
        if part.generation != generation {
            return None;
        }
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
    /// batch, the rest waits in `pending`. Returns a fatal error, if the arrival is
    /// one, and whether the split reached its stop.
    fn absorb<D: Deserializer>(
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
                if part.generation != generation {
                    return None;
                }
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
                            self.pending = Some(Arrival::Records {
                                key: key.clone(),
                                generation,
                                answer,
                            });
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
                    part.generation = self.fetch.seek(&key, at);
                    SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!("{}/{}: {what}", key.0, key.1),
                    }
                })
            }
            Arrival::Reset {
                key,
                generation,
                from,
                to,
                log_start,
                log_end,
            } => {
                let stop = self.reset_to(&key, generation, to)?;
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
                generation,
                from,
                to,
                epoch,
            } => {
                self.reset_to(&key, generation, to)?;
                let id = self.split_id(&key);
                tracing::warn!(
                    split = %id,
                    offset = from,
                    to,
                    epoch,
                    "log truncated below the position (an unclean leader election?): the records fetched from `to` on are no longer in the log; reading on from there"
                );
                self.truncated.push((id, from));
                None
            }
            Arrival::OutOfRange {
                key,
                generation,
                offset,
                log_start,
                log_end,
            } => {
                let part = self.parts.get(&key)?;
                if part.generation != generation {
                    return None;
                }
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

impl<D: Deserializer> FetchPath<D> for NativeFetch {
    fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError> {
        let mut done = Vec::new();
        for s in splits {
            if s.is_finished() {
                done.push(s.id);
                continue;
            }
            let key = (self.topic(&s.id.topic), s.id.partition);
            // The epoch of the record just before the position, which a restored
            // split may know: the first fetch then finds a log truncated meanwhile.
            let epoch = s
                .last
                .as_ref()
                .filter(|l| l.search.is_none() && l.fingerprint.offset + 1 == s.next_offset)
                .and_then(|l| l.fingerprint.leader_epoch);
            let generation = self.fetch.add(key.clone(), s.next_offset, epoch);
            if let Some(stop) = s.stop_offset {
                self.fetch.stop_at(&key, stop);
            }
            self.parts.insert(
                key,
                Reading {
                    reader: PartitionReader::new(s.next_offset, self.options),
                    generation,
                    stop: s.stop_offset,
                },
            );
        }
        Ok(done)
    }

    fn remove(&mut self, ids: &[SplitId]) {
        let keys: Vec<PartKey> = ids
            .iter()
            .map(|id| (self.topic(&id.topic), id.partition))
            .collect();
        for key in &keys {
            self.parts.remove(key);
        }
        self.fetch.remove(&keys);
        self.staging.remove(ids);
    }

    fn pause(&mut self, ids: &[SplitId], paused: bool) {
        let keys: Vec<PartKey> = ids
            .iter()
            .map(|id| (self.topic(&id.topic), id.partition))
            .collect();
        self.fetch.pause(&keys, paused);
    }

    fn poll(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
    ) -> Result<Polled, SourceError> {
        let mut polled = Polled::default();
        if self
            .staging
            .take_leftover(&self.cluster, deserializer, max, out, &mut polled)
        {
            return Ok(polled);
        }
        if let Some(e) = self.staging.take_failed() {
            return Err(e);
        }
        let lag_due = self.last_lag_report.elapsed() >= LAG_REPORT_INTERVAL;
        let mut data = self.staging.buffer();
        self.slots.clear();
        let mut finished: Vec<PartKey> = Vec::new();
        let mut fatal = None;
        // Records straight into the batch when deserializing them needs nothing of
        // them; else staged, and those past `max` wait for the next poll.
        let direct = deserializer.without_record().is_some();
        // Answers until they give `max` records: whole record batches, so the batch
        // may pass `max` by part of one (the reader hands out `max` at a time).
        loop {
            let taken = self.slots.len() + out.entries.len();
            if taken >= max {
                break;
            }
            let Some(arrival) = self.pending.take().or_else(|| self.fetch.take()) else {
                break;
            };
            let how = (deserializer, direct, max - taken);
            if let Some(e) = self.absorb(arrival, how, out, &mut data, &mut finished) {
                fatal = Some(e);
                break;
            }
        }
        if !self.slots.is_empty() || !out.entries.is_empty() {
            self.fetch.records_flow();
        }
        if direct {
            polled.records = out.entries.len();
            polled.bytes = out.entries.iter().map(|e| e.bytes() as usize).sum();
        }
        let mut slots = std::mem::take(&mut self.slots);
        self.staging.fill(
            &self.cluster,
            deserializer,
            max,
            data,
            &mut slots,
            out,
            &mut polled,
        );
        self.slots = slots;
        if lag_due {
            self.last_lag_report = Instant::now();
            metrics::gauge!(crate::metrics::FETCH_BUFFERED_BYTES)
                .set(self.fetch.source_buffered() as f64);
            for (key, high) in self.fetch.high_watermarks() {
                if self.parts.contains_key(&key) {
                    polled.high_watermarks.push((key.0, key.1, high));
                }
            }
        }
        polled.truncated = std::mem::take(&mut self.truncated);
        if !finished.is_empty() {
            finished.sort();
            finished.dedup();
            for key in &finished {
                self.parts.remove(key);
            }
            self.fetch.remove(&finished);
            let ids: Vec<SplitId> = finished.iter().map(|k| self.split_id(k)).collect();
            polled.finished = self.staging.defer_finished(ids);
        }
        self.staging.answer(polled, fatal)
    }

    fn close(self: Box<Self>, closed: std::sync::mpsc::Sender<()>) {
        // The tasks stop and their connections close as the fetch is dropped; nothing
        // here waits for a broker.
        drop(self);
        drop(closed);
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
        let read: Vec<&[u8]> = spans[..3].iter().map(|s| bytes.value(s.unwrap())).collect();
        assert_eq!(read, [&b"one"[..], b"two", b"three"]);
        let (buffer, _) = bytes.place(spans[1].unwrap());
        assert_eq!(buffer.as_ptr(), answers[0].as_ptr(), "not copied");
    }
}
