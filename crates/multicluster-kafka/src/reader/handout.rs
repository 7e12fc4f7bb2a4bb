//! Handing out records: taking the fetchers' answers, buffering each cluster's
//! batch, and giving records (one by one or as batches) in order, with the
//! positions, counts and lag that follow them.

use std::sync::Arc;

use super::fetch_path::Polled;
use super::fetcher::Answer;
use super::{ReaderNotice, SourceReader};
use crate::base::fingerprint::Step;
use crate::base::metadata::OnMismatch;
use crate::base::resolve::{AgainstStop, against_stop};
use crate::base::split::{Fingerprint, SplitId};
use crate::deserializer::Deserializer;
use crate::error::{MirrorDivergence, SourceError};
use crate::metrics as m;
use crate::record::{BatchEntry, Buffers};
use crate::record::{Record, RecordBatch};

impl<D: Deserializer> SourceReader<D> {
    pub(super) fn report_active(&self) {
        let active = self.states.iter().filter(|s| !s.finished).count();
        metrics::gauge!(m::ACTIVE_SPLITS, "reader" => self.id.to_string()).set(active as f64);
    }

    /// A split reached its stop: counted, and said to the enumerator.
    pub(super) fn split_finished(&self) {
        self.report_active();
        let _ = self.notices.send(ReaderNotice::Finished);
    }

    /// Adds the current batch's counts to the per-cluster metrics.
    pub(super) fn flush_counts(&mut self) {
        let (records, bytes) = std::mem::take(&mut self.handout.counts);
        if records == 0 {
            return;
        }
        let Some(cluster) = self.handout.cluster.clone() else {
            return;
        };
        let (r, b) = self.counters.entry(cluster.clone()).or_insert_with(|| {
            (
                metrics::counter!(m::RECORDS, "cluster" => cluster.to_string()),
                metrics::counter!(m::BYTES, "cluster" => cluster.to_string()),
            )
        });
        r.increment(records);
        b.increment(bytes);
    }

    /// Updates the lag of the splits touched since the last report (once per batch,
    /// not per record).
    pub(super) fn report_lag(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        self.touched.sort_unstable();
        self.touched.dedup();
        for i in self.touched.drain(..) {
            if let Some(s) = self.states.get_mut(i) {
                s.report_lag();
            }
        }
    }

    /// Collects the fetchers' answers, then makes the oldest one the buffer (empty
    /// when this is called) and asks its fetcher for the next. Returns the number of
    /// records buffered (a failed record counts).
    ///
    /// At most one answer per cluster waits here: a fetcher is asked again only when
    /// its answer is taken from the queue, so taking another of its answers while
    /// one waits would let the queue grow by a batch per call for every cluster but
    /// one, without bound, whenever the fetchers are ahead of the program.
    pub(super) fn take_answers(&mut self) -> Result<usize, SourceError> {
        for (cluster, fetcher) in &mut self.consumers {
            if self.ready.iter().any(|(c, _)| c == cluster) {
                continue;
            }
            if let Some(answer) = fetcher.answer() {
                self.ready.push_back((cluster.clone(), answer));
            }
        }
        while let Some((cluster, answer)) = self.ready.pop_front() {
            let (batch, polled) = match answer {
                Answer::Batch(batch, polled) => (batch, polled),
                Answer::Failed(e) | Answer::Gone(e) if !self.active.is_active(&cluster) => {
                    tracing::debug!(cluster = %cluster, error = %e, "ignoring an error of a cluster the metadata no longer calls active");
                    self.ask_again(&cluster);
                    continue;
                }
                Answer::Failed(e) | Answer::Gone(e) => {
                    self.ask_again(&cluster);
                    return Err(e);
                }
                Answer::Panicked(payload) => {
                    // A later call starts a new fetcher for the cluster's splits, at
                    // the positions handed out.
                    self.ask_again(&cluster);
                    std::panic::resume_unwind(payload);
                }
            };
            self.ask_again(&cluster);
            if self.time_order.is_some() {
                self.hold(cluster, batch, polled);
                continue;
            }
            if let Some(found) = self.buffer(cluster, batch, polled) {
                return Ok(found);
            }
        }
        Ok(self.release_held())
    }

