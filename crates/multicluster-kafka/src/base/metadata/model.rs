use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{MetadataError, MirrorOf};
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::properties::{BOOTSTRAP_SERVERS, ClientProperties};

/// One logical stream: its id and, for each logical cluster id, what to read there.
///
/// ```
/// use multicluster_kafka::metadata::{ClusterMetadata, KafkaStream};
/// let a = ClusterMetadata::builder("a:9092").topic("orders").build().unwrap();
/// let s1 = KafkaStream::new("s").with_cluster("a", a.clone());
/// let s2 = KafkaStream::new("s").with_cluster("a", a);
/// assert_eq!(s1, s2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KafkaStream {
    /// The logical stream id users subscribe to.
    pub stream_id: String,
    /// Logical cluster id → what to read on that cluster.
    pub clusters: BTreeMap<String, ClusterMetadata>,
}

impl KafkaStream {
    /// A stream with no clusters yet.
    pub fn new(stream_id: impl Into<String>) -> Self {
        Self {
            stream_id: stream_id.into(),
            clusters: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) a cluster.
    pub fn with_cluster(
        mut self,
        cluster_id: impl Into<String>,
        metadata: ClusterMetadata,
    ) -> Self {
        self.clusters.insert(cluster_id.into(), metadata);
        self
    }
}

/// What to read on one cluster for one stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterMetadata {
    /// Topic names to read.
    pub topics: BTreeSet<String>,
    /// librdkafka client properties; `bootstrap.servers` is required.
    pub properties: ClientProperties,
    /// Where splits on this cluster start, overriding the source's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_offsets: Option<StartingOffsets>,
    /// Where splits on this cluster stop. Setting it here makes this cluster bounded
    /// even when the source is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping_offsets: Option<StoppingOffsets>,
    /// The Kafka `cluster.id` of the physical cluster this one replaces: positions
    /// recorded on that cluster (a checkpoint, retained positions, the running
    /// reader's) are dropped and this cluster starts at its starting offsets, instead
    /// of the change being refused as a cluster identity mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// This cluster's topics are a copy of another cluster's (see [`MirrorOf`]): while
    /// that cluster is in the stream too, this one is a standby and is not read; when
    /// it leaves, reading continues here right after the last record handed out there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_of: Option<MirrorOf>,
}

impl ClusterMetadata {
    /// Starts a definition with its bootstrap list.
    pub fn builder(bootstrap_servers: impl Into<String>) -> ClusterMetadataBuilder {
        let mut properties = ClientProperties::new();
        properties.set(BOOTSTRAP_SERVERS, bootstrap_servers);
        ClusterMetadataBuilder {
            inner: ClusterMetadata {
                topics: BTreeSet::new(),
                properties,
                starting_offsets: None,
                stopping_offsets: None,
                replaces: None,
                mirror_of: None,
            },
        }
    }

    /// The `bootstrap.servers` value (guaranteed present in validated metadata).
    pub fn bootstrap_servers(&self) -> &str {
        self.properties.bootstrap_servers().unwrap_or_default()
    }
}

/// Builds a [`ClusterMetadata`]; see [`ClusterMetadata::builder`].
#[derive(Clone, Debug)]
pub struct ClusterMetadataBuilder {
    inner: ClusterMetadata,
}

impl ClusterMetadataBuilder {
    /// Adds a topic.
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.inner.topics.insert(topic.into());
        self
    }

    /// Adds topics.
    pub fn topics<I: IntoIterator<Item = S>, S: Into<String>>(mut self, topics: I) -> Self {
        self.inner.topics.extend(topics.into_iter().map(Into::into));
        self
    }

    /// Sets a client property.
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.inner.properties.set(key, value);
        self
    }

    /// Sets this cluster's starting offsets.
    pub fn starting_offsets(mut self, offsets: StartingOffsets) -> Self {
        self.inner.starting_offsets = Some(offsets);
        self
    }

    /// Marks this cluster as the replacement of the physical cluster whose Kafka
    /// `cluster.id` is `kafka_cluster_id` (see [`ClusterMetadata::replaces`]).
    pub fn replaces(mut self, kafka_cluster_id: impl Into<String>) -> Self {
        self.inner.replaces = Some(kafka_cluster_id.into());
        self
    }

    /// Marks this cluster's topics as a copy of another cluster's (see
    /// [`ClusterMetadata::mirror_of`]).
    pub fn mirror_of(mut self, mirror: MirrorOf) -> Self {
        self.inner.mirror_of = Some(mirror);
        self
    }

    /// Sets this cluster's stopping offsets.
    pub fn stopping_offsets(mut self, offsets: StoppingOffsets) -> Self {
        self.inner.stopping_offsets = Some(offsets);
        self
    }

    /// Checks and returns the definition.
    pub fn build(self) -> Result<ClusterMetadata, MetadataError> {
        let bootstrap = self
            .inner
            .properties
            .bootstrap_servers()
            .unwrap_or_default();
        if bootstrap.trim().is_empty() {
            return Err(MetadataError::MissingBootstrapServers {
                location: None,
                cluster: "<builder>".into(),
            });
        }
        Ok(self.inner)
    }
}

