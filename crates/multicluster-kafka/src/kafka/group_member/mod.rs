//! Group mode's member on one cluster: a consumer subscribed to the cluster's topics
//! of the stream in the source's group, whose group coordinator divides the
//! cluster's partitions among the instances. It fetches nothing itself: partitions
//! are paused as soon as they are assigned, and the source's readers read them. It
//! tells the enumerator what it was given and what is taken back, and commits for the
//! source (a consumer group accepts commits only from its members).
//!
//! Kafka's consumer group protocol (KIP-848, `group.protocol=consumer`) is used where
//! the brokers have it; a cluster that refuses it is joined with the classic protocol
//! and cooperative-sticky assignment.

use crate::base::properties::hide_secrets;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::base::hooks::ClientHooks;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::config::client_config;
use rdkafka::client::OAuthToken;

/// How long a revocation waits for the enumerator's answer (the positions to commit)
/// before it commits nothing and lets the partitions go.
const REVOKE_WAIT: Duration = Duration::from_secs(30);

/// How long a commit through the member may take.
const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// How many times a commit refused for a stale member epoch is asked.
const STALE_COMMIT_TRIES: u32 = 5;

/// Properties of the classic protocol that librdkafka refuses with
/// `group.protocol=consumer`.
const CLASSIC_ONLY: &[&str] = &[
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
];

/// What a member tells the enumerator.
#[derive(Debug)]
pub(crate) enum MemberEvent {
    /// The coordinator gave these partitions to this instance.
    Assigned {
        cluster: Arc<str>,
        partitions: Vec<(String, i32)>,
    },
    /// The coordinator takes these partitions back: answer with the positions to
    /// commit (the acknowledged ones); the partitions are released after the commit.
    /// `lost`: the coordinator already gave them to others (it fenced this member,
    /// which missed its session timeout): nothing can be committed for them, and the
    /// answer waits only for the readers to let them go.
    Revoking {
        cluster: Arc<str>,
        partitions: Vec<(String, i32)>,
        reply: std_mpsc::Sender<Vec<(String, i32, i64)>>,
        lost: bool,
    },
    /// The member cannot go on (a fatal error of the group protocol);
    /// `unsupported` when the brokers lack the consumer group protocol.
    Failed {
        cluster: Arc<str>,
        message: String,
        unsupported: bool,
    },
}

enum MemberCommand {
    Subscribe(Vec<String>),
    Commit(Vec<StampedOffset>, std_mpsc::Sender<Result<(), String>>),
}

/// An offset to commit: topic, partition, next offset, and the stay of the
/// partition at this member it belongs to (see [`Stays`]).
pub(crate) type StampedOffset = (String, i32, i64, u64);

mod context;

use context::{MemberContext, Stays};

