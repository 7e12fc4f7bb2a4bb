//! The plain lines that say what a metadata change did, one per changed stream.

use std::collections::{BTreeMap, BTreeSet};

use super::Enumerator;
use crate::base::metadata::KafkaStream;
use crate::base::plan::is_standby;

/// The tracing target of the lines [`change_lines`] makes, one event per line.
pub const CHANGES_TARGET: &str = "multicluster_kafka::changes";

/// What the source now reads as applied, per stream: `new`, without the clusters
/// `applied` rejects (an added cluster that could not be reached), and with the old
/// properties of clusters whose property change was `held` back.
pub(super) fn applied_streams(
    old: &BTreeMap<String, KafkaStream>,
    mut new: BTreeMap<String, KafkaStream>,
    held: &BTreeSet<String>,
    applied: impl Fn(&str) -> bool,
) -> BTreeMap<String, KafkaStream> {
    for (id, stream) in new.iter_mut() {
        stream.clusters.retain(|cluster, _| applied(cluster));
        for cluster in held {
            let before = old.get(id).and_then(|s| s.clusters.get(cluster));
            if let (Some(meta), Some(before)) = (stream.clusters.get_mut(cluster), before) {
                meta.properties = before.properties.clone();
            }
        }
    }
    new
}

/// One plain line per stream whose metadata changed from `old` to `new`, e.g.
/// `stream orders: + cluster west (3 splits), - topic orders-v2 on east, ~ cluster
/// east properties`. `splits` holds the split count per topic of every discovered
/// cluster (a cluster not in it gets no count). Property values are never shown.
pub(crate) fn change_lines(
    old: &BTreeMap<String, KafkaStream>,
    new: &BTreeMap<String, KafkaStream>,
    splits: &BTreeMap<String, BTreeMap<String, usize>>,
) -> Vec<String> {
    let count = |cluster: &str, topics: &mut dyn Iterator<Item = &String>| -> String {
        let Some(per_topic) = splits.get(cluster) else {
            return String::new();
        };
        let n: usize = topics.map(|t| per_topic.get(t).copied().unwrap_or(0)).sum();
        format!(" ({n} split{})", if n == 1 { "" } else { "s" })
    };
    let empty = KafkaStream::new("");
    let ids: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut lines = Vec::new();
    for id in ids {
        let mut items = Vec::new();
        let before = match (old.get(id), new.get(id)) {
            (None, Some(_)) => {
                items.push("new stream".to_string());
                &empty
            }
            (Some(before), None) => {
                items.push("gone from the metadata".to_string());
                before
            }
            (Some(before), Some(_)) => before,
            (None, None) => continue,
        };
        let after = new.get(id).unwrap_or(&empty);
        for (cluster, meta) in &after.clusters {
            if !before.clusters.contains_key(cluster) {
                let n = if is_standby(after, meta) {
                    " (standby)".to_string()
                } else {
                    count(cluster, &mut meta.topics.iter())
                };
                items.push(format!("+ cluster {cluster}{n}"));
            }
        }
        for cluster in before.clusters.keys() {
            if !after.clusters.contains_key(cluster) {
                items.push(format!("- cluster {cluster}"));
            }
        }
        for (cluster, meta) in &after.clusters {
            let Some(was) = before.clusters.get(cluster) else {
                continue;
            };
            match (is_standby(before, was), is_standby(after, meta)) {
                (true, false) => {
                    let from = meta.mirror_of.as_ref().map_or("", |m| m.cluster.as_str());
                    items.push(format!("~ cluster {cluster} takes over from {from}"));
                }
                (false, true) => items.push(format!("~ cluster {cluster} becomes a standby")),
                _ => {}
            }
            for topic in meta.topics.difference(&was.topics) {
                let n = count(cluster, &mut std::iter::once(topic));
                items.push(format!("+ topic {topic} on {cluster}{n}"));
            }
            for topic in was.topics.difference(&meta.topics) {
                items.push(format!("- topic {topic} on {cluster}"));
            }
            let mut what = Vec::new();
            if meta.properties != was.properties {
                what.push("properties");
            }
            if meta.starting_offsets != was.starting_offsets {
                what.push("starting offsets");
            }
            if meta.stopping_offsets != was.stopping_offsets {
                what.push("stopping offsets");
            }
            // The source's settings carried along are the source's change, not this one.
            let bare = |m: &Option<crate::base::metadata::MirrorOf>| {
                m.clone().map(|mut m| {
                    m.source_properties = None;
                    m
                })
            };
            if bare(&meta.mirror_of) != bare(&was.mirror_of) {
                what.push("mirrorOf");
            }
            if !what.is_empty() {
                items.push(format!("~ cluster {cluster} {}", what.join(" and ")));
            }
        }
        if !items.is_empty() {
            lines.push(format!("stream {id}: {}", items.join(", ")));
        }
    }
    lines
}

