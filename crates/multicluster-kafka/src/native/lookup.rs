//! A cluster's lookups on the native path: its id, topics and partitions, offsets
//! by position or time, and short reads of a partition, over connections of their
//! own on the source's tokio runtime (no thread of their own: a source's thread count
//! does not grow with its clusters). The enumerator calls them from its blocking
//! lookup threads, through [`super::lookups::NativeLookups`]; groups and commits stay
//! on librdkafka.
//!
//! A connection is taken from the idle ones of its broker for a call and given back
//! after an answer; one that fails is dropped. An idle connection the broker closed
//! meanwhile (`connections.max.idle.ms`) is replaced once, silently.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use multicluster_kafka_client::Uuid;
use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::error::SourceError;
use crate::lookups::{Bounds, EndEarly};

use super::reported::{issue_kind, kind, kind_of_code, leader_moving, retriable_code};
use super::settings::Settings;
use crate::error::KafkaErrorKind;
use multicluster_kafka_client::batch::Record;
use multicluster_kafka_client::calls::Metadata;
use multicluster_kafka_client::conn::{ConnectOptions, Connection};
use multicluster_kafka_client::error::NativeError;
use multicluster_kafka_client::fetch_response::FetchPartitionData;
use multicluster_kafka_client::partition::{PartitionIssue, PartitionReader, code};

/// The native lookups of one cluster.
pub(crate) struct Lookup {
    cluster: Arc<str>,
    /// What it was made from.
    settings: Settings,
    /// The settings' connection options, no answer waited for longer than `timeout`.
    connect: ConnectOptions,
    /// How long a call may take in all.
    timeout: Duration,
    runtime: Handle,
    /// Idle connections by broker address.
    idle: Mutex<HashMap<String, Vec<Connection>>>,
    /// Broker addresses by node id, from the last metadata answer.
    brokers: Mutex<BTreeMap<i32, String>>,
    /// The cluster refused the client (TLS, SASL) since its last answer.
    refused: AtomicBool,
    /// The last failure of a metadata request since the last answer.
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// How long a metadata request waits for a broker before it asks the next one too.
const STAGGER: Duration = Duration::from_secs(1);

/// The least and most a lookup waits before asking again.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Lookup {
    /// The lookups of `cluster` with its native `settings`, each within `timeout`, on
    /// `runtime`. Connects to nothing yet.
    pub fn new(cluster: Arc<str>, settings: &Settings, timeout: Duration, runtime: Handle) -> Self {
        let mut connect = settings.connect.clone();
        // No single answer is waited for longer than the whole call may take.
        connect.timeout = connect.timeout.min(timeout);
        Self {
            cluster,
            settings: settings.clone(),
            connect,
            timeout,
            runtime,
            idle: Mutex::new(HashMap::new()),
            brokers: Mutex::new(BTreeMap::new()),
            refused: AtomicBool::new(false),
            last_error: Mutex::new(None),
        }
    }

    /// The same lookups with calls of `timeout` (no connection is carried over).
    pub fn retimed(&self, timeout: Duration) -> Self {
        Self::new(
            self.cluster.clone(),
            &self.settings,
            timeout,
            self.runtime.clone(),
        )
    }

