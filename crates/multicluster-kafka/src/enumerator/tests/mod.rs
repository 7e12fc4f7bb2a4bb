//! The enumerator's decisions, without a broker: an enumerator built with no cluster
//! (`Enumerator::new`), clusters put in as if they had answered, a static metadata
//! service, and readers that are plain channels the tests read. Timing runs on
//! tokio's paused clock.
//!
//! Clusters share one lookup client made for an address where nothing listens: it is
//! never asked anything here, and, being static, never destroyed either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, advance};

use super::cluster::{ClusterState, WantedCluster};
use super::connect::{Connected, Pending};
use super::discovery::Absent;
use super::*;
use crate::base::active::ActiveClusters;
use crate::base::assignment::AssignmentStrategy;
use crate::base::checkpoint::{ClusterCheckpoint, SplitCheckpoint};
use crate::base::config::Subscription;
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::plan::{ClusterView, clusters_of_streams, plan};
use crate::base::properties::ClientProperties;
use crate::base::retention::{Retained, now_ms};
use crate::base::split::{KafkaSplit, SplitId};
use crate::kafka::client::ClusterClient;
use crate::kafka::config::ClientSetup;
use crate::metadata::{ClusterMetadata, MetadataError, StaticMetadataService};

const STREAM: &str = "s";

fn config() -> SourceConfig {
    SourceConfig {
        subscription: Subscription::Ids(vec![STREAM.to_string()]),
        group_id: None,
        starting: StartingOffsets::Earliest,
        stopping: None,
        properties: ClientProperties::new(),
        parallelism: 2,
        partition_discovery: None,
        strategy: AssignmentStrategy::Global,
        restore: None,
        discard_mismatched_positions: false,
        client_timeout: Duration::from_millis(200),
        startup_timeout: None,
        max_batch: 16,
        poll_timeout: Duration::from_millis(100),
        include_headers: false,
        policy: Default::default(),
        metadata_discovery: None,
        metadata_failure_threshold: 10,
        new_partition_start: StartingOffsets::Earliest,
        retention: Duration::from_secs(3600),
        rebuild_interval: Duration::from_secs(1),
        client_hooks: None,
        shard: None,
        group_mode: false,
        shard_lock_wait: crate::DEFAULT_SHARD_LOCK_WAIT,
        watermarks: None,
        order: crate::ReadOrder::Fetch,
    }
}

/// The bootstrap list of a test cluster: a port where nothing listens.
fn bootstrap(cluster: &str) -> &'static str {
    if cluster == "east" {
        "127.0.0.1:1"
    } else {
        "127.0.0.1:2"
    }
}

fn meta(cluster: &str, topics: &[&str]) -> ClusterMetadata {
    ClusterMetadata::builder(bootstrap(cluster))
        .topics(topics.iter().copied())
        .build()
        .unwrap()
}

fn stream(clusters: Vec<(&str, ClusterMetadata)>) -> KafkaStream {
    clusters
        .into_iter()
        .fold(KafkaStream::new(STREAM), |s, (c, m)| s.with_cluster(c, m))
}

/// A lookup client that is never asked anything (nothing listens at its address).
fn idle_client(cluster: &str) -> ClusterClient {
    let mut props = ClientProperties::new();
    props.set("bootstrap.servers", "127.0.0.1:1");
    ClusterClient::new(
        None,
        Arc::from(cluster),
        &props,
        None,
        Duration::from_millis(100),
        ClientSetup::new(None, cluster),
        None,
    )
    .expect("librdkafka makes a client without a broker")
}

fn shared_client() -> Arc<ClusterClient> {
    static CLIENT: OnceLock<Arc<ClusterClient>> = OnceLock::new();
    CLIENT.get_or_init(|| Arc::new(idle_client("any"))).clone()
}

fn split(cluster: &str, topic: &str, partition: i32, next_offset: i64) -> KafkaSplit {
    KafkaSplit {
        id: SplitId::new(cluster, topic, partition),
        next_offset,
        stop_offset: None,
        last: None,
    }
}

fn err(cluster: &str, message: &str) -> SourceError {
    SourceError::Cluster {
        cluster: cluster.to_string(),
        message: message.to_string(),
    }
}

fn key(cluster: &str) -> Arc<str> {
    Arc::from(cluster)
}

/// A static metadata service that can be made to fail.
struct TestService {
    streams: StaticMetadataService,
    failing: AtomicBool,
}

impl TestService {
    fn replace(&self, streams: impl IntoIterator<Item = KafkaStream>) -> Result<(), MetadataError> {
        self.streams.replace(streams)
    }

    /// Makes every read fail from now on (`true`) or answer again (`false`).
    fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), MetadataError> {
        if self.failing.load(Ordering::SeqCst) {
            Err(MetadataError::Closed)
        } else {
            Ok(())
        }
    }
}

