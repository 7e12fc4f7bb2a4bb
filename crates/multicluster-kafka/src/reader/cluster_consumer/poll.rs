//! Taking records from librdkafka a batch at a time: copying keys and values into
//! the batch's buffer, deserializing them, and finishing bounded splits at their stops.

use super::truncation::Checked;
use super::*;
use crate::base::resolve::{AgainstStop, against_stop};
use crate::reader::staging::copy_into;

impl ClusterConsumer {
    /// Reads what librdkafka already has (never waits), up to `max` records, into
    /// `out` (an empty batch of this cluster). A fatal error (offset out of range) is
    /// returned after the records before it; a record that fails to deserialize ends
    /// the batch (the records after it come with the next poll).
    pub fn poll<D: Deserializer>(
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
        let mut finished: Vec<(Arc<str>, i32)> = Vec::new();
        let mut out_of_range: Vec<(String, i32, i64)> = Vec::new();
        let mut checked: Vec<(String, i32, Checked)> = Vec::new();
        let lag_due = self.last_lag_report.elapsed() >= LAG_REPORT_INTERVAL;
        // SAFETY: the queue belongs to the consumer, which lives as long as `self`;
        // the messages are destroyed below, before this returns.
        unsafe { self.messages.take_from(self.queue, max) };
        // Pass 1: keys and values go into one buffer for the whole batch (one
        // allocation, and a record's bytes are then slices of it).
        let mut data = self.staging.buffer();
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        self.staging.reserve_slots(&mut slots);
        // Records come in runs per partition: remember the last topic handle and
        // partition bound instead of looking them up for every record.
        let mut last_topic: Option<(*mut rd::rd_kafka_topic_t, Arc<str>, u32)> = None;
        let mut last_bound: Option<(*const str, i32, Option<i64>)> = None;
        for i in 0..self.messages.len() {
            let m = self.messages.get(i);
            if let Some(err) = m.error() {
                match err {
                    // With `auto.offset.reset=error` librdkafka reports a position
                    // outside the log as an automatic-reset failure, and one its
                    // leader epoch found not in the log too.
                    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE
                    | rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET => {
                        let (topic, partition) = (m.topic(), m.partition());
                        match Checked::from_text(&m.error_text()) {
                            Some(c) => checked.push((topic, partition, c)),
                            None => out_of_range.push((topic, partition, m.offset())),
                        }
                    }
                    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF => {}
                    // Transient errors (broker down, …): librdkafka retries by itself.
                    _ => self.consumer().context().report_error(&m.error_text()),
                }
                continue;
            }
            let handle = m.topic_handle();
            let (topic, topic_index) = match &last_topic {
                Some((h, t, k)) if *h == handle => (t, *k),
                _ => {
                    let t = intern(&mut self.topics, &m.topic());
                    let k = out.topic_index(&t);
                    let (_, t, k) = last_topic.insert((handle, t, k));
                    (&*t, *k)
                }
            };
            let partition = m.partition();
            let offset = m.offset();
            if !self.bounds.is_empty() {
                let stop = match last_bound {
                    Some((t, p, stop)) if p == partition && std::ptr::eq(t, Arc::as_ptr(topic)) => {
                        stop
                    }
                    _ => {
                        let stop = self.bounds.get(&(topic.clone(), partition)).copied();
                        last_bound = Some((Arc::as_ptr(topic), partition, stop));
                        stop
                    }
                };
                match against_stop(offset, stop) {
                    AgainstStop::Before => {}
                    AgainstStop::Last => finished.push((topic.clone(), partition)),
                    AgainstStop::Beyond => {
                        finished.push((topic.clone(), partition));
                        continue;
                    }
                }
            }
            let mut copy = |bytes: &[u8]| copy_into(&mut data, bytes);
            let (raw_key, raw_value) = (m.key(), m.payload());
            let key = raw_key.map(&mut copy);
            let value = raw_value.map(&mut copy);
            // The fingerprint hash takes the headers whether or not they are handed
            // out (as the native path's does, so a switch onto a mirror read by the
            // other path finds the record); without headers it is made from the key
            // and value when it is needed.
            let all = m.headers();
            let hash = (!all.is_empty())
                .then(|| crate::base::split::record_hash(raw_key, raw_value, &all));
            let headers = if self.include_headers {
                all
            } else {
                Vec::new()
            };
            slots.push(Slot {
                topic: topic_index,
                partition,
                offset,
                timestamp: m.timestamp(),
                key,
                value,
                hash,
                headers,
                epoch: Some(m.leader_epoch()),
            });
        }
        let took = self.messages.len();
        self.messages.clear();
        if !slots.is_empty() {
            // Records flow again: the current error streak is over.
            self.consumer().context().end_error_streak();
        }
        // Pass 2: deserialize.
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
            // Every assigned partition, with records in this poll or not: a caught-up
            // split's lag falls to 0, and one that gets no records still has one.
            self.last_lag_report = std::time::Instant::now();
            if let Ok(assigned) = self.consumer().assignment() {
                for e in assigned.elements() {
                    let t = self.topic(e.topic());
                    if let Some(h) = self.cached_high_watermark(&t, e.partition()) {
                        polled.high_watermarks.push((t, e.partition(), h));
                    }
                }
            }
        }
        let not_read_on = self.read_on(checked, &mut polled);
        let fatal = self.out_of_range(out_of_range).or(not_read_on);
        // A split whose last records before its stop are transaction markers (or
        // compacted away) is finished by its fetch position; that only matters once
        // records stop coming.
        if fatal.is_none() && took == 0 && !self.bounds.is_empty() {
            self.check_positions(&mut finished);
        }
        if !finished.is_empty() {
            finished.sort();
            finished.dedup();
            let mut tpl = TopicPartitionList::new();
            for (topic, partition) in &finished {
                self.bounds.remove(&(topic.clone(), *partition));
                tpl.add_partition(topic, *partition);
            }
            self.unassign(&tpl);
            let ids: Vec<SplitId> = finished
                .into_iter()
                .map(|(topic, partition)| SplitId {
                    cluster: self.cluster.clone(),
                    topic,
                    partition,
                })
                .collect();
            polled.finished = self.staging.defer_finished(ids);
        }
        self.staging.answer(polled, fatal)
    }

    /// Bounded splits whose fetch position passed the stop without a record at
    /// stop - 1 (transaction markers, compaction) are finished too.
    fn check_positions(&self, finished: &mut Vec<(Arc<str>, i32)>) {
        let Ok(positions) = self.consumer().position() else {
            return;
        };
        for e in positions.elements() {
            if let Offset::Offset(pos) = e.offset()
                && let Some(t) = self.topics.get(e.topic())
                && let Some(stop) = self.bounds.get(&(t.clone(), e.partition()))
                && pos >= *stop
            {
                finished.push((t.clone(), e.partition()));
            }
        }
    }

    /// librdkafka's cached high watermark (no network round trip).
    fn cached_high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        let topic = CString::new(topic).ok()?;
        let mut low = -1i64;
        let mut high = -1i64;
        // SAFETY: the client pointer is valid while the consumer lives; the
        // out-pointers are valid locals; the call only reads librdkafka's cache.
        let err = unsafe {
            rd::rd_kafka_get_watermark_offsets(
                self.consumer().client().native_ptr(),
                topic.as_ptr(),
                partition,
                &mut low,
                &mut high,
            )
        };
        (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
    }
}