    /// Asks the cluster's fetcher for its next batch; a fetcher whose thread has ended
    /// is replaced by a new one the next time round.
    pub(super) fn ask_again(&mut self, cluster: &Arc<str>) {
        let Some(fetcher) = self.consumers.get_mut(cluster) else {
            return;
        };
        if fetcher.is_gone() {
            let properties = fetcher.properties.clone();
            self.rebuild(cluster.clone(), properties);
        } else {
            fetcher.ask();
        }
    }

    /// Makes a fetcher's batch the buffer. `None` when it holds nothing to hand out.
    pub(super) fn buffer(
        &mut self,
        cluster: Arc<str>,
        batch: RecordBatch<D::Value>,
        polled: Polled,
    ) -> Option<usize> {
        for id in polled.finished {
            // Records of the split polled before the stop are still handed out
            // first (handing out the one just before the stop finishes it too).
            let pending = batch.entries.iter().any(|e| {
                e.partition == id.partition && *batch.topics[e.topic as usize] == *id.topic
            }) || polled
                .failed
                .as_ref()
                .is_some_and(|f| f.partition == id.partition && *f.topic == *id.topic);
            if pending {
                self.handout.finish_after.push(id);
            } else {
                self.mark_finished(&id);
            }
        }
        self.note_high_watermarks(&cluster, polled.high_watermarks);
        self.note_truncated(polled.truncated);
        // The batch's first run of records finds its split by lookup, so it is
        // counted as touched even if the previous batch ended on the same split.
        self.last = None;
        let found = polled.records + usize::from(polled.failed.is_some());
        if found == 0 {
            // Watermarks (or finished splits) without records: reported now.
            self.report_lag();
            return None;
        }
        let mut batch = batch;
        batch.set_streams(&self.stream_index);
        self.handout.records = Some(batch.into_iter());
        self.handout.failed = polled.failed.map(|f| (cluster.clone(), *f));
        self.handout.cluster = Some(cluster);
        Some(found)
    }

    /// Marks the splits whose log was truncated below what was fetched.
    pub(super) fn note_truncated(&mut self, truncated: Vec<(SplitId, i64)>) {
        for (id, from) in truncated {
            if let Some(i) = self.index.get(&id).copied() {
                self.states[i].truncated = Some(from);
            }
        }
    }

    /// Takes the splits' high watermarks a poll reported (for their lag).
    pub(super) fn note_high_watermarks(
        &mut self,
        cluster: &Arc<str>,
        high_watermarks: Vec<(Arc<str>, i32, i64)>,
    ) {
        for (topic, partition, hw) in high_watermarks {
            let id = SplitId {
                cluster: cluster.clone(),
                topic,
                partition,
            };
            if let Some(i) = self.index.get(&id).copied() {
                self.states[i].high_watermark = hw;
                self.touched.push(i);
            }
        }
    }