impl Enumerator {
    /// Splits per topic of every cluster whose partitions were discovered.
    pub(super) fn split_counts(&self) -> BTreeMap<String, BTreeMap<String, usize>> {
        let mut out: BTreeMap<String, BTreeMap<String, usize>> = self
            .clusters
            .iter()
            .filter(|(_, state)| state.initial_discovery_done())
            .map(|(cluster, _)| (cluster.to_string(), BTreeMap::new()))
            .collect();
        for id in self.readers.split_ids() {
            if let Some(topics) = out.get_mut(&*id.cluster) {
                *topics.entry(id.topic.to_string()).or_default() += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::metadata::ClusterMetadata;
    use crate::base::offsets::{StartingOffsets, StoppingOffsets};

    fn meta(topics: &[&str]) -> ClusterMetadata {
        ClusterMetadata::builder("host:9092")
            .topics(topics.iter().copied())
            .build()
            .unwrap()
    }

    fn streams(list: &[(&str, &[(&str, ClusterMetadata)])]) -> BTreeMap<String, KafkaStream> {
        list.iter()
            .map(|(id, clusters)| {
                let mut s = KafkaStream::new(*id);
                for (c, m) in clusters.iter() {
                    s = s.with_cluster(*c, m.clone());
                }
                (id.to_string(), s)
            })
            .collect()
    }

    fn counts(list: &[(&str, &[(&str, usize)])]) -> BTreeMap<String, BTreeMap<String, usize>> {
        list.iter()
            .map(|(c, topics)| {
                let per_topic = topics.iter().map(|(t, n)| (t.to_string(), *n)).collect();
                (c.to_string(), per_topic)
            })
            .collect()
    }

    #[test]
    fn one_line_per_changed_stream_in_the_order_added_removed_changed() {
        let old = streams(&[
            ("orders", &[("east", meta(&["orders", "orders-v2"]))]),
            ("quiet", &[("east", meta(&["quiet"]))]),
        ]);
        let east = ClusterMetadata::builder("host:9092")
            .topic("orders")
            .property("client.id", "new")
            .build()
            .unwrap();
        let new = streams(&[
            (
                "orders",
                &[("east", east), ("west", meta(&["orders", "more"]))],
            ),
            ("quiet", &[("east", meta(&["quiet"]))]),
        ]);
        let splits = counts(&[
            ("east", &[("orders", 4), ("quiet", 1)]),
            ("west", &[("orders", 2), ("more", 1), ("other", 9)]),
        ]);
        assert_eq!(
            change_lines(&old, &new, &splits),
            [
                "stream orders: + cluster west (3 splits), - topic orders-v2 on east, ~ cluster east properties"
            ]
        );
        assert!(change_lines(&new, &new, &splits).is_empty());
    }

    #[test]
    fn removed_clusters_topics_offsets_new_and_gone_streams() {
        let with_offsets = ClusterMetadata::builder("host:9092")
            .topics(["a", "b"])
            .starting_offsets(StartingOffsets::Latest)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let old = streams(&[
            ("s", &[("east", meta(&["a"])), ("west", meta(&["a"]))]),
            ("gone", &[("north", meta(&["x"]))]),
        ]);
        let new = streams(&[
            ("s", &[("east", with_offsets)]),
            ("fresh", &[("south", meta(&["y"]))]),
        ]);
        // South not discovered yet: no count.
        let splits = counts(&[("east", &[("a", 1), ("b", 1)])]);
        assert_eq!(
            change_lines(&old, &new, &splits),
            [
                "stream fresh: new stream, + cluster south",
                "stream gone: gone from the metadata, - cluster north",
                "stream s: - cluster west, + topic b on east (1 split), ~ cluster east starting offsets and stopping offsets",
            ]
        );
    }

    #[test]
    fn applied_streams_leave_out_unreached_clusters_and_held_back_properties() {
        let old = streams(&[("s", &[("east", meta(&["a"]))])]);
        let changed = ClusterMetadata::builder("other:9092")
            .topics(["a", "b"])
            .build()
            .unwrap();
        let new = streams(&[("s", &[("east", changed), ("west", meta(&["a"]))])]);
        let held = BTreeSet::from(["east".to_string()]);
        let applied = applied_streams(&old, new, &held, |c| c != "west");
        let east = &applied["s"].clusters["east"];
        assert_eq!(east.properties, old["s"].clusters["east"].properties);
        assert_eq!(east.topics.len(), 2, "topics are applied");
        assert!(!applied["s"].clusters.contains_key("west"));
        // What is said now: the topic; the rest when it is applied.
        assert_eq!(
            change_lines(&old, &applied, &BTreeMap::new()),
            ["stream s: + topic b on east"]
        );
    }
}
