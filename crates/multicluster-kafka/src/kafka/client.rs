//! The blocking IO shell towards one Kafka cluster: its lookups (through the lookup
//! seam, [`Lookups`]: natively or with librdkafka), and groups and commits (with
//! librdkafka). Every method blocks; the source calls them on threads of their own
//! ([`detached`]), never on an async worker thread.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::base::offsets::PartitionFacts;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::events::SourceContext;
use crate::kafka::lookups::RdLookups;
use crate::kafka::shared::{ClientShare, SharedClient};
use crate::lookups::{Bounds, EachRecord, EndEarly, Lookups, PerPartition, TopicPartitions};
use crate::native::lookups::NativeLookups;
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

/// Lookups, groups and commits on one cluster: lookups through the native path's
/// connections where it serves the cluster and the caller runs on a tokio runtime,
/// else through a librdkafka client that a reader may fetch with as well
/// ([`crate::kafka::shared`]); groups and commits through that librdkafka client, or
/// beside native lookups one made when first needed.
pub(crate) struct ClusterClient {
    cluster: Arc<str>,
    lookups: Box<dyn Lookups>,
    /// The librdkafka client for groups and commits: the lookups' own, or, beside
    /// native lookups, made from `groups_from` on first use.
    groups: OnceLock<Arc<SharedClient>>,
    groups_from: Option<GroupsFrom>,
    timeout: Duration,
}

/// What a groups client beside native lookups is made from.
struct GroupsFrom {
    props: ClientProperties,
    group_id: Option<String>,
    setup: ClientSetup,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient")
            .field("cluster", &self.cluster)
            .field("lookups", &self.lookups.path())
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
                let lookups = NativeLookups::new(cluster.clone(), &settings, timeout, runtime);
                tracing::debug!(cluster = %cluster, "looking up natively");
                return Ok(Self {
                    lookups: Box::new(lookups),
                    cluster,
                    groups: OnceLock::new(),
                    groups_from: Some(GroupsFrom {
                        props: props.clone(),
                        group_id: group_id.map(str::to_string),
                        setup,
                    }),
                    timeout,
                });
            }
        }
        let client = match share {
            Some(share) => share.lookup_client(&cluster, props, group_id, setup)?,
            None => crate::kafka::shared::standalone(&cluster, props, group_id, setup)?,
        };
        Ok(Self {
            lookups: Box::new(RdLookups::new(cluster.clone(), client.clone(), timeout)),
            cluster,
            groups: OnceLock::from(client),
            groups_from: None,
            timeout,
        })
    }

    /// Which path the lookups take: `native` or `librdkafka`.
    #[cfg(test)]
    pub fn lookup_path(&self) -> &'static str {
        self.lookups.path()
    }

    /// The librdkafka client for groups and commits (made on first use beside native
    /// lookups, blocking).
    fn rdkafka(&self) -> Result<&SharedClient, SourceError> {
        if let Some(client) = self.groups.get() {
            return Ok(client);
        }
        let from = self
            .groups_from
            .as_ref()
            .expect("a client without one for groups has what to make it from");
        let made = crate::kafka::shared::standalone(
            &self.cluster,
            &from.props,
            from.group_id.as_deref(),
            from.setup.clone(),
        )?;
        if let Err(other) = self.groups.set(made) {
            // Another call made one meanwhile.
            close_detached(other);
        }
        Ok(self.groups.get().expect("set above"))
    }

    /// The librdkafka consumer of [`Self::rdkafka`].
    fn consumer(&self) -> Result<&BaseConsumer<SourceContext>, SourceError> {
        self.rdkafka().map(SharedClient::consumer)
    }

    /// Whether a reader fetches with this client too: then a request of ours waits
    /// behind the reader's fetch on the broker (a broker answers one connection's
    /// requests in order, and an idle fetch is held for up to `fetch.wait.max.ms`).
    pub fn is_read(&self) -> bool {
        self.lookups.is_read()
    }

    /// A failed group request, with the lookups' last client error as its cause.
    fn err(&self, what: &str, e: &rdkafka::error::KafkaError) -> SourceError {
        let message = match self.lookups.last_error() {
            Some(cause) => format!("{what}: {e}; last client error: {cause}"),
            None => format!("{what}: {e}"),
        };
        SourceError::kafka(&self.cluster, message, e)
    }

    /// True when the cluster refused this client (authentication or TLS failed)
    /// since its last metadata answer, as opposed to not answering at all (or a token
    /// provider that failed).
    pub fn rejected(&self) -> bool {
        self.lookups.rejected()
    }

    /// The Kafka `cluster.id` (the physical identity of the cluster).
    pub fn kafka_cluster_id(&self) -> Result<String, SourceError> {
        self.lookups.cluster_id(EndEarly::OnRefusal)
    }

    /// Like [`Self::kafka_cluster_id`], but fails about a second after every broker
    /// of the client failed (a refused connection, a name that does not resolve, …)
    /// rather than at the timeout: for a first contact that is tried again with
    /// backoff, and whose warning should say why soon.
    pub fn first_contact(&self) -> Result<String, SourceError> {
        self.lookups.cluster_id(EndEarly::OnAnyError)
    }

    /// Partitions of each topic (one metadata request for all topics).
    pub fn describe(&self, topics: &BTreeSet<String>) -> Result<TopicPartitions, SourceError> {
        self.lookups.describe(topics)
    }

    /// The names of the cluster's topics that `keep` selects (one metadata request).
    pub fn topic_names(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<String>, SourceError> {
        let mut names = self.lookups.topic_names()?;
        names.retain(|n| keep(n));
        Ok(names)
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
        self.lookups.bounds(partitions)
    }

    /// The first offset at or after each partition's own timestamp (`None` where no
    /// record is that late), in one ListOffsets round.
    pub fn offsets_at_times(
        &self,
        queries: &[(String, i32, i64)],
    ) -> Result<PerPartition, SourceError> {
        if queries.is_empty() {
            return Ok(PerPartition::new());
        }
        self.lookups.offsets_at_times(queries)
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
    /// On librdkafka it assigns the partition to the client (and takes it away
    /// again): only for a client of its own ([`crate::kafka::shared::standalone`]).
    /// The source's lookup client may be the one a reader fetches with, whose
    /// assignment is the reader's.
    pub(crate) fn read_partition(
        &self,
        topic: &str,
        partition: i32,
        each: &mut EachRecord<'_>,
    ) -> Result<u64, SourceError> {
        let what = format!("reading {topic}/{partition}");
        if self.is_read() {
            return Err(SourceError::internal(
                "a topic read",
                format!("{what}: the client a reader fetches with cannot be assigned"),
            ));
        }
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
        self.lookups
            .read_partition(topic, partition, (start, end), each)
    }

    /// The timestamp of the newest record of each partition (its last offset; `None`
    /// for an empty partition, or one whose last offset holds no record handed out,
    /// such as a transaction marker), read within the client timeout.
    ///
    /// Only for a client of its own, as [`Self::read_partition`].
    pub(crate) fn newest_timestamps(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<PerPartition, SourceError> {
        if self.is_read() {
            return Err(SourceError::internal(
                "a timestamp read",
                "newest record timestamps: the client a reader fetches with cannot be assigned",
            ));
        }
        if partitions.is_empty() {
            return Ok(PerPartition::new());
        }
        self.lookups.newest_timestamps(partitions)
    }
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
                took >= crate::kafka::lookups::ERROR_GRACE && took < timeout / 3,
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
        assert_eq!(client.lookup_path(), "native");
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
        assert_eq!(native.lookup_path(), "native");
        assert_eq!(librdkafka.lookup_path(), "librdkafka");
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
