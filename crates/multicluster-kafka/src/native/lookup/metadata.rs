//! The cluster's metadata, from whichever broker answers first, and what the lookups
//! read in it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use multicluster_kafka_client::Uuid;
use tokio::time::Instant;

use crate::error::SourceError;
use crate::lookups::EndEarly;

use super::pool::stale;
use super::{BACKOFF_MAX, BACKOFF_MIN, Lookup};
use multicluster_kafka_client::calls::Metadata;
use multicluster_kafka_client::error::NativeError;
use multicluster_kafka_client::partition::code;

/// How long a metadata request waits for a broker before it asks the next one too.
const STAGGER: Duration = Duration::from_secs(1);

impl Lookup {
    /// The cluster's metadata (of `topics`, or of all), from any broker that
    /// answers: the idle connections' first, then the known brokers, then the
    /// bootstrap servers. A round where every broker failed is tried again with
    /// backoff until the timeout, unless `give_up` says it ends there.
    pub fn metadata(
        self: &Arc<Self>,
        topics: Option<Vec<String>>,
        give_up: EndEarly,
    ) -> Result<Metadata, SourceError> {
        let me = self.clone();
        self.block(async move {
            let deadline = Instant::now() + me.timeout;
            me.metadata_until(topics.as_deref(), give_up, deadline)
                .await
        })
    }

    pub(super) async fn metadata_until(
        self: &Arc<Self>,
        topics: Option<&[String]>,
        give_up: EndEarly,
        deadline: Instant,
    ) -> Result<Metadata, SourceError> {
        let mut backoff = BACKOFF_MIN;
        loop {
            let mut last: Option<NativeError> = None;
            let mut refusals = 0;
            let mut tried = 0;
            let addrs = self.addresses();
            // The brokers are asked one after the other, the next one when the one
            // before failed or has not answered within [`STAGGER`]: a broker whose
            // host is down (its connection attempts time out) holds nothing up,
            // and the first answer ends the round (the others' attempts are
            // dropped).
            let mut attempts: tokio::task::JoinSet<Result<Metadata, NativeError>> =
                tokio::task::JoinSet::new();
            let mut next = 0;
            loop {
                if attempts.is_empty() && next < addrs.len() {
                    attempts.spawn(self.clone().metadata_from(addrs[next].clone(), topics));
                    next += 1;
                    tried += 1;
                }
                if attempts.is_empty() {
                    break;
                }
                let stagger = tokio::time::sleep(STAGGER);
                let outcome = tokio::select! {
                    joined = attempts.join_next() => joined,
                    () = stagger, if next < addrs.len() => {
                        attempts.spawn(self.clone().metadata_from(addrs[next].clone(), topics));
                        next += 1;
                        tried += 1;
                        continue;
                    }
                    () = tokio::time::sleep_until(deadline) => break,
                };
                match outcome {
                    Some(Ok(Ok(md))) => {
                        self.refused.store(false, Ordering::SeqCst);
                        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                        self.learn(&md);
                        return Ok(md);
                    }
                    Some(Ok(Err(e))) => {
                        if refusal(&e) {
                            refusals += 1;
                        }
                        tracing::debug!(cluster = %self.cluster, error = %e, "metadata request failed");
                        self.settings.errors.tell(&e);
                        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(e.to_string());
                        last = Some(e);
                    }
                    Some(Err(panicked)) => {
                        return Err(SourceError::internal("a metadata request", panicked));
                    }
                    None => {}
                }
            }
            // Every broker failed; some refused the client (others may be down),
            // as librdkafka's "refused since its last answer".
            let refused = tried > 0 && refusals > 0;
            self.refused.store(refused, Ordering::SeqCst);
            let last = last.unwrap_or_else(|| match addrs.first() {
                // The deadline came while brokers were still being asked.
                Some(addr) => self.late(addr, "metadata answer"),
                None => NativeError::Closed {
                    addr: "(no bootstrap.servers)".into(),
                },
            });
            let ends = match give_up {
                EndEarly::OnAnyError => true,
                EndEarly::OnRefusal => refused,
            };
            if ends || Instant::now() + backoff >= deadline {
                return Err(self.error("metadata request", &last));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// The metadata from the broker at `addr`, on an idle connection to it (replaced
    /// once if the broker closed it meanwhile) or a new one, given back after the
    /// answer.
    fn metadata_from(
        self: Arc<Self>,
        addr: String,
        topics: Option<&[String]>,
    ) -> impl Future<Output = Result<Metadata, NativeError>> + Send + 'static {
        let topics: Option<Vec<String>> = topics.map(<[String]>::to_vec);
        async move {
            let names: Option<Vec<&str>> = topics
                .as_ref()
                .map(|t| t.iter().map(String::as_str).collect());
            let (mut conn, reused) = self.take(&addr, false).await?;
            let md = match conn.metadata(names.as_deref()).await {
                Err(e) if reused && stale(&e) => {
                    conn = self.take(&addr, true).await?.0;
                    conn.metadata(names.as_deref()).await
                }
                other => other,
            }?;
            self.give(conn);
            Ok(md)
        }
    }
}

/// The leader of `topic`/`partition` in `md`, or the error code why there is none.
pub(super) fn leader_of(md: &Metadata, topic: &str, partition: i32) -> Result<i32, i16> {
    let Some(t) = md.topics.iter().find(|t| t.name == topic) else {
        return Err(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    if t.error_code != 0 {
        return Err(t.error_code);
    }
    let Some(p) = t.partitions.iter().find(|p| p.partition == partition) else {
        return Err(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    if p.leader_id < 0 {
        return Err(code::LEADER_NOT_AVAILABLE);
    }
    Ok(p.leader_id)
}

/// A topic's id in `md` (nil when unknown or before Metadata v10).
pub(super) fn topic_id(md: &Metadata, topic: &str) -> Uuid {
    md.topics
        .iter()
        .find(|t| t.name == topic)
        .map_or(Uuid::nil(), |t| t.topic_id)
}

/// Whether the cluster refused the client (as opposed to not answering).
fn refusal(e: &NativeError) -> bool {
    matches!(e, NativeError::Tls { .. } | NativeError::Auth { .. })
}
