//! Group mode, partitions taken back: they stop being handed out, and their positions
//! are committed once the program acknowledged what was handed out of them, or after
//! [`ACK_WAIT`] the last acknowledged position.

use super::*;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// A revocation waiting for the readers' last positions and the program's
/// acknowledgement.
struct Revocation {
    ids: Vec<SplitId>,
    confirms: Vec<oneshot::Receiver<Vec<KafkaSplit>>>,
    /// Where each split started when it was assigned.
    starts: BTreeMap<SplitId, i64>,
    /// Where each split was when its reader let it go.
    handed_out: BTreeMap<SplitId, i64>,
    /// Splits a metadata change removed before the group took them back: their
    /// reader's confirmation of that removal gives where they were.
    await_release: BTreeSet<SplitId>,
    reply: std_mpsc::Sender<Vec<(String, i32, i64)>>,
    deadline: Instant,
    /// The coordinator fenced this member and gave the partitions to others: nothing
    /// is committed, and only the readers' last positions are waited for.
    lost: bool,
}

/// Partitions being given back to the group, and what is kept of those given back.
#[derive(Default)]
pub(super) struct GivingBack {
    /// The positions the program acknowledged last (its last commit), of the splits
    /// this instance holds or is giving back: never of an earlier ownership.
    acked: BTreeMap<SplitId, i64>,
    /// Where readers let splits go that a metadata change removed.
    released: BTreeMap<SplitId, i64>,
    /// Where this instance had handed out partitions the group took back, and until
    /// when that is kept. A partition that comes back (a member that lost its
    /// membership, fenced after a stall longer than the session timeout, joins again
    /// and is given its partitions anew) starts there when its committed offset is
    /// behind: those records were handed out here already.
    handed_back: BTreeMap<SplitId, (i64, Instant)>,
    /// The revocations waiting for the readers' last positions or the program's
    /// acknowledgement.
    revocations: Vec<Revocation>,
}

impl GivingBack {
    /// Whether a revocation waits.
    pub(super) fn waiting(&self) -> bool {
        !self.revocations.is_empty()
    }

    /// Splits handed out (again): where a metadata change's removal let them go
    /// before is no longer where they are.
    pub(super) fn handing_out(&mut self, splits: &[KafkaSplit]) {
        for s in splits {
            self.released.remove(&s.id);
        }
    }

    /// Takes where this instance had handed out `partitions` of `cluster` before the
    /// group took them back, for those still kept at `now`; forgets those kept too
    /// long.
    pub(super) fn take_handed_back(
        &mut self,
        cluster: &Arc<str>,
        partitions: &[(String, i32)],
        now: Instant,
    ) -> BTreeMap<SplitId, i64> {
        self.handed_back.retain(|_, (_, until)| *until > now);
        partitions
            .iter()
            .filter_map(|(t, p)| {
                let id = SplitId::new(cluster, t, *p);
                self.handed_back.remove(&id).map(|(at, _)| (id, at))
            })
            .collect()
    }

    /// `id` is held anew: what was acknowledged of an earlier ownership is not this
    /// one's.
    pub(super) fn held_anew(&mut self, id: &SplitId) {
        self.acked.remove(id);
    }

    /// Whether a revocation waits for a reader's last positions.
    pub(super) fn confirming(&self) -> bool {
        self.revocations.iter().any(|r| !r.confirms.is_empty())
    }

    /// Ready once a reader confirmed (or dropped) a revocation's removal, with its
    /// last positions noted: so the enumerator answers the revocation as soon as it
    /// may, rather than on a timer.
    pub(super) fn poll_confirms(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let mut any = false;
        for r in &mut self.revocations {
            r.confirms.retain_mut(|c| match Pin::new(c).poll(cx) {
                Poll::Ready(confirmed) => {
                    for s in confirmed.unwrap_or_default() {
                        r.handed_out.insert(s.id.clone(), s.next_offset);
                    }
                    any = true;
                    false
                }
                Poll::Pending => true,
            });
        }
        if any { Poll::Ready(()) } else { Poll::Pending }
    }

    /// When the first revocation stops waiting for the program's acknowledgement.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.revocations.iter().map(|r| r.deadline).min()
    }
}

impl Enumerator {
    /// Partitions taken back: the readers stop handing them out and say where they
    /// are; the positions are committed once acknowledged (see [`Self::revocations_due`]).
    pub(super) fn revoking(
        &mut self,
        cluster: Arc<str>,
        partitions: Vec<(String, i32)>,
        reply: std_mpsc::Sender<Vec<(String, i32, i64)>>,
        lost: bool,
    ) {
        let ids: Vec<SplitId> = partitions
            .iter()
            .map(|(t, p)| SplitId::new(&cluster, t, *p))
            .collect();
        let per_reader = self.readers.take_ids(&ids);
        let mut confirms = Vec::new();
        // The readers keep the final positions as retained ones, which go into every
        // checkpoint taken after the removal: the program's next commit carries them,
        // and that is its acknowledgement (a commit of an older checkpoint is not).
        let keep_until = crate::base::retention::now_ms() + ACK_WAIT.as_millis() as i64 * 4;
        for (reader, ids) in per_reader {
            if self.readers.is_live(reader) {
                let (ctx, crx) = oneshot::channel();
                self.readers.tell(
                    reader,
                    ReaderEvent::Remove {
                        ids,
                        retain_until_ms: Some(keep_until),
                        confirm: Some(ctx),
                    },
                );
                confirms.push(crx);
            }
        }
        let Some(group) = self.group.as_mut() else {
            let _ = reply.send(Vec::new());
            return;
        };
        for id in &ids {
            group.forget_lookup(id);
        }
        let mut starts = BTreeMap::new();
        for id in &ids {
            if let Some(start) = group.take_assigned(id) {
                starts.insert(id.clone(), start);
            }
        }
        // Splits a metadata change already took from the readers (their cluster or
        // topic left the stream): where they were comes with the readers'
        // confirmation of that removal.
        let await_release: BTreeSet<SplitId> = ids
            .iter()
            .filter(|id| {
                starts.contains_key(*id)
                    && (self.removals.unconfirmed(id)
                        || group.giving_back.released.contains_key(*id))
            })
            .cloned()
            .collect();
        if let Some(state) = self.clusters.get_mut(&cluster) {
            state.retain_known(|(t, p)| !partitions.contains(&(t.clone(), *p)));
        }
        group.giving_back.revocations.push(Revocation {
            ids,
            confirms,
            handed_out: starts.clone(),
            starts,
            await_release,
            reply,
            deadline: Instant::now() + ACK_WAIT,
            lost,
        });
        if !lost {
            group.set_ack_wanted(true);
        }
    }

