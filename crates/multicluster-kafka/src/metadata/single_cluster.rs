use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{ClusterMetadata, KafkaMetadataService, KafkaStream, MetadataError};
use crate::base::hooks::ClientHooks;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::config::ClientSetup;
use crate::kafka::lookups::RdLookups;
use crate::lookups::Lookups;
use crate::native::lookups::NativeLookups;
use crate::native::settings::{self, Given};

/// How the service lists the cluster's topics: the source's lookups
/// ([`Lookups`]), native where the native path serves the cluster and the service
/// is made on a tokio runtime, else librdkafka's.
type Client = Arc<dyn Lookups>;

/// The cluster's lookups with these properties and hooks, each request waiting at
/// most `timeout`.
fn lookups(
    cluster_id: &str,
    properties: &ClientProperties,
    hooks: Option<&Arc<dyn ClientHooks>>,
    timeout: Duration,
) -> Result<Client, MetadataError> {
    let cluster: Arc<str> = Arc::from(cluster_id);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let given = Given {
            cluster: &cluster,
            props: properties,
            hooks,
            runtime: true,
        };
        // Settings the native path refuses stay with librdkafka's words for them.
        let native = match settings::serves(&given) {
            true => settings::settings(&given).ok(),
            false => None,
        };
        if let Some(settings) = native {
            return Ok(Arc::new(NativeLookups::new(
                cluster, &settings, timeout, runtime,
            )));
        }
    }
    let setup = ClientSetup {
        hooks: hooks.cloned(),
        dispatch: Some(tracing::dispatcher::get_default(|d| d.clone())),
    };
    let client =
        crate::kafka::shared::standalone(&cluster, properties, None, setup).map_err(|e| {
            MetadataError::Cluster {
                message: redact(
                    properties,
                    format!("cannot create a Kafka client: {}", message_of(e)),
                ),
                cluster: cluster_id.to_string(),
            }
        })?;
    Ok(Arc::new(RdLookups::new(cluster, client, timeout)))
}

/// An error's message without the cluster (the caller names it).
fn message_of(e: SourceError) -> String {
    match e {
        SourceError::Kafka { message, .. } | SourceError::Cluster { message, .. } => message,
        other => other.to_string(),
    }
}

/// Every topic of one cluster is a stream of the same name.
///
/// The stream `orders` is the topic `orders` on the cluster, with the service's client
/// properties. Topics are discovered with a metadata request on every call, so a topic
/// created later shows up on the next call and a deleted one disappears. Topics whose
/// name starts with `__` (Kafka's internal topics such as `__consumer_offsets` and
/// `__transaction_state`) are never streams.
///
/// Made on a tokio runtime for a cluster the native fetch path serves (see
/// `fetch.backend`), the service lists topics over connections of its own on that
/// runtime, with no thread of its own; otherwise with a librdkafka client. Each
/// request runs on a thread of its own, which a runtime shutting down does not wait
/// for; a call waits at most [`metadata_timeout`](Self::with_metadata_timeout) for the
/// cluster. The methods need a tokio runtime. [`close`](KafkaMetadataService::close), or dropping the service,
/// lets the client go on a thread of its own too (destroying it takes rust-rdkafka up
/// to 100 ms), so neither blocks the caller.
///
/// `Debug` output and error messages never contain secret property values.
///
/// ```no_run
/// # async fn demo() -> Result<(), multicluster_kafka::metadata::MetadataError> {
/// use multicluster_kafka::metadata::{KafkaMetadataService, SingleClusterMetadataService};
/// use multicluster_kafka::properties::ClientProperties;
///
/// let properties: ClientProperties = [("bootstrap.servers", "127.0.0.1:9092")]
///     .into_iter()
///     .collect();
/// let service = SingleClusterMetadataService::new("east", properties)?;
/// let streams = service.describe_streams(&["orders".to_string()]).await?;
/// if let Some(orders) = streams.get("orders") {
///     assert!(orders.clusters["east"].topics.contains("orders"));
/// }
/// service.close().await?;
/// # Ok(())
/// # }
/// ```
pub struct SingleClusterMetadataService {
    cluster_id: String,
    properties: ClientProperties,
    metadata_timeout: Duration,
    /// The program's hooks for the service's client.
    hooks: Option<Arc<dyn ClientHooks>>,
    /// `None` once closed.
    client: Mutex<Option<Client>>,
    /// How the listings went so far ([`Listing`]), for how loudly a failure is said.
    listing: AtomicU8,
    /// The first listing's slowness was said (once: a caller that tries again while
    /// the cluster does not answer says so itself).
    slow_said: AtomicBool,
}