    /// Whether a polled record is handed out (a split this reader owns, not finished,
    /// not handed out before, and on a mirror, past the last record handed out from
    /// its source); if so, its split's position moves past it. `mark` is the record's
    /// timestamp, fingerprint hash and batch's leader epoch, `event` its event time
    /// (see [`Self::event_time`]).
    pub(super) fn accept(
        &mut self,
        cluster: &Arc<str>,
        topic: &Arc<str>,
        partition: i32,
        offset: i64,
        mark: (Option<i64>, HashOf<'_, D::Value>, Option<i32>),
        event: Option<i64>,
    ) -> bool {
        let i = match &self.last {
            Some((t, p, i)) if *p == partition && Arc::ptr_eq(t, topic) => *i,
            _ => {
                let id = SplitId {
                    cluster: cluster.clone(),
                    topic: topic.clone(),
                    partition,
                };
                let Some(i) = self.index.get(&id).copied() else {
                    return false; // a split this reader no longer owns
                };
                self.last = Some((topic.clone(), partition, i));
                self.touched.push(i);
                i
            }
        };
        let state = &mut self.states[i];
        if let Some(from) = state.truncated {
            if offset < state.next_offset {
                // The first record of the log as it is now, below what was
                // handed out: the position goes back to it.
                state.next_offset = offset;
                state.truncated = None;
            } else if offset >= from {
                state.truncated = None;
            }
        }
        if state.finished || offset < state.next_offset {
            return false; // already handed out (a rebuilt consumer re-fetched it)
        }
        if state.search.is_some() {
            return self.search_step(i, offset, (mark.0, mark.1.made(), mark.2));
        }
        if let Some(rewound) = state.rewound {
            if offset > rewound {
                return false; // fetched before the split went back to its lower bound
            }
            state.rewound = None;
        }
        let against = against_stop(offset, state.stop);
        if against == AgainstStop::Beyond {
            state.finished = true;
            self.split_finished();
            return false;
        }
        state.next_offset = offset + 1;
        if let Some(ts) = event
            && state.newest_ts.is_none_or(|n| ts > n)
        {
            state.newest_ts = Some(ts);
        }
        state.last = Some(Fingerprint {
            offset,
            timestamp: mark.0,
            // `accept_batch` sets a hash made later, for the last record of the split
            // it hands out.
            hash: match mark.1 {
                HashOf::Known(h) => h,
                HashOf::Later(..) => 0,
            },
            leader_epoch: mark.2,
        });
        if against == AgainstStop::Last {
            state.finished = true;
            self.split_finished();
        }
        true
    }

    /// A record read on a mirror that looks for the last record handed out from its
    /// source: never handed out itself (it was, from the source, or comes before).
    /// `epoch` is its batch's leader epoch on the mirror, which a found record keeps.
    fn search_step(
        &mut self,
        i: usize,
        offset: i64,
        (timestamp, hash, epoch): (Option<i64>, u64, Option<i32>),
    ) -> bool {
        let state = &mut self.states[i];
        let (Some(search), Some(want)) = (state.search.as_mut(), state.last) else {
            return false;
        };
        state.next_offset = offset + 1;
        if let (Some(looked_for), Some(here)) = (want.timestamp, timestamp) {
            crate::metrics::mirror_behind(&state.id, looked_for - here);
        }
        if offset < search.lower_bound {
            // A mirror that lagged at the switch: read from its end up to the bound.
            return false;
        }
        match search.step(&want, timestamp, hash) {
            Step::Before => {}
            Step::Found => {
                tracing::info!(split = %state.id, source = %search.cluster, offset, looked_at = search.looked_at, "found the last record handed out from the source on its mirror; continuing after it");
                state.last = Some(Fingerprint {
                    offset,
                    timestamp,
                    hash,
                    leader_epoch: epoch,
                });
                state.search = None;
                metrics::counter!(m::MIRROR_SWITCHES, "cluster" => state.id.cluster.to_string(), "outcome" => "found").increment(1);
                crate::metrics::mirror_searching(&state.id, false);
                crate::metrics::mirror_behind(&state.id, 0);
            }
            Step::Diverged => {
                let error = SourceError::MirrorDiverged(Box::new(MirrorDivergence {
                    split: state.id.to_string(),
                    source_split: format!(
                        "{}/{}/{}",
                        search.cluster, search.topic, state.id.partition
                    ),
                    expected: format!(
                        "offset {}, timestamp {}, hash {:016x}",
                        want.offset,
                        want.timestamp.map_or("none".to_string(), |t| t.to_string()),
                        want.hash
                    ),
                    lower_bound: search.lower_bound,
                    found_by: search.found_by.clone(),
                    looked_at: search.looked_at,
                    last_offset: offset,
                }));
                match search.on_mismatch {
                    OnMismatch::Fail => {
                        metrics::counter!(m::MIRROR_SWITCHES, "cluster" => state.id.cluster.to_string(), "outcome" => "diverged").increment(1);
                        crate::metrics::mirror_searching(&state.id, false);
                        crate::metrics::mirror_behind(&state.id, 0);
                        state.finished = true;
                        self.handout.diverged.push(error);
                        self.split_finished();
                    }
                    OnMismatch::LowerBound => {
                        tracing::warn!(split = %state.id, lower_bound = search.lower_bound, "{error}; continuing at the lower bound as mirrorOf.onMismatch says (records from there may be handed out a second time)");
                        metrics::counter!(m::MIRROR_SWITCHES, "cluster" => state.id.cluster.to_string(), "outcome" => "lower_bound").increment(1);
                        crate::metrics::mirror_searching(&state.id, false);
                        crate::metrics::mirror_behind(&state.id, 0);
                        state.next_offset = search.lower_bound;
                        state.rewound = Some(offset);
                        state.search = None;
                        state.last = None;
                        let cluster = state.id.cluster.clone();
                        // The records read since the lower bound are read again.
                        if let Some(properties) =
                            self.consumers.get(&cluster).map(|f| f.properties.clone())
                        {
                            self.rebuild(cluster, properties);
                        }
                    }
                }
            }
        }
        false
    }

    /// A record's event time: the program's timestamp of its value when it set
    /// [`event_timestamps`](crate::SourceBuilder::event_timestamps), else the Kafka
    /// timestamp. Only with watermarks on.
    pub(super) fn event_time(&self, value: Option<&D::Value>, kafka: Option<i64>) -> Option<i64> {
        self.watermarks.as_ref()?;
        match &self.event_timestamps {
            Some(f) => value.and_then(|v| f(v)),
            None => kafka,
        }
    }

    /// Hands out the next buffered record, if any, advancing its split's position.
    pub(super) fn pop(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        if let Some(e) = self.handout.diverged.pop() {
            return Some(Err(e));
        }
        while let Some((record, (bytes, hash, epoch))) =
            self.handout.records.as_mut().and_then(|b| b.next_counted())
        {
            let event = self.event_time(Some(&record.value), record.timestamp);
            if self.accept(
                &record.cluster,
                &record.topic,
                record.partition,
                record.offset,
                (record.timestamp, HashOf::Known(hash), epoch),
                event,
            ) {
                self.handout.counts.0 += 1;
                self.handout.counts.1 += u64::from(bytes);
                return Some(Ok(record));
            }
        }
        self.handout.records = None;
        let failed = self.take_failed();
        self.buffer_done();
        failed.map(Err)
    }

    /// The deserialization failure after the buffered records, if its split still
    /// wants it (its position moves past it).
    pub(super) fn take_failed(&mut self) -> Option<SourceError> {
        let (cluster, f) = self.handout.failed.take()?;
        let event = self.event_time(None, f.timestamp);
        if !self.accept(
            &cluster,
            &f.topic,
            f.partition,
            f.offset,
            (f.timestamp, HashOf::Known(f.hash), None),
            event,
        ) {
            return None;
        }
        self.handout.counts.0 += 1;
        self.handout.counts.1 += u64::from(f.bytes);
        Some(SourceError::from(f.error))
    }

    /// Hands out the buffered records as one batch, advancing their splits'
    /// positions; then the deserialization failure after them, if any.
    pub(super) fn take_batch(
        &mut self,
        max: usize,
    ) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        if let Some(e) = self.handout.diverged.pop() {
            return Some(Err(e));
        }
        while let Some(rest) = self.handout.records.take() {
            let mut batch = rest.into_batch();
            // Past `max`, the records wait for the next call, as after `next`.
            self.handout.records = batch.split_off(max.max(1)).map(RecordBatch::into_iter);
            self.accept_batch(&mut batch);
            if !batch.is_empty() {
                if self.handout.failed.is_none() && self.handout.records.is_none() {
                    self.buffer_done();
                } else {
                    self.report_lag();
                    self.update_watermark();
                }
                batch.watermark = self.current_watermark();
                return Some(Ok(batch));
            }
        }
        let failed = self.take_failed();
        self.buffer_done();
        failed.map(Err)
    }

