//! One librdkafka client per cluster for both sides of a source: the enumerator's
//! lookups and commits, and the fetching of one reader.
//!
//! Every librdkafka client costs its own threads (its main thread, an internal broker
//! thread, one per bootstrap entry and one per broker) plus the thread that serves its
//! events. The enumerator's lookup client is idle most of the time, and a reader's
//! consumer can answer metadata, offset and commit requests as well as fetch: so the
//! first reader that reads a cluster takes the enumerator's client of that cluster as
//! its consumer instead of making one, when both were made from the same settings.
//! A second reader of the same cluster (only when splits of one cluster are spread
//! over readers) makes a client of its own.
//!
//! librdkafka's client calls are thread safe: a lookup that waits for a slow broker
//! does not hold the reader's fetches, which librdkafka's broker threads do on their
//! own. The broker, though, answers a connection's requests in order, so a lookup can
//! wait behind an idle fetch for up to `fetch.wait.max.ms`: lookups someone waits for
//! use a client of their own while a reader fetches with the shared one
//! ([`SharedClient::is_reading`]). A client is closed when its last holder lets it go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::config::consumer_config;
use crate::kafka::events::{ClientRole, Served, SourceContext};

/// A client of one cluster, held by the enumerator, a reader, or both.
pub(crate) struct SharedClient {
    cluster: Arc<str>,
    consumer: Served<BaseConsumer<SourceContext>>,
    /// A reader fetches with this client.
    reading: AtomicBool,
}

impl std::fmt::Debug for SharedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClient")
            .field("cluster", &self.cluster)
            .field("reading", &self.reading.load(Ordering::Relaxed))
            .finish()
    }
}

impl SharedClient {
    /// Makes a client (blocking) with its event thread.
    fn create(
        cluster: &Arc<str>,
        made: Made,
        role: ClientRole,
        setup: ClientSetup,
        props: &ClientProperties,
    ) -> Result<Self, SourceError> {
        let ClientSetup { hooks, dispatch } = setup;
        let context = SourceContext::new(cluster.clone(), role, hooks).for_properties(props);
        let consumer = Served::create(&made.config, context, dispatch)
            .map_err(|e| SourceError::cluster(cluster, made.what, &e, props))?;
        Ok(Self {
            cluster: cluster.clone(),
            consumer,
            reading: AtomicBool::new(false),
        })
    }

    pub(crate) fn consumer(&self) -> &BaseConsumer<SourceContext> {
        &self.consumer
    }

    /// Whether a reader fetches with this client.
    pub(crate) fn is_reading(&self) -> bool {
        self.reading.load(Ordering::SeqCst)
    }

    /// Takes the reader's place; false when a reader holds it already.
    fn take_reading(&self) -> bool {
        let taken = self
            .reading
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if taken {
            self.consumer.context().set_reading(true);
        }
        taken
    }

    /// Gives the reader's place back (the reader has unassigned everything).
    pub(crate) fn release_reading(&self) {
        self.consumer.context().set_reading(false);
        self.reading.store(false, Ordering::SeqCst);
    }
}

type Key = (Arc<str>, Vec<(String, String)>);

/// The clients of one source by cluster and settings, each living as long as one
/// of its holders does; and the byte budget its native fetches share.
#[derive(Default)]
pub(crate) struct ClientShare {
    clients: Mutex<HashMap<Key, Weak<SharedClient>>>,
    /// The byte budget of the source's native fetches, which all of them share.
    native_budget: Arc<multicluster_kafka_client::budget::Budget>,
    /// The source's native fetching, one per cluster, shared by its readers.
    native_fetches: multicluster_kafka_client::cluster::ClusterFetches,
}

impl std::fmt::Debug for ClientShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.clients.lock().map(|c| c.len()).unwrap_or(0);
        f.debug_struct("ClientShare").field("clients", &n).finish()
    }
}

/// A client's finished settings, and what making it is called in an error.
struct Made {
    config: ClientConfig,
    what: &'static str,
}

