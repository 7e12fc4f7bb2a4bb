use std::collections::BTreeMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::watch;

use super::{KafkaMetadataService, KafkaStream, MetadataError, check_consistent};

/// In-memory metadata, replaceable at run time: for tests and for embedding the
/// source in a program that owns its own configuration.
///
/// ```
/// # tokio_test_block_on(async {
/// use multicluster_kafka::metadata::*;
/// let svc = StaticMetadataService::new([KafkaStream::new("s")
///     .with_cluster("a", ClusterMetadata::builder("a:9092").topic("t").build().unwrap())])
///     .unwrap();
/// assert!(svc.is_cluster_active("a").await.unwrap());
/// svc.replace([KafkaStream::new("s")
///     .with_cluster("b", ClusterMetadata::builder("b:9092").topic("t").build().unwrap())])
///     .unwrap();
/// assert!(!svc.is_cluster_active("a").await.unwrap());
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct StaticMetadataService {
    streams: RwLock<BTreeMap<String, KafkaStream>>,
    generation: watch::Sender<u64>,
    closed: AtomicBool,
}

impl StaticMetadataService {
    /// A service answering with these streams. Fails when they are inconsistent (see
    /// [`check_consistent`]) or a stream id repeats.
    pub fn new(streams: impl IntoIterator<Item = KafkaStream>) -> Result<Self, MetadataError> {
        let map = Self::index(streams)?;
        Ok(Self {
            streams: RwLock::new(map),
            generation: watch::Sender::new(0),
            closed: AtomicBool::new(false),
        })
    }

    fn index(
        streams: impl IntoIterator<Item = KafkaStream>,
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        let mut map = BTreeMap::new();
        for s in streams {
            let id = s.stream_id.clone();
            if map.insert(id.clone(), s).is_some() {
                return Err(MetadataError::DuplicateStream {
                    location: None,
                    stream: id,
                });
            }
        }
        check_consistent(map.values())?;
        Ok(map)
    }

    /// Replaces every stream at once and notifies [`KafkaMetadataService::changes`]
    /// subscribers. On error nothing changes.
    pub fn replace(
        &self,
        streams: impl IntoIterator<Item = KafkaStream>,
    ) -> Result<(), MetadataError> {
        let map = Self::index(streams)?;
        *self.streams.write().unwrap_or_else(|p| p.into_inner()) = map;
        self.generation.send_modify(|g| *g += 1);
        Ok(())
    }

    fn check_open(&self) -> Result<(), MetadataError> {
        if self.closed.load(Ordering::Acquire) {
            Err(MetadataError::Closed)
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl KafkaMetadataService for StaticMetadataService {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check_open()?;
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        Ok(stream_ids
            .iter()
            .filter_map(|id| streams.get(id).map(|s| (id.clone(), s.clone())))
            .collect())
    }

    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check_open()?;
        Ok(self
            .streams
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone())
    }

    /// Looks in the streams held, without copying them (the default copies every
    /// stream for each cluster asked about).
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        self.check_open()?;
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        Ok(streams
            .values()
            .any(|s| s.clusters.contains_key(cluster_id)))
    }

    async fn close(&self) -> Result<(), MetadataError> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.generation.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::ClusterMetadata;

    fn stream(id: &str, cluster: &str, bootstrap: &str) -> KafkaStream {
        KafkaStream::new(id).with_cluster(
            cluster,
            ClusterMetadata::builder(bootstrap)
                .topic("t")
                .build()
                .unwrap(),
        )
    }

    #[tokio::test]
    async fn replace_is_seen_by_describe_and_notifies_subscribers() {
        let svc = StaticMetadataService::new([stream("s", "a", "a:1")]).unwrap();
        let rx = svc.changes().unwrap();
        svc.replace([stream("s", "b", "b:1")]).unwrap();
        assert!(rx.has_changed().unwrap());
        let got = svc
            .describe_streams(&["s".into(), "missing".into()])
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert!(got["s"].clusters.contains_key("b"));
    }

    #[tokio::test]
    async fn an_inconsistent_replacement_keeps_the_old_streams() {
        let svc = StaticMetadataService::new([stream("s", "a", "a:1")]).unwrap();
        let err = svc
            .replace([stream("s", "a", "a:1"), stream("s2", "a", "other:1")])
            .unwrap_err();
        assert!(
            matches!(err, MetadataError::ConflictingBootstrapServers { .. }),
            "{err}"
        );
        assert_eq!(svc.all_streams().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_closed_service_refuses_calls() {
        let svc = StaticMetadataService::new([stream("s", "a", "a:1")]).unwrap();
        svc.close().await.unwrap();
        assert_eq!(svc.all_streams().await.unwrap_err(), MetadataError::Closed);
    }
}
