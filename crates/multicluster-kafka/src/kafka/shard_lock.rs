//! A shard's exclusive membership: a consumer with a static `group.instance.id` in a
//! group of Kafka's consumer group protocol (KIP-848), whose coordinator refuses a
//! second live member with the same instance id (`UNRELEASED_INSTANCE_ID`). It reads
//! nothing: it subscribes to a topic name that is never created, so its assignment
//! stays empty; joining is what counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use crate::base::properties::ClientProperties;
use crate::base::shard::Shard;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::config::client_config;
use crate::kafka::events::{ClientRole, Served, SourceContext};

/// The topic the membership subscribes to. Never created: a subscription to a
/// missing topic keeps the member in the group with nothing assigned.
const LOCK_TOPIC: &str = "__mck-shard-membership";

/// Properties of the classic protocol that librdkafka refuses with
/// `group.protocol=consumer` (the broker decides them in KIP-848 groups).
const CLASSIC_ONLY: &[&str] = &[
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
];

/// The group of every shard membership of a stream read under `group`.
pub(crate) fn lock_group(group: &str) -> String {
    format!("{group}-shards")
}

/// The static instance id of shard `shard` of a stream read under `group`.
pub(crate) fn instance_id(group: &str, shard: Shard) -> String {
    format!("{group}-shard-{}", shard.index())
}

/// A shard's membership, held until dropped: dropping closes the consumer, which
/// leaves the group as a static member (epoch -2) and frees the instance id at once.
/// Dropping blocks while the leave is sent.
pub(crate) struct ShardLock {
    /// The client, its events (log lines, errors, OAUTHBEARER tokens) served.
    consumer: Served<BaseConsumer<SourceContext>>,
    shard: Shard,
    instance: String,
    cluster: Arc<str>,
}

impl std::fmt::Debug for ShardLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardLock")
            .field("shard", &self.shard)
            .field("instance", &self.instance)
            .field("cluster", &self.cluster)
            .finish()
    }
}

/// Why a membership was not had.
enum Attempt {
    /// Another live member holds the instance id.
    Held(String),
    /// No answer (yet), or another failure worth trying again.
    Pending(String),
}

impl ShardLock {
    /// Takes shard `shard`'s membership on `cluster` (its merged client properties
    /// `props`), trying again while another member holds it, for up to `wait`.
    /// Blocking: call it on a thread of its own.
    pub fn acquire(
        cluster: Arc<str>,
        props: &ClientProperties,
        group: &str,
        shard: Shard,
        wait: Duration,
        setup: ClientSetup,
    ) -> Result<ShardLock, SourceError> {
        let instance = instance_id(group, shard);
        let give_up = Instant::now() + wait;
        let mut said = false;
        let mut held: Option<String> = None;
        loop {
            let lock = Self::start(
                cluster.clone(),
                props,
                group,
                shard,
                &instance,
                setup.clone(),
            )?;
            let last = match lock.await_join(give_up) {
                Ok(()) => {
                    tracing::info!(cluster = %cluster, shard = %shard, instance = %instance, "holding the shard's membership");
                    return Ok(lock);
                }
                Err(Attempt::Held(why)) => {
                    held = Some(why.clone());
                    why
                }
                Err(Attempt::Pending(why)) => why,
            };
            crate::kafka::client::close_detached(lock);
            if Instant::now() >= give_up {
                // A refusal says more than a last attempt cut short by the deadline.
                return Err(SourceError::ShardTaken {
                    shard: shard.to_string(),
                    instance,
                    cluster: cluster.to_string(),
                    message: held.unwrap_or(last),
                });
            }
            if !said {
                tracing::warn!(cluster = %cluster, shard = %shard, instance = %instance, reason = %last, "the shard's membership is not free: another instance of this shard runs, or one was killed and the broker has not noticed yet; trying again for up to {wait:?}");
                said = true;
            }
            std::thread::sleep(
                Duration::from_secs(1).min(give_up.saturating_duration_since(Instant::now())),
            );
        }
    }

