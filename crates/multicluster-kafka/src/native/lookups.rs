//! A cluster's lookups over the native path's connections ([`Lookups`], with
//! [`Lookup`] doing the calls).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use crate::error::SourceError;
use crate::lookups::{Bounds, EachRecord, EndEarly, Lookups, PerPartition, TopicPartitions};

use super::lookup::Lookup;
use super::settings::Settings;

/// Kafka's TOPIC_AUTHORIZATION_FAILED.
const UNAUTHORIZED: i16 = 29;

/// A cluster's lookups over the native path's connections.
pub(crate) struct NativeLookups {
    cluster: Arc<str>,
    lookup: Arc<Lookup>,
}

impl NativeLookups {
    /// The lookups of `cluster` with its native `settings`, each within `timeout`,
    /// on `runtime`. Connects to nothing yet.
    pub fn new(cluster: Arc<str>, settings: &Settings, timeout: Duration, runtime: Handle) -> Self {
        Self {
            lookup: Arc::new(Lookup::new(cluster.clone(), settings, timeout, runtime)),
            cluster,
        }
    }
}

impl Lookups for NativeLookups {
    fn path(&self) -> &'static str {
        "native"
    }

    fn cluster_id(&self, end_early: EndEarly) -> Result<String, SourceError> {
        // Asks for no topic: the answer's cluster id is all that is wanted.
        let md = self.lookup.metadata(Some(Vec::new()), end_early)?;
        md.cluster_id.ok_or_else(|| SourceError::Cluster {
            cluster: self.cluster.to_string(),
            message: "metadata request: the broker gave no cluster id".into(),
        })
    }

    /// The partitions of the listed topics, and those missing asked for by name,
    /// which is how a broker says which it refused to describe.
    fn describe(&self, topics: &BTreeSet<String>) -> Result<TopicPartitions, SourceError> {
        let md = self.lookup.metadata(None, EndEarly::OnRefusal)?;
        let mut out = TopicPartitions::default();
        for t in md.topics {
            if topics.contains(&t.name) && t.error_code == 0 && !t.partitions.is_empty() {
                let mut parts: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
                parts.sort_unstable();
                out.partitions.insert(t.name, parts);
            }
        }
        out.missing = topics
            .iter()
            .filter(|t| !out.partitions.contains_key(*t))
            .cloned()
            .collect();
        if !out.missing.is_empty() {
            let asked: Vec<String> = out.missing.iter().cloned().collect();
            if let Ok(md) = self.lookup.metadata(Some(asked), EndEarly::OnRefusal) {
                out.unauthorized = md
                    .topics
                    .into_iter()
                    .filter(|t| t.error_code == UNAUTHORIZED && out.missing.contains(&t.name))
                    .map(|t| t.name)
                    .collect();
            }
        }
        Ok(out)
    }

    fn topic_names(&self) -> Result<Vec<String>, SourceError> {
        let md = self.lookup.metadata(None, EndEarly::OnRefusal)?;
        /// Kafka's UNKNOWN_TOPIC_OR_PARTITION: a topic being deleted may still be
        /// listed, as unknown.
        const UNKNOWN: i16 = 3;
        Ok(md
            .topics
            .into_iter()
            .filter(|t| t.error_code != UNKNOWN)
            .map(|t| t.name)
            .collect())
    }

    fn bounds(&self, partitions: &[(String, i32)]) -> Result<Bounds, SourceError> {
        self.lookup.bounds(partitions)
    }

    fn offsets_at_times(
        &self,
        queries: &[(String, i32, i64)],
    ) -> Result<PerPartition, SourceError> {
        self.lookup.offsets_at_times(queries)
    }

    fn read_partition(
        &self,
        topic: &str,
        partition: i32,
        range: (i64, i64),
        each: &mut EachRecord<'_>,
    ) -> Result<u64, SourceError> {
        self.lookup.read(topic, partition, range, &mut |r| {
            each(r.offset, r.key, r.value)
        })
    }

    fn newest_timestamps(&self, partitions: &[(String, i32)]) -> Result<PerPartition, SourceError> {
        self.lookup.newest_timestamps(partitions)
    }

    fn rejected(&self) -> bool {
        self.lookup.rejected()
    }

    fn last_error(&self) -> Option<String> {
        self.lookup.last_error()
    }
}
