//! The blocking IO shell towards one Kafka cluster: metadata, watermarks, offset
//! lookups and commits. Every method blocks; the source calls them on threads of
//! their own ([`detached`]), never on an async worker thread.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::base::offsets::PartitionFacts;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::events::SourceContext;
use crate::kafka::shared::{ClientShare, SharedClient};
use crate::native::lookup::{Bounds, GiveUp, Lookup};
use crate::native::settings::{self, Given};

/// Runs a blocking librdkafka call (a lookup, a commit, closing a client) on a thread
/// of its own, and waits for it. Unlike tokio's blocking pool, the thread is not
/// waited for when the runtime shuts down: a call to a cluster that does not answer
/// (it ends by itself within the client timeout) cannot hold a program's exit. Panics
/// when the call panicked (a task of a `JoinSet` reports it as a `JoinError`).
pub(crate) async fn detached<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("mck-lookup".into())
        .spawn(move || {
            let _ = tx.send(call());
        })
        .expect("a thread for a cluster lookup");
    rx.await.expect("the cluster lookup panicked")
}

/// Closes a client (or anything holding one) without blocking the caller or the
/// runtime's shutdown.
pub(crate) fn close_detached<T: Send + 'static>(client: T) {
    let _ = std::thread::Builder::new()
        .name("mck-close".into())
        .spawn(move || drop(client));
}

/// How often a metadata request waiting for a usable broker looks at the client's
/// errors ([`EndEarly`]).
const ERROR_CHECK: Duration = Duration::from_millis(100);

/// How long a metadata request still waits for a usable broker once it may end
/// early: a broker librdkafka re-bootstraps may still accept the client.
const ERROR_GRACE: Duration = Duration::from_secs(1);

/// When [`all_metadata`] gives up before its timeout: both only once as many
/// brokers failed since the client's last answer as it knows (its bootstrap list's,
/// then its last answer's), never while one of them is still connecting for the
/// first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndEarly {
    /// When the cluster refused the client (credentials, certificates) since its
    /// last answer.
    OnRefusal,
    /// Whatever the brokers' errors (a refused connection, a name that does not
    /// resolve, a refusal), but a failed token provider's: for a first contact,
    /// whose caller tries again with backoff and should say why meanwhile.
    OnAnyError,
}

/// The metadata of every topic, within `timeout`; ends early when the cluster
/// refuses the client (credentials, certificates), or with [`EndEarly::OnAnyError`]
/// when no broker can be reached. A token provider that failed does not end it
/// early: librdkafka asks the provider again meanwhile.
///
/// librdkafka first waits for a usable broker, for up to the whole timeout, and a
/// cluster that refused the client never has one: a wrong password was reported only
/// when the timeout (30 s by default) ran out, though librdkafka had said why after
/// ~100 ms. So the wait for a broker is taken in steps of [`ERROR_CHECK`], each
/// followed by a look at the client's state: once every broker failed since the
/// client's last answer ([`SourceContext::every_broker_failed`]) and the request may
/// end early, it ends [`ERROR_GRACE`] later if no broker became usable meanwhile. A
/// broker of the bootstrap list still connecting (a slow handshake) keeps it waiting.
/// What ends it is the client's state, not an error reported during the request:
/// librdkafka reports a broker's identical error again only after 30 s, so a request
/// on a client kept from an earlier attempt would see none, and requests sharing a
/// client do not reset anything for each other. Once a broker is usable, the request
/// itself gets all the time left (a step that ran out while the request was in
/// flight sends it again).
pub(crate) fn all_metadata(
    client: &rdkafka::client::Client<SourceContext>,
    timeout: Duration,
    end_early: EndEarly,
) -> rdkafka::error::KafkaResult<rdkafka::metadata::Metadata> {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};
    use std::time::Instant;
    // librdkafka takes milliseconds as an i32.
    let timeout = timeout.min(Duration::from_millis(i32::MAX as u64));
    let context = client.context();
    let end = Instant::now() + timeout;
    let mut broker_usable = false;
    let mut failing_since: Option<Instant> = None;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let step = if broker_usable {
            left
        } else {
            left.min(ERROR_CHECK)
        };
        match client.fetch_metadata(None, step) {
            Err(KafkaError::MetadataFetch(C::BrokerTransportFailure)) if step < left => {
                let may_end = context.every_broker_failed()
                    && match end_early {
                        EndEarly::OnRefusal => context.refused_since_answer(),
                        EndEarly::OnAnyError => !context.last_error_is_token(),
                    };
                if !may_end {
                    failing_since = None;
                } else if failing_since.get_or_insert_with(Instant::now).elapsed() >= ERROR_GRACE {
                    return Err(KafkaError::MetadataFetch(C::BrokerTransportFailure));
                }
            }
            Err(KafkaError::MetadataFetch(C::OperationTimedOut)) if step < left => {
                broker_usable = true;
            }
            Ok(metadata) => {
                context.answered(metadata.brokers().len());
                return Ok(metadata);
            }
            answer => return answer,
        }
    }
}

