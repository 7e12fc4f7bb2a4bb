//! From a parsed [`Document`] to validated streams: ids, topics, references,
//! bootstrap lists, and the consistency of one cluster id across streams.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_saphyr::Spanned;

use super::refs::Resolver;
use super::syntax::{self, Document, FlinkStream, RawProperties, RichDocument};
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::properties::{BOOTSTRAP_SERVERS, ClientProperties};
use crate::metadata::{ClusterMetadata, KafkaStream, MetadataError, MirrorOf, SourceLocation};

/// The only version of the richer layout.
const VERSION: u32 = 1;

/// Kafka's limit on topic name length.
const MAX_TOPIC_LEN: usize = 249;

/// A property's key and value as written.
type KeyAndValue<'p> = (&'p Spanned<String>, &'p Spanned<String>);

/// A cluster's resolved bootstrap list and where it was written.
#[derive(Clone)]
struct Bootstrap {
    /// Resolved and trimmed.
    value: String,
    /// As written in the file (may hold references, never a resolved secret).
    raw: String,
    at: SourceLocation,
}

/// A cluster definition with its bootstrap list resolved and its other properties.
struct ClusterDef {
    bootstrap: Bootstrap,
    properties: ClientProperties,
    /// Where the definition and each of its property keys are written.
    places: ClusterPlaces,
    starting_offsets: Option<StartingOffsets>,
    stopping_offsets: Option<StoppingOffsets>,
    replaces: Option<String>,
}

/// Where a stream's cluster and its properties are written, for what is found wrong
/// with them after the build (a property a client refuses).
#[derive(Clone, Debug)]
pub(super) struct ClusterPlaces {
    /// The cluster's definition (its id).
    pub at: SourceLocation,
    /// Each property key, a stream's own override over the definition's;
    /// `bootstrap.servers` where the list is written.
    pub keys: BTreeMap<String, SourceLocation>,
}

/// [`ClusterPlaces`] of every stream's clusters, by stream and cluster id.
pub(super) type Places = BTreeMap<(String, String), ClusterPlaces>;

/// Builds streams from a document; `path` names the file in errors.
pub(super) fn build(
    doc: Document,
    path: &Path,
    resolver: &Resolver<'_>,
) -> Result<(BTreeMap<String, KafkaStream>, Places), MetadataError> {
    let cx = Context {
        path,
        resolver,
        places: std::cell::RefCell::default(),
    };
    let streams = match doc {
        Document::Flink(streams) => cx.flink(streams),
        Document::Rich(doc) => cx.rich(doc),
    }?;
    Ok((streams, cx.places.into_inner()))
}

struct Context<'a> {
    path: &'a Path,
    resolver: &'a Resolver<'a>,
    places: std::cell::RefCell<Places>,
}