/// The states of [`SingleClusterMetadataService::listing`].
struct Listing;

impl Listing {
    /// No listing answered yet: a failure is the caller's to report (a start that
    /// fails says why in its error; a second line would repeat it).
    const NEVER: u8 = 0;
    /// The last listing answered.
    const ANSWERED: u8 = 1;
    /// Listings fail since one that answered; the first failure was warned about.
    const FAILING: u8 = 2;
}

impl SingleClusterMetadataService {
    /// How long a metadata request may take unless
    /// [`with_metadata_timeout`](Self::with_metadata_timeout) says otherwise.
    pub const DEFAULT_METADATA_TIMEOUT: Duration = Duration::from_secs(30);

    /// How long the first listing waits before it says that the cluster has not
    /// answered yet.
    const SLOW_FIRST_ANSWER: Duration = Duration::from_secs(5);

    /// A service for the cluster with this logical id, reached with these librdkafka
    /// client properties.
    ///
    /// Fails with [`MetadataError::MissingBootstrapServers`] when `bootstrap.servers`
    /// is missing or blank, and with [`MetadataError::Cluster`] when librdkafka
    /// rejects the properties. Creating the client does not wait for the cluster.
    pub fn new(
        cluster_id: impl Into<String>,
        properties: ClientProperties,
    ) -> Result<Self, MetadataError> {
        Self::with_client_hooks(cluster_id, properties, None)
    }

    /// Like [`new`](Self::new), with [`ClientHooks`] for the service's client (an
    /// OAUTHBEARER token provider, a statistics receiver; see
    /// [`hooks`](crate::hooks)).
    pub fn with_client_hooks(
        cluster_id: impl Into<String>,
        properties: ClientProperties,
        hooks: Option<Arc<dyn ClientHooks>>,
    ) -> Result<Self, MetadataError> {
        let cluster_id = cluster_id.into();
        if properties
            .bootstrap_servers()
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            return Err(MetadataError::MissingBootstrapServers {
                location: None,
                cluster: cluster_id,
            });
        }
        let timeout = Self::DEFAULT_METADATA_TIMEOUT;
        let client = lookups(&cluster_id, &properties, hooks.as_ref(), timeout)?;
        Ok(Self {
            cluster_id,
            properties,
            metadata_timeout: timeout,
            hooks,
            client: Mutex::new(Some(client)),
            listing: AtomicU8::new(Listing::NEVER),
            slow_said: AtomicBool::new(false),
        })
    }

    /// Sets how long one metadata request may wait for the cluster before the call
    /// fails with [`MetadataError::Cluster`].
    pub fn with_metadata_timeout(mut self, timeout: Duration) -> Self {
        self.metadata_timeout = timeout;
        // Lookups made again with the new timeout (the same properties were taken
        // once: they are taken again); the old ones go on a thread of their own.
        let remade = lookups(
            &self.cluster_id,
            &self.properties,
            self.hooks.as_ref(),
            timeout,
        );
        if let Ok(remade) = remade {
            let mut client = self.lock();
            if let Some(old) = client.replace(remade) {
                crate::kafka::client::close_detached(old);
            }
        }
        self
    }

    /// The client's last error while it tries to reach the cluster (a refused
    /// connection, a failed handshake), without secrets; for a caller whose own wait
    /// ends before a listing does, to say why.
    pub fn last_client_error(&self) -> Option<String> {
        let cause = self.lock().as_ref().and_then(|c| c.last_error())?;
        Some(redact(&self.properties, cause))
    }

    /// The logical id of the cluster this service reads.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    fn lock(&self) -> MutexGuard<'_, Option<Client>> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cluster_error(&self, message: String) -> MetadataError {
        MetadataError::Cluster {
            cluster: self.cluster_id.clone(),
            message: redact(&self.properties, message),
        }
    }

    /// The names of the cluster's non-internal topics, from a fresh metadata request.
    async fn topics(&self) -> Result<BTreeSet<String>, MetadataError> {
        let client = self.lock().clone().ok_or(MetadataError::Closed)?;
        // The client moves onto the lookup's thread, so if the service is closed
        // meanwhile, the client is destroyed there, not on an async worker, and a
        // runtime shutting down does not wait for it.
        let fetch = crate::kafka::client::detached(move || {
            // A request to a cluster that refuses the client says why (the lookups
            // add the client's last error as the cause).
            let names = client.topic_names().map_err(message_of)?;
            Ok::<_, String>(
                names
                    .into_iter()
                    .filter(|name| !is_internal_topic(name))
                    .collect::<BTreeSet<String>>(),
            )
        });
        tokio::pin!(fetch);
        let fetched = tokio::select! {
            fetched = &mut fetch => fetched,
            _ = tokio::time::sleep(Self::SLOW_FIRST_ANSWER) => {
                if self.listing.load(Ordering::Relaxed) == Listing::NEVER
                    && !self.slow_said.swap(true, Ordering::Relaxed)
                {
                    // Nothing else is said before the request's timeout ends it.
                    let cause = self.last_client_error().map_or_else(String::new, |c| format!(" (last client error: {c})"));
                    let bootstrap = self.properties.shown("bootstrap.servers").unwrap_or_default();
                    tracing::warn!(cluster = %self.cluster_id, bootstrap, "no answer from the cluster yet{cause}; waiting up to the metadata timeout of {:?}", self.metadata_timeout);
                }
                fetch.await
            }
        };
        match fetched {
            Ok(topics) => {
                tracing::debug!(cluster = %self.cluster_id, topics = topics.len(), "listed topics");
                if self.listing.swap(Listing::ANSWERED, Ordering::Relaxed) == Listing::FAILING {
                    tracing::info!(cluster = %self.cluster_id, "metadata request answered again");
                }
                Ok(topics)
            }
            Err(e) => {
                let err = self.cluster_error(format!("cannot fetch topic metadata: {e}"));
                // A running source keeps its last good metadata and says nothing
                // itself: warned once per streak of failures after an answer.
                let before = self.listing.compare_exchange(
                    Listing::ANSWERED,
                    Listing::FAILING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                if before.is_ok() {
                    tracing::warn!(cluster = %self.cluster_id, error = %err, "metadata request failed (said once until a request answers again)");
                } else {
                    tracing::debug!(cluster = %self.cluster_id, error = %err, "metadata request failed");
                }
                Err(err)
            }
        }
    }

    fn stream(&self, topic: &str) -> KafkaStream {
        let metadata = ClusterMetadata {
            topics: BTreeSet::from([topic.to_string()]),
            properties: self.properties.clone(),
            starting_offsets: None,
            stopping_offsets: None,
            replaces: None,
            mirror_of: None,
        };
        KafkaStream::new(topic).with_cluster(self.cluster_id.clone(), metadata)
    }
}

