//! A group member's librdkafka context: the group's rebalance callbacks (what is
//! assigned and taken back, and each partition's stay), its commits, and its events
//! handed to the program's hooks.

use super::*;

/// Which stay of each partition this member is in: a number counted up at every
/// assignment. A commit asked during one stay and run after the partition went and
/// came back would carry a position of the earlier stay, behind what another member
/// committed meanwhile; the stamp tells it apart.
#[derive(Clone, Default)]
pub(super) struct Stays(pub(super) Arc<std::sync::Mutex<StayCount>>);

#[derive(Default)]
pub(super) struct StayCount {
    /// Stays begun so far.
    pub(super) begun: u64,
    /// The stay of each partition held.
    pub(super) of: std::collections::BTreeMap<(String, i32), u64>,
}

impl Stays {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, StayCount> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn begin(&self, partitions: &[(String, i32)]) {
        let mut stays = self.lock();
        for tp in partitions {
            stays.begun += 1;
            let stay = stays.begun;
            stays.of.insert(tp.clone(), stay);
        }
    }

    pub(super) fn end(&self, partitions: &[(String, i32)]) {
        let mut stays = self.lock();
        for tp in partitions {
            stays.of.remove(tp);
        }
    }

    pub(super) fn of(&self, topic: &str, partition: i32) -> Option<u64> {
        self.lock().of.get(&(topic.to_string(), partition)).copied()
    }

    /// The offsets of partitions `held` and still in the stay they were stamped in.
    pub(super) fn current(
        &self,
        offsets: Vec<StampedOffset>,
        held: &std::collections::BTreeSet<(String, i32)>,
    ) -> Vec<(String, i32, i64)> {
        offsets
            .into_iter()
            .filter(|(t, p, _, stay)| {
                held.contains(&(t.clone(), *p)) && self.of(t, *p) == Some(*stay)
            })
            .map(|(t, p, o, _)| (t, p, o))
            .collect()
    }
}

pub(super) struct MemberContext {
    pub(super) cluster: Arc<str>,
    pub(super) events: mpsc::UnboundedSender<MemberEvent>,
    /// The enumerator's commands; served by the member's loop, and by a revocation
    /// while it waits (the program's commit may be what it waits for).
    pub(super) commands: std::sync::Mutex<std_mpsc::Receiver<MemberCommand>>,
    /// Subscription changes that came during a revocation, applied after it.
    pub(super) deferred: std::sync::Mutex<Vec<Vec<String>>>,
    /// The stay of each partition held.
    pub(super) stays: Stays,
    /// Joined with the classic protocol.
    pub(super) classic: bool,
    /// The program's hooks for this cluster: tokens, statistics, errors.
    pub(super) hooks: Option<Arc<dyn ClientHooks>>,
    /// What of the secret properties librdkafka's texts may show (a secret bootstrap
    /// list's brokers): hidden in what is logged or handed to the hooks.
    pub(super) secrets: Vec<String>,
}

impl MemberContext {
    /// Runs the commits asked so far; subscription changes wait for the loop.
    pub(super) fn serve_commits(&self, consumer: &BaseConsumer<MemberContext>) {
        let commands = self.commands.lock().unwrap_or_else(|p| p.into_inner());
        while let Ok(cmd) = commands.try_recv() {
            match cmd {
                MemberCommand::Subscribe(topics) => self
                    .deferred
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(topics),
                MemberCommand::Commit(offsets, reply) => {
                    // Only partitions the member holds now, in the stay the commit was
                    // asked in: a commit asked before a revocation must not move a
                    // released partition's offset back under its next owner, nor
                    // under what that owner committed once the partition came back.
                    let held: std::collections::BTreeSet<(String, i32)> = consumer
                        .assignment()
                        .map(|tpl| partitions_of(&tpl).into_iter().collect())
                        .unwrap_or_default();
                    let offsets = self.stays.current(offsets, &held);
                    let done = if offsets.is_empty() {
                        Ok(())
                    } else {
                        commit_offsets(consumer, &offsets)
                    };
                    let _ = reply.send(done);
                }
            }
        }
    }
}