/// The handle of a member running on a thread of its own; dropping it leaves the
/// group in the background.
pub(crate) struct GroupMember {
    cluster: Arc<str>,
    commands: std_mpsc::Sender<MemberCommand>,
    stays: Stays,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
    /// `consumer` (KIP-848) or `classic`.
    pub protocol: &'static str,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember")
            .field("cluster", &self.cluster)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl GroupMember {
    /// Joins `group` on `cluster` (its merged client properties `props`), subscribed
    /// to `topics`; events go to `events`.
    /// `classic` forces the classic protocol (else the properties decide, the
    /// consumer protocol by default). `hooks` are the program's for this cluster:
    /// OAUTHBEARER tokens from a hook are made on the member's thread; otherwise
    /// librdkafka's background thread serves OIDC and unsecured JWTs.
    pub fn start(
        cluster: Arc<str>,
        props: &ClientProperties,
        group: &str,
        topics: Vec<String>,
        events: mpsc::UnboundedSender<MemberEvent>,
        classic: bool,
        hooks: Option<Arc<dyn ClientHooks>>,
    ) -> Result<GroupMember, SourceError> {
        let mut props = props.clone();
        let classic = classic
            || props
                .get("group.protocol")
                .is_some_and(|p| p.trim().eq_ignore_ascii_case("classic"));
        if !classic {
            for key in CLASSIC_ONLY {
                props.remove(key);
            }
        }
        let mut config = client_config(&props);
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        if classic {
            config
                .set("group.protocol", "classic")
                .set("partition.assignment.strategy", "cooperative-sticky");
        } else {
            config.set("group.protocol", "consumer");
        }
        crate::kafka::config::prepare(&mut config, &props, hooks.as_ref())
            .map_err(|e| SourceError::cluster(&cluster, "create the group member", &e, &props))?;
        let provider = hooks.as_ref().is_some_and(|h| h.enable_token_refresh());
        let (tx, rx) = std_mpsc::channel();
        let stays = Stays::default();
        let context = MemberContext {
            cluster: cluster.clone(),
            events: events.clone(),
            commands: std::sync::Mutex::new(rx),
            deferred: std::sync::Mutex::new(Vec::new()),
            stays: stays.clone(),
            classic,
            hooks,
            secrets: props.secret_texts(),
        };
        crate::kafka::config::init_tls();
        let consumer: BaseConsumer<MemberContext> = config
            .create_with_context(context)
            .map_err(|e| SourceError::cluster(&cluster, "create the group member", &e, &props))?;
        // SAFETY: the consumer is live; the queue handle is released once. Token
        // requests for a hook go to the consumer queue, which the member's thread polls
        // (rdkafka's poll hands them to `generate_oauth_token`).
        unsafe {
            let client = consumer.client().native_ptr();
            let queue = rdkafka::bindings::rd_kafka_queue_get_consumer(client);
            if !queue.is_null() {
                crate::kafka::events::route_token_requests(client, queue, provider, &cluster);
                rdkafka::bindings::rd_kafka_queue_destroy(queue);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let name = format!("mck-group-{cluster}").replace('\0', "?");
        let (c, s) = (cluster.clone(), stop.clone());
        let join = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _guard = crate::base::dispatch::enter(&dispatch);
                serve(&c, consumer, topics, &s, &events);
            })
            .map_err(|e| SourceError::internal("a group member thread", e))?;
        Ok(GroupMember {
            cluster,
            commands: tx,
            stays,
            stop,
            join: Some(join),
            protocol: if classic { "classic" } else { "consumer" },
        })
    }

    /// Changes the subscription (the cluster's topics of the stream changed).
    pub fn subscribe(&self, topics: Vec<String>) {
        let _ = self.commands.send(MemberCommand::Subscribe(topics));
    }

    /// A handle that commits through this member.
    pub fn committer(&self) -> MemberCommitter {
        MemberCommitter {
            cluster: self.cluster.clone(),
            commands: self.commands.clone(),
            stays: self.stays.clone(),
        }
    }

    /// Leaves the group (its partitions are revoked first, which asks the enumerator
    /// for their positions), waiting for it on a thread of its own for up to
    /// `within`. Blocking.
    pub fn leave(mut self, within: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(join) = self.join.take() {
            let (tx, rx) = std_mpsc::channel();
            let _ = std::thread::Builder::new()
                .name("mck-group-leave".into())
                .spawn(move || {
                    let _ = join.join();
                    let _ = tx.send(());
                });
            if rx.recv_timeout(within).is_err() {
                tracing::warn!(cluster = %self.cluster, "the group member did not leave within {within:?}; the coordinator takes its partitions back after the session timeout");
            }
        }
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Commits through a member, from any thread (blocking).
#[derive(Clone)]
pub(crate) struct MemberCommitter {
    cluster: Arc<str>,
    commands: std_mpsc::Sender<MemberCommand>,
    stays: Stays,
}

impl MemberCommitter {
    /// Stamps `offsets` (topic, partition, next offset) with the partitions' stays
    /// now; those of partitions the member does not hold are dropped. Stamp when the
    /// commit is asked, [`Self::commit`] when it runs.
    pub fn stamp(&self, offsets: Vec<(String, i32, i64)>) -> Vec<StampedOffset> {
        offsets
            .into_iter()
            .filter_map(|(t, p, o)| {
                let stay = self.stays.of(&t, p)?;
                Some((t, p, o, stay))
            })
            .collect()
    }

    /// Commits stamped offsets as the group's member: those of a partition that is
    /// no longer in the stay it was stamped in are not committed.
    pub fn commit(&self, offsets: &[StampedOffset]) -> Result<(), SourceError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (tx, rx) = std_mpsc::channel();
        let gone = || SourceError::Cluster {
            cluster: self.cluster.to_string(),
            message: "commit: the group member is gone".into(),
        };
        self.commands
            .send(MemberCommand::Commit(offsets.to_vec(), tx))
            .map_err(|_| gone())?;
        match rx.recv_timeout(COMMIT_WAIT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: format!("commit as a group member: {message}"),
            }),
            Err(_) => Err(SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: format!("commit as a group member: no answer within {COMMIT_WAIT:?}"),
            }),
        }
    }
}