impl Context<'_> {
    fn at<T>(&self, spanned: &Spanned<T>) -> SourceLocation {
        syntax::location(self.path, &spanned.referenced)
    }

    fn invalid<T>(&self, spanned: &Spanned<T>, message: String) -> MetadataError {
        MetadataError::Invalid {
            location: Some(self.at(spanned)),
            message,
        }
    }

    fn flink(
        &self,
        entries: Vec<FlinkStream>,
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        let mut streams = BTreeMap::new();
        let mut bootstraps: BTreeMap<String, Bootstrap> = BTreeMap::new();
        for entry in entries {
            let stream_id = self.id("stream id", &entry.stream_id)?;
            if streams.contains_key(&stream_id) {
                return Err(MetadataError::DuplicateStream {
                    location: Some(self.at(&entry.stream_id)),
                    stream: stream_id,
                });
            }
            if entry.cluster_metadata_list.value.is_empty() {
                let message = format!("stream `{stream_id}` lists no clusters");
                return Err(self.invalid(&entry.cluster_metadata_list, message));
            }
            let mut stream = KafkaStream::new(stream_id.clone());
            for cluster in entry.cluster_metadata_list.value {
                let cluster_id = self.id("cluster id", &cluster.cluster_id)?;
                if stream.clusters.contains_key(&cluster_id) {
                    let message =
                        format!("cluster `{cluster_id}` is listed twice in stream `{stream_id}`");
                    return Err(self.invalid(&cluster.cluster_id, message));
                }
                let def = self.cluster_def(
                    &cluster_id,
                    &cluster.cluster_id,
                    cluster.bootstrap_servers.as_ref(),
                    cluster.properties.as_ref(),
                )?;
                same_bootstrap_everywhere(&mut bootstraps, &cluster_id, &def.bootstrap)?;
                let topics = self.topics(&stream_id, &cluster_id, &cluster.topics)?;
                // Flink's layout defines a cluster only by listing it in a stream, so a
                // source that left every stream is not defined anywhere: the name
                // itself is not checked against definitions here.
                let mirror_of = self.mirror(
                    &stream_id,
                    &cluster_id,
                    &topics,
                    cluster.mirror_of,
                    None::<&BTreeMap<String, ()>>,
                )?;
                let metadata = ClusterMetadata {
                    topics,
                    properties: def.properties,
                    starting_offsets: cluster.starting_offsets.map(|o| o.value),
                    stopping_offsets: cluster.stopping_offsets.map(|o| o.value),
                    replaces: self.replaces(cluster.replaces.as_ref())?,
                    mirror_of,
                };
                self.places
                    .borrow_mut()
                    .insert((stream_id.clone(), cluster_id.clone()), def.places);
                stream.clusters.insert(cluster_id, metadata);
            }
            streams.insert(stream_id, stream);
        }
        Ok(streams)
    }

    fn rich(&self, doc: RichDocument) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        if let Some(version) = &doc.version
            && version.value != VERSION
        {
            let message = format!("unsupported version {}, expected {VERSION}", version.value);
            return Err(self.invalid(version, message));
        }
        let mut defs: BTreeMap<String, ClusterDef> = BTreeMap::new();
        for (key, cluster) in &doc.clusters.0 {
            let cluster_id = self.id("cluster id", key)?;
            if defs.contains_key(&cluster_id) {
                return Err(self.invalid(
                    key,
                    format!("cluster `{cluster_id}` is defined more than once"),
                ));
            }
            let mut def = self.cluster_def(
                &cluster_id,
                key,
                cluster.bootstrap_servers.as_ref(),
                cluster.properties.as_ref(),
            )?;
            def.starting_offsets = cluster.starting_offsets.as_ref().map(|o| o.value.clone());
            def.stopping_offsets = cluster.stopping_offsets.as_ref().map(|o| o.value.clone());
            def.replaces = self.replaces(cluster.replaces.as_ref())?;
            defs.insert(cluster_id, def);
        }

        let mut streams = BTreeMap::new();
        for (key, stream_def) in doc.streams.0 {
            let stream_id = self.id("stream id", &key)?;
            if streams.contains_key(&stream_id) {
                return Err(MetadataError::DuplicateStream {
                    location: Some(self.at(&key)),
                    stream: stream_id,
                });
            }
            if stream_def.clusters.0.is_empty() {
                return Err(self.invalid(&key, format!("stream `{stream_id}` lists no clusters")));
            }
            let mut stream = KafkaStream::new(stream_id.clone());
            for (cluster_key, reading) in stream_def.clusters.0 {
                let cluster_id = self.id("cluster id", &cluster_key)?;
                let Some(def) = defs.get(&cluster_id) else {
                    return Err(MetadataError::UnknownCluster {
                        location: Some(self.at(&cluster_key)),
                        stream: stream_id,
                        cluster: cluster_id,
                    });
                };
                if stream.clusters.contains_key(&cluster_id) {
                    let message =
                        format!("cluster `{cluster_id}` is listed twice in stream `{stream_id}`");
                    return Err(self.invalid(&cluster_key, message));
                }
                let (overrides, bootstrap) = self.properties(reading.properties.as_ref())?;
                let mut places = def.places.clone();
                places
                    .keys
                    .extend(self.key_places(reading.properties.as_ref()));
                if let Some((key, _)) = bootstrap {
                    let message = format!(
                        "stream `{stream_id}` cannot override bootstrap.servers of cluster `{cluster_id}`; \
                         define another cluster id instead"
                    );
                    return Err(self.invalid(key, message));
                }
                let topics = self.topics(&stream_id, &cluster_id, &reading.topics)?;
                let mut mirror_of = self.mirror(
                    &stream_id,
                    &cluster_id,
                    &topics,
                    reading.mirror_of,
                    Some(&defs),
                )?;
                // The source's definition holds its settings even once it leaves the
                // streams: MirrorMaker's syncs kept there stay readable.
                if let Some(m) = mirror_of.as_mut() {
                    m.source_properties = defs.get(&m.cluster).map(|d| d.properties.clone());
                }
                let metadata = ClusterMetadata {
                    topics,
                    properties: def.properties.merged_with(&overrides),
                    starting_offsets: reading
                        .starting_offsets
                        .map(|o| o.value)
                        .or_else(|| def.starting_offsets.clone()),
                    stopping_offsets: reading
                        .stopping_offsets
                        .map(|o| o.value)
                        .or_else(|| def.stopping_offsets.clone()),
                    replaces: def.replaces.clone(),
                    mirror_of,
                };
                self.places
                    .borrow_mut()
                    .insert((stream_id.clone(), cluster_id.clone()), places);
                stream.clusters.insert(cluster_id, metadata);
            }
            streams.insert(stream_id, stream);
        }
        Ok(streams)
    }

    /// Where each property key of `raw` is written.
    fn key_places(
        &self,
        raw: Option<&RawProperties>,
    ) -> impl Iterator<Item = (String, SourceLocation)> {
        raw.map(|p| p.0.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|(key, _)| (key.value.trim().to_string(), self.at(key)))
    }

    /// Properties plus a required bootstrap list, given once: as `bootstrapServers` or
    /// as `properties.bootstrap.servers`.
    fn cluster_def(
        &self,
        cluster_id: &str,
        cluster_key: &Spanned<String>,
        field: Option<&Spanned<String>>,
        raw_properties: Option<&RawProperties>,
    ) -> Result<ClusterDef, MetadataError> {
        let (mut properties, from_properties) = self.properties(raw_properties)?;
        let raw = match (field, from_properties) {
            (Some(_), Some((key, _))) => {
                let message = format!(
                    "cluster `{cluster_id}` gives bootstrap servers twice \
                     (bootstrapServers and properties.bootstrap.servers)"
                );
                return Err(self.invalid(key, message));
            }
            (Some(value), None) | (None, Some((_, value))) => value,
            (None, None) => {
                return Err(MetadataError::MissingBootstrapServers {
                    location: Some(self.at(cluster_key)),
                    cluster: cluster_id.to_string(),
                });
            }
        };
        let at = self.at(raw);
        let value = self
            .resolver
            .resolve(&raw.value, &at)?
            .value
            .trim()
            .to_string();
        if value.is_empty() {
            return Err(MetadataError::MissingBootstrapServers {
                location: Some(at),
                cluster: cluster_id.to_string(),
            });
        }
        properties.set(BOOTSTRAP_SERVERS, value.clone());
        let mut keys: BTreeMap<String, SourceLocation> = self.key_places(raw_properties).collect();
        keys.insert(BOOTSTRAP_SERVERS.to_string(), at.clone());
        Ok(ClusterDef {
            places: ClusterPlaces {
                at: self.at(cluster_key),
                keys,
            },
            bootstrap: Bootstrap {
                value,
                raw: raw.value.trim().to_string(),
                at,
            },
            properties,
            starting_offsets: None,
            stopping_offsets: None,
            replaces: None,
        })
    }

    /// Resolves property values. `bootstrap.servers` is handed back unresolved, with
    /// its key, for the caller to place.
    fn properties<'p>(
        &self,
        raw: Option<&'p RawProperties>,
    ) -> Result<(ClientProperties, Option<KeyAndValue<'p>>), MetadataError> {
        let mut properties = ClientProperties::new();
        let mut bootstrap = None;
        let mut seen = BTreeSet::new();
        for (key, value) in raw.map(|p| p.0.as_slice()).unwrap_or_default() {
            let name = key.value.trim();
            if name.is_empty() || name != key.value {
                return Err(self.invalid(
                    key,
                    format!(
                        "property name `{}` is empty or padded",
                        key.value.escape_debug()
                    ),
                ));
            }
            if !seen.insert(name) {
                let message = format!("property `{}` is set twice", name.escape_debug());
                return Err(self.invalid(key, message));
            }
            if name == BOOTSTRAP_SERVERS {
                bootstrap = Some((key, value));
                continue;
            }
            let resolved = self.resolver.resolve(&value.value, &self.at(value))?;
            if resolved.referenced {
                properties.set_secret(name, resolved.value);
            } else {
                properties.set(name, resolved.value);
            }
        }
        Ok((properties, bootstrap))
    }

    fn id(&self, what: &str, id: &Spanned<String>) -> Result<String, MetadataError> {
        let text = id.value.as_str();
        let problem = if text.trim().is_empty() {
            Some("is empty")
        } else if text.trim() != text {
            Some("has leading or trailing spaces")
        } else if text.chars().any(char::is_control) {
            Some("contains control characters")
        } else {
            None
        };
        match problem {
            Some(problem) => {
                Err(self.invalid(id, format!("{what} `{}` {problem}", text.escape_debug())))
            }
            None => Ok(text.to_string()),
        }
    }

    /// A `mirrorOf` value, checked: not a mirror of itself, topic map and names
    /// matching the entry's topics and, where clusters are defined apart from streams
    /// (`defs`), naming a defined cluster.
    fn mirror<D>(
        &self,
        stream_id: &str,
        cluster_id: &str,
        topics: &BTreeSet<String>,
        mirror: Option<Spanned<MirrorOf>>,
        defs: Option<&BTreeMap<String, D>>,
    ) -> Result<Option<MirrorOf>, MetadataError> {
        let Some(mirror) = mirror else {
            return Ok(None);
        };
        if let Some(defs) = defs
            && !defs.contains_key(&mirror.value.cluster)
        {
            let message = format!(
                "stream `{stream_id}`: mirrorOf of cluster `{cluster_id}` names undefined cluster `{}`",
                mirror.value.cluster.escape_debug()
            );
            return Err(self.invalid(&mirror, message));
        }
        crate::base::metadata::check_mirror(stream_id, cluster_id, topics, &mirror.value)
            .map_err(|message| self.invalid(&mirror, message))?;
        Ok(Some(mirror.value))
    }

    /// A `replaces` value: a Kafka `cluster.id`, checked like an id.
    fn replaces(&self, value: Option<&Spanned<String>>) -> Result<Option<String>, MetadataError> {
        value
            .map(|v| self.id("replaced Kafka cluster.id", v))
            .transpose()
    }

    fn topics(
        &self,
        stream_id: &str,
        cluster_id: &str,
        topics: &Spanned<Vec<Spanned<String>>>,
    ) -> Result<BTreeSet<String>, MetadataError> {
        if topics.value.is_empty() {
            let message = format!("stream `{stream_id}` lists no topics on cluster `{cluster_id}`");
            return Err(self.invalid(topics, message));
        }
        let mut out = BTreeSet::new();
        for topic in &topics.value {
            if !is_legal_topic(&topic.value) {
                let message = format!(
                    "`{}` is not a legal Kafka topic name (letters, digits, `.`, `_`, `-`; 1 to {MAX_TOPIC_LEN})",
                    topic.value.escape_debug()
                );
                return Err(self.invalid(topic, message));
            }
            out.insert(topic.value.clone());
        }
        Ok(out)
    }
}

