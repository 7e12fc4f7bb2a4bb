//! Records a fetch path has taken but not yet handed out: their keys and values
//! copied into one buffer per batch ([`Slot`]s point into it), deserialized into the
//! batch, and, after a record that fails to deserialize, kept for the next poll
//! ([`Staging`]). Every fetch path stages its records the same way, so a batch, its
//! failures and its finished splits look the same whichever client fetched them.

use std::sync::Arc;

use bytes::Bytes;

use crate::base::split::SplitId;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::record::{BatchEntry, RawRecord, RawSpans, RecordBatch};

use super::fetch_path::{Failed, Polled};

/// A record taken from a client, its key and value copied into the batch's buffer
/// (start and length; a large value may be shared instead, see
/// [`shared_span`](crate::record::shared_span)), not yet deserialized.
#[derive(Clone)]
pub(crate) struct Slot {
    /// Index into the batch's topics.
    pub topic: u32,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub key: Option<(usize, u32)>,
    pub value: Option<(usize, u32)>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// [`record_hash`](crate::base::split::record_hash) of key, value and headers; `None`
    /// for a record without headers, whose hash is made from its key and value only
    /// when it is needed ([`BatchEntry::hash`](crate::record::BatchEntry::hash)).
    pub hash: Option<u64>,
    /// The leader epoch of its record batch, if known.
    pub epoch: Option<i32>,
}

/// Copies `bytes` to the end of `data`; returns where they are.
pub(crate) fn copy_into(data: &mut Vec<u8>, bytes: &[u8]) -> (usize, u32) {
    let start = data.len();
    data.extend_from_slice(bytes);
    (start, bytes.len() as u32)
}

fn span(data: &[u8], (start, len): (usize, u32)) -> &[u8] {
    &data[start..start + len as usize]
}

/// The most slots [`Staging::reserve_slots`] makes room for (a few MiB).
const MAX_SLOTS_HINT: usize = 1 << 15;

/// Records already taken that come after a deserialization failure, or past a
/// poll's limit: the next poll hands them out first.
struct Leftover {
    topics: Vec<Arc<str>>,
    data: Bytes,
    /// The buffers their large values are shared from.
    shared: Vec<Bytes>,
    /// Taken from the front, a batch at a time, without moving the rest: a fetch
    /// answer can hold many batches' worth.
    slots: std::vec::IntoIter<Slot>,
    /// Splits finished at a record among these.
    finished: Vec<SplitId>,
}

/// What a fetch path keeps between polls of what it took from its client and did
/// not hand out yet: the one place either path keeps leftovers.
pub(crate) struct Staging<U = ()> {
    /// A client's answer taken in part (the native path's: a partition's answer of
    /// which a poll took records up to its limit), with its partition: the next
    /// poll goes on with it. `U` is what the path's client answers.
    untaken: Option<((Arc<str>, i32), U)>,
    leftover: Option<Leftover>,
    /// A fatal error met after records that were handed out first.
    failed: Option<SourceError>,
    /// Capacity to start the next batch's buffer with.
    data_hint: usize,
    /// Capacity to start the next poll's slots with: a poll takes whole record
    /// batches, thousands of records at a time, and growing the slots to that many
    /// copied them over and over (a tenth of a fetch thread's time at 100-byte
    /// records).
    slots_hint: usize,
}

impl<U> Default for Staging<U> {
    fn default() -> Self {
        Self {
            untaken: None,
            leftover: None,
            failed: None,
            data_hint: 0,
            slots_hint: 0,
        }
    }
}

impl<U> Staging<U> {
    /// Keeps the rest of a partition's answer for the next poll.
    pub fn keep_untaken(&mut self, topic: Arc<str>, partition: i32, rest: U) {
        self.untaken = Some(((topic, partition), rest));
    }

    /// The answer taken in part, to go on with.
    pub fn take_untaken(&mut self) -> Option<U> {
        self.untaken.take().map(|(_, rest)| rest)
    }

    /// Drops the answer taken in part if it is the partition's (added again: it
    /// starts afresh).
    pub fn forget_untaken(&mut self, topic: &str, partition: i32) {
        if self
            .untaken
            .as_ref()
            .is_some_and(|((t, p), _)| **t == *topic && *p == partition)
        {
            self.untaken = None;
        }
    }

    /// A buffer for the next batch's keys and values, sized by the last one's.
    pub fn buffer(&self) -> Vec<u8> {
        Vec::with_capacity(self.data_hint)
    }

    /// Makes room in `slots` (empty) for as many records as the last poll took.
    pub fn reserve_slots(&self, slots: &mut Vec<Slot>) {
        slots.reserve(self.slots_hint);
    }

    /// The fatal error the last poll put off, to be returned now.
    pub fn take_failed(&mut self) -> Option<SourceError> {
        self.failed.take()
    }

