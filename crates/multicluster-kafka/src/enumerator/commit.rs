//! Committing a checkpoint's offsets to each cluster under the group id.

use super::Enumerator;
use crate::checkpoint::Checkpoint;
use crate::error::SourceError;
use crate::metrics as m;

impl Enumerator {
    pub(super) async fn commit(&self, cp: &Checkpoint) -> Result<(), SourceError> {
        if self.cfg.group_id.is_none() {
            return Err(SourceError::Config(
                "committing offsets needs a group id".into(),
            ));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (cluster, saved) in &cp.clusters {
            let Some(state) = self.clusters.get(cluster.as_str()) else {
                continue;
            };
            let offsets: Vec<(String, i32, i64)> = saved
                .splits
                .iter()
                .filter(|s| s.next_offset >= 0)
                .map(|s| (s.topic.clone(), s.partition, s.next_offset))
                .collect();
            let client = state.client.clone();
            let cluster = cluster.clone();
            tasks.spawn_blocking(move || (cluster.clone(), client.commit(&offsets)));
        }
        let mut failures = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let Ok((cluster, result)) = joined else {
                failures.push("a commit task panicked".to_string());
                continue;
            };
            match result {
                Ok(()) => {
                    metrics::counter!(m::COMMITS_SUCCEEDED, "cluster" => cluster).increment(1)
                }
                Err(e) => {
                    metrics::counter!(m::COMMITS_FAILED, "cluster" => cluster).increment(1);
                    failures.push(e.to_string());
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SourceError::Cluster {
                cluster: "commit".into(),
                message: failures.join("; "),
            })
        }
    }
}
