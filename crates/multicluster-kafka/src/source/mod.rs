//! The source: builder, running handles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::checkpoint::Checkpoint;
use crate::deserializer::{Deserializer, RawValue};
use crate::enumerator::assignment::AssignmentStrategy;
use crate::enumerator::{Command, Enumerator};
use crate::kafka::hooks::{ClientHooks, ClientHooksFactory};

pub(crate) mod config;
use crate::error::{ConfigError, SourceError};
use crate::kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use crate::kafka::properties::ClientProperties;
use crate::metadata::KafkaMetadataService;
use crate::reader::{ReadPolicy, ReaderParts, SourceReader};
use crate::record::{Record, RecordBatch};
use config::{SourceConfig, Subscription};

/// Default interval of partition discovery in unbounded mode (on by default).
pub const DEFAULT_PARTITION_DISCOVERY: Duration = Duration::from_secs(30);

/// Reads one logical stream from many Kafka clusters. Built with
/// [`MultiClusterKafkaSource::builder`], then opened as a single stream
/// ([`open`](MultiClusterKafkaSource::open)) or as parallel readers
/// ([`open_parallel`](MultiClusterKafkaSource::open_parallel)).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use multicluster_kafka::prelude::*;
///
/// let source = MultiClusterKafkaSource::builder()
///     .metadata_service(FileMetadataService::watch("streams.yaml")?)
///     .stream_ids(["orders"])
///     .group_id("my-consumer-group")
///     .deserializer(ValueOnly::<String>::utf8())
///     .starting_offsets(StartingOffsets::Earliest)
///     .build()?;
/// let mut stream = source.open().await?;
/// while let Some(record) = stream.next().await {
///     let record = record?;
///     println!("{} {}/{}@{}: {}", record.cluster, record.topic, record.partition, record.offset, record.value);
/// }
/// # Ok(()) }
/// ```
pub struct MultiClusterKafkaSource<D: Deserializer> {
    cfg: SourceConfig,
    service: Arc<dyn KafkaMetadataService>,
    deserializer: Arc<D>,
}

impl<D: Deserializer> std::fmt::Debug for MultiClusterKafkaSource<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiClusterKafkaSource")
            .field("subscription", &self.cfg.subscription)
            .field("group_id", &self.cfg.group_id)
            .field("bounded", &self.cfg.bounded())
            .field("parallelism", &self.cfg.parallelism)
            .field("properties", &self.cfg.properties)
            .finish()
    }
}