impl ClientContext for MemberContext {
    /// Token requests reach the member's poll only when a hook provides the tokens
    /// (see [`GroupMember::start`]).
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        let cluster = &*self.cluster;
        let log_message = &*hide_secrets(log_message, &self.secrets);
        tracing::debug!(target: "librdkafka", %cluster, facility = %fac, level = ?level, "group member: {log_message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let reason = &*hide_secrets(reason, &self.secrets);
        tracing::debug!(cluster = %self.cluster, error = %error, reason, "group member client error");
        if let Some(h) = &self.hooks {
            h.error(crate::kafka::errors::kind_of_error(&error), reason);
        }
    }

    fn stats_raw(&self, statistics: &[u8]) {
        if let Some(h) = &self.hooks {
            h.stats_raw(statistics);
        }
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        crate::kafka::events::context::token_of(self.hooks.as_ref(), oauthbearer_config)
    }
}

fn partitions_of(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

impl ConsumerContext for MemberContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if let Err(e) = consumer.incremental_assign(tpl) {
                    tracing::warn!(cluster = %self.cluster, error = %e, "group member: cannot take its assignment");
                    return;
                }
                // The readers fetch; the member only holds the partitions.
                let _ = consumer.pause(tpl);
                let partitions = partitions_of(tpl);
                self.stays.begin(&partitions);
                if !partitions.is_empty() {
                    tracing::info!(cluster = %self.cluster, count = partitions.len(), "the group assigned partitions to this instance");
                    let _ = self.events.send(MemberEvent::Assigned {
                        cluster: self.cluster.clone(),
                        partitions,
                    });
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let partitions = partitions_of(tpl);
                if !partitions.is_empty() {
                    // Fenced: the coordinator gave them to others already, and refuses
                    // this member's commits. (The classic protocol also calls
                    // partitions lost whose topic a metadata answer lacked, while the
                    // member is still in the group: there it commits as usual.)
                    let lost = !self.classic && consumer.assignment_lost();
                    if lost {
                        // A commit asked before the fence is not run for them either.
                        self.stays.end(&partitions);
                    }
                    tracing::info!(cluster = %self.cluster, count = partitions.len(), lost, "the group takes partitions back from this instance");
                    let (reply, answer) = std_mpsc::channel();
                    let asked = self.events.send(MemberEvent::Revoking {
                        cluster: self.cluster.clone(),
                        partitions,
                        reply,
                        lost,
                    });
                    let mut offsets = Vec::new();
                    if asked.is_ok() {
                        let give_up = std::time::Instant::now() + REVOKE_WAIT;
                        while std::time::Instant::now() < give_up {
                            match answer.recv_timeout(Duration::from_millis(20)) {
                                Ok(o) => {
                                    offsets = o;
                                    break;
                                }
                                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                                    self.serve_commits(consumer)
                                }
                                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                            }
                        }
                    }
                    if !offsets.is_empty()
                        && !lost
                        && let Err(e) = commit_offsets(consumer, &offsets)
                    {
                        tracing::warn!(cluster = %self.cluster, error = %e, "group member: the commit before releasing partitions failed; their next owner reads from the group's previous offsets");
                    }
                }
                let _ = consumer.incremental_unassign(tpl);
                self.stays.end(&partitions_of(tpl));
            }
            other => {
                tracing::warn!(cluster = %self.cluster, error = ?other, "group member: rebalance error");
            }
        }
    }

    fn commit_callback(&self, _: rdkafka::error::KafkaResult<()>, _: &TopicPartitionList) {}
}

/// Commits `offsets` as the member. A commit that crossed a heartbeat which moved
/// the member to a new epoch is refused as stale; librdkafka has the new epoch by
/// the time the answer comes, so the commit is asked again (a few times).
fn commit_offsets(
    consumer: &BaseConsumer<MemberContext>,
    offsets: &[(String, i32, i64)],
) -> Result<(), String> {
    let mut tpl = TopicPartitionList::new();
    for (t, p, o) in offsets {
        tpl.add_partition_offset(t, *p, Offset::Offset(*o))
            .map_err(|e| e.to_string())?;
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match consumer.commit(&tpl, CommitMode::Sync) {
            Err(KafkaError::ConsumerCommit(rdkafka::types::RDKafkaErrorCode::StaleMemberEpoch))
                if tries < STALE_COMMIT_TRIES =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            done => return done.map_err(|e| e.to_string()),
        }
    }
}