/// What [`ClusterClient::describe`] found for a set of topics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TopicPartitions {
    /// Topic → partition ids, for topics that exist.
    pub partitions: BTreeMap<String, Vec<i32>>,
    /// Requested topics the cluster does not have (yet), or does not show this
    /// client.
    pub missing: BTreeSet<String>,
    /// Those of `missing` the cluster refused to describe to this client's principal
    /// (no DESCRIBE permission): they may exist.
    pub unauthorized: BTreeSet<String>,
}

/// Lookups and commits on one cluster: through the native path's connections
/// ([`Lookup`]) where it serves the cluster and the caller runs on a tokio runtime,
/// with a librdkafka client for groups and commits made when first needed; else
/// through a librdkafka client that a reader may fetch with as well
/// ([`crate::kafka::shared`]).
pub(crate) struct ClusterClient {
    cluster: Arc<str>,
    way: Way,
    timeout: Duration,
}

/// How a [`ClusterClient`] reaches its cluster.
enum Way {
    Librdkafka(Arc<SharedClient>),
    Native {
        lookup: Arc<Lookup>,
        /// The librdkafka client for groups and commits, once made.
        groups: OnceLock<Arc<SharedClient>>,
        /// What it is made from.
        props: ClientProperties,
        group_id: Option<String>,
        setup: ClientSetup,
    },
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient")
            .field("cluster", &self.cluster)
            .field("native", &matches!(self.way, Way::Native { .. }))
            .finish()
    }
}

