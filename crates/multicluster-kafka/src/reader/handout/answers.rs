//! Taking the fetchers' answers: the oldest made the buffer to hand out (or held for
//! the merge in time order), its fetcher asked for the next, and what a poll
//! reported of its splits noted; and waiting for them.

use std::sync::Arc;

use crate::base::split::SplitId;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::reader::SourceReader;
use crate::reader::fetch_path::Polled;
use crate::reader::fetcher::Answer;
use crate::record::RecordBatch;

impl<D: Deserializer> SourceReader<D> {
    /// Collects the fetchers' answers, then makes the oldest one the buffer (empty
    /// when this is called) and asks its fetcher for the next. Returns the number of
    /// records buffered (a failed record counts).
    pub(crate) fn take_answers(&mut self) -> Result<usize, SourceError> {
        while let Some((cluster, answer)) = self.fetchers.next_answer() {
            let (batch, polled) = match answer {
                Answer::Batch(batch, polled) => (batch, polled),
                Answer::Failed(e) | Answer::Gone(e) if !self.links.active().is_active(&cluster) => {
                    tracing::debug!(cluster = %cluster, error = %e, "ignoring an error of a cluster the metadata no longer calls active");
                    self.ask_again(&cluster);
                    continue;
                }
                Answer::Failed(e) => {
                    self.ask_again(&cluster);
                    return Err(e);
                }
                Answer::Gone(e) => {
                    // The next fetcher starts after a backoff; the same error again
                    // is not said again.
                    let new = self.fetchers.ended(&cluster, &e);
                    self.ask_again(&cluster);
                    if new {
                        return Err(e);
                    }
                    tracing::debug!(cluster = %cluster, error = %e, "the cluster's fetcher ended again; starting another after a backoff");
                    continue;
                }
                Answer::Panicked(payload) => {
                    // A later call starts a new fetcher for the cluster's splits, at
                    // the positions handed out.
                    self.ask_again(&cluster);
                    std::panic::resume_unwind(payload);
                }
            };
            self.fetchers.answered(&cluster);
            self.ask_again(&cluster);
            if self.time_order.is_some() {
                // A split over its share is paused (or not) by the release, before
                // the next answer is held.
                if self.hold(cluster, batch, polled) {
                    let found = self.release_held();
                    if found > 0 {
                        return Ok(found);
                    }
                }
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
    pub(crate) fn ask_again(&mut self, cluster: &Arc<str>) {
        if let Some(properties) = self.fetchers.ask_again(cluster) {
            self.rebuild(cluster.clone(), properties);
        }
    }

    /// Makes a fetcher's batch the buffer. `None` when it holds nothing to hand out.
    pub(crate) fn buffer(
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
        self.splits.forget_last();
        let found = polled.records + usize::from(polled.failed.is_some());
        if found == 0 {
            // Watermarks (or finished splits) without records: reported now.
            self.report_lag();
            return None;
        }
        let mut batch = batch;
        batch.set_streams(self.links.stream_index());
        self.handout.records = Some(batch.into_iter());
        self.handout.failed = polled.failed.map(|f| (cluster.clone(), *f));
        self.handout.cluster = Some(cluster);
        Some(found)
    }

    /// Marks the splits whose log was truncated below what was fetched.
    pub(crate) fn note_truncated(&mut self, truncated: Vec<(SplitId, i64)>) {
        for (id, from) in truncated {
            self.splits.set_truncated(&id, from);
        }
    }

    /// Takes the splits' high watermarks a poll reported (for their lag).
    pub(crate) fn note_high_watermarks(
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
            self.splits.set_high_watermark(&id, hw);
        }
    }
    /// Buffers the next records, waiting for them if none are there. `Ok(true)` when
    /// the input has ended.
    pub(crate) async fn fill(&mut self) -> Result<bool, SourceError> {
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
        let wait = self.wait_at_most();
        tokio::select! {
            biased;
            event = self.links.event() => match event {
                Some(e) => self.apply(e)?,
                None => {
                    if self.splits.is_empty() {
                        self.closed = true;
                        return Err(SourceError::Closed);
                    }
                }
            },
            _ = self.fetchers.notified() => {}
            // A safety net: the fetchers wake the reader with every answer, this covers
            // anything else (and a fetcher due to start again).
            _ = tokio::time::sleep(wait) => {}
        }
        Ok(false)
    }

    /// How long [`Self::fill`] waits at most for an answer or an event: the poll
    /// timeout, or less when a fetcher is due to start again sooner.
    fn wait_at_most(&self) -> std::time::Duration {
        let most = self.settings.poll_timeout;
        match self.fetchers.next_start() {
            Some(at) => at
                .saturating_duration_since(tokio::time::Instant::now())
                .min(most),
            None => most,
        }
    }
}
