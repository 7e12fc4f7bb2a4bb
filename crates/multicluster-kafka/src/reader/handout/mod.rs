//! Handing out records: taking the fetchers' answers, buffering each cluster's
//! batch, and giving records (one by one or as batches) in order, with the
//! positions, counts and lag that follow them.

mod accept;
mod answers;
mod mirror_search;

use super::{ReaderNotice, SourceReader};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::metrics as m;
use crate::record::{Record, RecordBatch};
use accept::HashOf;

impl<D: Deserializer> SourceReader<D> {
    pub(super) fn report_active(&self) {
        let active = self.splits.active();
        metrics::gauge!(m::ACTIVE_SPLITS, "reader" => self.settings.id.to_string())
            .set(active as f64);
    }

    /// A split reached its stop: counted, and said to the enumerator.
    pub(super) fn split_finished(&self) {
        self.report_active();
        self.links.notice(ReaderNotice::Finished);
    }

    /// Adds the current batch's counts to the per-cluster metrics.
    pub(super) fn flush_counts(&mut self) {
        self.handout.flush_counts();
    }

    /// Updates the lag of the splits touched since the last report (once per batch,
    /// not per record).
    pub(super) fn report_lag(&mut self) {
        self.splits.report_lag();
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
}