    fn start(
        cluster: Arc<str>,
        props: &ClientProperties,
        group: &str,
        shard: Shard,
        instance: &str,
        setup: ClientSetup,
    ) -> Result<ShardLock, SourceError> {
        let ClientSetup { hooks, dispatch } = setup;
        let mut props = props.clone();
        for key in CLASSIC_ONLY {
            props.remove(key);
        }
        let mut config = client_config(&props);
        config
            .set("group.id", lock_group(group))
            .set("group.instance.id", instance)
            .set("group.protocol", "consumer")
            .set("enable.auto.commit", "false")
            .set("allow.auto.create.topics", "false");
        let what = "create the shard membership client";
        crate::kafka::config::prepare(&mut config, &props, hooks.as_ref())
            .map_err(|e| SourceError::cluster(&cluster, what, &e, &props))?;
        let context =
            SourceContext::new(cluster.clone(), ClientRole::Lookup, hooks).for_properties(&props);
        let consumer = Served::<BaseConsumer<SourceContext>>::create(&config, context, dispatch)
            .map_err(|e| SourceError::cluster(&cluster, what, &e, &props))?;
        consumer.subscribe(&[LOCK_TOPIC]).map_err(|e| {
            SourceError::cluster(&cluster, "join the shard membership group", &e, &props)
        })?;
        Ok(ShardLock {
            consumer,
            shard,
            instance: instance.to_string(),
            cluster,
        })
    }

    /// Polls until the coordinator took the member in, refused it, or `until`.
    fn await_join(&self, until: Instant) -> Result<(), Attempt> {
        loop {
            self.poll();
            if let Some(e) = self.fatal() {
                return Err(e);
            }
            if self.member_epoch().is_some_and(|e| e > 0) {
                return Ok(());
            }
            if Instant::now() >= until {
                let cause = self
                    .consumer
                    .context()
                    .last_error()
                    .map_or_else(String::new, |e| format!("; last client error: {e}"));
                return Err(Attempt::Pending(format!(
                    "the group coordinator did not take the member in (cluster unreachable, or brokers without Kafka's consumer group protocol, before 4.0){cause}"
                )));
            }
        }
    }

    /// The member epoch the coordinator gave this member (0 before it joined), read
    /// from librdkafka's consumer group metadata: a member of a KIP-848 group with
    /// nothing assigned gets no rebalance callback, so the epoch is the only sign it
    /// was taken in. `None` if the metadata cannot be read.
    fn member_epoch(&self) -> Option<i32> {
        // The serialized form of rd_kafka_consumer_group_metadata_write(): the magic
        // "CGMDv2:" (7 bytes), then the generation id (member epoch) as a native i32.
        const MAGIC: &[u8] = b"CGMDv2:";
        // SAFETY: a live consumer handle; the metadata and the buffer librdkafka
        // allocates are released once below, and read only within their size.
        unsafe {
            let md = rd::rd_kafka_consumer_group_metadata(self.consumer.client().native_ptr());
            if md.is_null() {
                return None;
            }
            let mut buf: *mut std::ffi::c_void = std::ptr::null_mut();
            let mut size: usize = 0;
            let err = rd::rd_kafka_consumer_group_metadata_write(md, &mut buf, &mut size);
            rd::rd_kafka_consumer_group_metadata_destroy(md);
            if !err.is_null() {
                rd::rd_kafka_error_destroy(err);
                return None;
            }
            if buf.is_null() {
                return None;
            }
            let bytes = std::slice::from_raw_parts(buf as *const u8, size);
            let epoch = (size >= MAGIC.len() + 4 && bytes.starts_with(MAGIC)).then(|| {
                let mut raw = [0u8; 4];
                raw.copy_from_slice(&bytes[MAGIC.len()..MAGIC.len() + 4]);
                i32::from_ne_bytes(raw)
            });
            rd::rd_kafka_mem_free(std::ptr::null_mut(), buf);
            epoch
        }
    }

