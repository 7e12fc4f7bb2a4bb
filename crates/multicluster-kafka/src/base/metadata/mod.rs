//! The stream metadata model (`KafkaStream`, `ClusterMetadata`), the service trait
//! that answers it, its errors, and the index of stream ids the readers tag records
//! with. The services themselves are in the crate's `metadata` module.

mod error;
pub(crate) mod index;
mod mirror;
mod model;

use std::collections::BTreeMap;

use async_trait::async_trait;
use tokio::sync::watch;

pub use error::{MetadataError, SourceLocation};
pub use mirror::{MirrorOf, OnMismatch, Translate};
pub(crate) use model::check_mirror;
pub use model::{ClusterMetadata, ClusterMetadataBuilder, KafkaStream, check_consistent};

/// Answers which clusters and topics make up the streams a source reads.
///
/// Implementations are shared between tasks (`Send + Sync`), and every method takes
/// `&self`.
#[async_trait]
pub trait KafkaMetadataService: Send + Sync + 'static {
    /// Describes the streams with these ids. Ids the service does not know are absent
    /// from the answer (the caller decides whether that is an error).
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError>;

    /// Every stream the service knows, by id.
    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError>;

    /// True when some stream currently references this logical cluster id.
    ///
    /// Errors from clusters that are not active are ignored by the source. The source
    /// asks about every cluster it reads at each metadata read: the default copies
    /// [`all_streams`](Self::all_streams) for each of them, so a service whose
    /// `all_streams` is costly (a request, a large model) should answer this from what
    /// it holds.
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        let all = self.all_streams().await?;
        Ok(all.values().any(|s| s.clusters.contains_key(cluster_id)))
    }

    /// Releases watches, clients and tasks. Later calls fail with
    /// [`MetadataError::Closed`].
    async fn close(&self) -> Result<(), MetadataError>;

    /// A channel that ticks with a new generation number whenever the service's
    /// metadata may have changed (for example a file watch event), so a source can
    /// re-read at once instead of waiting for its next poll. `None` when the service
    /// has no change notification.
    fn changes(&self) -> Option<watch::Receiver<u64>> {
        None
    }
}