impl ClusterClient {
    /// Creates the lookup client of a cluster. On a tokio `runtime`, for a cluster
    /// the native path serves ([`settings::serves`]), it connects natively (nothing
    /// yet) and makes a librdkafka client only for groups and commits, when first
    /// asked. Otherwise it is the `share`'s librdkafka client for these settings
    /// (which the first reader of the cluster fetches with), or one of its own
    /// without a share. `props` are the merged client properties of the cluster;
    /// `group_id` (else the properties' group id) is used for committed-offset lookups
    /// and commits; `setup` has the cluster's hooks, if the program set any, and where
    /// its log lines go.
    pub fn new(
        share: Option<&ClientShare>,
        cluster: Arc<str>,
        props: &ClientProperties,
        group_id: Option<&str>,
        timeout: Duration,
        setup: ClientSetup,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<Self, SourceError> {
        if let Some(runtime) = runtime {
            let given = Given {
                cluster: &cluster,
                props,
                hooks: setup.hooks.as_ref(),
                runtime: true,
            };
            // Settings the native path refuses (a bad number, a missing file) leave
            // the lookups on librdkafka, which says so in its words, as before; the
            // reader's native fetcher fails with the native path's.
            let native = match settings::serves(&given) {
                true => settings::settings(&given).ok(),
                false => None,
            };
            if let Some(settings) = native {
                let lookup = Lookup::new(cluster.clone(), &settings, timeout, runtime);
                tracing::debug!(cluster = %cluster, "looking up natively");
                return Ok(Self {
                    cluster,
                    way: Way::Native {
                        lookup: Arc::new(lookup),
                        groups: OnceLock::new(),
                        props: props.clone(),
                        group_id: group_id.map(str::to_string),
                        setup,
                    },
                    timeout,
                });
            }
        }
        let client = match share {
            Some(share) => share.lookup_client(&cluster, props, group_id, setup)?,
            None => crate::kafka::shared::standalone(&cluster, props, group_id, setup)?,
        };
        Ok(Self {
            cluster,
            way: Way::Librdkafka(client),
            timeout,
        })
    }

    /// The native lookups, when this client has them.
    fn native(&self) -> Option<&Arc<Lookup>> {
        match &self.way {
            Way::Native { lookup, .. } => Some(lookup),
            Way::Librdkafka(_) => None,
        }
    }

    /// The librdkafka client: the one lookups go through, or the one for groups and
    /// commits beside native lookups (made on first use, blocking).
    fn rdkafka(&self) -> Result<&SharedClient, SourceError> {
        match &self.way {
            Way::Librdkafka(client) => Ok(client),
            Way::Native {
                groups,
                props,
                group_id,
                setup,
                ..
            } => {
                if let Some(client) = groups.get() {
                    return Ok(client);
                }
                let made = crate::kafka::shared::standalone(
                    &self.cluster,
                    props,
                    group_id.as_deref(),
                    setup.clone(),
                )?;
                if let Err(other) = groups.set(made) {
                    // Another call made one meanwhile.
                    close_detached(other);
                }
                Ok(groups.get().expect("set above"))
            }
        }
    }

    /// The librdkafka consumer of [`Self::rdkafka`].
    fn consumer(&self) -> Result<&BaseConsumer<SourceContext>, SourceError> {
        self.rdkafka().map(SharedClient::consumer)
    }

    /// Whether a reader fetches with this client too: then a request of ours waits
    /// behind the reader's fetch on the broker (a broker answers one connection's
    /// requests in order, and an idle fetch is held for up to `fetch.wait.max.ms`).
    pub fn is_read(&self) -> bool {
        match &self.way {
            Way::Librdkafka(client) => client.is_reading(),
            Way::Native { .. } => false,
        }
    }

    /// A failed request, with librdkafka's last client error as its cause: a request
    /// to a cluster that refuses the credentials or the certificate only times out.
    fn err(&self, what: &str, e: &rdkafka::error::KafkaError) -> SourceError {
        SourceError::kafka(&self.cluster, self.with_cause(format!("{what}: {e}")), e)
    }

    /// `message`, with librdkafka's last client error as its cause when there is one.
    fn with_cause(&self, message: String) -> String {
        let Way::Librdkafka(client) = &self.way else {
            return message;
        };
        match client.consumer().context().last_error() {
            Some(cause) => format!("{message}; last client error: {cause}"),
            None => message,
        }
    }

    /// True when the cluster refused this client (authentication or TLS failed)
    /// since its last metadata answer, as opposed to not answering at all (or a token
    /// provider that failed).
    pub fn rejected(&self) -> bool {
        match &self.way {
            Way::Librdkafka(client) => client.consumer().context().refused_since_answer(),
            Way::Native { lookup, .. } => lookup.rejected(),
        }
    }

    /// The Kafka `cluster.id` (the physical identity of the cluster).
    pub fn kafka_cluster_id(&self) -> Result<String, SourceError> {
        self.cluster_id_unless(EndEarly::OnRefusal)
    }

    /// Like [`Self::kafka_cluster_id`], but fails about a second after every broker
    /// of the client failed (a refused connection, a name that does not resolve, …)
    /// rather than at the timeout: for a first contact that is tried again with
    /// backoff, and whose warning should say why soon.
    pub fn first_contact(&self) -> Result<String, SourceError> {
        self.cluster_id_unless(EndEarly::OnAnyError)
    }

    fn cluster_id_unless(&self, end_early: EndEarly) -> Result<String, SourceError> {
        if let Some(lookup) = self.native() {
            let give_up = match end_early {
                EndEarly::OnRefusal => GiveUp::OnRefusal,
                EndEarly::OnAnyError => GiveUp::OnAnyError,
            };
            // Asks for no topic: the answer's cluster id is all that is wanted.
            let md = lookup.metadata(Some(Vec::new()), give_up)?;
            return md.cluster_id.ok_or_else(|| SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: "metadata request: the broker gave no cluster id".into(),
            });
        }
        // A metadata answer carries the cluster id; asking for the id alone first
        // waits in librdkafka's one-second polling steps.
        let consumer = self.consumer()?;
        all_metadata(consumer.client(), self.timeout, end_early)
            .map_err(|e| self.err("metadata request", &e))?;
        consumer
            .client()
            .fetch_cluster_id(self.timeout)
            .ok_or_else(|| SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: self.with_cause(format!(
                    "metadata request: no answer within {:?}",
                    self.timeout
                )),
            })
    }

    /// Partitions of each topic (one metadata request for all topics).
    pub fn describe(&self, topics: &BTreeSet<String>) -> Result<TopicPartitions, SourceError> {
        if let Some(lookup) = self.native() {
            return describe_natively(lookup, topics);
        }
        let consumer = self.consumer()?;
        let md = all_metadata(consumer.client(), self.timeout, EndEarly::OnRefusal)
            .map_err(|e| self.err("metadata request", &e))?;
        let mut out = TopicPartitions::default();
        for t in md.topics() {
            if topics.contains(t.name()) && t.error().is_none() && !t.partitions().is_empty() {
                let mut parts: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
                parts.sort_unstable();
                out.partitions.insert(t.name().to_string(), parts);
            }
        }
        for t in topics {
            if !out.partitions.contains_key(t) {
                out.missing.insert(t.clone());
            }
        }
        // A listing of all topics leaves out those the principal may not describe:
        // asked by name, the broker says which ones it refused.
        for t in &out.missing {
            if let Ok(md) = consumer.fetch_metadata(Some(t), self.timeout)
                && md.topics().iter().any(|m| {
                    m.name() == t
                        && m.error()
                            == Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
                })
            {
                out.unauthorized.insert(t.clone());
            }
        }
        Ok(out)
    }

    /// The names of the cluster's topics that `keep` selects (one metadata request).
    pub fn topic_names(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<String>, SourceError> {
        if let Some(lookup) = self.native() {
            let md = lookup.metadata(None, GiveUp::OnRefusal)?;
            return Ok(md
                .topics
                .into_iter()
                .map(|t| t.name)
                .filter(|n| keep(n))
                .collect());
        }
        let md = all_metadata(self.consumer()?.client(), self.timeout, EndEarly::OnRefusal)
            .map_err(|e| self.err("metadata request", &e))?;
        Ok(md
            .topics()
            .iter()
            .map(|t| t.name())
            .filter(|n| keep(n))
            .map(str::to_string)
            .collect())
    }

    /// Earliest/latest offsets, committed offsets (when `committed`), and the offset
    /// for `timestamp` (when given) of each partition.
    pub fn facts(
        &self,
        partitions: &[(String, i32)],
        committed: bool,
        timestamp: Option<i64>,
    ) -> Result<BTreeMap<(String, i32), PartitionFacts>, SourceError> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut out: BTreeMap<(String, i32), PartitionFacts> = self
            .bounds(partitions)?
            .into_iter()
            .map(|(key, (low, high))| {
                let facts = PartitionFacts {
                    earliest: low,
                    latest: high,
                    committed: None,
                    at_timestamp: None,
                };
                (key, facts)
            })
            .collect();
        if committed {
            let mut tpl = TopicPartitionList::new();
            for (topic, p) in partitions {
                tpl.add_partition(topic, *p);
            }
            let got = self.committed_offsets(tpl)?;
            for e in got.elements() {
                if let Offset::Offset(o) = e.offset()
                    && let Some(f) = out.get_mut(&(e.topic().to_string(), e.partition()))
                {
                    f.committed = Some(o);
                }
            }
        }
        if let Some(ts) = timestamp {
            let queries: Vec<(String, i32, i64)> = partitions
                .iter()
                .map(|(t, p)| (t.clone(), *p, ts))
                .collect();
            for (key, at) in self.offsets_at_times(&queries)? {
                if let Some(f) = out.get_mut(&key) {
                    f.at_timestamp = at;
                }
            }
        }
        Ok(out)
    }

    /// The earliest and latest offsets of every partition.
    fn bounds(&self, partitions: &[(String, i32)]) -> Result<Bounds, SourceError> {
        if let Some(lookup) = self.native() {
            return lookup.bounds(partitions);
        }
        let earliest = self.list_offsets(partitions, Offset::Beginning, "earliest offsets")?;
        let latest = self.list_offsets(partitions, Offset::End, "latest offsets")?;
        let mut out = Bounds::new();
        for (topic, p) in partitions {
            let key = (topic.clone(), *p);
            let (Some(&low), Some(&high)) = (earliest.get(&key), latest.get(&key)) else {
                return Err(SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: format!("offsets of {topic}/{p}: missing from the broker's answer"),
                });
            };
            out.insert(key, (low, high));
        }
        Ok(out)
    }

    /// The first offset at or after each partition's own timestamp (`None` where no
    /// record is that late), in one ListOffsets round.
    pub fn offsets_at_times(
        &self,
        queries: &[(String, i32, i64)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        let mut out = BTreeMap::new();
        if queries.is_empty() {
            return Ok(out);
        }
        if let Some(lookup) = self.native() {
            return lookup.offsets_at_times(queries);
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, p, ts) in queries {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*ts))
                .map_err(|e| self.err("timestamp lookup", &e))?;
            out.insert((topic.clone(), *p), None);
        }
        let got = self
            .consumer()?
            .offsets_for_times(tpl, self.timeout)
            .map_err(|e| self.err("timestamp lookup", &e))?;
        for e in got.elements() {
            if let Offset::Offset(o) = e.offset()
                && let Some(slot) = out.get_mut(&(e.topic().to_string(), e.partition()))
            {
                *slot = Some(o);
            }
        }
        Ok(out)
    }

    /// What the group's coordinator says of `group`: its protocol, state and members.
    pub(crate) fn describe_group(
        &self,
        group: &str,
    ) -> Result<crate::kafka::group_describe::GroupReport, String> {
        // SAFETY: the handle lives as long as `self.consumer`, which outlives the call.
        unsafe {
            crate::kafka::group_describe::describe_group(
                self.consumer()
                    .map_err(|e| e.to_string())?
                    .client()
                    .native_ptr(),
                group,
                self.timeout,
            )
        }
    }

    /// The group's committed offsets of `partitions` (those without one are left
    /// out).
    pub(crate) fn committed(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        for (topic, p) in partitions {
            tpl.add_partition(topic, *p);
        }
        let got = self.committed_offsets(tpl)?;
        Ok(got
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some(((e.topic().to_string(), e.partition()), o)),
                _ => None,
            })
            .collect())
    }

    /// The group's committed offsets of `tpl`, asked again while the group's
    /// coordinator is not ready (a new cluster creates its offsets topic on the first
    /// group request; a coordinator moves), within the client timeout.
    fn committed_offsets(
        &self,
        tpl: TopicPartitionList,
    ) -> Result<TopicPartitionList, SourceError> {
        use rdkafka::types::RDKafkaErrorCode as C;
        let give_up = std::time::Instant::now() + self.timeout;
        loop {
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            match self.consumer()?.committed_offsets(tpl.clone(), left) {
                Ok(got) => return Ok(got),
                Err(e)
                    if matches!(
                        e.rdkafka_error_code(),
                        Some(
                            C::NotCoordinator
                                | C::CoordinatorLoadInProgress
                                | C::CoordinatorNotAvailable
                        )
                    ) && std::time::Instant::now() + Duration::from_millis(200) < give_up =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(self.err("committed offsets", &e)),
            }
        }
    }

    /// The earliest (`Offset::Beginning`) or latest (`Offset::End`) offset of every
    /// partition, from one ListOffsets request per leader: the special timestamps -2
    /// and -1 ask the broker for those. A watermark query per partition costs two round
    /// trips each, one partition after the other: with 8 partitions per cluster, building
    /// a source took 120–140 ms to assign its splits that way and 80–90 ms this way
    /// (`mck-bench throughput`, two local clusters).
    ///
    /// A leader that moves or is not yet elected (a topic just made, a broker that
    /// restarts) is asked again, within the client timeout: librdkafka does not retry
    /// a ListOffsets answer that names such an error.
    fn list_offsets(
        &self,
        partitions: &[(String, i32)],
        which: Offset,
        what: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let until = std::time::Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.list_offsets_once(partitions, which, what) {
                Err(e) if leader_moving(&e) && std::time::Instant::now() + pause < until => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    fn list_offsets_once(
        &self,
        partitions: &[(String, i32)],
        which: Offset,
        what: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        for (topic, p) in partitions {
            tpl.add_partition_offset(topic, *p, which)
                .map_err(|e| self.err(what, &e))?;
        }
        let got = self
            .consumer()?
            .offsets_for_times(tpl, self.timeout)
            .map_err(|e| self.err(what, &e))?;
        let mut out = BTreeMap::new();
        for e in got.elements() {
            e.error().map_err(|err| {
                self.err(&format!("{what} of {}/{}", e.topic(), e.partition()), &err)
            })?;
            match e.offset() {
                Offset::Offset(o) => {
                    out.insert((e.topic().to_string(), e.partition()), o);
                }
                other => {
                    return Err(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!(
                            "{what} of {}/{}: the broker answered {other:?}",
                            e.topic(),
                            e.partition()
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Commits `next offsets` (the next record to read) for the group, synchronously.
    pub fn commit(&self, offsets: &[(String, i32, i64)]) -> Result<(), SourceError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, p, o) in offsets {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*o))
                .map_err(|e| self.err("commit", &e))?;
        }
        self.consumer()?
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| self.err("commit", &e))
    }

    /// Reads `topic`/`partition` from its log start to its end as the read starts,
    /// handing each record's offset, key and value to `each` in offset order, within
    /// the client timeout; returns how many records it read. Records written after the
    /// read started are not waited for.
    ///
    /// Assigns the partition to this client (and takes it away again): only for a
    /// client of its own ([`crate::kafka::shared::standalone`]). The source's lookup
    /// client may be the one a reader fetches with, whose assignment is the reader's.
    pub(crate) fn read_partition(
        &self,
        topic: &str,
        partition: i32,
        each: &mut EachRecord<'_>,
    ) -> Result<u64, SourceError> {
        use rdkafka::Message as _;
        use std::time::Instant;
        let what = format!("reading {topic}/{partition}");
        if self.is_read() {
            return Err(SourceError::internal(
                "a topic read",
                format!("{what}: the client a reader fetches with cannot be assigned"),
            ));
        }
        let deadline = Instant::now() + self.timeout;
        let key = (topic.to_string(), partition);
        let Some(&(start, end)) = self.bounds(std::slice::from_ref(&key))?.get(&key) else {
            return Err(SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: format!("{what}: offsets missing from the broker's answer"),
            });
        };
        if start >= end {
            return Ok(0);
        }
        if let Some(lookup) = self.native() {
            return lookup.read(topic, partition, (start, end), &mut |r| {
                each(r.offset, r.key, r.value)
            });
        }
        let consumer = self.consumer()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(start))
            .map_err(|e| self.err(&what, &e))?;
        consumer.assign(&tpl).map_err(|e| self.err(&what, &e))?;
        let mut next = start;
        let mut read = 0u64;
        let outcome = loop {
            if next >= end {
                break Ok(read);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: self.with_cause(format!(
                        "{what}: at offset {next} of {start}..{end} after {:?} (the client timeout)",
                        self.timeout
                    )),
                });
            }
            match consumer.poll(left.min(Duration::from_millis(100))) {
                Some(Ok(m)) => {
                    if m.topic() == topic && m.partition() == partition && m.offset() >= next {
                        each(m.offset(), m.key(), m.payload());
                        read += 1;
                        next = m.offset() + 1;
                    }
                }
                Some(Err(e)) => break Err(self.err(&what, &e)),
                None => {
                    // Nothing more to hand out: transaction markers at the end take
                    // offsets that no record is handed out for; the position passes
                    // them.
                    let position = consumer
                        .position()
                        .ok()
                        .and_then(|p| p.find_partition(topic, partition).map(|e| e.offset()));
                    if let Some(Offset::Offset(o)) = position {
                        next = next.max(o);
                    }
                }
            }
        };
        if let Err(e) = consumer.unassign() {
            tracing::debug!(cluster = %self.cluster, error = %e, "{what}: unassigning failed");
        }
        outcome
    }
}