    /// Makes `data` the batch's buffer and deserializes up to `max` of `slots` (see
    /// [`Self::deserialize`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "what one poll fills: the batch, its parts and the answer"
    )]
    pub fn fill<D: Deserializer>(
        &mut self,
        cluster: &Arc<str>,
        deserializer: &D,
        max: usize,
        data: Vec<u8>,
        slots: &mut Vec<Slot>,
        out: &mut RecordBatch<D::Value>,
        polled: &mut Polled,
    ) {
        self.data_hint = data.len().next_power_of_two().clamp(4096, 16 << 20);
        self.slots_hint = slots.len().min(MAX_SLOTS_HINT);
        out.data = Bytes::from(data);
        self.deserialize(cluster, deserializer, max, slots, out, polled);
    }

    /// The poll's answer: a fatal error met while taking records comes at once when
    /// nothing else is to be reported, else at the next poll, after the records and
    /// finished splits before it (they are unassigned already, and nothing would
    /// report them later).
    pub fn answer(
        &mut self,
        polled: Polled,
        fatal: Option<SourceError>,
    ) -> Result<Polled, SourceError> {
        match fatal {
            Some(e)
                if polled.records == 0
                    && polled.failed.is_none()
                    && polled.finished.is_empty()
                    && polled.truncated.is_empty()
                    && self.leftover.is_none() =>
            {
                Err(e)
            }
            Some(e) => {
                self.failed = Some(e);
                Ok(polled)
            }
            None => Ok(polled),
        }
    }

    /// Hands out up to `max` of the records left from the last poll, if any, into
    /// `out` (an empty batch): true when there were some (the poll ends there).
    pub fn take_leftover<D: Deserializer>(
        &mut self,
        cluster: &Arc<str>,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
        polled: &mut Polled,
    ) -> bool {
        let Some(left) = self.leftover.take() else {
            return false;
        };
        out.topics = left.topics;
        out.data = left.data;
        out.shared = left.shared;
        let mut slots = left.slots;
        self.hand_out(cluster, deserializer, max, &mut slots, out, polled);
        polled.finished = self.defer_finished(left.finished);
        true
    }

    /// Deserializes up to `max` of `slots` (draining them all) into `out`, whose
    /// buffer holds their bytes. A failure ends the batch: the slots after it, and
    /// those past `max`, become the leftover.
    pub fn deserialize<D: Deserializer>(
        &mut self,
        cluster: &Arc<str>,
        deserializer: &D,
        max: usize,
        slots: &mut Vec<Slot>,
        out: &mut RecordBatch<D::Value>,
        polled: &mut Polled,
    ) {
        let mut rest = std::mem::take(slots).into_iter();
        self.hand_out(cluster, deserializer, max, &mut rest, out, polled);
    }

    /// Deserializes up to `max` records from the front of `rest` into `out`; what is
    /// left (after a failure, or past `max`) becomes the leftover.
    fn hand_out<D: Deserializer>(
        &mut self,
        cluster: &Arc<str>,
        deserializer: &D,
        max: usize,
        rest: &mut std::vec::IntoIter<Slot>,
        out: &mut RecordBatch<D::Value>,
        polled: &mut Polled,
    ) {
        out.entries.reserve(rest.len().min(max));
        for slot in rest.by_ref().take(max) {
            let value = slot.value.map(|v| out.buffers().place(v));
            let raw = RawRecord {
                cluster,
                topic: &out.topics[slot.topic as usize],
                partition: slot.partition,
                offset: slot.offset,
                timestamp: slot.timestamp,
                key: slot.key.map(|k| span(&out.data, k)),
                value: value.clone().map(|(buffer, range)| &buffer[range]),
                headers: &slot.headers,
                shared: Some(value.map_or(&out.data, |(buffer, _)| buffer)),
            };
            let bytes = slot.key.map_or(0, |k| k.1) + slot.value.map_or(0, |v| v.1);
            match deserializer.deserialize(&raw) {
                Ok(value) => {
                    out.entries.push(BatchEntry::new(
                        (slot.topic, slot.partition, slot.offset),
                        (slot.timestamp, slot.hash),
                        RawSpans {
                            key: slot.key,
                            value: slot.value,
                        },
                        slot.epoch,
                        slot.headers.into(),
                        value,
                    ));
                    polled.records += 1;
                    polled.bytes += bytes as usize;
                }
                Err(error) => {
                    polled.failed = Some(Box::new(Failed {
                        topic: out.topics[slot.topic as usize].clone(),
                        partition: slot.partition,
                        offset: slot.offset,
                        timestamp: slot.timestamp,
                        hash: slot.hash.unwrap_or_else(|| {
                            crate::base::split::record_hash(raw.key, raw.value, &[])
                        }),
                        bytes,
                        error,
                    }));
                    break;
                }
            }
        }
        if rest.len() > 0 {
            self.leftover = Some(Leftover {
                topics: out.topics.clone(),
                data: out.data.clone(),
                shared: out.shared.clone(),
                slots: std::mem::take(rest),
                finished: Vec::new(),
            });
        }
    }

    /// Keeps finished splits that still have records in the leftover with it (they
    /// finish with the poll that hands those out); returns the others.
    pub fn defer_finished(&mut self, ids: Vec<SplitId>) -> Vec<SplitId> {
        let Some(left) = &mut self.leftover else {
            return ids;
        };
        let (later, now): (Vec<SplitId>, Vec<SplitId>) = ids.into_iter().partition(|id| {
            left.slots
                .as_slice()
                .iter()
                .any(|s| s.partition == id.partition && *left.topics[s.topic as usize] == *id.topic)
        });
        left.finished.extend(later);
        now
    }

    /// Drops the waiting records of these splits (they were removed).
    pub fn remove(&mut self, ids: &[SplitId]) {
        for id in ids {
            self.forget_untaken(&id.topic, id.partition);
        }
        if let Some(left) = &mut self.leftover {
            let topics = &left.topics;
            let gone = |topic: u32, partition: i32| {
                ids.iter()
                    .any(|id| id.partition == partition && *id.topic == *topics[topic as usize])
            };
            let kept: Vec<Slot> = std::mem::take(&mut left.slots)
                .filter(|s| !gone(s.topic, s.partition))
                .collect();
            left.slots = kept.into_iter();
            left.finished.retain(|f| !ids.contains(f));
            if left.slots.len() == 0 && left.finished.is_empty() {
                self.leftover = None;
            }
        }
    }

    /// Drops everything waiting.
    pub fn clear(&mut self) {
        self.leftover = None;
        self.failed = None;
    }
}