    /// Everything polled has been handed out: counts go to the metrics, and splits
    /// whose stop was seen are finished.
    pub(super) fn buffer_done(&mut self) {
        self.flush_counts();
        self.update_watermark();
        for id in std::mem::take(&mut self.handout.finish_after) {
            self.mark_finished(&id);
        }
        self.report_lag();
    }

    /// [`Self::accept`] for every record of `batch`, dropping those not handed out.
    /// The fingerprint hash of a record without headers is made only for the last
    /// record of each split handed out (what a checkpoint keeps), not for every one.
    pub(super) fn accept_batch(&mut self, batch: &mut RecordBatch<D::Value>) {
        let mut rejected: Vec<usize> = Vec::new();
        let mut bytes = 0u64;
        // (split, record) of the last record of each run of one split handed out
        // whose hash is still to be made.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (k, e) in batch.entries.iter().enumerate() {
            let topic = &batch.topics[e.topic as usize];
            let event = self.event_time(Some(&e.value), e.timestamp());
            let known = e.known_hash();
            let hash = match known {
                Some(h) => HashOf::Known(h),
                None => HashOf::Later(e, batch.buffers()),
            };
            if self.accept(
                &batch.cluster,
                topic,
                e.partition,
                e.offset,
                (e.timestamp(), hash, e.epoch()),
                event,
            ) {
                bytes += u64::from(e.bytes());
                if let (None, Some((_, _, i))) = (known, &self.last) {
                    let i = *i;
                    match runs.last_mut() {
                        Some(run) if run.0 == i => run.1 = k,
                        _ => runs.push((i, k)),
                    }
                }
            } else {
                rejected.push(k);
            }
        }
        // Only a split's last record handed out has the offset its position keeps
        // (offsets only grow in a split), so only that one is hashed.
        for (i, k) in runs {
            let e = &batch.entries[k];
            if let Some(last) = &mut self.states[i].last
                && last.offset == e.offset
            {
                last.hash = e.hash(batch.buffers());
            }
        }
        if !rejected.is_empty() {
            let mut k = 0;
            let mut next = rejected.iter().peekable();
            batch.entries.retain(|_| {
                let drop = next.next_if_eq(&&k).is_some();
                k += 1;
                !drop
            });
        }
        self.handout.counts.0 += batch.entries.len() as u64;
        self.handout.counts.1 += bytes;
    }

    /// Buffers the next records, waiting for them if none are there. `Ok(true)` when
    /// the input has ended.
    pub(super) async fn fill(&mut self) -> Result<bool, SourceError> {
        self.drain_events()?;
        self.start_pending()?;
        if self.take_answers()? > 0 || !self.handout.diverged.is_empty() {
            return Ok(false);
        }
        if self.is_done() {
            return Ok(true);
        }
        if self.aligning() {
            // Paused splits resume when the others catch up or go idle, which may
            // happen with no batch handed out.
            self.update_watermark();
        }
        tokio::select! {
            biased;
            event = self.events.recv(), if !self.enumerator_gone => match event {
                Some(e) => self.apply(e)?,
                None => {
                    self.enumerator_gone = true;
                    if self.states.is_empty() {
                        self.closed = true;
                        return Err(SourceError::Closed);
                    }
                }
            },
            _ = self.notify.notified() => {}
            // A safety net: the fetchers wake the reader with every answer, this covers
            // anything else.
            _ = tokio::time::sleep(self.poll_timeout) => {}
        }
        Ok(false)
    }
}

/// A record's fingerprint hash as [`SourceReader::accept`] takes it.
#[derive(Clone, Copy)]
pub(super) enum HashOf<'a, V> {
    Known(u64),
    /// A record without headers, whose hash is made from its key and value (in the
    /// batch's bytes) only when needed: by a mirror search at once, else by
    /// [`SourceReader::accept_batch`] for the last record of its split.
    Later(&'a BatchEntry<V>, Buffers<'a>),
}

impl<V> HashOf<'_, V> {
    /// The hash, made now if it was not known.
    fn made(&self) -> u64 {
        match self {
            Self::Known(h) => *h,
            Self::Later(entry, bytes) => entry.hash(*bytes),
        }
    }
}
