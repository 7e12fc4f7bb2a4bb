//! Which subscribed streams each cluster's topic belongs to, kept by the enumerator as
//! it applies metadata and read by the readers when they hand records out.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use super::KafkaStream;

/// The stream ids of one topic on one cluster (usually one; several when subscribed
/// streams share the topic there).
pub(crate) type StreamIds = Arc<[Arc<str>]>;

/// A topic on a cluster.
type ClusterTopic = (Arc<str>, Arc<str>);

/// (cluster, topic) → the streams that read the topic there.
type Index = HashMap<ClusterTopic, StreamIds>;

/// Shared between the enumerator (which writes it) and the readers.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamIndex(Arc<RwLock<Index>>);

impl StreamIndex {
    /// Replaces the index with the streams the source now reads.
    pub fn set(&self, streams: &BTreeMap<String, KafkaStream>) {
        let mut by_topic: HashMap<ClusterTopic, Vec<Arc<str>>> = HashMap::new();
        for (id, stream) in streams {
            let id: Arc<str> = Arc::from(id.as_str());
            for (cluster, meta) in &stream.clusters {
                for topic in &meta.topics {
                    by_topic
                        .entry((Arc::from(cluster.as_str()), Arc::from(topic.as_str())))
                        .or_default()
                        .push(id.clone());
                }
            }
        }
        let index = by_topic
            .into_iter()
            .map(|(k, ids)| (k, StreamIds::from(ids)))
            .collect();
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = index;
    }

    /// The streams of `topic` on `cluster` (none when the metadata no longer has it).
    pub fn get(&self, cluster: &Arc<str>, topic: &Arc<str>) -> StreamIds {
        let index = self.0.read().unwrap_or_else(|p| p.into_inner());
        index
            .get(&(cluster.clone(), topic.clone()))
            .cloned()
            .unwrap_or_else(|| StreamIds::from(Vec::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::ClusterMetadata;

    #[test]
    fn a_topic_shared_by_two_streams_names_both_and_an_unknown_one_none() {
        let m = |t: &[&str]| {
            ClusterMetadata::builder("a:9092")
                .topics(t.iter().copied())
                .build()
                .unwrap()
        };
        let streams = BTreeMap::from([
            (
                "orders".to_string(),
                KafkaStream::new("orders").with_cluster("east", m(&["o", "shared"])),
            ),
            (
                "audit".to_string(),
                KafkaStream::new("audit").with_cluster("east", m(&["shared"])),
            ),
        ]);
        let index = StreamIndex::default();
        index.set(&streams);
        let ids = |c: &str, t: &str| -> Vec<String> {
            index
                .get(&Arc::from(c), &Arc::from(t))
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        assert_eq!(ids("east", "o"), ["orders"]);
        assert_eq!(ids("east", "shared"), ["audit", "orders"]);
        assert!(ids("west", "o").is_empty());
    }
}