impl MultiClusterKafkaSource<RawValue> {
    /// Starts a builder (values as bytes until a deserializer is set).
    pub fn builder() -> SourceBuilder<RawValue> {
        SourceBuilder {
            service: None,
            stream_ids: Vec::new(),
            pattern: None,
            group_id: None,
            deserializer: RawValue,
            starting: StartingOffsets::Earliest,
            stopping: None,
            properties: ClientProperties::new(),
            parallelism: 1,
            partition_discovery: Interval::Default,
            strategy: AssignmentStrategy::default(),
            restore: None,
            discard_mismatched_positions: false,
            client_timeout: Duration::from_secs(30),
            startup_timeout: None,
            max_batch: 1024,
            include_headers: true,
            policy: ReadPolicy::default(),
            metadata_discovery: Interval::Default,
            metadata_failure_threshold: DEFAULT_METADATA_FAILURE_THRESHOLD,
            new_partition_start: StartingOffsets::Earliest,
            retention: DEFAULT_RETENTION,
            rebuild_interval: DEFAULT_REBUILD_INTERVAL,
            client_hooks: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
/// A discovery interval as the user set it.
enum Interval {
    Default,
    Every(Duration),
    Off,
}

impl Interval {
    /// The interval in force: none in bounded mode (where setting one is an error),
    /// `default` unless set.
    fn resolve(
        self,
        what: &str,
        bounded: bool,
        default: Duration,
    ) -> Result<Option<Duration>, SourceError> {
        let setting = if what == "partition" {
            "partition_discovery_interval"
        } else {
            "metadata_discovery_interval"
        };
        let config = |m: String| SourceError::Config(ConfigError::new(setting, m));
        match (self, bounded) {
            (Interval::Every(_), true) => Err(config(format!(
                "{what} discovery cannot be set in bounded mode: a bounded source reads the {} found at start",
                if what == "partition" {
                    "partitions"
                } else {
                    what
                }
            ))),
            (Interval::Every(d), false) if d.is_zero() => Err(config(format!(
                "the {what} discovery interval must be positive"
            ))),
            (Interval::Every(d), false) => Ok(Some(d)),
            (Interval::Default, false) => Ok(Some(default)),
            (Interval::Default, true) | (Interval::Off, _) => Ok(None),
        }
    }
}

/// How long a bounded run waits, by default, for every cluster to answer at start
/// (see [`SourceBuilder::startup_timeout`]).
pub const DEFAULT_BOUNDED_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long, by default, positions of topics and clusters that left the metadata are
/// kept (in the source and in its checkpoints), so that they resume where they were if
/// they come back in time.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3600);

/// Default shortest time between two rebuilds of one cluster's clients after property
/// changes (see [`SourceBuilder::rebuild_interval`]).
pub const DEFAULT_REBUILD_INTERVAL: Duration = Duration::from_secs(1);

/// Default interval of metadata discovery in unbounded mode. Services with change
/// notification (the file service) are also followed immediately on each change.
pub const DEFAULT_METADATA_DISCOVERY: Duration = Duration::from_secs(30);

/// Consecutive metadata-service failures tolerated, by default, while the source
/// keeps reading with the last good metadata. One more failure is reported to every
/// reader as an error (reading goes on with the last good metadata).
pub const DEFAULT_METADATA_FAILURE_THRESHOLD: u32 = 10;

/// Configures a [`MultiClusterKafkaSource`]; see [`MultiClusterKafkaSource::builder`].
pub struct SourceBuilder<D> {
    service: Option<Arc<dyn KafkaMetadataService>>,
    stream_ids: Vec<String>,
    pattern: Option<String>,
    group_id: Option<String>,
    deserializer: D,
    starting: StartingOffsets,
    stopping: Option<StoppingOffsets>,
    properties: ClientProperties,
    parallelism: usize,
    partition_discovery: Interval,
    strategy: AssignmentStrategy,
    restore: Option<Checkpoint>,
    discard_mismatched_positions: bool,
    client_timeout: Duration,
    startup_timeout: Option<Option<Duration>>,
    max_batch: usize,
    include_headers: bool,
    policy: ReadPolicy,
    metadata_discovery: Interval,
    metadata_failure_threshold: u32,
    new_partition_start: StartingOffsets,
    retention: Duration,
    rebuild_interval: Duration,
    client_hooks: Option<ClientHooksFactory>,
}

impl<D> std::fmt::Debug for SourceBuilder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceBuilder")
            .field("stream_ids", &self.stream_ids)
            .field("pattern", &self.pattern)
            .field("group_id", &self.group_id)
            .field("properties", &self.properties)
            .finish()
    }
}

impl<D: Deserializer> SourceBuilder<D> {
    /// The metadata service (required).
    pub fn metadata_service(mut self, service: impl KafkaMetadataService) -> Self {
        self.service = Some(Arc::new(service));
        self
    }

    /// A shared metadata service (required, or [`SourceBuilder::metadata_service`]).
    pub fn shared_metadata_service(mut self, service: Arc<dyn KafkaMetadataService>) -> Self {
        self.service = Some(service);
        self
    }

    /// The stream ids to read. Unknown ids fail [`MultiClusterKafkaSource::open`].
    pub fn stream_ids<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.stream_ids = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Read every stream whose id matches this regular expression (unanchored, like
    /// `Regex::is_match`), instead of a list of ids.
    pub fn stream_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.pattern = Some(pattern.into());
        self
    }

