//! Group mode: each cluster's group coordinator decides which of the cluster's
//! partitions this instance reads. A member per cluster read ([`GroupMember`]) says
//! what was assigned and what is taken back; assigned partitions become splits,
//! starting at the group's committed offset (else the starting offsets); a revoked
//! partition stops being handed out, and its position is committed once the program
//! acknowledged every record handed out (a commit through the source), or after
//! [`ACK_WAIT`] the last acknowledged one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Enumerator;
use super::group_stop::GroupStops;
use crate::base::checkpoint::Checkpoint;
use crate::base::offsets::PartitionFacts;
use crate::base::protocol::ReaderEvent;
use crate::base::resolve::resolve_start;
use crate::base::split::{KafkaSplit, SplitId};
use crate::error::SourceError;
use crate::kafka::client::detached;
use crate::kafka::group_member::{GroupMember, MemberEvent};

mod revoke;

use revoke::GivingBack;

/// How long a revocation waits for the program to acknowledge the records handed
/// out of the revoked partitions.
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(15);

/// How long the position where this instance let a partition go is kept for the
/// partition's return (see [`GroupState::handed_back`]).
const HANDED_BACK_KEEP: Duration = Duration::from_secs(300);

/// How long leaving the groups may take when the source closes.
pub(crate) const LEAVE_WAIT: Duration = Duration::from_secs(5);

/// A cluster's member, with the topics and client properties it was given.
struct Joined {
    member: GroupMember,
    topics: BTreeSet<String>,
    props: crate::base::properties::ClientProperties,
}

/// What woke group mode's part of the loop.
pub(super) enum Woke {
    Member(MemberEvent),
    StopsChecked(super::group_stop::Checked),
    /// Where partitions just assigned start: looked up.
    Looked(Looked),
    /// A reader let go of partitions the group takes back.
    Confirmed,
}

/// A lookup's number, a cluster's assigned partitions and what the lookup found.
pub(super) type Looked = (
    u64,
    Arc<str>,
    Vec<(String, i32)>,
    Result<BTreeMap<(String, i32), PartitionFacts>, SourceError>,
);

/// Group mode's state in the enumerator.
pub(crate) struct GroupState {
    members: BTreeMap<Arc<str>, Joined>,
    /// Clusters whose brokers lack the consumer group protocol: joined with the
    /// classic one.
    classic: BTreeSet<Arc<str>>,
    events_tx: mpsc::UnboundedSender<MemberEvent>,
    events: mpsc::UnboundedReceiver<MemberEvent>,
    /// Splits the coordinators gave this instance, with where they started.
    assigned: BTreeMap<SplitId, i64>,
    /// Partitions given to this instance whose start is being looked up (in
    /// `assigning`), with the number of their lookup; one taken back meanwhile is
    /// dropped from here, and one given again waits for its newer lookup.
    pending: BTreeMap<SplitId, u64>,
    lookups: u64,
    assigning: tokio::task::JoinSet<Looked>,
    /// Partitions being given back, and what is kept of those given back.
    giving_back: GivingBack,
    /// Set while a revocation waits for the program's acknowledgement.
    ack_wanted: crate::base::ack::AckRequests,
    /// The source closes: no group is joined again.
    leaving: bool,
    /// A bounded run's stops, and whether the group reached them.
    stops: Option<GroupStops>,
}