    /// Why the last metadata request failed, if none answered since.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `work` on the runtime and waits for it: blocks the calling thread, which
    /// is one of the enumerator's lookup threads (never a runtime's worker). The work
    /// is a task of the runtime, so a runtime that shuts down meanwhile drops it, and
    /// the call ends with [`SourceError::Closed`] (its timers would panic in a
    /// `Handle::block_on` then).
    fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, SourceError>> + Send + 'static,
    ) -> Result<T, SourceError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv().unwrap_or(Err(SourceError::Closed))
    }

    /// True when the cluster refused this client (TLS or SASL failed) since its last
    /// metadata answer.
    pub fn rejected(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

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

    async fn metadata_until(
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

    /// The earliest and latest offsets of `partitions` (the latest: the last stable
    /// offset under `read_committed`), asking their leaders again while leadership
    /// moves, within the timeout.
    pub fn bounds(self: &Arc<Self>, partitions: &[(String, i32)]) -> Result<Bounds, SourceError> {
        let me = self.clone();
        let partitions = partitions.to_vec();
        self.block(async move {
            let deadline = Instant::now() + me.timeout;
            me.bounds_until(&partitions, deadline).await
        })
    }

    async fn bounds_until(
        self: &Arc<Self>,
        partitions: &[(String, i32)],
        deadline: Instant,
    ) -> Result<Bounds, SourceError> {
        let earliest: Vec<_> = partitions
            .iter()
            .map(|(t, p)| (t.clone(), *p, -2))
            .collect();
        let latest: Vec<_> = partitions
            .iter()
            .map(|(t, p)| (t.clone(), *p, -1))
            .collect();
        let low = self
            .offsets_until(&earliest, "earliest offsets", deadline)
            .await?;
        let high = self
            .offsets_until(&latest, "latest offsets", deadline)
            .await?;
        let mut out = Bounds::new();
        for key in partitions {
            match (low.get(key), high.get(key)) {
                (Some(&l), Some(&h)) if l >= 0 && h >= 0 => {
                    out.insert(key.clone(), (l, h));
                }
                _ => {
                    return Err(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!(
                            "offsets of {}/{}: missing from the broker's answer",
                            key.0, key.1
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The first offset at or after each partition's timestamp (`None` where no
    /// record is that late).
    pub fn offsets_at_times(
        self: &Arc<Self>,
        queries: &[(String, i32, i64)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        let me = self.clone();
        let queries = queries.to_vec();
        self.block(async move {
            let deadline = Instant::now() + me.timeout;
            let found = me
                .offsets_until(&queries, "timestamp lookup", deadline)
                .await?;
            Ok(queries
                .iter()
                .map(|(t, p, _)| {
                    let key = (t.clone(), *p);
                    let at = found.get(&key).copied().filter(|o| *o >= 0);
                    (key, at)
                })
                .collect())
        })
    }

    /// ListOffsets for `queries` (topic, partition, timestamp: −2 earliest, −1
    /// latest), one request per leader, asked again while a leader moves.
    async fn offsets_until(
        self: &Arc<Self>,
        queries: &[(String, i32, i64)],
        what: &str,
        deadline: Instant,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let mut out = BTreeMap::new();
        let mut left: Vec<(String, i32, i64)> = queries.to_vec();
        let mut backoff = BACKOFF_MIN;
        while !left.is_empty() {
            let topics: BTreeSet<String> = left.iter().map(|q| q.0.clone()).collect();
            let md = self
                .metadata_until(
                    Some(&topics.into_iter().collect::<Vec<_>>()),
                    EndEarly::OnRefusal,
                    deadline,
                )
                .await?;
            let mut by_leader: BTreeMap<i32, Vec<(String, i32, i64)>> = BTreeMap::new();
            let mut again: Vec<(String, i32, i64)> = Vec::new();
            let mut last_moving: Option<String> = None;
            for q in left.drain(..) {
                match leader_of(&md, &q.0, q.1) {
                    Ok(leader) => by_leader.entry(leader).or_default().push(q),
                    Err(code) if leader_moving(code) => {
                        last_moving = Some(format!("{}/{}: no leader", q.0, q.1));
                        again.push(q);
                    }
                    Err(code) => {
                        return Err(self.broker_code(what, &q.0, q.1, code));
                    }
                }
            }
            for (leader, wanted) in by_leader {
                let Some(addr) = self.address_of(leader) else {
                    last_moving = Some(format!("broker {leader} not in the metadata"));
                    again.extend(wanted);
                    continue;
                };
                let asked: Vec<(&str, i32, i64)> = wanted
                    .iter()
                    .map(|(t, p, ts)| (t.as_str(), *p, *ts))
                    .collect();
                let asking = tokio::time::timeout_at(deadline, self.list_offsets_on(&addr, &asked));
                let answered = asking
                    .await
                    .unwrap_or_else(|_| Err(self.late(&addr, "ListOffsets answer")));
                let answers = match answered {
                    Ok(answers) => answers,
                    Err(e) if retriable(&e) && Instant::now() + backoff < deadline => {
                        last_moving = Some(e.to_string());
                        again.extend(wanted);
                        continue;
                    }
                    Err(e) => return Err(self.error(what, &e)),
                };
                for q in wanted {
                    let answer = answers
                        .iter()
                        .find(|a| a.topic == q.0 && a.partition == q.1);
                    match answer {
                        Some(a) if a.error_code == 0 => {
                            out.insert((q.0.clone(), q.1), a.offset);
                        }
                        Some(a) if leader_moving(a.error_code) => {
                            last_moving = Some(format!("{}/{}: code {}", q.0, q.1, a.error_code));
                            again.push(q);
                        }
                        Some(a) => return Err(self.broker_code(what, &q.0, q.1, a.error_code)),
                        None => {
                            return Err(SourceError::Cluster {
                                cluster: self.cluster.to_string(),
                                message: format!(
                                    "{what} of {}/{}: missing from the broker's answer",
                                    q.0, q.1
                                ),
                            });
                        }
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            if Instant::now() + backoff >= deadline {
                return Err(SourceError::Kafka {
                    cluster: self.cluster.to_string(),
                    message: format!(
                        "{what}: leaders still moving after {:?}: {}",
                        self.timeout,
                        last_moving.unwrap_or_default()
                    ),
                    kind: KafkaErrorKind::LeaderMoving,
                    retriable: true,
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            left = again;
        }
        Ok(out)
    }

    async fn list_offsets_on(
        &self,
        addr: &str,
        asked: &[(&str, i32, i64)],
    ) -> Result<Vec<multicluster_kafka_client::responses::OffsetAnswer>, NativeError> {
        let committed = self.settings.partition.read_committed;
        let (mut conn, reused) = self.take(addr, false).await?;
        let answer = match conn.list_offsets_of(asked, committed).await {
            Err(e) if reused && stale(&e) => {
                conn = self.take(addr, true).await?.0;
                conn.list_offsets_of(asked, committed).await
            }
            other => other,
        }?;
        self.give(conn);
        Ok(answer)
    }

    /// Reads `topic`/`partition` from `from` up to (not including) `to`, handing
    /// each record (read_committed: of committed transactions only) to `each`, in
    /// offset order, within the timeout; returns how many it handed. The answers are
    /// fetched on the runtime and decoded on the calling thread.
    pub fn read(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        (from, to): (i64, i64),
        each: &mut dyn FnMut(&Record<'_>),
    ) -> Result<u64, SourceError> {
        let what = format!("reading {topic}/{partition}");
        let deadline = Instant::now() + self.timeout;
        let mut reader = PartitionReader::new(from, self.settings.partition);
        let mut handed = 0u64;
        let mut backoff = BACKOFF_MIN;
        while reader.next_offset() < to {
            if Instant::now() >= deadline {
                return Err(SourceError::Kafka {
                    cluster: self.cluster.to_string(),
                    message: format!(
                        "{what}: at offset {} of {from}..{to} after {:?} (the client timeout)",
                        reader.next_offset(),
                        self.timeout
                    ),
                    kind: KafkaErrorKind::Timeout,
                    retriable: true,
                });
            }
            let answer = self.fetch(topic, partition, reader.next_offset(), deadline, &what)?;
            let absorbed = reader.absorb(&answer, |r| {
                if r.offset < to {
                    each(r);
                    handed += 1;
                }
            });
            match absorbed {
                Ok(_) => backoff = BACKOFF_MIN,
                Err(PartitionIssue::LeaderMoved { .. } | PartitionIssue::Unknown { .. }) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(issue) => {
                    return Err(SourceError::Kafka {
                        cluster: self.cluster.to_string(),
                        message: format!("{what}: at offset {}: {issue}", reader.next_offset()),
                        kind: issue_kind(&issue),
                        retriable: false,
                    });
                }
            }
        }
        Ok(handed)
    }

    /// The timestamp of the record at each partition's last offset (`None` for an
    /// empty partition, or one whose last offset holds no record handed out, such as
    /// a transaction marker).
    pub fn newest_timestamps(
        self: &Arc<Self>,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        let mut out: BTreeMap<(String, i32), Option<i64>> =
            partitions.iter().map(|k| (k.clone(), None)).collect();
        if partitions.is_empty() {
            return Ok(out);
        }
        let bounds = self.bounds(partitions)?;
        let deadline = Instant::now() + self.timeout;
        for (key, (low, high)) in bounds {
            if high <= low {
                continue;
            }
            let what = format!("the newest record of {}/{}", key.0, key.1);
            let mut reader = PartitionReader::new(high - 1, self.settings.partition);
            let mut newest = None;
            let mut backoff = BACKOFF_MIN;
            loop {
                let answer = self.fetch(&key.0, key.1, high - 1, deadline, &what)?;
                let absorbed = reader.absorb(&answer, |r| {
                    if r.offset == high - 1 {
                        newest = Some(r.timestamp);
                    }
                });
                match absorbed {
                    Ok(_) => break,
                    Err(PartitionIssue::LeaderMoved { .. }) if Instant::now() < deadline => {
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                    Err(issue) => {
                        return Err(SourceError::Kafka {
                            cluster: self.cluster.to_string(),
                            message: format!("{what}: {issue}"),
                            kind: issue_kind(&issue),
                            retriable: false,
                        });
                    }
                }
            }
            out.insert(key, newest);
        }
        Ok(out)
    }

    /// One fetch of `topic`/`partition` at `offset` from its leader (as the
    /// metadata says now): the partition's answer, error code and all.
    fn fetch(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Instant,
        what: &str,
    ) -> Result<FetchPartitionData, SourceError> {
        let me = self.clone();
        let topic = topic.to_string();
        let what = what.to_string();
        self.block(async move {
            let names = [topic.clone()];
            let md = me
                .metadata_until(Some(&names), EndEarly::OnRefusal, deadline)
                .await?;
            let leader = match leader_of(&md, &topic, partition) {
                Ok(leader) => leader,
                Err(code) => return Err(me.broker_code(&what, &topic, partition, code)),
            };
            let Some(addr) = me.address_of(leader) else {
                return Err(SourceError::Cluster {
                    cluster: me.cluster.to_string(),
                    message: format!("{what}: leader {leader} is not in the metadata"),
                });
            };
            let id = topic_id(&md, &topic);
            let fetched = me.fetch_on(&addr, (&topic, id, partition), offset);
            match tokio::time::timeout_at(deadline, fetched).await {
                Ok(answer) => answer.map_err(|e| me.error(&what, &e)),
                Err(_) => Err(me.error(&what, &me.late(&addr, "Fetch answer"))),
            }
        })
    }

    async fn fetch_on(
        &self,
        addr: &str,
        (topic, id, partition): (&str, Uuid, i32),
        offset: i64,
    ) -> Result<FetchPartitionData, NativeError> {
        let settings = &self.settings;
        let (max, committed) = (
            settings.partition_max_bytes,
            settings.partition.read_committed,
        );
        let (mut conn, reused) = self.take(addr, false).await?;
        let answer = match conn
            .fetch_once(topic, id, partition, offset, max, committed)
            .await
        {
            Err(e) if reused && stale(&e) => {
                conn = self.take(addr, true).await?.0;
                conn.fetch_once(topic, id, partition, offset, max, committed)
                    .await
            }
            other => other,
        }?;
        self.give(conn);
        Ok(answer)
    }

    /// The error of a call to `addr` the deadline ended.
    fn late(&self, addr: &str, what: &str) -> NativeError {
        NativeError::Timeout {
            addr: addr.to_string(),
            what: what.to_string(),
            timeout_ms: self.timeout.as_millis(),
        }
    }
}

impl Lookup {
    /// The addresses to ask for metadata: those with idle connections first, then
    /// the known brokers, then the bootstrap servers.
    fn addresses(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |a: &String| {
            if !out.contains(a) {
                out.push(a.clone());
            }
        };
        for (addr, conns) in self.idle.lock().expect("lookup idle connections").iter() {
            if !conns.is_empty() {
                add(addr);
            }
        }
        for addr in self.brokers.lock().expect("lookup brokers").values() {
            add(addr);
        }
        for addr in &self.settings.bootstrap {
            add(addr);
        }
        out
    }

    fn address_of(&self, node: i32) -> Option<String> {
        self.brokers
            .lock()
            .expect("lookup brokers")
            .get(&node)
            .cloned()
    }

    /// Keeps the brokers' addresses of a metadata answer.
    fn learn(&self, md: &Metadata) {
        if md.brokers.is_empty() {
            return;
        }
        let mut brokers = self.brokers.lock().expect("lookup brokers");
        brokers.clear();
        for b in &md.brokers {
            brokers.insert(b.node_id, format!("{}:{}", b.host, b.port));
        }
    }

    /// A connection to `addr`: an idle one (then `true`), unless `fresh`, or a new one.
    async fn take(&self, addr: &str, fresh: bool) -> Result<(Connection, bool), NativeError> {
        if !fresh {
            let idle = self
                .idle
                .lock()
                .expect("lookup idle connections")
                .get_mut(addr)
                .and_then(Vec::pop);
            if let Some(conn) = idle {
                return Ok((conn, true));
            }
        }
        Connection::connect(addr, &self.connect)
            .await
            .map(|c| (c, false))
    }

    /// Gives a connection that answered back to the idle ones.
    fn give(&self, conn: Connection) {
        self.idle
            .lock()
            .expect("lookup idle connections")
            .entry(conn.addr().to_string())
            .or_default()
            .push(conn);
    }

    /// A connection error as the source's error of this cluster.
    fn error(&self, what: &str, e: &NativeError) -> SourceError {
        let (kind, retriable) = kind(e);
        SourceError::Kafka {
            cluster: self.cluster.to_string(),
            message: format!("{what}: {e}"),
            kind,
            retriable,
        }
    }

    /// A partition's error code in an answer as the source's error.
    fn broker_code(&self, what: &str, topic: &str, partition: i32, code: i16) -> SourceError {
        let text = multicluster_kafka_client::error::code_text(code)
            .unwrap_or_else(|| format!("error code {code}"));
        SourceError::Kafka {
            cluster: self.cluster.to_string(),
            message: format!("{what} of {topic}/{partition}: {text} (error code {code})"),
            kind: kind_of_code(code),
            retriable: retriable_code(code),
        }
    }
}

/// The leader of `topic`/`partition` in `md`, or the error code why there is none.
fn leader_of(md: &Metadata, topic: &str, partition: i32) -> Result<i32, i16> {
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
fn topic_id(md: &Metadata, topic: &str) -> Uuid {
    md.topics
        .iter()
        .find(|t| t.name == topic)
        .map_or(Uuid::nil(), |t| t.topic_id)
}

/// Whether an error on a reused connection may only mean the broker closed it while
/// it was idle.
fn stale(e: &NativeError) -> bool {
    matches!(e, NativeError::Io { .. } | NativeError::Closed { .. })
}

/// Whether the cluster refused the client (as opposed to not answering).
fn refusal(e: &NativeError) -> bool {
    matches!(e, NativeError::Tls { .. } | NativeError::Auth { .. })
}

/// Whether a failed request may succeed on another try.
fn retriable(e: &NativeError) -> bool {
    match e {
        NativeError::Connect { .. }
        | NativeError::Io { .. }
        | NativeError::Closed { .. }
        | NativeError::Timeout { .. }
        | NativeError::Token { .. } => true,
        NativeError::Broker { code, .. } => retriable_code(*code),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::properties::ClientProperties;
    use crate::native::settings::{self, Given};

    #[test]
    fn a_lookup_ends_closed_when_its_runtime_shuts_down() {
        let rt = mck_testkit::runtime();
        // Port 1 refuses connections: the call tries again until its timeout.
        let props = ClientProperties::from_iter([("bootstrap.servers", "127.0.0.1:1")]);
        let cluster: Arc<str> = Arc::from("dead");
        let given = Given {
            cluster: &cluster,
            props: &props,
            hooks: None,
            runtime: true,
        };
        let settings = settings::settings(&given).unwrap();
        let timeout = Duration::from_secs(30);
        let lookup = Arc::new(Lookup::new(
            cluster,
            &settings,
            timeout,
            rt.handle().clone(),
        ));
        let pending = {
            let lookup = lookup.clone();
            std::thread::spawn(move || lookup.metadata(None, EndEarly::OnRefusal))
        };
        std::thread::sleep(Duration::from_millis(300));
        rt.shutdown_background();
        let during = pending.join().expect("the call does not panic");
        assert!(matches!(during, Err(SourceError::Closed)), "{during:?}");
        let after = lookup.metadata(None, EndEarly::OnAnyError);
        assert!(matches!(after, Err(SourceError::Closed)), "{after:?}");
    }
}
