//! The native path as a fetch path: splits added, removed and paused, and polls
//! that take the arrived answers' records into batches.

use std::time::Instant;

use super::{LAG_REPORT_INTERVAL, NativeFetch, Reading};
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::reader::fetch_path::{FetchPath, Polled};
use crate::record::RecordBatch;
use multicluster_kafka_client::PartitionReader;
use multicluster_kafka_client::cluster::PartKey;

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
            self.fetch.add(key.clone(), s.next_offset, s.epoch_before());
            self.staging.forget_untaken(&key.0, key.1);
            if let Some(stop) = s.stop_offset {
                self.fetch.stop_at(&key, stop);
            }
            self.parts.insert(
                key,
                Reading {
                    reader: PartitionReader::new(s.next_offset, self.options),
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
        self.staging.reserve_slots(&mut self.slots);
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
            let Some(arrival) = self.staging.take_untaken().or_else(|| self.fetch.take()) else {
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