impl Made {
    fn new(
        props: &ClientProperties,
        group: Option<&str>,
        setup: &ClientSetup,
        what: &'static str,
        cluster: &str,
    ) -> Result<Self, SourceError> {
        // The source's own properties never reach librdkafka, which would refuse a
        // bad one here: refused the same way, at the cluster's first client, rather
        // than by every fetcher that tries to open.
        props
            .check_source_keys()
            .map_err(|refused| SourceError::Kafka {
                cluster: cluster.to_string(),
                message: format!("{what}: {refused}"),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            })?;
        let mut config = consumer_config(props, group);
        crate::kafka::config::prepare(&mut config, props, setup.hooks.as_ref())
            .map_err(|e| SourceError::cluster(cluster, what, &e, props))?;
        Ok(Self { config, what })
    }

    fn key(&self, cluster: &Arc<str>) -> Key {
        let mut pairs: Vec<(String, String)> = self
            .config
            .config_map()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pairs.sort_unstable();
        (cluster.clone(), pairs)
    }
}

impl ClientShare {
    /// The byte budget of the source's native fetches.
    pub(crate) fn native_budget(&self) -> Arc<multicluster_kafka_client::budget::Budget> {
        self.native_budget.clone()
    }

    /// The source's native fetching of its clusters, shared by its readers.
    pub(crate) fn native_fetches(&self) -> &multicluster_kafka_client::cluster::ClusterFetches {
        &self.native_fetches
    }

    fn live(&self, key: &Key) -> Option<Arc<SharedClient>> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.retain(|_, c| c.strong_count() > 0);
        clients.get(key).and_then(Weak::upgrade)
    }

    fn register(&self, key: Key, client: &Arc<SharedClient>) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.get(&key).is_none_or(|c| c.strong_count() == 0) {
            clients.insert(key, Arc::downgrade(client));
        }
    }

    /// A client for lookups and commits: the live one made from the same settings,
    /// else a new one (blocking). `group` overrides the properties' group id.
    pub(crate) fn lookup_client(
        &self,
        cluster: &Arc<str>,
        props: &ClientProperties,
        group: Option<&str>,
        setup: ClientSetup,
    ) -> Result<Arc<SharedClient>, SourceError> {
        let made = Made::new(props, group, &setup, "create client", cluster)?;
        self.live_or_new(cluster, made, ClientRole::Lookup, setup, props, |_| true)
    }

    /// A client for a reader to fetch with: the live one made from the same settings
    /// when no reader fetches with it, else a new one (blocking). The reader gives its
    /// place back with [`SharedClient::release_reading`].
    pub(crate) fn reader_client(
        &self,
        cluster: &Arc<str>,
        props: &ClientProperties,
        setup: ClientSetup,
    ) -> Result<Arc<SharedClient>, SourceError> {
        let made = Made::new(props, None, &setup, "create consumer", cluster)?;
        self.live_or_new(
            cluster,
            made,
            ClientRole::Reader,
            setup,
            props,
            SharedClient::take_reading,
        )
    }

    /// The live client made from `made`'s settings if `take` accepts it, else a new
    /// one (which `take` is also applied to), registered when no other live one is.
    fn live_or_new(
        &self,
        cluster: &Arc<str>,
        made: Made,
        role: ClientRole,
        setup: ClientSetup,
        props: &ClientProperties,
        take: fn(&SharedClient) -> bool,
    ) -> Result<Arc<SharedClient>, SourceError> {
        let key = made.key(cluster);
        if let Some(c) = self.live(&key)
            && take(&c)
        {
            return Ok(c);
        }
        let client = Arc::new(SharedClient::create(cluster, made, role, setup, props)?);
        take(&client);
        self.register(key, &client);
        Ok(client)
    }
}

/// A lookup client made outside any share (a one-off lookup).
pub(crate) fn standalone(
    cluster: &Arc<str>,
    props: &ClientProperties,
    group: Option<&str>,
    setup: ClientSetup,
) -> Result<Arc<SharedClient>, SourceError> {
    let made = Made::new(props, group, &setup, "create client", cluster)?;
    SharedClient::create(cluster, made, ClientRole::Lookup, setup, props).map(Arc::new)
}