/// The member's thread: polls the consumer (rebalances, commit callbacks; records
/// of paused partitions are dropped), runs commands, and leaves when stopped.
fn serve(
    cluster: &Arc<str>,
    consumer: BaseConsumer<MemberContext>,
    topics: Vec<String>,
    stop: &AtomicBool,
    events: &mpsc::UnboundedSender<MemberEvent>,
) {
    let subscribe = |topics: &[String]| {
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(e) = consumer.subscribe(&refs) {
            tracing::warn!(cluster = %cluster, error = %e, "group member: cannot subscribe");
        }
    };
    subscribe(&topics);
    let mut said_fatal = false;
    while !stop.load(Ordering::SeqCst) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) | None => {}
            Some(Err(e)) => tracing::debug!(cluster = %cluster, error = %e, "group member poll"),
        }
        consumer.context().serve_commits(&consumer);
        let deferred = std::mem::take(
            &mut *consumer
                .context()
                .deferred
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for topics in deferred {
            subscribe(&topics);
        }
        if !said_fatal && let Some((code, text)) = consumer.client().fatal_error() {
            said_fatal = true;
            use rdkafka::types::RDKafkaErrorCode as C;
            let unsupported = matches!(
                code,
                C::UnsupportedVersion | C::UnsupportedFeature | C::UnsupportedForMessageFormat
            ) || text.contains("Unsupported")
                || text.contains("not supported");
            let _ = events.send(MemberEvent::Failed {
                cluster: cluster.clone(),
                message: text,
                unsupported,
            });
        }
    }
    // Leaving: dropping closes the consumer, which revokes every partition first (the
    // rebalance callback runs within the close, and asks the enumerator for the
    // positions to commit), then leaves the group.
    drop(consumer);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committer(stays: &Stays) -> MemberCommitter {
        MemberCommitter {
            cluster: Arc::from("east"),
            commands: std_mpsc::channel().0,
            stays: stays.clone(),
        }
    }

    #[test]
    fn a_commit_stamped_in_an_earlier_stay_is_not_run() {
        let stays = Stays::default();
        let p0 = ("t".to_string(), 0);
        let p1 = ("t".to_string(), 1);
        stays.begin(&[p0.clone(), p1.clone()]);
        let held: std::collections::BTreeSet<_> = [p0.clone(), p1.clone()].into();
        let asked = committer(&stays).stamp(vec![
            ("t".into(), 0, 120),
            ("t".into(), 1, 40),
            ("t".into(), 2, 7),
        ]);
        assert_eq!(asked.len(), 2, "a partition not held is not stamped");
        assert_eq!(
            stays.current(asked.clone(), &held),
            vec![("t".into(), 0, 120), ("t".into(), 1, 40)]
        );
        // Partition 0 goes and comes back before the commit runs.
        stays.end(std::slice::from_ref(&p0));
        stays.begin(std::slice::from_ref(&p0));
        assert_eq!(
            stays.current(asked.clone(), &held),
            vec![("t".into(), 1, 40)]
        );
        // Partition 1 is no longer held.
        let held: std::collections::BTreeSet<_> = [p0].into();
        assert_eq!(stays.current(asked, &held), vec![]);
    }
}
