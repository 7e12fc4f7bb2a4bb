//! Group mode, partitions taken back: they stop being handed out, and their positions
//! are committed once the program acknowledged what was handed out of them, or after
//! [`ACK_WAIT`] the last acknowledged position.

use super::*;

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
            group.pending.remove(id);
        }
        let mut starts = BTreeMap::new();
        for id in &ids {
            if let Some(start) = group.assigned.remove(id) {
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
                    && (self.removals.unconfirmed(id) || group.released.contains_key(*id))
            })
            .cloned()
            .collect();
        if let Some(state) = self.clusters.get_mut(&cluster) {
            state.retain_known(|(t, p)| !partitions.contains(&(t.clone(), *p)));
        }
        group.revocations.push(Revocation {
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
            group.ack_wanted.store(true, Ordering::SeqCst);
        }
    }

    /// Records where readers let go splits that a metadata change removed, for the
    /// group's revocation of them.
    pub(in crate::enumerator) fn released(&mut self, handed_out: &[KafkaSplit]) {
        if let Some(group) = self.group.as_mut() {
            // Every split handed out in group mode was assigned: its revocation
            // follows (its cluster's member leaves, or its topic leaves the
            // subscription), and takes the position from here.
            for s in handed_out {
                group.released.insert(s.id.clone(), s.next_offset);
            }
        }
    }

    /// Records what the program acknowledged (the checkpoint it commits).
    pub(in crate::enumerator) fn acknowledged(&mut self, cp: &Checkpoint) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        if let Some(stops) = group.stops.as_mut() {
            stops.acknowledged();
        }
        for (cluster, c) in &cp.clusters {
            for s in &c.splits {
                let id = SplitId::new(cluster, &s.topic, s.partition);
                // Only of the ownership now: held, or being given back. A checkpoint
                // taken before a revocation ended can be acknowledged after it; its
                // positions belong to an ownership that is over.
                let start = group
                    .assigned
                    .get(&id)
                    .or_else(|| group.revocations.iter().find_map(|r| r.starts.get(&id)));
                if start.is_none_or(|start| s.next_offset < *start) {
                    continue;
                }
                let e = group.acked.entry(id).or_insert(s.next_offset);
                *e = (*e).max(s.next_offset);
            }
        }
    }

    /// Answers the revocations whose readers confirmed and whose records the program
    /// acknowledged (or whose wait is over): with the positions to commit.
    pub(in crate::enumerator) fn revocations_due(&mut self) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let now = Instant::now();
        let mut still = Vec::new();
        for mut r in std::mem::take(&mut group.revocations) {
            let mut waiting = Vec::new();
            for mut c in std::mem::take(&mut r.confirms) {
                match c.try_recv() {
                    Ok(splits) => {
                        for s in splits {
                            r.handed_out.insert(s.id.clone(), s.next_offset);
                        }
                    }
                    Err(oneshot::error::TryRecvError::Empty) => waiting.push(c),
                    Err(oneshot::error::TryRecvError::Closed) => {}
                }
            }
            r.confirms = waiting;
            r.await_release
                .retain(|id| match group.released.remove(id) {
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
                    group.acked.get(id).is_some_and(|a| a >= at) || r.starts.get(id) == Some(at)
                });
            // Leaving (the source closes): the program acknowledged what it will; the
            // readers are not asked again. Lost: nothing can be committed, so nothing
            // is waited for but the readers' last positions.
            let released = r.confirms.is_empty() && r.await_release.is_empty();
            let due = now >= r.deadline || group.leaving || (r.lost && released);
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
                    let acked = group.acked.get(id).copied();
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
            } else if !acked_all && !group.leaving {
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
                group.acked.remove(id);
                if let Some(at) = r.handed_out.get(id) {
                    group
                        .handed_back
                        .insert(id.clone(), (*at, now + HANDED_BACK_KEEP));
                }
            }
            let _ = self.links.retained().take(|id| r.ids.contains(id));
            let _ = r.reply.send(offsets);
        }
        group.revocations = still;
        let finished = group.stops.as_ref().is_some_and(|s| s.finished_unacked());
        let waiting = group.revocations.iter().any(|r| !r.lost);
        group
            .ack_wanted
            .store(waiting || finished, Ordering::SeqCst);
    }
}
