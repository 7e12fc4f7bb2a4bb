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
    /// The client properties its readers read with.
    reader_props: ClientProperties,
    /// The topics read there.
    topics: BTreeSet<String>,
    /// The enumerator's lookup client (the first reader of the cluster fetches with it).
    client: Arc<ClusterClient>,
    /// The Kafka cluster.id it answered with.
    kafka_cluster_id: Option<String>,
    /// Its partitions were discovered once (later ones start at the new-partition
    /// start).
    initial_discovery_done: bool,
    /// Where its splits start.
    start: StartingOffsets,
    /// Where its splits stop, in a bounded run.
    stop: Option<StoppingOffsets>,
    /// The partitions known already: discovery does not hand them out again.
    known: BTreeSet<(String, i32)>,
}

impl ClusterState {
    /// A cluster just connected, before its first discovery.
    pub(super) fn new(
        wanted: WantedCluster,
        client: Arc<ClusterClient>,
        kafka_cluster_id: String,
    ) -> Self {
        ClusterState {
            reader_props: wanted.props,
            topics: wanted.topics,
            client,
            kafka_cluster_id: Some(kafka_cluster_id),
            initial_discovery_done: false,
            start: wanted.start,
            stop: wanted.stop,
            known: BTreeSet::new(),
        }
    }

    /// The client properties its readers read with.
    pub(super) fn reader_props(&self) -> &ClientProperties {
        &self.reader_props
    }

    /// The topics read there.
    pub(super) fn topics(&self) -> &BTreeSet<String> {
        &self.topics
    }

    /// The enumerator's lookup client.
    pub(super) fn client(&self) -> &Arc<ClusterClient> {
        &self.client
    }

    /// The Kafka cluster.id it answered with.
    pub(super) fn kafka_cluster_id(&self) -> &Option<String> {
        &self.kafka_cluster_id
    }

    /// Whether its partitions were discovered once.
    pub(super) fn initial_discovery_done(&self) -> bool {
        self.initial_discovery_done
    }

    /// Where its splits start.
    pub(super) fn start(&self) -> &StartingOffsets {
        &self.start
    }

    /// Where its splits stop, in a bounded run.
    pub(super) fn stop(&self) -> &Option<StoppingOffsets> {
        &self.stop
    }

    /// The partitions known already.
    pub(super) fn known(&self) -> &BTreeSet<(String, i32)> {
        &self.known
    }

    /// Knows `topic`'s `partition` from now; returns whether it was new.
    pub(super) fn know(&mut self, topic: String, partition: i32) -> bool {
        self.known.insert((topic, partition))
    }

    /// Forgets the known partitions `keep` does not keep.
    pub(super) fn retain_known(&mut self, keep: impl Fn(&(String, i32)) -> bool) {
        self.known.retain(keep);
    }

    /// Its partitions were discovered; returns whether for the first time.
    pub(super) fn mark_discovered(&mut self) -> bool {
        !std::mem::replace(&mut self.initial_discovery_done, true)
    }

    /// Whether its partitions count as discovered (as a checkpoint says).
    pub(super) fn set_discovered(&mut self, done: bool) {
        self.initial_discovery_done = done;
    }

    /// The topics read there from now.
    pub(super) fn set_topics(&mut self, topics: BTreeSet<String>) {
        self.topics = topics;
    }

    /// Where its splits start and stop from now.
    pub(super) fn set_offsets(&mut self, start: StartingOffsets, stop: Option<StoppingOffsets>) {
        self.start = start;
        self.stop = stop;
    }

    /// Looks up with `client` from now; returns the one it replaces.
    pub(super) fn replace_client(&mut self, client: ClusterClient) -> Arc<ClusterClient> {
        std::mem::replace(&mut self.client, Arc::new(client))
    }

    /// Its readers read with `props` from now.
    pub(super) fn set_reader_props(&mut self, props: ClientProperties) {
        self.reader_props = props;
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
