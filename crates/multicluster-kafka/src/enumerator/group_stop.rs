//! Bounded runs in group mode. Each instance reads only what the group gives it, so
//! its own splits reaching their stops does not end the run: a partition can still
//! come to it from an instance that leaves. The run ends once the group's committed
//! offset of every partition of the stream is at its stop (looked up every
//! [`STOP_CHECK`]); until then a finished split asks the program to acknowledge it, so
//! that its position reaches the group soon.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Enumerator;
use crate::base::protocol::ReaderEvent;
use crate::base::split::{KafkaSplit, SplitId};
use crate::error::SourceError;
use crate::kafka::client::detached;

/// How often a bounded run in group mode looks at the group's committed offsets.
pub(crate) const STOP_CHECK: Duration = Duration::from_secs(1);

/// How long a bounded run waits for other members before it says so.
const WAIT_SAID_AFTER: Duration = Duration::from_secs(30);

/// The group's committed offsets, per partition of the stream, or why a cluster
/// could not say.
pub(super) type Checked = Result<BTreeMap<SplitId, i64>, SourceError>;

/// Where the group stops.
pub(crate) struct GroupStops {
    /// Per partition of the stream: where the group starts it when nothing is
    /// committed, and this run's stop.
    at: BTreeMap<SplitId, (i64, i64)>,
    checking: JoinSet<Checked>,
    next_check: Instant,
    /// Every partition is at its stop: the readers were told that no split comes.
    reached: bool,
    /// A reader finished a split since the program's last acknowledgement.
    finished_unacked: bool,
    /// Since when the group is behind the stops on partitions other members hold;
    /// `None` once that was said.
    waiting_since: Option<Instant>,
}

/// Whether the group is at every stop: a partition's position is its committed
/// offset, else where the group starts it.
pub(crate) fn at_every_stop(
    at: &BTreeMap<SplitId, (i64, i64)>,
    committed: &BTreeMap<SplitId, i64>,
) -> bool {
    at.iter()
        .all(|(id, (start, stop))| committed.get(id).copied().unwrap_or(*start) >= *stop)
}

impl GroupStops {
    /// The stops of a bounded run's splits as discovered at start.
    pub(crate) fn of(discovered: &[KafkaSplit]) -> GroupStops {
        GroupStops {
            at: discovered
                .iter()
                .filter_map(|s| {
                    s.stop_offset
                        .map(|stop| (s.id.clone(), (s.next_offset, stop)))
                })
                .collect(),
            checking: JoinSet::new(),
            next_check: Instant::now() + STOP_CHECK,
            reached: false,
            finished_unacked: false,
            waiting_since: Some(Instant::now()),
        }
    }

    /// This run's stop of `id`; `None` for a partition not found at start (a bounded
    /// run does not read it).
    pub(crate) fn stop_of(&self, id: &SplitId) -> Option<i64> {
        self.at.get(id).map(|(_, stop)| *stop)
    }

    /// When the next look is due (none while one runs or after the end).
    pub(super) fn due(&self) -> Option<Instant> {
        (!self.reached && self.checking.is_empty()).then_some(self.next_check)
    }

    /// Whether a reader finished a split since the program's last acknowledgement.
    pub(super) fn finished_unacked(&self) -> bool {
        self.finished_unacked
    }

    /// The program acknowledged what it processed.
    pub(super) fn acknowledged(&mut self) {
        self.finished_unacked = false;
    }

    /// Whether a look runs.
    pub(super) fn checking(&self) -> bool {
        !self.checking.is_empty()
    }

    /// The partitions of topics gone from `cluster` are no longer waited for.
    pub(super) fn forget_topics(&mut self, cluster: &str, topics: &[String]) {
        self.at
            .retain(|id, _| !(&*id.cluster == cluster && topics.iter().any(|t| *t == *id.topic)));
    }

    pub(super) async fn next_checked(&mut self) -> Option<Checked> {
        match self.checking.join_next().await? {
            Ok(checked) => Some(checked),
            Err(e) => Some(Err(SourceError::internal("a group stop lookup task", e))),
        }
    }
}

