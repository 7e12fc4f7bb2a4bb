//! What changed between two metadata snapshots: a pure function from the clusters and
//! topics a source reads now to the ones it should read, giving the plan that
//! reconciliation applies (clusters added, removed or changed; topics added or
//! removed; properties changed). No IO; property-tested.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::metadata::{ClusterMetadata, KafkaStream, MirrorOf};
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::properties::ClientProperties;

/// What a source reads on one cluster, merged over every subscribed stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// Topics to read.
    pub topics: BTreeSet<String>,
    /// The cluster's client properties (from metadata, before the source's own).
    pub properties: ClientProperties,
    /// Per-cluster starting offsets, if set.
    pub starting_offsets: Option<StartingOffsets>,
    /// Per-cluster stopping offsets, if set.
    pub stopping_offsets: Option<StoppingOffsets>,
    /// The Kafka `cluster.id` this cluster replaces, if set
    /// ([`ClusterMetadata::replaces`](crate::base::metadata::ClusterMetadata::replaces)).
    pub replaces: Option<String>,
    /// The cluster whose topics this one copies, and how positions translate
    /// ([`ClusterMetadata::mirror_of`](crate::base::metadata::ClusterMetadata::mirror_of)).
    pub mirror_of: Option<MirrorOf>,
}

/// Merges streams into one view per logical cluster: topics are united; properties
/// and offsets come from the first stream (by id) that names the cluster, since the
/// metadata services guarantee one bootstrap list per cluster id.
///
/// A mirror entry (`mirrorOf`) of a stream that also names the mirror's source is a
/// standby: it is not read, and so not in the view.
///
/// ```
/// use multicluster_kafka::metadata::{ClusterMetadata, KafkaStream};
/// use multicluster_kafka::unstable::plan::clusters_of_streams;
/// let m = |t: &str| ClusterMetadata::builder("a:9092").topic(t).build().unwrap();
/// let streams = [KafkaStream::new("s1").with_cluster("a", m("x")),
///                KafkaStream::new("s2").with_cluster("a", m("y"))];
/// let view = clusters_of_streams(streams.iter());
/// assert_eq!(view["a"].topics.len(), 2);
/// ```
pub fn clusters_of_streams<'a>(
    streams: impl IntoIterator<Item = &'a KafkaStream>,
) -> BTreeMap<String, ClusterView> {
    clusters_of_streams_with(streams, &BTreeSet::new())
}

/// [`clusters_of_streams`] after failovers: a cluster in `taken_over` is not read in
/// a stream that has a mirror of it, and that mirror is read instead.
pub fn clusters_of_streams_with<'a>(
    streams: impl IntoIterator<Item = &'a KafkaStream>,
    taken_over: &BTreeSet<String>,
) -> BTreeMap<String, ClusterView> {
    merge_clusters(streams, taken_over, false)
}

/// Every cluster the streams name, standby mirrors included (what `mck describe`
/// shows), merged as [`clusters_of_streams`] merges them.
pub fn every_cluster_of_streams<'a>(
    streams: impl IntoIterator<Item = &'a KafkaStream>,
) -> BTreeMap<String, ClusterView> {
    merge_clusters(streams, &BTreeSet::new(), true)
}

fn merge_clusters<'a>(
    streams: impl IntoIterator<Item = &'a KafkaStream>,
    taken_over: &BTreeSet<String>,
    with_standby: bool,
) -> BTreeMap<String, ClusterView> {
    let mut out: BTreeMap<String, ClusterView> = BTreeMap::new();
    let mut streams: Vec<&KafkaStream> = streams.into_iter().collect();
    streams.sort_by(|a, b| a.stream_id.cmp(&b.stream_id));
    for stream in streams {
        for (cluster, meta) in &stream.clusters {
            let failed_over = taken_over.contains(cluster) && has_mirror_of(stream, cluster);
            let standby = is_standby(stream, meta)
                && !meta
                    .mirror_of
                    .as_ref()
                    .is_some_and(|m| taken_over.contains(&m.cluster));
            if (standby || failed_over) && !with_standby {
                continue;
            }
            let view = out.entry(cluster.clone()).or_insert_with(|| ClusterView {
                topics: BTreeSet::new(),
                properties: meta.properties.clone(),
                starting_offsets: meta.starting_offsets.clone(),
                stopping_offsets: meta.stopping_offsets.clone(),
                replaces: meta.replaces.clone(),
                mirror_of: meta.mirror_of.clone(),
            });
            view.topics.extend(meta.topics.iter().cloned());
        }
    }
    out
}

