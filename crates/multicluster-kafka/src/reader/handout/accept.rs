//! Accepting a polled record: whether it is handed out, and its split's position
//! moved past it; one by one, or over a batch.

use std::sync::Arc;

use crate::base::resolve::{AgainstStop, against_stop};
use crate::base::split::Fingerprint;
use crate::deserializer::Deserializer;
use crate::reader::SourceReader;
use crate::record::{BatchEntry, Buffers, RecordBatch};

impl<D: Deserializer> SourceReader<D> {
    /// Whether a polled record is handed out (a split this reader owns, not finished,
    /// not handed out before, and on a mirror, past the last record handed out from
    /// its source); if so, its split's position moves past it. `mark` is the record's
    /// timestamp, fingerprint hash and batch's leader epoch, `event` its event time
    /// (see [`Self::event_time`]).
    pub(crate) fn accept(
        &mut self,
        cluster: &Arc<str>,
        topic: &Arc<str>,
        partition: i32,
        offset: i64,
        mark: (Option<i64>, HashOf<'_, D::Value>, Option<i32>),
        event: Option<i64>,
    ) -> bool {
        let Some(i) = self.splits.find(cluster, topic, partition) else {
            return false; // a split this reader no longer owns
        };
        let state = self.splits.get_mut(i);
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
        if let Some(ts) = event {
            state.pace.handed_out(ts);
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
    /// A record's event time: the program's timestamp of its value when it set
    /// [`event_timestamps`](crate::SourceBuilder::event_timestamps), else the Kafka
    /// timestamp. Only with watermarks on.
    pub(crate) fn event_time(&self, value: Option<&D::Value>, kafka: Option<i64>) -> Option<i64> {
        self.watermarks.as_ref()?;
        match &self.settings.event_timestamps {
            Some(f) => value.and_then(|v| f(v)),
            None => kafka,
        }
    }
    /// [`Self::accept`] for every record of `batch`, dropping those not handed out.
    /// The fingerprint hash of a record without headers is made only for the last
    /// record of each split handed out (what a checkpoint keeps), not for every one.
    pub(crate) fn accept_batch(&mut self, batch: &mut RecordBatch<D::Value>) {
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
                if let (None, Some(i)) = (known, self.splits.found_last()) {
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
            if let Some(last) = &mut self.splits.get_mut(i).last
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
}

/// A record's fingerprint hash as [`SourceReader::accept`] takes it.
#[derive(Clone, Copy)]
pub(crate) enum HashOf<'a, V> {
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
