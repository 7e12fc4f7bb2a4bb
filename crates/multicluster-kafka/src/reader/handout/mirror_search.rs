//! A mirror's search, on hand-out, for the last record handed out from its source.

use crate::base::fingerprint::Step;
use crate::base::metadata::OnMismatch;
use crate::base::split::Fingerprint;
use crate::deserializer::Deserializer;
use crate::error::{MirrorDivergence, SourceError};
use crate::metrics as m;
use crate::reader::SourceReader;

impl<D: Deserializer> SourceReader<D> {
    /// A record read on a mirror that looks for the last record handed out from its
    /// source: never handed out itself (it was, from the source, or comes before).
    /// `epoch` is its batch's leader epoch on the mirror, which a found record keeps.
    pub(super) fn search_step(
        &mut self,
        i: usize,
        offset: i64,
        (timestamp, hash, epoch): (Option<i64>, u64, Option<i32>),
    ) -> bool {
        let state = self.splits.get_mut(i);
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
                            self.fetchers.get(&cluster).map(|f| f.properties.clone())
                        {
                            self.rebuild(cluster, properties);
                        }
                    }
                }
            }
        }
        false
    }
}