/// Records a cluster's bootstrap list, failing when the same id had another one.
fn same_bootstrap_everywhere(
    seen: &mut BTreeMap<String, Bootstrap>,
    cluster_id: &str,
    bootstrap: &Bootstrap,
) -> Result<(), MetadataError> {
    match seen.get(cluster_id) {
        Some(first) if first.value != bootstrap.value => {
            Err(MetadataError::ConflictingBootstrapServers {
                location: Some(bootstrap.at.clone()),
                cluster: cluster_id.to_string(),
                first: first.raw.clone(),
                first_location: Some(Box::new(first.at.clone())),
                second: bootstrap.raw.clone(),
            })
        }
        Some(_) => Ok(()),
        None => {
            seen.insert(cluster_id.to_string(), bootstrap.clone());
            Ok(())
        }
    }
}

/// Kafka's rule: 1 to 249 of `[A-Za-z0-9._-]`, and not `.` or `..`.
fn is_legal_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= MAX_TOPIC_LEN
        && topic != "."
        && topic != ".."
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_topic_rules_are_applied() {
        for ok in ["orders", "orders-v2", "a.b_c", &"x".repeat(249)] {
            assert!(is_legal_topic(ok), "{ok}");
        }
        for bad in ["", ".", "..", "has space", "ünï", "a/b", &"x".repeat(250)] {
            assert!(!is_legal_topic(bad), "{bad}");
        }
    }
}
