//! The change from one metadata file to the other, cluster by cluster, and the splits
//! a cluster's report adds to it.

use super::*;

/// The keys whose values differ between `old` and `new`; secret values never copied.
pub fn property_changes(old: &ClientProperties, new: &ClientProperties) -> Vec<PropertyChange> {
    let keys: BTreeSet<&str> = old.iter().chain(new.iter()).map(|(k, _)| k).collect();
    let mut out = Vec::new();
    for key in keys {
        let (before, after) = (old.get(key), new.get(key));
        let secret = old.is_secret(key) || new.is_secret(key);
        let change = match (before, after) {
            (None, Some(_)) => "added",
            (Some(_), None) => "removed",
            (Some(a), Some(b)) if a != b || old.is_secret(key) != new.is_secret(key) => "changed",
            _ => continue,
        };
        let shown = |v: Option<&str>| if secret { None } else { v.map(str::to_string) };
        out.push(PropertyChange {
            key: key.to_string(),
            change,
            secret,
            old: shown(before),
            new: shown(after),
        });
    }
    out
}

/// Where splits found on a cluster start: an added cluster uses its own
/// `startingOffsets`, else the source's starting offsets (earliest by default); a topic
/// added to a cluster already being read uses the source's
/// `new_partition_starting_offsets` (earliest by default), as the enumerator does.
pub fn start_rule(kind: Kind, view: &ClusterView) -> StartRule {
    match (kind, &view.starting_offsets) {
        (Kind::Added, Some(o)) => StartRule {
            offsets: o.clone(),
            from: "the cluster's startingOffsets",
        },
        (Kind::Added, None) => StartRule {
            offsets: StartingOffsets::Earliest,
            from: "the source's default for a new cluster",
        },
        _ => StartRule {
            offsets: StartingOffsets::Earliest,
            from: "the source's default for a topic added to a cluster being read",
        },
    }
}

/// An offsets spec as written in metadata files (`earliest`, `{"timestamp":…}`).
pub(super) fn spec_text(spec: Option<Value>) -> String {
    match spec {
        None => "(source default)".into(),
        Some(Value::String(s)) => s,
        Some(v) => v.to_string(),
    }
}

/// The change from `old` to `new`, without looking at any cluster.
pub fn changes(
    old: &BTreeMap<String, KafkaStream>,
    new: &BTreeMap<String, KafkaStream>,
) -> Changes {
    let (before, after) = (
        clusters_of_streams(old.values()),
        clusters_of_streams(new.values()),
    );
    let p = plan(&before, &after);
    let mut out = Changes {
        streams_added: new
            .keys()
            .filter(|s| !old.contains_key(*s))
            .cloned()
            .collect(),
        streams_removed: old
            .keys()
            .filter(|s| !new.contains_key(*s))
            .cloned()
            .collect(),
        ..Changes::default()
    };
    for (cluster, view) in &p.clusters_added {
        out.clusters.push(added_cluster(cluster, view));
    }
    for cluster in &p.clusters_removed {
        out.clusters
            .push(removed_cluster(cluster, &before[cluster]));
    }
    let mut offsets = stream_offset_changes(old, new);
    for (cluster, change) in &p.clusters_changed {
        let (was, view) = (&before[cluster], &after[cluster]);
        let own = offsets.remove(cluster).unwrap_or_default();
        out.clusters
            .push(changed_cluster(cluster, was, view, change, own));
    }
    // Offsets changed by a stream whose cluster's merged view (taken from the first
    // stream naming it) stayed the same: the cluster is shared with another stream.
    for (cluster, offsets) in offsets {
        if !after.contains_key(&cluster) || out.clusters.iter().any(|c| c.cluster == cluster) {
            continue;
        }
        let view = &after[&cluster];
        out.clusters
            .push(offsets_changed_cluster(cluster, view, offsets));
    }
    out.clusters.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out.unchanged = before
        .keys()
        .filter(|c| {
            after.get(*c) == before.get(*c) && !out.clusters.iter().any(|p| &p.cluster == *c)
        })
        .cloned()
        .collect();
    out
}

/// What to ask a cluster: its properties and `topics`, unless there are none.
fn lookup(
    topics: &BTreeSet<String>,
    props: &ClientProperties,
) -> Option<(ClientProperties, BTreeSet<String>)> {
    (!topics.is_empty()).then(|| (props.clone(), topics.clone()))
}

/// The splits of a cluster that changed nothing a lookup would show.
fn no_splits() -> Splits {
    Splits::Known {
        added: Vec::new(),
        removed: Vec::new(),
        missing: BTreeSet::new(),
    }
}

/// A cluster only in the new file: every topic is read from now on.
fn added_cluster(cluster: &str, view: &ClusterView) -> ClusterPlan {
    ClusterPlan {
        cluster: cluster.to_string(),
        kind: Kind::Added,
        bootstrap: shown_bootstrap(&view.properties),
        topics_added: view.topics.clone(),
        topics_removed: BTreeSet::new(),
        properties: Vec::new(),
        offsets: Vec::new(),
        bootstrap_changed: false,
        start: Some(start_rule(Kind::Added, view)),
        splits: Splits::NotLookedUp,
        lookup: lookup(&view.topics, &view.properties),
    }
}