/// Checks a set of streams as a whole: every cluster has a non-empty
/// `bootstrap.servers`, and one logical cluster id never maps to two bootstrap lists.
///
/// ```
/// use multicluster_kafka::metadata::{check_consistent, ClusterMetadata, KafkaStream};
/// let s1 = KafkaStream::new("s1")
///     .with_cluster("east", ClusterMetadata::builder("a:9092").topic("t").build().unwrap());
/// let s2 = KafkaStream::new("s2")
///     .with_cluster("east", ClusterMetadata::builder("b:9092").topic("t").build().unwrap());
/// assert!(check_consistent([&s1, &s2]).is_err());
/// ```
pub fn check_consistent<'a, I>(streams: I) -> Result<(), MetadataError>
where
    I: IntoIterator<Item = &'a KafkaStream>,
{
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for stream in streams {
        for (cluster, meta) in &stream.clusters {
            let bootstrap = meta.properties.bootstrap_servers().unwrap_or_default();
            if bootstrap.trim().is_empty() {
                return Err(MetadataError::MissingBootstrapServers {
                    location: None,
                    cluster: cluster.clone(),
                });
            }
            match seen.get(cluster.as_str()) {
                Some(first) if *first != bootstrap => {
                    return Err(MetadataError::ConflictingBootstrapServers {
                        location: None,
                        cluster: cluster.clone(),
                        first: (*first).to_string(),
                        first_location: None,
                        second: bootstrap.to_string(),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert(cluster.as_str(), bootstrap);
                }
            }
            if let Some(mirror) = &meta.mirror_of {
                check_mirror(&stream.stream_id, cluster, &meta.topics, mirror).map_err(
                    |message| MetadataError::Invalid {
                        location: None,
                        message,
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// What is wrong with a `mirrorOf` on its own (not whether its cluster is defined,
/// which only a whole file can tell): a mirror of itself, a topic that maps to no
/// topic there, a topic map that names a topic the entry does not read.
pub(crate) fn check_mirror(
    stream: &str,
    cluster: &str,
    topics: &BTreeSet<String>,
    mirror: &MirrorOf,
) -> Result<(), String> {
    if mirror.cluster == cluster {
        return Err(format!(
            "stream `{stream}`: cluster `{cluster}` cannot be a mirror of itself"
        ));
    }
    if let Some(extra) = mirror.topics.keys().find(|t| !topics.contains(*t)) {
        return Err(format!(
            "stream `{stream}`: mirrorOf.topics of cluster `{cluster}` maps `{extra}`, which is not one of its topics"
        ));
    }
    if let Some(unmapped) = topics.iter().find(|t| mirror.source_topic(t).is_none()) {
        return Err(format!(
            "stream `{stream}`: topic `{unmapped}` on cluster `{cluster}` is not named `{}.<topic>` as MirrorMaker names copies; map it in mirrorOf.topics",
            mirror.alias()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_without_bootstrap_servers_is_an_error() {
        let err = ClusterMetadata::builder("  ")
            .topic("t")
            .build()
            .unwrap_err();
        assert!(matches!(err, MetadataError::MissingBootstrapServers { .. }));
    }

    #[test]
    fn metadata_round_trips_through_json() {
        let m = ClusterMetadata::builder("a:9092")
            .topics(["x", "y"])
            .property("client.id", "c")
            .starting_offsets(crate::base::offsets::StartingOffsets::Timestamp(5))
            .build()
            .unwrap();
        let s = KafkaStream::new("s").with_cluster("a", m);
        let json = serde_json::to_string(&s).unwrap();
        let back: KafkaStream = serde_json::from_str(&json).unwrap();
        assert_eq!(s, back);
    }

    #[test]
    fn mirrors_of_themselves_or_with_unmatched_topic_maps_are_inconsistent() {
        use crate::base::metadata::Translate;
        let mirror = |m: MirrorOf, topic: &str| {
            let meta = ClusterMetadata::builder("w:9092")
                .topic(topic)
                .mirror_of(m)
                .build()
                .unwrap();
            check_consistent([&KafkaStream::new("s").with_cluster("west", meta)])
        };
        assert!(mirror(MirrorOf::new("east", Translate::Mm2), "east.orders").is_ok());
        let err = mirror(MirrorOf::new("west", Translate::Identical), "orders").unwrap_err();
        assert!(err.to_string().contains("mirror of itself"), "{err}");
        let err = mirror(MirrorOf::new("east", Translate::Mm2), "orders").unwrap_err();
        assert!(err.to_string().contains("`east.<topic>`"), "{err}");
        let mut mapped = MirrorOf::new("east", Translate::Mm2);
        mapped.topics.insert("copy".into(), "orders".into());
        assert!(mirror(mapped.clone(), "copy").is_ok());
        let err = mirror(mapped, "east.copy").unwrap_err();
        assert!(err.to_string().contains("maps `copy`"), "{err}");
    }

    #[test]
    fn same_cluster_with_same_bootstrap_in_two_streams_is_consistent() {
        let m = ClusterMetadata::builder("a:9092")
            .topic("t")
            .build()
            .unwrap();
        let s1 = KafkaStream::new("s1").with_cluster("east", m.clone());
        let s2 = KafkaStream::new("s2").with_cluster("east", m);
        assert!(check_consistent([&s1, &s2]).is_ok());
    }
}