impl GroupState {
    pub(crate) fn new(ack_wanted: crate::base::ack::AckRequests) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        GroupState {
            members: BTreeMap::new(),
            classic: BTreeSet::new(),
            events_tx,
            events,
            assigned: BTreeMap::new(),
            pending: BTreeMap::new(),
            lookups: 0,
            assigning: tokio::task::JoinSet::new(),
            giving_back: GivingBack::default(),
            ack_wanted,
            leaving: false,
            stops: None,
        }
    }

    /// The next word of a member, or the next look at the group's stops.
    pub(super) async fn next(&mut self) -> Option<Woke> {
        let checking = self.stops.as_ref().is_some_and(GroupStops::checking);
        let assigning = !self.assigning.is_empty();
        let confirming = self.giving_back.confirming();
        tokio::select! {
            event = self.events.recv() => event.map(Woke::Member),
            looked = self.assigning.join_next(), if assigning => match looked? {
                Ok(looked) => Some(Woke::Looked(looked)),
                Err(e) => {
                    tracing::warn!(error = %e, "a lookup of assigned partitions failed");
                    None
                }
            },
            checked = async { self.stops.as_mut().expect("guarded").next_checked().await }, if checking => {
                checked.map(Woke::StopsChecked)
            }
            () = std::future::poll_fn(|cx| self.giving_back.poll_confirms(cx)), if confirming => {
                Some(Woke::Confirmed)
            }
        }
    }

    /// A bounded run's stops (none in a follow run).
    pub(super) fn stops(&self) -> Option<&GroupStops> {
        self.stops.as_ref()
    }

    /// A bounded run's stops, to be changed (none in a follow run).
    pub(super) fn stops_mut(&mut self) -> Option<&mut GroupStops> {
        self.stops.as_mut()
    }

    /// The run is bounded: the group stops at `stops`.
    pub(super) fn set_stops(&mut self, stops: GroupStops) {
        self.stops = Some(stops);
    }

    /// What asks the program to acknowledge, as the program sees it.
    #[cfg(test)]
    pub(super) fn ack_requests(&self) -> crate::base::ack::AckRequests {
        self.ack_wanted.clone()
    }

    /// Asks the program to acknowledge what it processed (`wanted`), or stops asking.
    pub(super) fn set_ack_wanted(&self, wanted: bool) {
        self.ack_wanted.set(wanted);
    }

    /// Whether the source closes (no group is joined again).
    pub(super) fn leaving(&self) -> bool {
        self.leaving
    }

    /// Where `id` started when the coordinators gave it to this instance, while it
    /// holds it.
    pub(super) fn assigned_start(&self, id: &SplitId) -> Option<i64> {
        self.assigned.get(id).copied()
    }

    /// The coordinators took `id` back: returns where it started here, if it was
    /// held.
    pub(super) fn take_assigned(&mut self, id: &SplitId) -> Option<i64> {
        self.assigned.remove(id)
    }

    /// The coordinators took `id` back: a lookup of where it starts is not taken.
    pub(super) fn forget_lookup(&mut self, id: &SplitId) {
        self.pending.remove(id);
    }

    /// Whether the program is asked to acknowledge what it processed.
    #[cfg(test)]
    pub(super) fn ack_wanted(&self) -> bool {
        self.ack_wanted.get()
    }

    /// Whether a revocation waits.
    pub(super) fn revoking(&self) -> bool {
        self.giving_back.waiting()
    }

    /// When the first waiting revocation is answered without the program's
    /// acknowledgement.
    pub(super) fn ack_deadline(&self) -> Option<Instant> {
        self.giving_back.next_deadline()
    }

    /// The members, for commits.
    pub(super) fn committer(
        &self,
        cluster: &str,
    ) -> Option<crate::kafka::group_member::MemberCommitter> {
        self.members.get(cluster).map(|j| j.member.committer())
    }

    /// Whether the coordinators gave this instance `id`.
    pub(super) fn holds(&self, id: &SplitId) -> bool {
        self.assigned.contains_key(id)
    }

    /// The offset to commit for `id` from a checkpoint that holds it at `at`: none
    /// when this instance does not hold it, or when `at` is behind where it started
    /// here (a checkpoint taken before the partition came back: committing it would
    /// move the group's offset back under what another member committed meanwhile).
    pub(super) fn committable(&self, id: &SplitId, at: i64) -> Option<i64> {
        self.assigned
            .get(id)
            .is_some_and(|start| at >= *start)
            .then_some(at)
    }

    /// Splits handed out (again): where a metadata change's removal let them go
    /// before is no longer where they are (a topic removed and added back before the
    /// group took its partitions back resumes them).
    pub(super) fn handing_out(&mut self, splits: &[KafkaSplit]) {
        self.giving_back.handing_out(splits);
    }

    /// Expects a lookup of where `id` starts, as a member's assignment does; returns
    /// its number.
    #[cfg(test)]
    pub(super) fn expect_lookup(&mut self, id: &SplitId) -> u64 {
        self.lookups += 1;
        self.pending.insert(id.clone(), self.lookups);
        self.lookups
    }
}

