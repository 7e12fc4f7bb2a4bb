//! Everything the builder decided, with the defaults in one place.

use std::time::Duration;

use std::sync::Arc;

use crate::base::assignment::AssignmentStrategy;
use crate::base::checkpoint::Checkpoint;
use crate::base::hooks::ClientHooksFactory;
use crate::base::metadata::KafkaMetadataService;
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::plan::ClusterView;
use crate::base::properties::ClientProperties;
use crate::base::setting::ConfigError;
use crate::base::shard::{ScaleOut, Shard};

/// Which streams a source reads.
#[derive(Clone, Debug)]
pub(crate) enum Subscription {
    Ids(Vec<String>),
    Pattern(regex::Regex),
}

/// Everything the builder decided.
#[derive(Clone, Debug)]
pub(crate) struct SourceConfig {
    pub subscription: Subscription,
    pub group_id: Option<String>,
    pub starting: StartingOffsets,
    pub stopping: Option<StoppingOffsets>,
    pub properties: ClientProperties,
    pub parallelism: usize,
    pub partition_discovery: Option<Duration>,
    pub strategy: AssignmentStrategy,
    pub restore: Option<Checkpoint>,
    pub discard_mismatched_positions: bool,
    pub client_timeout: Duration,
    /// How long start-up waits for every cluster to answer (`None`: a follow run
    /// starts with those that answered and takes the others up later).
    pub startup_timeout: Option<Duration>,
    pub max_batch: usize,
    pub poll_timeout: Duration,
    pub include_headers: bool,
    /// What a split does when its position is outside the log, or its topic is
    /// deleted during a bounded run.
    pub policy: ReadPolicy,
    /// How often to re-read the metadata service (unbounded mode).
    pub metadata_discovery: Option<Duration>,
    /// Consecutive metadata failures tolerated on the last good metadata.
    pub metadata_failure_threshold: u32,
    /// Where partitions found after a cluster's first discovery start (new
    /// partitions, and every partition of a topic added to a known cluster).
    pub new_partition_start: StartingOffsets,
    /// How long positions of removed topics and clusters are kept (zero: not kept).
    pub retention: Duration,
    /// Shortest time between two client rebuilds of one cluster.
    pub rebuild_interval: Duration,
    /// The program's hooks for each cluster's librdkafka clients.
    pub client_hooks: Option<crate::base::hooks::ClientHooksFactory>,
    /// The shard this source reads, when the stream is sharded.
    pub shard: Option<Shard>,
    /// Group mode: the clusters' group coordinators assign the partitions.
    pub group_mode: bool,
    /// How long start-up waits for the shard's membership (see
    /// [`SourceBuilder::shard_lock_wait`](crate::SourceBuilder::shard_lock_wait)).
    pub shard_lock_wait: Duration,
    /// Event time: how the readers derive their watermarks (none: no watermarks).
    pub watermarks: Option<crate::base::watermark::WatermarkStrategy>,
    /// The order records are handed out in.
    pub order: crate::base::watermark::ReadOrder,
}

impl SourceConfig {
    /// The client properties of a cluster: the source's under the cluster's own, with
    /// the source's group id.
    pub fn client_properties(&self, cluster: &ClientProperties) -> ClientProperties {
        let mut props = self.properties.merged_with(cluster);
        if let Some(g) = &self.group_id {
            props.set("group.id", g.clone());
        }
        props
    }

    /// Where a cluster starts and stops: its own offsets where the metadata sets them,
    /// else the source's. Stopping offsets apply in bounded mode, or when set per
    /// cluster.
    pub fn offsets_for(&self, view: &ClusterView) -> (StartingOffsets, Option<StoppingOffsets>) {
        let start = view
            .starting_offsets
            .clone()
            .unwrap_or_else(|| self.starting.clone());
        let stop = view
            .stopping_offsets
            .clone()
            .or_else(|| self.stopping.clone());
        (start, stop)
    }

    pub fn bounded(&self) -> bool {
        self.stopping.is_some()
    }
}

/// How long start-up waits, by default, for a shard's membership held by an instance
/// that is gone without leaving (killed): longer than the brokers' default consumer
/// session timeout (45 s), after which the broker frees it.
pub const DEFAULT_SHARD_LOCK_WAIT: Duration = Duration::from_secs(60);