#[async_trait]
impl KafkaMetadataService for SingleClusterMetadataService {
    /// Ids naming an existing, non-internal topic become one-topic streams; other ids
    /// are absent. One metadata request answers all ids.
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        if stream_ids.is_empty() {
            return self
                .lock()
                .as_ref()
                .map(|_| BTreeMap::new())
                .ok_or(MetadataError::Closed);
        }
        let topics = self.topics().await?;
        Ok(stream_ids
            .iter()
            .filter(|id| topics.contains(id.as_str()))
            .map(|id| (id.clone(), self.stream(id)))
            .collect())
    }

    /// One stream per non-internal topic.
    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        let topics = self.topics().await?;
        Ok(topics.iter().map(|t| (t.clone(), self.stream(t))).collect())
    }

    /// True exactly for this service's own cluster id, without asking the cluster.
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        if self.lock().is_none() {
            return Err(MetadataError::Closed);
        }
        Ok(cluster_id == self.cluster_id)
    }

    /// Lets the client go: it is destroyed on a thread of its own, not waited for
    /// (a rust-rdkafka client stops its polling thread, which takes up to
    /// 100 ms). Closing twice is not an error.
    async fn close(&self) -> Result<(), MetadataError> {
        let client = self.lock().take();
        if let Some(client) = client {
            // A metadata request still running holds another reference; the client is
            // then destroyed when that request ends, on the request's thread.
            crate::kafka::client::close_detached(client);
            tracing::debug!(cluster = %self.cluster_id, "single-cluster metadata service closed");
        }
        Ok(())
    }
}

impl Drop for SingleClusterMetadataService {
    /// A service dropped without [`close`](KafkaMetadataService::close) lets its client
    /// go the same way: a rust-rdkafka client joins its polling thread when dropped
    /// (up to 100 ms), which must not hold a runtime's worker or a program's
    /// exit.
    fn drop(&mut self) {
        if let Some(client) = self.lock().take() {
            crate::kafka::client::close_detached(client);
        }
    }
}

