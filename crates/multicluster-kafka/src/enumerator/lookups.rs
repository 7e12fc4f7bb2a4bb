//! Lookups about many splits at once: grouped by cluster, each cluster's asked on a
//! blocking thread of its own, all clusters concurrently.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Enumerator;
use super::cluster::ClusterState;
use crate::base::split::KafkaSplit;
use crate::error::SourceError;
use crate::kafka::client::detached;

/// A split's partition, as the lookups' answers are keyed.
pub(super) type PartitionKey = (Arc<str>, String, i32);

/// One cluster's lookup: the cluster's partitions in, an answer per partition out
/// (partitions without one left out).
pub(super) type Lookup<T> =
    Box<dyn FnOnce(&[(String, i32)]) -> Result<Vec<((String, i32), T)>, SourceError> + Send>;

impl Enumerator {
    /// Looks up something about each of `splits`: `lookup` gives, from a cluster's
    /// state, what to ask its client (or `None` to ask it nothing); the clusters are
    /// asked concurrently, each on a blocking thread. `what` names the lookup in the
    /// error of a task that failed. The first cluster's error is returned.
    pub(super) async fn per_cluster<T: Send + 'static>(
        &self,
        splits: &[KafkaSplit],
        what: &'static str,
        lookup: impl Fn(&Arc<str>, &ClusterState) -> Option<Lookup<T>>,
    ) -> Result<BTreeMap<PartitionKey, T>, SourceError> {
        let mut by_cluster: BTreeMap<Arc<str>, Vec<(String, i32)>> = BTreeMap::new();
        for s in splits {
            by_cluster
                .entry(s.id.cluster.clone())
                .or_default()
                .push((s.id.topic.to_string(), s.id.partition));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (cluster, partitions) in by_cluster {
            let Some(ask) = self
                .clusters
                .get(&cluster)
                .and_then(|state| lookup(&cluster, state))
            else {
                continue;
            };
            tasks.spawn(detached(move || (cluster, ask(&partitions))));
        }
        let mut answers = BTreeMap::new();
        while let Some(joined) = tasks.join_next().await {
            let (cluster, answer) = joined.map_err(|e| SourceError::internal(what, e))?;
            for ((topic, partition), value) in answer? {
                answers.insert((cluster.clone(), topic, partition), value);
            }
        }
        Ok(answers)
    }
}

/// The key of a split's partition in [`Enumerator::per_cluster`]'s answers.
pub(super) fn key_of(split: &KafkaSplit) -> PartitionKey {
    (
        split.id.cluster.clone(),
        split.id.topic.to_string(),
        split.id.partition,
    )
}