impl Enumerator {
    /// Keeps one member per cluster read, subscribed to its topics: joins clusters
    /// that are read now, leaves those that are not (in the background), and follows
    /// topic changes.
    pub(super) fn sync_group(&mut self) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        if group.leaving {
            return;
        }
        let Some(group_id) = self.cfg.group_id.clone() else {
            return;
        };
        let props_of = |cluster: &str| {
            self.applied
                .view(cluster)
                .map(|v| self.cfg.client_properties(&v.properties))
        };
        // Clusters no longer read, and clusters whose client properties changed
        // (credentials, bootstrap list): left; the latter joined again below.
        let gone: Vec<Arc<str>> = group
            .members
            .iter()
            .filter(|(c, j)| {
                !self.clusters.contains_key(*c) || props_of(c).is_some_and(|p| p != j.props)
            })
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in gone {
            if let Some(j) = group.members.remove(&cluster) {
                tracing::info!(cluster = %cluster, "leaving the cluster's group");
                let member = j.member;
                let _ = std::thread::Builder::new()
                    .name("mck-group-leave".into())
                    .spawn(move || member.leave(LEAVE_WAIT));
            }
        }
        for (cluster, state) in &self.clusters {
            match group.members.get_mut(cluster) {
                Some(j) if j.topics != *state.topics() => {
                    j.member.subscribe(state.topics().iter().cloned().collect());
                    j.topics = state.topics().clone();
                }
                Some(_) => {}
                None => {
                    let Some(props) = props_of(cluster) else {
                        continue;
                    };
                    match GroupMember::start(
                        cluster.clone(),
                        &props,
                        &group_id,
                        state.topics().iter().cloned().collect(),
                        group.events_tx.clone(),
                        group.classic.contains(cluster),
                        self.cfg
                            .client_hooks
                            .as_ref()
                            .and_then(|f| f.for_cluster(cluster)),
                    ) {
                        Ok(member) => {
                            tracing::info!(cluster = %cluster, group = %group_id, protocol = member.protocol, "joined the cluster's group");
                            let topics = state.topics().clone();
                            group.members.insert(
                                cluster.clone(),
                                Joined {
                                    member,
                                    topics,
                                    props,
                                },
                            );
                        }
                        Err(e) => {
                            tracing::warn!(cluster = %cluster, error = %e, "cannot join the cluster's group");
                        }
                    }
                }
            }
        }
    }

    /// Leaves every cluster's group, on threads of their own; the loop goes on
    /// answering the revocations that leaving brings. `reply` is answered once every
    /// member left (or gave up after [`LEAVE_WAIT`]).
    pub(super) fn leave_groups(&mut self, reply: oneshot::Sender<()>) {
        let Some(group) = self.group.as_mut() else {
            let _ = reply.send(());
            return;
        };
        group.leaving = true;
        let members: Vec<GroupMember> = std::mem::take(&mut group.members)
            .into_values()
            .map(|j| j.member)
            .collect();
        let _ = std::thread::Builder::new()
            .name("mck-group-leave".into())
            .spawn(move || {
                let leaving: Vec<_> = members
                    .into_iter()
                    .map(|m| std::thread::spawn(move || m.leave(LEAVE_WAIT)))
                    .collect();
                for l in leaving {
                    let _ = l.join();
                }
                let _ = reply.send(());
            });
    }

    /// Applies what a member said.
    pub(super) async fn member_event(&mut self, event: MemberEvent) {
        match event {
            MemberEvent::Assigned {
                cluster,
                partitions,
            } => self.look_up_assigned(cluster, partitions),
            MemberEvent::Revoking {
                cluster,
                partitions,
                reply,
                lost,
            } => self.revoking(cluster, partitions, reply, lost),
            MemberEvent::Failed {
                cluster,
                message,
                unsupported,
            } => {
                let Some(group) = self.group.as_mut() else {
                    return;
                };
                if unsupported && group.classic.insert(cluster.clone()) {
                    // Joined again, with the classic protocol, at the next sync.
                    tracing::info!(cluster = %cluster, reason = %message, "the cluster's brokers lack Kafka's consumer group protocol (KIP-848): joining its group with the classic protocol and cooperative-sticky assignment");
                    if let Some(Joined { member, .. }) = group.members.remove(&cluster) {
                        let _ = std::thread::Builder::new()
                            .name("mck-group-leave".into())
                            .spawn(move || member.leave(LEAVE_WAIT));
                    }
                    return;
                }
                tracing::error!(cluster = %cluster, error = %message, "the cluster's group member failed; its partitions are no longer read by this instance");
            }
        }
    }

    /// Looks up, in the background, where partitions given to this instance start:
    /// the loop goes on meanwhile (revocations on other clusters wait for nothing).
    fn look_up_assigned(&mut self, cluster: Arc<str>, partitions: Vec<(String, i32)>) {
        let Some(state) = self.clusters.get(&cluster) else {
            return;
        };
        let Some(group) = self.group.as_mut() else {
            return;
        };
        group.lookups += 1;
        let lookup_no = group.lookups;
        for (t, p) in &partitions {
            group
                .pending
                .insert(SplitId::new(&cluster, t, *p), lookup_no);
        }
        let client = state.client().clone();
        let start = state.start().clone();
        group.assigning.spawn(async move {
            let lookup = partitions.clone();
            // Tried a few times: the partitions are read only once this succeeds.
            let facts = detached(move || {
                let mut tries = 0;
                loop {
                    tries += 1;
                    match client.facts(&lookup, true, start.timestamp()) {
                        Err(e) if tries < 5 => {
                            tracing::debug!(error = %e, "looking up where assigned partitions start; trying again");
                            std::thread::sleep(Duration::from_secs(1));
                        }
                        done => return done,
                    }
                }
            })
            .await;
            (lookup_no, cluster, partitions, facts)
        });
    }

    /// Partitions given to this instance start at the group's committed offset, else
    /// at the cluster's starting offsets, and are handed out; those taken back while
    /// they were looked up are not.
    pub(super) fn assigned(&mut self, (lookup_no, cluster, partitions, facts): Looked) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let partitions: Vec<(String, i32)> = partitions
            .into_iter()
            .filter(|(t, p)| {
                let id = SplitId::new(&cluster, t, *p);
                let current = group.pending.get(&id) == Some(&lookup_no);
                if current {
                    group.pending.remove(&id);
                }
                current
            })
            .collect();
        let facts = match facts {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(cluster = %cluster, error = %e, "cannot look up where assigned partitions start: this instance does not read them until the group assigns them again");
                return;
            }
        };
        let Some(state) = self.clusters.get_mut(&cluster) else {
            return;
        };
        let now = Instant::now();
        let handed_back: BTreeMap<SplitId, i64> = match self.group.as_mut() {
            Some(g) => g.giving_back.take_handed_back(&cluster, &partitions, now),
            None => BTreeMap::new(),
        };
        let stops = self.group.as_ref().and_then(|g| g.stops());
        let mut splits = Vec::new();
        for (topic, p) in partitions {
            let Some(f) = facts.get(&(topic.clone(), p)) else {
                continue;
            };
            let id = SplitId::new(&cluster, &topic, p);
            // A bounded run reads the partitions found at start, to their stops.
            let stop_offset = match stops {
                Some(stops) => match stops.stop_of(&id) {
                    Some(stop) => Some(stop),
                    None => continue,
                },
                None => None,
            };
            let next_offset = match f.committed {
                Some(c) => c,
                None => match resolve_start(state.start(), &topic, &cluster, p, f) {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::warn!(cluster = %cluster, error = %e, "an assigned partition has no start");
                        continue;
                    }
                },
            };
            // Handed out here before the group took it back: not again.
            let next_offset = match handed_back.get(&id) {
                Some(at) if *at > next_offset => {
                    tracing::info!(cluster = %cluster, topic = %topic, partition = p, committed = next_offset, from = *at, "a partition came back to this instance: reading on from where it was handed out here");
                    *at
                }
                _ => next_offset,
            };
            state.know(topic.clone(), p);
            splits.push(KafkaSplit {
                id,
                next_offset,
                stop_offset,
                last: None,
            });
        }
        if let Some(group) = self.group.as_mut() {
            for s in &splits {
                group.assigned.insert(s.id.clone(), s.next_offset);
                // What was acknowledged of an earlier ownership is not this one's.
                group.giving_back.held_anew(&s.id);
            }
        }
        self.hand_out(splits);
    }
}