    /// Records where readers let go splits that a metadata change removed, for the
    /// group's revocation of them.
    pub(crate) fn released(&mut self, handed_out: &[KafkaSplit]) {
        if let Some(group) = self.group.as_mut() {
            // Every split handed out in group mode was assigned: its revocation
            // follows (its cluster's member leaves, or its topic leaves the
            // subscription), and takes the position from here.
            for s in handed_out {
                group
                    .giving_back
                    .released
                    .insert(s.id.clone(), s.next_offset);
            }
        }
    }

    /// Records what the program acknowledged (the checkpoint it commits).
    pub(crate) fn acknowledged(&mut self, cp: &Checkpoint) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        if let Some(stops) = group.stops_mut() {
            stops.acknowledged();
        }
        for (cluster, c) in &cp.clusters {
            for s in &c.splits {
                let id = SplitId::new(cluster, &s.topic, s.partition);
                // Only of the ownership now: held, or being given back. A checkpoint
                // taken before a revocation ended can be acknowledged after it; its
                // positions belong to an ownership that is over.
                let start = group.assigned_start(&id).or_else(|| {
                    group
                        .giving_back
                        .revocations
                        .iter()
                        .find_map(|r| r.starts.get(&id).copied())
                });
                if start.is_none_or(|start| s.next_offset < start) {
                    continue;
                }
                let e = group.giving_back.acked.entry(id).or_insert(s.next_offset);
                *e = (*e).max(s.next_offset);
            }
        }
    }

    /// Answers the revocations whose readers confirmed and whose records the program
    /// acknowledged (or whose wait is over): with the positions to commit.
    pub(crate) fn revocations_due(&mut self) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let now = Instant::now();
        // The confirmations that came while the loop woke for something else.
        let _ = group
            .giving_back
            .poll_confirms(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        let mut still = Vec::new();
        for mut r in std::mem::take(&mut group.giving_back.revocations) {
            r.await_release
                .retain(|id| match group.giving_back.released.remove(id) {
                    Some(at) => {
                        r.handed_out.insert(id.clone(), at);
                        false
                    }
                    None => true,
                });
            // A split is acknowledged when the program's last commit reached where its
            // reader let it go, or when nothing was handed out of it.
            let acked_all = r.confirms.is_empty()
                && r.await_release.is_empty()
                && r.handed_out.iter().all(|(id, at)| {
                    group.giving_back.acked.get(id).is_some_and(|a| a >= at)
                        || r.starts.get(id) == Some(at)
                });
            // Leaving (the source closes): the program acknowledged what it will; the
            // readers are not asked again. Lost: nothing can be committed, so nothing
            // is waited for but the readers' last positions.
            let released = r.confirms.is_empty() && r.await_release.is_empty();
            let due = now >= r.deadline || group.leaving() || (r.lost && released);
            if !(acked_all || due) {
                still.push(r);
                continue;
            }
            // Only what this instance started reading: a partition taken back while
            // its start was still looked up was not read here. None when lost.
            let offsets: Vec<(String, i32, i64)> = r
                .ids
                .iter()
                .filter(|id| !r.lost && r.starts.contains_key(*id))
                .filter_map(|id| {
                    let acked = group.giving_back.acked.get(id).copied();
                    let at = if acked_all {
                        acked.or_else(|| r.handed_out.get(id).copied())
                    } else {
                        acked
                    }?;
                    Some((id.topic.to_string(), id.partition, at))
                })
                .collect();
            if r.lost {
                tracing::warn!(
                    partitions = r.ids.len(),
                    "the cluster's group fenced this instance (no heartbeat within the session timeout) and gave its partitions to other members: what was handed out of them since this instance's last commit is read again by their next owner"
                );
            } else if !acked_all && !group.leaving() {
                let waited_for = if !r.confirms.is_empty() {
                    "the readers' last positions"
                } else if !r.await_release.is_empty() {
                    "the release of splits a metadata change removed"
                } else {
                    "the program's acknowledgement"
                };
                tracing::warn!(
                    partitions = r.ids.len(),
                    waited_for,
                    "partitions taken back before the program acknowledged every record handed out of them within {ACK_WAIT:?}: their next owner reads those records again"
                );
            }
            for id in &r.ids {
                group.giving_back.acked.remove(id);
                if let Some(at) = r.handed_out.get(id) {
                    group
                        .giving_back
                        .handed_back
                        .insert(id.clone(), (*at, now + HANDED_BACK_KEEP));
                }
            }
            let _ = self.links.retained().take(|id| r.ids.contains(id));
            let _ = r.reply.send(offsets);
        }
        group.giving_back.revocations = still;
        let finished = group.stops().is_some_and(|s| s.finished_unacked());
        let waiting = group.giving_back.revocations.iter().any(|r| !r.lost);
        group.set_ack_wanted(waiting || finished);
    }
}