    fn poll(&self) {
        // Serves the consumer's events; the subscription yields no records.
        if let Some(Err(e)) = self.consumer.poll(Duration::from_millis(100)) {
            tracing::debug!(cluster = %self.cluster, error = %e, "shard membership poll");
        }
    }

    fn fatal(&self) -> Option<Attempt> {
        let (code, text) = self.consumer.client().fatal_error()?;
        Some(match code {
            RDKafkaErrorCode::UnreleasedInstanceId | RDKafkaErrorCode::FencedInstanceId => {
                Attempt::Held(format!(
                    "the broker refused the member: {text} (group.instance.id {} is held by a live member)",
                    self.instance
                ))
            }
            _ => Attempt::Pending(format!("the group coordinator failed the member: {text}")),
        })
    }

    /// Keeps the membership alive (the consumer must be polled within
    /// `max.poll.interval.ms`) and says whether it still holds. Blocks up to 100 ms.
    pub fn check(&self) -> Result<(), SourceError> {
        self.poll();
        match self.fatal() {
            None => Ok(()),
            Some(Attempt::Held(why)) | Some(Attempt::Pending(why)) => {
                Err(SourceError::ShardTaken {
                    shard: self.shard.to_string(),
                    instance: self.instance.clone(),
                    cluster: self.cluster.to_string(),
                    message: format!("the shard's membership was lost: {why}"),
                })
            }
        }
    }
}

/// A held membership kept alive on a thread of its own, which polls it and reports
/// its loss. Shared by the enumerator (which hears of a loss) and the source's
/// coordinator (which releases it on close).
#[derive(Clone, Debug)]
pub(crate) struct ShardKeeper {
    stop: Arc<AtomicBool>,
    released: Arc<tokio::sync::Notify>,
    done: Arc<AtomicBool>,
}

impl ShardKeeper {
    /// Starts keeping `lock`; the receiver gets the error if the membership is lost.
    pub fn start(lock: ShardLock) -> (ShardKeeper, tokio::sync::oneshot::Receiver<SourceError>) {
        let keeper = ShardKeeper {
            stop: Arc::new(AtomicBool::new(false)),
            released: Arc::new(tokio::sync::Notify::new()),
            done: Arc::new(AtomicBool::new(false)),
        };
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
        let k = keeper.clone();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let spawned = std::thread::Builder::new()
            .name("mck-shard".into())
            .spawn(move || {
                let _guard = crate::base::dispatch::enter(&dispatch);
                while !k.stop.load(Ordering::SeqCst) {
                    if let Err(e) = lock.check() {
                        tracing::error!(error = %e, "shard membership lost");
                        let _ = lost_tx.send(e);
                        break;
                    }
                }
                drop(lock); // leaves the group
                k.done.store(true, Ordering::SeqCst);
                k.released.notify_waiters();
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the shard membership thread");
            keeper.done.store(true, Ordering::SeqCst);
        }
        (keeper, lost_rx)
    }

    /// Leaves the group, waiting up to `within` for the leave to be sent.
    pub async fn release(&self, within: Duration) {
        let notified = self.released.notified();
        self.stop.store(true, Ordering::SeqCst);
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        if tokio::time::timeout(within, notified).await.is_err() {
            tracing::warn!(
                "the shard's membership was not released within {within:?}; the broker frees it after its consumer session timeout"
            );
        }
    }

    /// Leaves the group in the background (nobody waits).
    pub fn release_in_background(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_derived_from_the_group_and_the_shard() {
        let s = Shard::new(2, 3).unwrap();
        assert_eq!(instance_id("orders", s), "orders-shard-2");
        assert_eq!(lock_group("orders"), "orders-shards");
    }
}