impl ClusterClient {
    /// The timestamp of the newest record of each partition (its last offset; `None`
    /// for an empty partition, or one whose last offset holds no record handed out,
    /// such as a transaction marker), read within the client timeout.
    ///
    /// Assigns the partitions to this client: only for a client of its own, as
    /// [`Self::read_partition`].
    pub(crate) fn newest_timestamps(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        use rdkafka::Message as _;
        use std::time::Instant;
        let what = "newest record timestamps";
        if self.is_read() {
            return Err(SourceError::internal(
                "a timestamp read",
                format!("{what}: the client a reader fetches with cannot be assigned"),
            ));
        }
        let mut out: BTreeMap<(String, i32), Option<i64>> =
            partitions.iter().map(|k| (k.clone(), None)).collect();
        if partitions.is_empty() {
            return Ok(out);
        }
        if let Some(lookup) = self.native() {
            return lookup.newest_timestamps(partitions);
        }
        let consumer = self.consumer()?;
        let mut tpl = TopicPartitionList::new();
        let mut wanted: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for (key, (low, high)) in self.bounds(partitions)? {
            if high > low {
                tpl.add_partition_offset(&key.0, key.1, Offset::Offset(high - 1))
                    .map_err(|e| self.err(what, &e))?;
                wanted.insert(key.clone(), high - 1);
            }
        }
        if wanted.is_empty() {
            return Ok(out);
        }
        consumer.assign(&tpl).map_err(|e| self.err(what, &e))?;
        let deadline = Instant::now() + self.timeout;
        let mut quiet_since = Instant::now();
        while !wanted.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            // A last offset that holds no record (a transaction marker) never comes:
            // after a second with nothing, those partitions have no timestamp.
            if left.is_zero() || quiet_since.elapsed() > Duration::from_secs(1) {
                break;
            }
            match consumer.poll(left.min(Duration::from_millis(100))) {
                Some(Ok(m)) => {
                    let key = (m.topic().to_string(), m.partition());
                    if wanted.get(&key).is_some_and(|at| m.offset() >= *at) {
                        wanted.remove(&key);
                        out.insert(key, m.timestamp().to_millis());
                    }
                    quiet_since = Instant::now();
                }
                Some(Err(e)) => {
                    if let Err(u) = consumer.unassign() {
                        tracing::debug!(cluster = %self.cluster, error = %u, "{what}: unassigning failed");
                    }
                    return Err(self.err(what, &e));
                }
                None => {}
            }
        }
        if let Err(e) = consumer.unassign() {
            tracing::debug!(cluster = %self.cluster, error = %e, "{what}: unassigning failed");
        }
        Ok(out)
    }
}

