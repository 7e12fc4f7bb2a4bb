//! The reader's positions: the checkpoint of what it handed out.

use super::SourceReader;
use crate::base::checkpoint::Checkpoint;
use crate::base::split::KafkaSplit;
use crate::deserializer::Deserializer;
use crate::error::SourceError;

impl<D: Deserializer> SourceReader<D> {
    /// This reader's positions: every split it owns at the offset after the last
    /// record handed out. Merge the checkpoints of all readers with
    /// [`Checkpoint::merge`].
    pub fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        self.drain_events()?;
        let mut cp = Checkpoint::from_splits(self.positions());
        // Retained positions go into every reader's checkpoint; merging keeps one.
        for (id, r) in self.links.retained().live() {
            let c = cp.clusters.entry(id.cluster.to_string()).or_default();
            if c.kafka_cluster_id.is_none() {
                c.kafka_cluster_id = r.kafka_cluster_id.clone();
            }
            if !c
                .splits
                .iter()
                .any(|s| *s.topic == *id.topic && s.partition == id.partition)
            {
                c.splits.push(crate::base::checkpoint::SplitCheckpoint {
                    topic: id.topic.to_string(),
                    partition: id.partition,
                    next_offset: r.next_offset,
                    retained_until_ms: Some(r.until_ms),
                    last: r.last.clone(),
                });
            }
        }
        cp.normalize();
        for (cluster, info) in self.splits.clusters() {
            let c = cp.clusters.entry(cluster.to_string()).or_default();
            c.kafka_cluster_id = info.kafka_cluster_id.clone();
            c.initial_discovery_done = info.initial_discovery_done;
        }
        cp.shard = self.settings.shard;
        cp.watermark_ms = self.watermark();
        Ok(cp)
    }

    pub(super) fn positions(&self) -> Vec<KafkaSplit> {
        self.splits.positions()
    }
}