/// Whether `meta`, an entry of `stream`, is a standby mirror: its source is in the
/// stream too.
pub fn is_standby(stream: &KafkaStream, meta: &ClusterMetadata) -> bool {
    meta.mirror_of
        .as_ref()
        .is_some_and(|m| stream.clusters.contains_key(&m.cluster))
}

/// Whether `stream` has a mirror of `cluster`.
pub fn has_mirror_of(stream: &KafkaStream, cluster: &str) -> bool {
    stream
        .clusters
        .values()
        .any(|m| m.mirror_of.as_ref().is_some_and(|m| m.cluster == cluster))
}

/// The change to one cluster that stays.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterChange {
    /// Topics to start reading.
    pub topics_added: BTreeSet<String>,
    /// Topics to stop reading.
    pub topics_removed: BTreeSet<String>,
    /// True when the client properties differ (bootstrap list, credentials, …): the
    /// cluster's consumers are rebuilt at their current positions.
    pub properties_changed: bool,
    /// True when the per-cluster starting or stopping offsets differ (they apply to
    /// splits found from now on).
    pub offsets_changed: bool,
}

impl ClusterChange {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.topics_added.is_empty()
            && self.topics_removed.is_empty()
            && !self.properties_changed
            && !self.offsets_changed
    }
}

/// What reconciliation does. Clusters in none of the three maps are untouched: their
/// consumers keep running.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New clusters and what to read there.
    pub clusters_added: BTreeMap<String, ClusterView>,
    /// Clusters no longer read.
    pub clusters_removed: BTreeSet<String>,
    /// Clusters that stay but change.
    pub clusters_changed: BTreeMap<String, ClusterChange>,
}

impl Plan {
    /// True when the metadata change touches nothing the source reads.
    pub fn is_empty(&self) -> bool {
        self.clusters_added.is_empty()
            && self.clusters_removed.is_empty()
            && self.clusters_changed.is_empty()
    }
}

