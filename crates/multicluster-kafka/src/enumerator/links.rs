//! The enumerator's links to the rest of its source: the metadata service, the state
//! it shares with the readers, and the queue its commits wait in. Set up once.

use std::sync::Arc;

use super::commit::{QueuedCommit, commit_worker};
use crate::base::active::ActiveClusters;
use crate::base::metadata::index::StreamIndex;
use crate::base::metadata::{KafkaMetadataService, KafkaStream};
use crate::base::retention::Retained;
use crate::kafka::shared::ClientShare;

/// What links the enumerator to the metadata service, to its readers and to its
/// commit worker.
pub(super) struct Links {
    /// The metadata service the source reads.
    service: Arc<dyn KafkaMetadataService>,
    /// Commits wait their turn here (see `commit`).
    commits: tokio::sync::mpsc::UnboundedSender<QueuedCommit>,
    /// Positions of removed splits, shared with the readers.
    retained: Retained,
    /// The clusters the metadata service calls active, shared with the readers.
    active: ActiveClusters,
    /// The streams of each cluster's topic, for the readers' records.
    stream_index: StreamIndex,
    /// The source's librdkafka clients, shared with the readers.
    clients: Arc<ClientShare>,
}

impl Links {
    /// Links to `service`, sharing `retained` and `active` with the readers, with a
    /// commit worker of their own (started on the current runtime).
    pub(super) fn new(
        service: Arc<dyn KafkaMetadataService>,
        retained: Retained,
        active: ActiveClusters,
    ) -> Self {
        Links {
            service,
            commits: commit_worker(),
            retained,
            active,
            stream_index: StreamIndex::default(),
            clients: Arc::default(),
        }
    }

    /// Shares `stream_index` and `clients` with the readers too.
    pub(super) fn share(&mut self, stream_index: StreamIndex, clients: Arc<ClientShare>) {
        self.stream_index = stream_index;
        self.clients = clients;
    }

    /// The metadata service.
    pub(super) fn service(&self) -> &Arc<dyn KafkaMetadataService> {
        &self.service
    }

    /// Positions of removed splits, shared with the readers.
    pub(super) fn retained(&self) -> &Retained {
        &self.retained
    }

    /// The source's librdkafka clients.
    pub(super) fn clients(&self) -> &Arc<ClientShare> {
        &self.clients
    }

    /// Tells the readers which clusters are active.
    pub(super) fn set_active(&self, active: std::collections::BTreeSet<String>) {
        self.active.set(active);
    }

    /// Tells the readers the streams of each cluster's topic, from `streams`.
    pub(super) fn index_streams(&self, streams: &std::collections::BTreeMap<String, KafkaStream>) {
        self.stream_index.set(streams);
    }

    /// Queues a commit behind those asked before.
    pub(super) fn queue_commit(&self, commit: QueuedCommit) {
        let _ = self.commits.send(commit);
    }
}