impl Enumerator {
    /// Starts a look at the group's committed offsets on every cluster of the stops.
    pub(super) fn check_group_stops(&mut self) {
        let Some(stops) = self.group.as_mut().and_then(|g| g.stops_mut()) else {
            return;
        };
        stops.next_check = Instant::now() + STOP_CHECK;
        let mut per_cluster: BTreeMap<Arc<str>, Vec<(String, i32)>> = BTreeMap::new();
        for id in stops.at.keys() {
            per_cluster
                .entry(id.cluster.clone())
                .or_default()
                .push((id.topic.to_string(), id.partition));
        }
        let clients: Vec<_> = per_cluster
            .into_iter()
            .filter_map(|(cluster, partitions)| {
                let client = self.clusters.get(&cluster)?.client().clone();
                Some((cluster, client, partitions))
            })
            .collect();
        stops.checking.spawn(detached(move || {
            let mut committed = BTreeMap::new();
            for (cluster, client, partitions) in clients {
                for ((topic, p), offset) in client.committed(&partitions)? {
                    committed.insert(SplitId::new(&cluster, &topic, p), offset);
                }
            }
            Ok(committed)
        }));
    }

    /// Ends the run when the group is at every stop: the readers end once their
    /// splits are finished. Says once when other members hold it up for long.
    pub(super) fn group_stops_checked(&mut self, checked: Checked) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let Some(stops) = group.stops() else {
            return;
        };
        match checked {
            Ok(committed) if at_every_stop(&stops.at, &committed) => {
                tracing::info!(
                    partitions = stops.at.len(),
                    "the group's committed offsets reached every stop of this run"
                );
                if let Some(stops) = group.stops_mut() {
                    stops.reached = true;
                }
                self.readers.tell_all(|| ReaderEvent::NoMoreSplits);
            }
            Ok(committed) => {
                let said_due = stops
                    .waiting_since
                    .is_some_and(|since| since.elapsed() >= WAIT_SAID_AFTER);
                if !said_due {
                    return;
                }
                let others = stops
                    .at
                    .iter()
                    .filter(|(id, (start, stop))| {
                        !group.holds(id) && committed.get(*id).copied().unwrap_or(*start) < *stop
                    })
                    .count();
                if others > 0 {
                    tracing::warn!(
                        partitions = others,
                        "the bounded run waits for the group: partitions other members hold are not committed up to this run's stops yet (it ends when they are)"
                    );
                    if let Some(stops) = group.stops_mut() {
                        stops.waiting_since = None;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "looking up the group's committed offsets; trying again");
            }
        }
    }

    /// A reader finished a split: in a bounded group run, the program is asked to
    /// acknowledge it, so that its position reaches the group.
    pub(super) fn split_finished(&mut self) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        if let Some(stops) = group.stops_mut() {
            stops.finished_unacked = true;
            group.set_ack_wanted(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(p: i32) -> SplitId {
        SplitId::new("east", "t", p)
    }

    #[test]
    fn the_group_is_at_its_stops_when_every_position_reached_them() {
        let at = BTreeMap::from([(id(0), (0, 10)), (id(1), (5, 5))]);
        // Nothing committed: partition 0 starts below its stop.
        assert!(!at_every_stop(&at, &BTreeMap::new()));
        assert!(!at_every_stop(&at, &BTreeMap::from([(id(0), 9)])));
        // Partition 1 needs no commit: the group starts it at its stop.
        assert!(at_every_stop(&at, &BTreeMap::from([(id(0), 10)])));
        // Past the stop (another instance stopped later) counts too.
        assert!(at_every_stop(
            &at,
            &BTreeMap::from([(id(0), 12), (id(1), 7)])
        ));
        // A commit below where the group would start is still below the stop.
        assert!(!at_every_stop(
            &at,
            &BTreeMap::from([(id(0), 10), (id(1), 4)])
        ));
    }

    #[test]
    fn stops_come_from_the_bounded_splits_found_at_start() {
        let splits = vec![
            KafkaSplit {
                id: id(0),
                next_offset: 3,
                stop_offset: Some(8),
                last: None,
            },
            KafkaSplit {
                id: id(1),
                next_offset: 0,
                stop_offset: None,
                last: None,
            },
        ];
        let mut stops = GroupStops::of(&splits);
        assert_eq!(stops.stop_of(&id(0)), Some(8));
        assert_eq!(stops.stop_of(&id(1)), None);
        stops.forget_topics("east", &["t".to_string()]);
        assert!(at_every_stop(&stops.at, &BTreeMap::new()));
    }
}