/// The plan that turns `old` into `new`.
///
/// ```
/// use std::collections::BTreeMap;
/// use multicluster_kafka::metadata::{ClusterMetadata, KafkaStream};
/// use multicluster_kafka::unstable::plan::{clusters_of_streams, plan};
/// let a = ClusterMetadata::builder("a:9092").topic("orders").build().unwrap();
/// let b = ClusterMetadata::builder("b:9092").topic("orders").build().unwrap();
/// let old = clusters_of_streams([&KafkaStream::new("s").with_cluster("a", a.clone())]);
/// let new = clusters_of_streams([&KafkaStream::new("s").with_cluster("a", a).with_cluster("b", b)]);
/// let p = plan(&old, &new);
/// assert!(p.clusters_added.contains_key("b"));
/// assert!(p.clusters_changed.is_empty() && p.clusters_removed.is_empty());
/// ```
pub fn plan(old: &BTreeMap<String, ClusterView>, new: &BTreeMap<String, ClusterView>) -> Plan {
    let mut p = Plan::default();
    for (cluster, view) in new {
        match old.get(cluster) {
            None => {
                p.clusters_added.insert(cluster.clone(), view.clone());
            }
            Some(before) => {
                let change = ClusterChange {
                    topics_added: view.topics.difference(&before.topics).cloned().collect(),
                    topics_removed: before.topics.difference(&view.topics).cloned().collect(),
                    // Naming a replaced cluster asks for the client to be made again
                    // (a bootstrap change refused before is tried again).
                    properties_changed: view.properties != before.properties
                        || view.replaces != before.replaces,
                    offsets_changed: view.starting_offsets != before.starting_offsets
                        || view.stopping_offsets != before.stopping_offsets,
                };
                if !change.is_empty() {
                    p.clusters_changed.insert(cluster.clone(), change);
                }
            }
        }
    }
    for cluster in old.keys() {
        if !new.contains_key(cluster) {
            p.clusters_removed.insert(cluster.clone());
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn view(topics: &[&str], bootstrap: &str) -> ClusterView {
        let mut properties = ClientProperties::new();
        properties.set("bootstrap.servers", bootstrap);
        ClusterView {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            properties,
            starting_offsets: None,
            stopping_offsets: None,
            replaces: None,
            mirror_of: None,
        }
    }

    #[test]
    fn a_mirror_is_a_standby_while_its_source_is_in_the_stream() {
        use crate::base::metadata::Translate;
        let east = ClusterMetadata::builder("e:1")
            .topic("orders")
            .build()
            .unwrap();
        let west = ClusterMetadata::builder("w:1")
            .topic("east.orders")
            .mirror_of(MirrorOf::new("east", Translate::Mm2))
            .build()
            .unwrap();
        let both = KafkaStream::new("s")
            .with_cluster("east", east)
            .with_cluster("west", west.clone());
        let view = clusters_of_streams([&both]);
        assert_eq!(view.keys().collect::<Vec<_>>(), ["east"]);
        let every = every_cluster_of_streams([&both]);
        assert_eq!(every.keys().collect::<Vec<_>>(), ["east", "west"]);
        let moved = KafkaStream::new("s").with_cluster("west", west.clone());
        let view = clusters_of_streams([&moved]);
        assert_eq!(view.keys().collect::<Vec<_>>(), ["west"]);
        assert_eq!(
            view["west"].mirror_of.as_ref().map(|m| m.cluster.as_str()),
            Some("east")
        );
        // After a failover the mirror is read and its source is not.
        let taken = BTreeSet::from(["east".to_string()]);
        let view = clusters_of_streams_with([&both], &taken);
        assert_eq!(view.keys().collect::<Vec<_>>(), ["west"]);
        // Another stream that reads the mirror without its source reads it.
        let view = clusters_of_streams([&both, &moved.clone()]);
        assert!(view.contains_key("west") && view.contains_key("east"));
        let _ = KafkaStream::new("t").with_cluster("west", west);
    }

    #[test]
    fn a_topic_migration_on_one_cluster_adds_and_removes_topics_only_there() {
        let old = BTreeMap::from([
            ("a".to_string(), view(&["orders"], "a:1")),
            ("b".into(), view(&["x"], "b:1")),
        ]);
        let new = BTreeMap::from([
            ("a".to_string(), view(&["orders-v2"], "a:1")),
            ("b".into(), view(&["x"], "b:1")),
        ]);
        let p = plan(&old, &new);
        assert_eq!(p.clusters_changed.len(), 1, "b is untouched");
        let a = &p.clusters_changed["a"];
        assert_eq!(a.topics_added, BTreeSet::from(["orders-v2".to_string()]));
        assert_eq!(a.topics_removed, BTreeSet::from(["orders".to_string()]));
        assert!(!a.properties_changed);
    }

    #[test]
    fn a_rotated_credential_is_a_property_change() {
        let mut rotated = view(&["t"], "a:1");
        rotated.properties.set("sasl.password", "new");
        let mut before = view(&["t"], "a:1");
        before.properties.set("sasl.password", "old");
        let p = plan(
            &BTreeMap::from([("a".to_string(), before)]),
            &BTreeMap::from([("a".to_string(), rotated)]),
        );
        assert!(p.clusters_changed["a"].properties_changed);
        assert!(p.clusters_changed["a"].topics_added.is_empty());
    }

    fn views() -> impl Strategy<Value = BTreeMap<String, ClusterView>> {
        prop::collection::btree_map(
            "[a-d]",
            (prop::collection::btree_set("[p-t]", 0..4), 0u8..3),
            0..4,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(|(c, (topics, b))| {
                    let t: Vec<&str> = topics.iter().map(String::as_str).collect();
                    let v = view(&t, &format!("{c}:{b}"));
                    (c, v)
                })
                .collect()
        })
    }

    /// Applies a plan to `old` the way reconciliation does.
    fn apply(
        old: &BTreeMap<String, ClusterView>,
        p: &Plan,
        new: &BTreeMap<String, ClusterView>,
    ) -> BTreeMap<String, ClusterView> {
        let mut out = old.clone();
        for c in &p.clusters_removed {
            out.remove(c);
        }
        for (c, v) in &p.clusters_added {
            out.insert(c.clone(), v.clone());
        }
        for (c, change) in &p.clusters_changed {
            let v = out.get_mut(c).expect("changed clusters exist");
            for t in &change.topics_removed {
                v.topics.remove(t);
            }
            v.topics.extend(change.topics_added.iter().cloned());
            if change.properties_changed {
                v.properties = new[c].properties.clone();
            }
        }
        out
    }

    proptest! {
        #[test]
        fn applying_the_plan_gives_the_new_metadata_and_touches_nothing_else(old in views(), new in views()) {
            let p = plan(&old, &new);
            prop_assert_eq!(apply(&old, &p, &new), new.clone());
            for c in old.keys().filter(|c| new.get(*c) == old.get(*c)) {
                prop_assert!(!p.clusters_changed.contains_key(c) && !p.clusters_removed.contains(c) && !p.clusters_added.contains_key(c));
            }
            prop_assert!(plan(&new, &new).is_empty());
        }
    }
}
