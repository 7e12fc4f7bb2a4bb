//! Everything the builder decided, with the defaults in one place.

use std::time::Duration;

use crate::checkpoint::Checkpoint;
use crate::enumerator::assignment::AssignmentStrategy;
use crate::enumerator::plan::ClusterView;
use crate::kafka::offsets::{StartingOffsets, StoppingOffsets};
use crate::kafka::properties::ClientProperties;

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
    pub policy: crate::reader::ReadPolicy,
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
    pub client_hooks: Option<crate::kafka::hooks::ClientHooksFactory>,
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