/// A cluster only in the old file: no topic of it is read any more.
fn removed_cluster(cluster: &str, view: &ClusterView) -> ClusterPlan {
    ClusterPlan {
        cluster: cluster.to_string(),
        kind: Kind::Removed,
        bootstrap: shown_bootstrap(&view.properties),
        topics_added: BTreeSet::new(),
        topics_removed: view.topics.clone(),
        properties: Vec::new(),
        offsets: Vec::new(),
        bootstrap_changed: false,
        start: None,
        splits: Splits::NotLookedUp,
        lookup: lookup(&view.topics, &view.properties),
    }
}

/// A cluster in both files whose merged view differs (`was` before, `view` after);
/// `offsets` are the streams' offset changes on it.
fn changed_cluster(
    cluster: &str,
    was: &ClusterView,
    view: &ClusterView,
    change: &ClusterChange,
    offsets: Vec<(String, String, String)>,
) -> ClusterPlan {
    let touched: BTreeSet<String> = change
        .topics_added
        .union(&change.topics_removed)
        .cloned()
        .collect();
    let bootstrap_changed =
        was.properties.bootstrap_servers() != view.properties.bootstrap_servers();
    ClusterPlan {
        cluster: cluster.to_string(),
        kind: Kind::Changed,
        bootstrap: shown_bootstrap(&view.properties),
        topics_added: change.topics_added.clone(),
        topics_removed: change.topics_removed.clone(),
        properties: if change.properties_changed {
            property_changes(&was.properties, &view.properties)
        } else {
            Vec::new()
        },
        offsets,
        bootstrap_changed,
        start: (!change.topics_added.is_empty()).then(|| start_rule(Kind::Changed, view)),
        splits: if touched.is_empty() && !bootstrap_changed {
            no_splits()
        } else {
            Splits::NotLookedUp
        },
        lookup: if bootstrap_changed {
            lookup(&view.topics, &view.properties)
        } else {
            lookup(&touched, &view.properties)
        },
    }
}

/// A cluster whose merged view stayed the same while a stream changed its offsets.
fn offsets_changed_cluster(
    cluster: String,
    view: &ClusterView,
    offsets: Vec<(String, String, String)>,
) -> ClusterPlan {
    ClusterPlan {
        bootstrap: shown_bootstrap(&view.properties),
        cluster,
        kind: Kind::Changed,
        topics_added: BTreeSet::new(),
        topics_removed: BTreeSet::new(),
        properties: Vec::new(),
        offsets,
        bootstrap_changed: false,
        start: None,
        splits: no_splits(),
        lookup: None,
    }
}

/// Starting and stopping offsets that differ between the two files, per stream and
/// cluster (in both files), by cluster.
fn stream_offset_changes(
    old: &BTreeMap<String, KafkaStream>,
    new: &BTreeMap<String, KafkaStream>,
) -> BTreeMap<String, Vec<(String, String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    for (id, now) in new {
        let Some(was) = old.get(id) else { continue };
        for (cluster, m) in &now.clusters {
            let Some(w) = was.clusters.get(cluster) else {
                continue;
            };
            let entry = out.entry(cluster.clone()).or_default();
            if w.starting_offsets != m.starting_offsets {
                entry.push((
                    format!("startingOffsets of stream {id}"),
                    spec_text(w.starting_offsets.as_ref().map(|o| json!(o))),
                    spec_text(m.starting_offsets.as_ref().map(|o| json!(o))),
                ));
            }
            if w.stopping_offsets != m.stopping_offsets {
                entry.push((
                    format!("stoppingOffsets of stream {id}"),
                    spec_text(w.stopping_offsets.as_ref().map(|o| json!(o))),
                    spec_text(m.stopping_offsets.as_ref().map(|o| json!(o))),
                ));
            }
        }
    }
    out.retain(|_, v| !v.is_empty());
    out
}

/// The splits of `c` from what its cluster reported.
pub fn splits(c: &ClusterPlan, report: &Result<ClusterReport, SourceError>) -> Splits {
    let r = match report {
        Ok(r) => r,
        Err(e) => return Splits::Unreachable(failure_reason(e)),
    };
    let mut added = Vec::new();
    for topic in &c.topics_added {
        for p in r.topics.get(topic).into_iter().flatten() {
            let start = match &c.start {
                Some(rule) => {
                    resolve_start(&rule.offsets, topic, &c.cluster, p.partition, &p.facts())
                        .map_err(|e| e.to_string())
                }
                None => Err("no start rule".to_string()),
            };
            added.push((topic.clone(), p.partition, start));
        }
    }
    let removed = c
        .topics_removed
        .iter()
        .flat_map(|t| {
            r.topics
                .get(t)
                .into_iter()
                .flatten()
                .map(move |p| (t.clone(), p.partition))
        })
        .collect();
    Splits::Known {
        added,
        removed,
        missing: r.missing_topics.clone(),
    }
}