impl fmt::Debug for SingleClusterMetadataService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleClusterMetadataService")
            .field("cluster_id", &self.cluster_id)
            .field("properties", &self.properties)
            .field("metadata_timeout", &self.metadata_timeout)
            .field("closed", &self.lock().is_none())
            .finish()
    }
}

/// Kafka's internal topics (`__consumer_offsets`, `__transaction_state`, …) start with
/// two underscores.
fn is_internal_topic(name: &str) -> bool {
    name.starts_with("__")
}

/// Replaces every secret property value that occurs in `message` (librdkafka quotes
/// rejected values in its configuration errors), and a secret bootstrap list's
/// brokers one by one.
fn redact(properties: &ClientProperties, mut message: String) -> String {
    for (key, value) in properties.iter() {
        if properties.is_secret(key) && !value.is_empty() && message.contains(value) {
            message = message.replace(value, crate::base::properties::REDACTED);
        }
    }
    crate::base::properties::hide_secrets(&message, &properties.secret_texts()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> ClientProperties {
        pairs.iter().copied().collect()
    }

    #[test]
    fn dropping_the_service_does_not_wait_for_its_client() {
        // A rust-rdkafka client joins a thread that polls 100 ms at a time:
        // dropped in place 30 ms after it was made, each drop took 70 ms.
        let mut took: Vec<std::time::Duration> = (0..5)
            .map(|_| {
                let svc = SingleClusterMetadataService::new(
                    "east",
                    props(&[("bootstrap.servers", "127.0.0.1:1")]),
                )
                .unwrap();
                // Let the client's polling thread start its wait.
                std::thread::sleep(std::time::Duration::from_millis(30));
                let t = std::time::Instant::now();
                drop(svc);
                t.elapsed()
            })
            .collect();
        took.sort();
        assert!(
            took[2] < std::time::Duration::from_millis(20),
            "drops took {took:?}"
        );
    }

    #[test]
    fn blank_bootstrap_servers_are_refused() {
        for p in [props(&[]), props(&[("bootstrap.servers", "  ")])] {
            let err = SingleClusterMetadataService::new("east", p).unwrap_err();
            assert_eq!(
                err,
                MetadataError::MissingBootstrapServers {
                    location: None,
                    cluster: "east".into()
                }
            );
        }
    }

    #[test]
    fn a_rejected_secret_value_is_not_repeated_in_the_error() {
        let mut p = props(&[("bootstrap.servers", "127.0.0.1:1")]);
        // A value librdkafka rejects, marked secret as if it came from `${file:…}`.
        p.set_secret("security.protocol", "hunter2-protocol");
        let err = SingleClusterMetadataService::new("east", p).unwrap_err();
        let shown = err.to_string();
        assert!(matches!(err, MetadataError::Cluster { .. }), "{shown}");
        assert!(shown.contains("security.protocol"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains(crate::base::properties::REDACTED), "{shown}");
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let p = props(&[
            ("bootstrap.servers", "127.0.0.1:1"),
            ("sasl.password", "hunter2"),
        ]);
        let svc = SingleClusterMetadataService::new("east", p).unwrap();
        let shown = format!("{svc:?}");
        assert!(
            shown.contains("east") && shown.contains("127.0.0.1:1"),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn internal_topics_are_recognised_by_their_double_underscore() {
        assert!(is_internal_topic("__consumer_offsets"));
        assert!(is_internal_topic("__transaction_state"));
        assert!(!is_internal_topic("_schemas"));
        assert!(!is_internal_topic("orders__v2"));
    }

    #[tokio::test]
    async fn a_closed_service_refuses_every_call() {
        let p = props(&[("bootstrap.servers", "127.0.0.1:1")]);
        let svc = SingleClusterMetadataService::new("east", p).unwrap();
        assert!(svc.is_cluster_active("east").await.unwrap());
        assert!(!svc.is_cluster_active("west").await.unwrap());
        svc.close().await.unwrap();
        svc.close().await.unwrap();
        assert_eq!(svc.all_streams().await.unwrap_err(), MetadataError::Closed);
        assert_eq!(
            svc.describe_streams(&["t".into()]).await.unwrap_err(),
            MetadataError::Closed
        );
        assert_eq!(
            svc.describe_streams(&[]).await.unwrap_err(),
            MetadataError::Closed
        );
        assert_eq!(
            svc.is_cluster_active("east").await.unwrap_err(),
            MetadataError::Closed
        );
        assert!(format!("{svc:?}").contains("closed: true"));
    }
}
