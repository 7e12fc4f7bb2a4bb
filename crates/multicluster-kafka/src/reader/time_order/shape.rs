//! What a fetch thread notes of a batch that the merge will hold, while the batch is
//! still in its cache: the reader then holds the batch without reading each record.

use crate::record::{BatchEntry, RecordBatch};

/// A fetched batch as the merge takes it when a record's event time is its Kafka
/// timestamp: each record's time and each run of one partition's records.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Each record's timestamp, no later than the wall clock when it was fetched (see
    /// [`TimeOrder::take`](super::TimeOrder::take)); [`NO_TIME`] for none.
    pub times: Vec<i64>,
    /// The runs of one partition's records in the batch's order: how many records,
    /// and their [`weight`].
    pub runs: Vec<(usize, usize)>,
}

/// A record without a timestamp in [`Shape::times`] (no record has this one).
pub(super) const NO_TIME: i64 = i64::MIN;

impl Shape {
    /// Notes `batch`'s times and runs.
    pub(crate) fn of<V>(batch: &RecordBatch<V>) -> Self {
        let wall = crate::base::retention::now_ms();
        let mut times = Vec::with_capacity(batch.entries.len());
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut last = None;
        for e in &batch.entries {
            if last != Some((e.topic, e.partition)) {
                runs.push((0, 0));
                last = Some((e.topic, e.partition));
            }
            if let Some(run) = runs.last_mut() {
                run.0 += 1;
                run.1 += weight(e);
            }
            times.push(e.timestamp().map_or(NO_TIME, |t| t.min(wall)));
        }
        Self { times, runs }
    }

    /// Whether it describes `records` records.
    pub(super) fn fits(&self, records: usize) -> bool {
        self.times.len() == records && self.runs.iter().map(|r| r.0).sum::<usize>() == records
    }
}

/// What a held record counts for in its split's share of memory: its key and value,
/// and about what an entry and Kafka's framing of a record take.
pub(super) fn weight<V>(entry: &BatchEntry<V>) -> usize {
    weight_of(entry.bytes() as usize, 1)
}

/// The [`weight`] of `records` records whose keys and values take `bytes`.
pub(super) fn weight_of(bytes: usize, records: usize) -> usize {
    bytes + records * RECORD_OVERHEAD
}

/// See [`weight`].
const RECORD_OVERHEAD: usize = 64;