    /// The consumer group id used for committed offsets and commits (the same on every
    /// cluster).
    pub fn group_id(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = Some(group_id.into());
        self
    }

    /// Sets the deserializer.
    pub fn deserializer<D2: Deserializer>(self, deserializer: D2) -> SourceBuilder<D2> {
        SourceBuilder {
            service: self.service,
            stream_ids: self.stream_ids,
            pattern: self.pattern,
            group_id: self.group_id,
            deserializer,
            starting: self.starting,
            stopping: self.stopping,
            properties: self.properties,
            parallelism: self.parallelism,
            partition_discovery: self.partition_discovery,
            strategy: self.strategy,
            restore: self.restore,
            discard_mismatched_positions: self.discard_mismatched_positions,
            client_timeout: self.client_timeout,
            startup_timeout: self.startup_timeout,
            max_batch: self.max_batch,
            include_headers: self.include_headers,
            policy: self.policy,
            metadata_discovery: self.metadata_discovery,
            metadata_failure_threshold: self.metadata_failure_threshold,
            new_partition_start: self.new_partition_start,
            retention: self.retention,
            rebuild_interval: self.rebuild_interval,
            client_hooks: self.client_hooks,
        }
    }

    /// Where splits start (default: earliest). Clusters may override it in metadata.
    pub fn starting_offsets(mut self, offsets: StartingOffsets) -> Self {
        self.starting = offsets;
        self
    }

    /// Makes the source bounded: every split stops here, and the input ends when all
    /// have. Clusters may override it in metadata.
    pub fn stopping_offsets(mut self, offsets: StoppingOffsets) -> Self {
        self.stopping = Some(offsets);
        self
    }

    /// Client properties for every cluster (librdkafka keys). Cluster properties from
    /// the metadata take precedence.
    pub fn properties(mut self, properties: ClientProperties) -> Self {
        self.properties = self.properties.merged_with(&properties);
        self
    }

    /// One client property for every cluster.
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.set(key, value);
        self
    }

    /// Number of parallel readers for [`MultiClusterKafkaSource::open_parallel`]
    /// (default 1).
    pub fn parallelism(mut self, readers: usize) -> Self {
        self.parallelism = readers;
        self
    }

    /// How often to look for new partitions in unbounded mode (default 30 s).
    pub fn partition_discovery_interval(mut self, every: Duration) -> Self {
        self.partition_discovery = Interval::Every(every);
        self
    }

    /// Turns periodic partition discovery off.
    pub fn without_partition_discovery(mut self) -> Self {
        self.partition_discovery = Interval::Off;
        self
    }

    /// How splits are spread over readers (default: global balance).
    pub fn assignment_strategy(mut self, strategy: AssignmentStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Resume from a checkpoint.
    pub fn restore_from(mut self, checkpoint: Checkpoint) -> Self {
        self.restore = Some(checkpoint);
        self
    }

    /// When a checkpointed cluster now reports a different Kafka `cluster.id`, start
    /// that cluster fresh instead of failing. Off by default.
    pub fn discard_positions_of_replaced_clusters(mut self, discard: bool) -> Self {
        self.discard_mismatched_positions = discard;
        self
    }

    /// How long start-up waits for every cluster to answer, trying each again with
    /// backoff meanwhile; a cluster that has not answered by then fails
    /// [`open`](MultiClusterKafkaSource::open), named with its bootstrap list and last
    /// error. `None` waits for ever in a bounded run; in a follow run it starts with
    /// the clusters that answered (5 s after the first did) and takes the others up in
    /// the background when they answer. Default: [`DEFAULT_BOUNDED_STARTUP_TIMEOUT`]
    /// in a bounded run, `None` in a follow run.
    pub fn startup_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }

    /// Timeout of metadata and offset lookups (default 30 s).
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.client_timeout = timeout;
        self
    }

    /// Most records a reader takes from one cluster's consumer at a time (default
    /// 1024). A reader buffers at most one such batch being handed out plus two ready
    /// or being built per cluster it reads (its fetcher threads build them ahead);
    /// librdkafka's `queued.max.messages.kbytes` and `queued.min.messages` bound what
    /// it prefetches.
    pub fn max_batch_size(mut self, records: usize) -> Self {
        self.max_batch = records;
        self
    }

    /// Whether records carry their headers (default true). Parsing headers costs
    /// librdkafka an allocation per record even when a record has none; turn it off
    /// when the application does not read them.
    pub fn include_headers(mut self, include: bool) -> Self {
        self.include_headers = include;
        self
    }

    /// What a split does when its position is outside the log (records deleted by
    /// retention or `kafka-delete-records`, a topic re-created): fail (the default,
    /// [`OffsetReset::None`]: the reader returns [`SourceError::OffsetOutOfRange`]
    /// naming the split, its position and the log's range, and reads that split no
    /// further), or jump to the earliest or latest offset of the log, with a warning
    /// and `mck_offset_resets_total`.
    pub fn on_offset_out_of_range(mut self, policy: OffsetReset) -> Self {
        self.policy.out_of_range = policy;
        self
    }

    /// In a bounded run, a topic deleted while it is read cannot reach its stop. By
    /// default its splits end with [`SourceError::TopicGone`]; allowed, they end with a
    /// warning and the run goes on to its end (default false).
    pub fn allow_missing_topics(mut self, allow: bool) -> Self {
        self.policy.allow_missing_topics = allow;
        self
    }

    /// How often to re-read the metadata service in unbounded mode (default 30 s).
    /// Changes are applied while reading: clusters and topics added and removed,
    /// properties changed. Services that notify changes (the file service) are
    /// followed at once as well.
    pub fn metadata_discovery_interval(mut self, every: Duration) -> Self {
        self.metadata_discovery = Interval::Every(every);
        self
    }

    /// Reads the metadata once at start and never again.
    pub fn without_metadata_discovery(mut self) -> Self {
        self.metadata_discovery = Interval::Off;
        self
    }

    /// Consecutive metadata-service failures tolerated on the last good metadata
    /// (default [`DEFAULT_METADATA_FAILURE_THRESHOLD`]).
    pub fn metadata_failure_threshold(mut self, failures: u32) -> Self {
        self.metadata_failure_threshold = failures;
        self
    }

    /// The shortest time between two rebuilds of one cluster's clients (default
    /// [`DEFAULT_REBUILD_INTERVAL`]). A property change (credentials, bootstrap list)
    /// is applied at once when the cluster was not rebuilt within this time; changes
    /// that follow sooner are merged and applied together when it has passed, so a
    /// burst of edits costs one rebuild, not one per edit. Other clusters, and
    /// topic or offset changes of this one, are never held back. Zero applies every
    /// change at once.
    pub fn rebuild_interval(mut self, interval: Duration) -> Self {
        self.rebuild_interval = interval;
        self
    }

    /// Where partitions found after a cluster's first discovery start: new partitions,
    /// and every partition of a topic added to a cluster already being read (default
    /// earliest, so nothing produced to them is missed).
    pub fn new_partition_starting_offsets(mut self, offsets: StartingOffsets) -> Self {
        self.new_partition_start = offsets;
        self
    }

    /// How long positions of removed topics and clusters are kept (default
    /// [`DEFAULT_RETENTION`], one hour). A topic or cluster that comes back within the
    /// window resumes at its positions; after it, it starts as new. Zero turns it off.
    pub fn removed_position_retention(mut self, window: Duration) -> Self {
        self.retention = window;
        self
    }

    /// Hooks into the librdkafka clients of each cluster: `hooks` is called with the
    /// logical cluster id whenever the source makes a client for that cluster (its
    /// lookup client at start and after a property change, and each reader's
    /// consumer), and the [`ClientHooks`] it returns, if any, get that client's
    /// OAUTHBEARER token requests, statistics and errors. Return the same `Arc` for a
    /// cluster to see all its clients in one place.
    ///
    /// This is how a program supplies OAUTHBEARER tokens librdkafka cannot make
    /// itself (AWS MSK IAM, a company token service): see
    /// [`client_context`](crate::kafka::hooks) and the `oauth_token` example.
    /// Statistics come every `statistics.interval.ms` when that property is set.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), multicluster_kafka::error::SourceError> {
    /// use std::sync::Arc;
    /// use multicluster_kafka::prelude::*;
    /// use multicluster_kafka::client_context::Statistics;
    ///
    /// struct LogStats;
    /// impl ClientHooks for LogStats {
    ///     fn stats(&self, s: Statistics) {
    ///         println!("{}: {} bytes received", s.name, s.rx_bytes);
    ///     }
    /// }
    /// let hooks: Arc<dyn ClientHooks> = Arc::new(LogStats);
    /// let source = MultiClusterKafkaSource::builder()
    ///     .metadata_service(StaticMetadataService::new([]).expect("no streams"))
    ///     .stream_ids(["orders"])
    ///     .property("statistics.interval.ms", "60000")
    ///     .client_hooks(move |cluster: &str| (cluster == "east").then(|| hooks.clone()))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn client_hooks(
        mut self,
        hooks: impl Fn(&str) -> Option<Arc<dyn ClientHooks>> + Send + Sync + 'static,
    ) -> Self {
        self.client_hooks = Some(ClientHooksFactory::new(hooks));
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<MultiClusterKafkaSource<D>, SourceError> {
        let config =
            |setting: &'static str, m: &str| SourceError::Config(ConfigError::new(setting, m));
        let service = self
            .service
            .ok_or_else(|| config("metadata_service", "a metadata service is required"))?;
        let subscription = match (self.stream_ids.is_empty(), self.pattern) {
            (false, Some(_)) => {
                return Err(config(
                    "stream_ids",
                    "set stream ids or a stream pattern, not both",
                ));
            }
            (true, None) => {
                return Err(config("stream_ids", "set stream ids or a stream pattern"));
            }
            (false, None) => {
                if let Some(bad) = self.stream_ids.iter().find(|s| s.trim().is_empty()) {
                    return Err(config("stream_ids", &format!("stream id `{bad}` is empty")));
                }
                Subscription::Ids(self.stream_ids)
            }
            (true, Some(p)) => Subscription::Pattern(regex::Regex::new(&p).map_err(|e| {
                config(
                    "stream_pattern",
                    &format!("invalid stream pattern `{p}`: {}", one_line(&e.to_string())),
                )
            })?),
        };
        if self.parallelism == 0 {
            return Err(config("parallelism", "parallelism must be at least 1"));
        }
        if self.max_batch == 0 {
            return Err(config(
                "max_batch_size",
                "the batch size must be at least 1",
            ));
        }
        let group_id = self
            .group_id
            .or_else(|| self.properties.get("group.id").map(str::to_string));
        if group_id.is_none() && self.starting.needs_committed() {
            return Err(config(
                "group_id",
                "starting from committed offsets needs a group id",
            ));
        }
        if group_id.is_none()
            && self
                .stopping
                .as_ref()
                .is_some_and(StoppingOffsets::needs_committed)
        {
            return Err(config(
                "group_id",
                "stopping at committed offsets needs a group id",
            ));
        }
        let bounded = self.stopping.is_some();
        let partition_discovery =
            self.partition_discovery
                .resolve("partition", bounded, DEFAULT_PARTITION_DISCOVERY)?;
        let metadata_discovery =
            self.metadata_discovery
                .resolve("metadata", bounded, DEFAULT_METADATA_DISCOVERY)?;
        if self.new_partition_start.needs_committed() && group_id.is_none() {
            return Err(config(
                "group_id",
                "new partitions starting from committed offsets needs a group id",
            ));
        }
        Ok(MultiClusterKafkaSource {
            cfg: SourceConfig {
                subscription,
                group_id,
                starting: self.starting,
                stopping: self.stopping,
                properties: self.properties,
                parallelism: self.parallelism,
                partition_discovery,
                strategy: self.strategy,
                restore: self.restore,
                discard_mismatched_positions: self.discard_mismatched_positions,
                client_timeout: self.client_timeout,
                startup_timeout: self
                    .startup_timeout
                    .unwrap_or(bounded.then_some(DEFAULT_BOUNDED_STARTUP_TIMEOUT)),
                max_batch: self.max_batch,
                poll_timeout: Duration::from_millis(100),
                include_headers: self.include_headers,
                policy: self.policy,
                metadata_discovery,
                metadata_failure_threshold: self.metadata_failure_threshold,
                new_partition_start: self.new_partition_start,
                retention: self.retention,
                rebuild_interval: self.rebuild_interval,
                client_hooks: self.client_hooks,
            },
            service,
            deserializer: Arc::new(self.deserializer),
        })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl<D: Deserializer> MultiClusterKafkaSource<D> {
    /// True when the source ends (stopping offsets set).
    pub fn is_bounded(&self) -> bool {
        self.cfg.bounded()
    }

    /// Starts the source with its configured number of readers.
    ///
    /// Reads metadata, connects to every cluster and discovers partitions before it
    /// returns: an unknown stream id or an unreachable cluster is an error here.
    pub async fn open_parallel(
        self,
    ) -> Result<(SourceCoordinator, Vec<SourceReader<D>>), SourceError> {
        let cfg = Arc::new(self.cfg);
        let retained = crate::enumerator::retention::Retained::default();
        let active = crate::enumerator::active::ActiveClusters::default();
        let (notice_tx, notice_rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let mut senders = BTreeMap::new();
        let mut readers = Vec::new();
        for id in 0..cfg.parallelism {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(id, tx);
            readers.push(SourceReader::new(ReaderParts {
                id,
                deserializer: self.deserializer.clone(),
                events: rx,
                notices: notice_tx.clone(),
                max_batch: cfg.max_batch,
                poll_timeout: cfg.poll_timeout,
                include_headers: cfg.include_headers,
                policy: cfg.policy,
                client_hooks: cfg.client_hooks.clone(),
                retained: retained.clone(),
                active: active.clone(),
            }));
        }
        drop(notice_tx);
        let enumerator = Enumerator::start(
            cfg,
            self.service,
            senders,
            notice_rx,
            cmd_rx,
            retained,
            active,
        )
        .await?;
        let task = tokio::spawn(enumerator.run());
        Ok((
            SourceCoordinator {
                commands: cmd_tx,
                task: Some(task),
            },
            readers,
        ))
    }

    /// Starts the source as one stream (one reader; `parallelism` must be 1).
    pub async fn open(self) -> Result<KafkaSourceStream<D>, SourceError> {
        if self.cfg.parallelism != 1 {
            return Err(SourceError::Config(ConfigError::new(
                "parallelism",
                "open() reads with one reader; use open_parallel() for parallelism > 1",
            )));
        }
        let (coordinator, mut readers) = self.open_parallel().await?;
        let reader = readers.pop().ok_or(SourceError::Closed)?;
        Ok(KafkaSourceStream {
            coordinator,
            reader,
        })
    }
}

/// Controls a running source: commits, shutdown.
#[derive(Debug)]
pub struct SourceCoordinator {
    commands: mpsc::Sender<Command>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SourceCoordinator {
    /// Commits a checkpoint's offsets to each cluster under the group id. Call it once
    /// the checkpoint is durable: Kafka then shows the group's progress, and
    /// `StartingOffsets::Committed` resumes there.
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        self.committer().commit(checkpoint).await
    }

    /// A handle that commits for this source from anywhere (another task, say), so
    /// a program need not wait for a commit where it reads. See [`Committer`].
    pub fn committer(&self) -> Committer {
        Committer {
            commands: self.commands.clone(),
        }
    }

    /// Stops the enumerator and waits for it (readers stop when dropped or closed).
    pub async fn close(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Commits checkpoints' offsets for a running source, apart from the stream that
/// reads it: a program can hand commits to a task of their own and go on reading
/// while a cluster's coordinator is slow. Commits run in the order they are asked, so
/// a group's offsets never go back. Cheap to clone; once the source is closed, a
/// commit fails with [`SourceError::Closed`].
///
/// ```no_run
/// # async fn run(mut stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>)
/// # -> Result<(), multicluster_kafka::error::SourceError> {
/// let committer = stream.committer();
/// let checkpoint = stream.checkpoint()?;
/// // … once the checkpoint is durable:
/// tokio::spawn(async move { committer.commit(&checkpoint).await });
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Committer {
    commands: mpsc::Sender<Command>,
}

impl Committer {
    /// Commits a durable checkpoint's offsets to each cluster, as
    /// [`SourceCoordinator::commit`].
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Commit(checkpoint.clone(), tx))
            .await
            .map_err(|_| SourceError::Closed)?;
        rx.await.map_err(|_| SourceError::Closed)?
    }
}

impl Drop for SourceCoordinator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A running source read as one stream of records.
#[derive(Debug)]
pub struct KafkaSourceStream<D: Deserializer> {
    coordinator: SourceCoordinator,
    reader: SourceReader<D>,
}

impl<D: Deserializer> KafkaSourceStream<D> {
    /// The next record, or `None` at the end of a bounded input.
    pub async fn next(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        self.reader.next().await
    }

    /// The next batch of records (all from one cluster), or `None` at the end of a
    /// bounded input. Cheaper per record than [`next`](Self::next); a checkpoint taken
    /// after it returns resumes right after the batch's last records. See
    /// [`SourceReader::next_batch`].
    ///
    /// ```no_run
    /// # async fn run(mut stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>)
    /// # -> Result<(), multicluster_kafka::error::SourceError> {
    /// while let Some(batch) = stream.next_batch().await {
    ///     for record in batch?.iter() {
    ///         println!("{} {}/{}@{}: {}", record.cluster, record.topic, record.partition, record.offset, record.value);
    ///     }
    ///     let _checkpoint = stream.checkpoint()?; // resumes after the batch
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        self.reader.next_batch().await
    }

    /// A checkpoint consistent with the records handed out so far.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        self.reader.checkpoint()
    }

    /// The records as a [`futures_core::Stream`], for programs that compose streams
    /// (`StreamExt`, `select`, sinks). The stream owns the source and closes it when
    /// dropped; it ends at the end of a bounded input. Use [`next`](Self::next)
    /// instead when the program takes checkpoints.
    ///
    /// ```no_run
    /// # async fn run(stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>) {
    /// use futures_util::StreamExt;
    ///
    /// let mut records = std::pin::pin!(stream.into_stream());
    /// while let Some(record) = records.next().await {
    ///     println!("{}", record.unwrap().value);
    /// }
    /// # }
    /// ```
    pub fn into_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<Record<D::Value>, SourceError>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let item = s.next().await?;
            Some((item, s))
        })
    }

    /// The records a batch at a time as a [`futures_core::Stream`] (see
    /// [`next_batch`](Self::next_batch) and [`into_stream`](Self::into_stream)).
    pub fn into_batch_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<RecordBatch<D::Value>, SourceError>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let item = s.next_batch().await?;
            Some((item, s))
        })
    }

    /// Commits a durable checkpoint's offsets to each cluster.
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        self.coordinator.commit(checkpoint).await
    }

    /// A handle that commits for this source while the stream goes on reading (see
    /// [`Committer`]).
    pub fn committer(&self) -> Committer {
        self.coordinator.committer()
    }

    /// Stops reading and waits until the reader's consumers are closed (consumers of
    /// clusters it stopped reading earlier close on their own threads).
    pub async fn close(self) {
        self.reader.close().await;
        self.coordinator.close().await;
    }
}
