//! Which streams the source reads: the subscription resolved against the metadata
//! service, and the warning when subscribed streams leave the metadata.

use std::collections::{BTreeMap, BTreeSet};

use super::Enumerator;
use crate::base::config::{SourceConfig, Subscription};
use crate::base::metadata::{KafkaMetadataService, KafkaStream};
use crate::base::plan::ClusterView;
use crate::error::SourceError;

/// Resolves the subscription against the metadata service. With `strict` (start-up)
/// an unknown stream id is an error; while running it counts as a stream with no
/// clusters (the caller reports it).
pub(crate) async fn subscribed_streams(
    cfg: &SourceConfig,
    service: &dyn KafkaMetadataService,
    strict: bool,
) -> Result<BTreeMap<String, KafkaStream>, SourceError> {
    match &cfg.subscription {
        Subscription::Ids(ids) => {
            let found = service.describe_streams(ids).await?;
            let missing: Vec<String> = ids
                .iter()
                .filter(|id| !found.contains_key(*id))
                .cloned()
                .collect();
            if !missing.is_empty() && strict {
                return Err(SourceError::UnknownStreams(missing));
            }
            Ok(found)
        }
        Subscription::Pattern(re) => Ok(service
            .all_streams()
            .await?
            .into_iter()
            .filter(|(id, _)| re.is_match(id))
            .collect()),
    }
}

impl Enumerator {
    /// Clusters of `views` the service does not report inactive become the active set
    /// (readers drop the errors of the others).
    pub(super) async fn refresh_active(&self, views: &BTreeMap<String, ClusterView>) {
        let mut active = BTreeSet::new();
        for cluster in views.keys() {
            if self
                .links
                .service()
                .is_cluster_active(cluster)
                .await
                .unwrap_or(true)
            {
                active.insert(cluster.clone());
            }
        }
        self.links.set_active(active);
    }
}