/// [`ClusterClient::describe`] on the native path: the partitions of the listed
/// topics, and those missing asked for by name, which is how a broker says which it
/// refused to describe.
fn describe_natively(
    lookup: &Arc<Lookup>,
    topics: &BTreeSet<String>,
) -> Result<TopicPartitions, SourceError> {
    /// Kafka's TOPIC_AUTHORIZATION_FAILED.
    const UNAUTHORIZED: i16 = 29;
    let md = lookup.metadata(None, GiveUp::OnRefusal)?;
    let mut out = TopicPartitions::default();
    for t in md.topics {
        if topics.contains(&t.name) && t.error_code == 0 && !t.partitions.is_empty() {
            let mut parts: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
            parts.sort_unstable();
            out.partitions.insert(t.name, parts);
        }
    }
    out.missing = topics
        .iter()
        .filter(|t| !out.partitions.contains_key(*t))
        .cloned()
        .collect();
    if !out.missing.is_empty() {
        let asked: Vec<String> = out.missing.iter().cloned().collect();
        if let Ok(md) = lookup.metadata(Some(asked), GiveUp::OnRefusal) {
            out.unauthorized = md
                .topics
                .into_iter()
                .filter(|t| t.error_code == UNAUTHORIZED && out.missing.contains(&t.name))
                .map(|t| t.name)
                .collect();
        }
    }
    Ok(out)
}