#[async_trait::async_trait]
impl KafkaMetadataService for TestService {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check()?;
        self.streams.describe_streams(stream_ids).await
    }

    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check()?;
        self.streams.all_streams().await
    }

    async fn close(&self) -> Result<(), MetadataError> {
        self.streams.close().await
    }
}

/// An enumerator with no cluster read yet, the service it reads, and its readers'
/// ends of their event channels.
struct Harness {
    e: Enumerator,
    service: Arc<TestService>,
    readers: Vec<mpsc::UnboundedReceiver<ReaderEvent>>,
    retained: Retained,
    notices: Option<mpsc::UnboundedSender<ReaderNotice>>,
    _commands: mpsc::Sender<Command>,
}

impl Harness {
    fn new(cfg: SourceConfig, metadata: KafkaStream) -> Self {
        let service = Arc::new(TestService {
            streams: StaticMetadataService::new([metadata.clone()]).unwrap(),
            failing: AtomicBool::new(false),
        });
        let mut senders = BTreeMap::new();
        let mut readers = Vec::new();
        for r in 0..cfg.parallelism {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(r, tx);
            readers.push(rx);
        }
        let (notices_tx, notices) = mpsc::unbounded_channel();
        let (commands_tx, commands) = mpsc::channel(1);
        let retained = Retained::default();
        let mut e = Enumerator::new(
            Arc::new(cfg),
            service.clone(),
            senders,
            notices,
            commands,
            retained.clone(),
            ActiveClusters::default(),
        );
        e.applied
            .set_latest(BTreeMap::from([(STREAM.to_string(), metadata)]));
        Harness {
            e,
            service,
            readers,
            retained,
            notices: Some(notices_tx),
            _commands: commands_tx,
        }
    }

    /// Reads `cluster` as if it had answered with Kafka cluster.id `kafka_id`, with
    /// its view in the service's metadata.
    fn read(&mut self, cluster: &str, kafka_id: &str) {
        let view = clusters_of_streams(self.e.applied.latest().values())[cluster].clone();
        let wanted = WantedCluster::new(&self.e.cfg, &view);
        self.e.clusters.insert(
            key(cluster),
            ClusterState::new(wanted, shared_client(), kafka_id.to_string()),
        );
        self.e.applied.read(cluster, view);
        let views = self.e.applied.views();
        let streams = self
            .e
            .applied
            .latest()
            .iter()
            .map(|(id, s)| {
                let mut s = s.clone();
                s.clusters.retain(|c, _| views.contains_key(c));
                (id.clone(), s)
            })
            .collect();
        self.e.applied.set_streams(streams);
    }

    /// The events reader `r` got since last asked.
    fn events(&mut self, r: usize) -> Vec<ReaderEvent> {
        let mut out = Vec::new();
        while let Ok(ev) = self.readers[r].try_recv() {
            out.push(ev);
        }
        out
    }

    /// The splits assigned to reader `r` since last asked (other events dropped).
    fn assigned(&mut self, r: usize) -> Vec<KafkaSplit> {
        self.events(r)
            .into_iter()
            .flat_map(|ev| match ev {
                ReaderEvent::Assign { splits, .. } => splits,
                _ => Vec::new(),
            })
            .collect()
    }

    fn pending(&self, cluster: &str) -> &Pending {
        self.e.connecting.pending(cluster)
    }
}

/// Collects the enumerator's warnings said on the thread that called `capture`.
///
/// tracing caches, process-wide, whether a call site is wanted, and the first thread
/// to reach it decides. A test thread without a subscriber would make a warning
/// nobody's for the whole binary, and a capture beside it would miss it now and then.
/// So one subscriber is installed for the whole process, wanting every call site
/// "sometimes", and it hands each warning to the capture of the thread it was said on.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

thread_local! {
    static CAPTURING: std::cell::RefCell<Option<Warnings>> = const { std::cell::RefCell::new(None) };
}

/// Ends a capture when dropped.
struct Capture;

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.borrow_mut().take());
    }
}

impl Warnings {
    fn capture(&self) -> Capture {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            tracing::subscriber::set_global_default(Forward)
                .expect("no other subscriber in the library's unit tests");
        });
        CAPTURING.with(|c| *c.borrow_mut() = Some(self.clone()));
        Capture
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn said(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The process-wide subscriber behind [`Warnings::capture`].
struct Forward;

impl tracing::Subscriber for Forward {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        *m.level() == tracing::Level::WARN
            && m.target()
                .starts_with(module_path!().trim_end_matches("::tests"))
            && CAPTURING.with(|c| c.borrow().is_some())
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        CAPTURING.with(|c| {
            if let Some(w) = &*c.borrow() {
                w.0.lock().unwrap().push(m.0);
            }
        });
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// A retention deadline an hour from now.
fn far() -> i64 {
    now_ms() + 3_600_000
}

mod connecting;
mod discovery_bookkeeping;
mod group_revocations;
mod hold_back;
mod identity;
mod metadata_reads;
mod removals;
mod shards;