/// How long a bounded run waits, by default, for every cluster to answer at start
/// (see [`SourceBuilder::startup_timeout`](crate::SourceBuilder::startup_timeout)).
pub const DEFAULT_BOUNDED_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long, by default, positions of topics and clusters that left the metadata are
/// kept (in the source and in its checkpoints), so that they resume where they were if
/// they come back in time.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3600);

/// Default shortest time between two rebuilds of one cluster's clients after property
/// changes (see [`SourceBuilder::rebuild_interval`](crate::SourceBuilder::rebuild_interval)).
pub const DEFAULT_REBUILD_INTERVAL: Duration = Duration::from_secs(1);

/// Default interval of metadata discovery in unbounded mode. Services with change
/// notification (the file service) are also followed immediately on each change.
pub const DEFAULT_METADATA_DISCOVERY: Duration = Duration::from_secs(30);

/// Consecutive metadata-service failures tolerated, by default, while the source
/// keeps reading with the last good metadata. One more failure is reported to every
/// reader as an error (reading goes on with the last good metadata).
pub const DEFAULT_METADATA_FAILURE_THRESHOLD: u32 = 10;

/// Default interval of partition discovery in unbounded mode (on by default).
pub const DEFAULT_PARTITION_DISCOVERY: Duration = Duration::from_secs(30);

/// A discovery interval as the user set it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Interval {
    Default,
    Every(Duration),
    Off,
}

impl Interval {
    /// The interval in force: none in bounded mode (where setting one is an error),
    /// `default` unless set.
    pub(crate) fn resolve(
        self,
        what: &str,
        bounded: bool,
        default: Duration,
    ) -> Result<Option<Duration>, ConfigError> {
        let setting = if what == "partition" {
            "partition_discovery_interval"
        } else {
            "metadata_discovery_interval"
        };
        let config = |m: String| ConfigError::new(setting, m);
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

/// Everything the builder is told but the deserializer, with the defaults. It moves as
/// a whole when the deserializer (and so the builder's type) changes.
pub(crate) struct Settings {
    pub(crate) service: Option<Arc<dyn KafkaMetadataService>>,
    pub(crate) stream_ids: Vec<String>,
    pub(crate) pattern: Option<String>,
    pub(crate) group_id: Option<String>,
    pub(crate) starting: StartingOffsets,
    pub(crate) stopping: Option<StoppingOffsets>,
    pub(crate) properties: ClientProperties,
    pub(crate) parallelism: usize,
    pub(crate) partition_discovery: Interval,
    pub(crate) strategy: AssignmentStrategy,
    pub(crate) restore: Option<Checkpoint>,
    pub(crate) discard_mismatched_positions: bool,
    pub(crate) client_timeout: Duration,
    pub(crate) startup_timeout: Option<Option<Duration>>,
    pub(crate) max_batch: usize,
    pub(crate) include_headers: bool,
    pub(crate) policy: ReadPolicy,
    pub(crate) metadata_discovery: Interval,
    pub(crate) metadata_failure_threshold: u32,
    pub(crate) new_partition_start: StartingOffsets,
    pub(crate) retention: Duration,
    pub(crate) rebuild_interval: Duration,
    pub(crate) client_hooks: Option<ClientHooksFactory>,
    pub(crate) scale_out: ScaleOut,
    pub(crate) shard_lock_wait: Duration,
    pub(crate) watermarks: Option<crate::base::watermark::WatermarkStrategy>,
    pub(crate) order: crate::base::watermark::ReadOrder,
    /// An `EventTimestamps<V>` of the deserializer's values, checked at build.
    pub(crate) event_timestamps: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            service: None,
            stream_ids: Vec::new(),
            pattern: None,
            group_id: None,
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
            scale_out: ScaleOut::Whole,
            shard_lock_wait: DEFAULT_SHARD_LOCK_WAIT,
            watermarks: None,
            order: crate::base::watermark::ReadOrder::Fetch,
            event_timestamps: None,
        }
    }
}

/// What a split does when it cannot reach its stop by reading: its position is
/// outside the log, or (bounded) its topic was deleted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadPolicy {
    /// Outside the log: fail ([`OffsetReset::None`](crate::base::offsets::OffsetReset))
    /// or jump to the log's start or end.
    pub out_of_range: crate::base::offsets::OffsetReset,
    /// A topic deleted during a bounded run ends its splits with a warning instead of
    /// an error.
    pub allow_missing_topics: bool,
}

impl Default for ReadPolicy {
    fn default() -> Self {
        ReadPolicy {
            out_of_range: crate::base::offsets::OffsetReset::None,
            allow_missing_topics: false,
        }
    }
}