/// What [`ClusterClient::read_partition`] hands each record to: its offset, key and
/// value.
pub(crate) type EachRecord<'a> = dyn FnMut(i64, Option<&[u8]>, Option<&[u8]>) + 'a;

/// Whether `e` says a partition's leader is moving or not yet known: worth asking
/// again shortly.
fn leader_moving(e: &SourceError) -> bool {
    e.kafka_kind() == Some(crate::error::KafkaErrorKind::LeaderMoving)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::config::client_config;

    #[test]
    fn client_defaults_apply_unless_the_properties_set_them() {
        let unset = ClientProperties::from_iter([("bootstrap.servers", "b:9092")]);
        assert_eq!(
            client_config(&unset).get("reconnect.backoff.ms"),
            Some("10")
        );
        let set = ClientProperties::from_iter([
            ("bootstrap.servers", "b:9092"),
            ("reconnect.backoff.ms", "250"),
        ]);
        assert_eq!(client_config(&set).get("reconnect.backoff.ms"), Some("250"));
        assert_eq!(client_config(&set).get("bootstrap.servers"), Some("b:9092"));
    }

    #[test]
    fn secured_clusters_without_a_ca_look_for_the_systems() {
        let config = |pairs: &[(&str, &str)]| client_config(&pairs.iter().copied().collect());
        assert_eq!(config(&[]).get("ssl.ca.location"), None);
        assert_eq!(
            config(&[("security.protocol", "PLAINTEXT")]).get("ssl.ca.location"),
            None
        );
        for protocol in ["SSL", "sasl_ssl"] {
            let c = config(&[("security.protocol", protocol)]);
            assert_eq!(c.get("ssl.ca.location"), Some("probe"), "{protocol}");
        }
        let own = config(&[("security.protocol", "SSL"), ("ssl.ca.location", "/ca.pem")]);
        assert_eq!(own.get("ssl.ca.location"), Some("/ca.pem"));
        let pem = config(&[("security.protocol", "SSL"), ("ssl.ca.pem", "-----BEGIN")]);
        assert_eq!(pem.get("ssl.ca.location"), None);
    }

    /// A lookup client of `cluster` with `props` and a 30 s timeout, native on a
    /// `runtime` (when the properties let it be).
    fn client_of(
        cluster: &str,
        props: &ClientProperties,
        runtime: Option<tokio::runtime::Handle>,
    ) -> ClusterClient {
        let (setup, timeout) = (ClientSetup::default(), Duration::from_secs(30));
        ClusterClient::new(None, cluster.into(), props, None, timeout, setup, runtime).unwrap()
    }

    #[test]
    fn a_client_kept_for_the_next_attempt_ends_it_early_too() {
        // Port 1 on loopback refuses connections. librdkafka reports the same error
        // of a broker again only after 30 s: the next contacts end early because the
        // client remembers that its broker failed, not because of a fresh error.
        let props = ClientProperties::from_iter([("bootstrap.servers", "127.0.0.1:1")]);
        let timeout = Duration::from_secs(30);
        let client = client_of("dead", &props, None);
        for attempt in 1..=3 {
            let began = std::time::Instant::now();
            let e = client.first_contact().unwrap_err().to_string();
            let took = began.elapsed();
            assert!(
                took >= ERROR_GRACE && took < timeout / 3,
                "attempt {attempt} took {took:?}: {e}"
            );
            assert!(e.contains("Connection refused"), "attempt {attempt}: {e}");
            assert!(!client.rejected(), "attempt {attempt}");
        }
        close_detached(client);
    }

    #[test]
    fn a_native_first_contact_with_no_broker_ends_at_once() {
        // Port 1 on loopback refuses connections: one round over the bootstrap list,
        // then the enumerator's backoff, not the client timeout.
        let props = ClientProperties::from_iter([
            ("bootstrap.servers", "127.0.0.1:1"),
            ("fetch.backend", "native"),
        ]);
        let rt = mck_testkit::runtime();
        let timeout = Duration::from_secs(30);
        let client = client_of("dead", &props, Some(rt.handle().clone()));
        assert!(client.native().is_some());
        let began = std::time::Instant::now();
        let e = client.first_contact().unwrap_err();
        assert!(began.elapsed() < timeout / 3, "took {:?}", began.elapsed());
        assert!(e.to_string().contains("Connection refused"), "{e}");
        assert!(e.is_retriable(), "{e}");
        assert!(!client.rejected());
    }

    /// The lookups through the native path and through librdkafka answer alike on
    /// one real broker (reached through the test kit's proxy), over committed and
    /// aborted transactions and timestamps; the native ones go on when every
    /// connection they kept is cut.
    #[test]
    fn native_lookups_answer_as_librdkafkas_do() {
        use mck_testkit::proxy::ProxiedCluster;
        use mck_testkit::{
            ClusterOptions, TestCluster, TestRecord, TransactionEnd, produce_transaction,
        };
        let kafka = ProxiedCluster::start(ClusterOptions::new("lookups"))
            .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
        let c = kafka.cluster();
        c.create_topic("lk", 2).unwrap();
        c.create_topic("other", 1).unwrap();
        // Recent timestamps: retention would delete records of 1970.
        let t0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 600_000;
        let at = |i: i64| t0 + i * 1_000;
        let p0: Vec<TestRecord> = (0..5)
            .map(|i| {
                TestRecord::value(format!("v{i}"))
                    .with_key(format!("k{i}"))
                    .at(at(i))
                    .to_partition(0)
            })
            .collect();
        c.produce("lk", &p0).unwrap();
        let committed = [TestRecord::value("t").at(at(5)).to_partition(0)];
        produce_transaction(c, "lk", &committed, TransactionEnd::Commit).unwrap();
        c.produce("lk", &[TestRecord::value("last").at(at(7)).to_partition(0)])
            .unwrap();
        let p1 = [
            TestRecord::value("a").at(at(1)).to_partition(1),
            TestRecord::value("b").at(at(2)).to_partition(1),
        ];
        c.produce("lk", &p1).unwrap();
        let aborted = [TestRecord::value("gone").at(at(3)).to_partition(1)];
        produce_transaction(c, "lk", &aborted, TransactionEnd::Abort).unwrap();

        let rt = mck_testkit::runtime();
        // Whatever MCK_FETCH_BACKEND says; librdkafka never sees the property.
        let props = ClientProperties::from_iter([
            (
                "bootstrap.servers",
                kafka.proxied_bootstrap_servers().as_str(),
            ),
            ("fetch.backend", "native"),
        ]);
        let native = client_of("lookups", &props, Some(rt.handle().clone()));
        let librdkafka = client_of("lookups", &props, None);
        assert!(native.native().is_some() && librdkafka.native().is_none());
        let parts = vec![("lk".to_string(), 0), ("lk".to_string(), 1)];
        let topics: BTreeSet<String> = ["lk", "other", "absent"].map(String::from).into();
        let ask = |client: &ClusterClient| {
            let id = client.kafka_cluster_id().unwrap();
            let described = client.describe(&topics).unwrap();
            let mut names = client.topic_names(|t| !t.starts_with("__")).unwrap();
            names.sort();
            let facts = client.facts(&parts, false, Some(at(2))).unwrap();
            let times = [
                ("lk".to_string(), 0, at(3) - 500),
                ("lk".to_string(), 1, at(10_000)),
            ];
            let found = client.offsets_at_times(&times).unwrap();
            let newest = client.newest_timestamps(&parts).unwrap();
            let mut read = Vec::new();
            let count = client
                .read_partition("lk", 1, &mut |o, _, v| {
                    read.push((o, v.map(<[u8]>::to_vec)));
                })
                .unwrap();
            (id, described, names, facts, found, newest, read, count)
        };
        let answers = ask(&native);
        assert_eq!(answers, ask(&librdkafka), "native first, librdkafka second");
        let (id, described, names, facts, found, newest, read, count) = answers.clone();
        assert_eq!(id, c.kafka_cluster_id());
        assert_eq!(described.partitions.get("lk"), Some(&vec![0, 1]));
        assert_eq!(described.missing, BTreeSet::from(["absent".to_string()]));
        assert_eq!(names, ["lk", "other"]);
        // Partition 0: five records, the committed one and its marker, "last".
        let p0_facts = &facts[&("lk".to_string(), 0)];
        assert_eq!((p0_facts.earliest, p0_facts.latest), (0, 8));
        assert_eq!(p0_facts.at_timestamp, Some(2));
        assert_eq!(found[&("lk".to_string(), 0)], Some(3));
        assert_eq!(found[&("lk".to_string(), 1)], None);
        assert_eq!(newest[&("lk".to_string(), 0)], Some(at(7)));
        // Partition 1 ends with the abort marker: no record at its last offset, and
        // the aborted record is not read.
        assert_eq!(newest[&("lk".to_string(), 1)], None);
        assert_eq!(count, 2);
        assert_eq!(
            read,
            [(0, Some(b"a".to_vec())), (1, Some(b"b".to_vec()))].to_vec()
        );

        // Every connection through the proxy is cut: the kept ones are dead, and the
        // native lookups open new ones without an error.
        kafka.proxy().reset_all();
        assert_eq!(ask(&native), answers, "after the connections were cut");
        close_detached(librdkafka);

        // A first bootstrap broker that takes connections and never answers (its
        // host gone behind a load balancer): the next one is asked a second later,
        // not after the timeout.
        let silent = mck_testkit::proxy::FaultProxy::bind().unwrap();
        silent.blackhole();
        let bootstrap = format!("{},{}", silent.addr(), kafka.proxied_bootstrap_servers());
        let props = ClientProperties::from_iter([
            ("bootstrap.servers", bootstrap.as_str()),
            ("fetch.backend", "native"),
        ]);
        let behind = client_of("lookups", &props, Some(rt.handle().clone()));
        let began = std::time::Instant::now();
        assert_eq!(behind.first_contact().unwrap(), c.kafka_cluster_id());
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "took {:?}",
            began.elapsed()
        );
    }

    #[test]
    fn librdkafka_says_when_every_broker_is_down() {
        // librdkafka raises "N/N brokers are down" (and re-bootstraps) only when its
        // rd_atomic32_set returns the previous value, which its CMake build gets
        // right only with HAVE_ATOMICS_32_ATOMIC defined (.cargo/config.toml).
        use crate::base::hooks::{ClientHooks, KafkaErrorKind};
        struct Seen(std::sync::Mutex<Vec<(KafkaErrorKind, String)>>);
        impl ClientHooks for Seen {
            fn error(&self, kind: KafkaErrorKind, reason: &str) {
                self.0.lock().unwrap().push((kind, reason.to_string()));
            }
        }
        let seen = Arc::new(Seen(std::sync::Mutex::new(Vec::new())));
        let props = ClientProperties::from_iter([("bootstrap.servers", "127.0.0.1:1")]);
        let setup = ClientSetup {
            hooks: Some(seen.clone()),
            dispatch: None,
        };
        let timeout = Duration::from_secs(5);
        let client =
            ClusterClient::new(None, "dead".into(), &props, None, timeout, setup, None).unwrap();
        // Ends about a second after the broker failed; the report comes with it.
        let _ = client.first_contact();
        close_detached(client);
        let seen = seen.0.lock().unwrap();
        assert!(
            seen.iter()
                .any(|(kind, reason)| *kind == KafkaErrorKind::Transport
                    && reason.contains("brokers are down")),
            "no \"brokers are down\" in {seen:?}"
        );
    }
}
