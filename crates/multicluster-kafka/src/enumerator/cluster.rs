//! What the enumerator keeps per cluster: the clients, topics and offsets it reads
//! there and how it connects.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::base::config::SourceConfig;
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::plan::ClusterView;
use crate::base::properties::ClientProperties;
use crate::kafka::client::ClusterClient;

/// One cluster being read.
pub(super) struct ClusterState {
    pub(super) reader_props: ClientProperties,
    pub(super) topics: BTreeSet<String>,
    pub(super) client: Arc<ClusterClient>,
    pub(super) kafka_cluster_id: Option<String>,
    pub(super) initial_discovery_done: bool,
    pub(super) start: StartingOffsets,
    pub(super) stop: Option<StoppingOffsets>,
    pub(super) known: BTreeSet<(String, i32)>,
}

impl ClusterState {
    /// A cluster just connected, before its first discovery.
    pub(super) fn new(
        wanted: WantedCluster,
        client: ClusterClient,
        kafka_cluster_id: String,
    ) -> Self {
        ClusterState {
            reader_props: wanted.props,
            topics: wanted.topics,
            client: Arc::new(client),
            kafka_cluster_id: Some(kafka_cluster_id),
            initial_discovery_done: false,
            start: wanted.start,
            stop: wanted.stop,
            known: BTreeSet::new(),
        }
    }
}

/// What the source reads on one cluster, merged over the subscribed streams: the
/// source's properties under the cluster's, and the source's offsets where the
/// cluster sets none.
#[derive(Clone, Debug)]
pub(super) struct WantedCluster {
    pub(super) props: ClientProperties,
    pub(super) topics: BTreeSet<String>,
    pub(super) start: StartingOffsets,
    pub(super) stop: Option<StoppingOffsets>,
}

impl WantedCluster {
    pub(super) fn new(cfg: &SourceConfig, view: &ClusterView) -> Self {
        let (start, stop) = cfg.offsets_for(view);
        WantedCluster {
            props: cfg.client_properties(&view.properties),
            topics: view.topics.clone(),
            start,
            stop,
        }
    }
}
