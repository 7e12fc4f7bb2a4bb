//! `mck plan OLD NEW`: what a running source would do if the metadata changed from
//! OLD to NEW. The change itself comes from the library's pure
//! [`multicluster_kafka::unstable::plan::plan`]; this command adds what only the clusters know
//! (the splits added and removed, and the offsets new splits would start at) and
//! renders it for a person or as JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use multicluster_kafka::error::SourceError;
use multicluster_kafka::inspect::{ClusterQuery, ClusterReport, InspectOptions, inspect_clusters};
use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::metadata::file::read_metadata;
use multicluster_kafka::offsets::StartingOffsets;
#[cfg(test)]
use multicluster_kafka::offsets::StoppingOffsets;
use multicluster_kafka::properties::ClientProperties;
use multicluster_kafka::unstable::plan::{ClusterView, clusters_of_streams, plan};
use multicluster_kafka::unstable::resolve_start;
use serde_json::{Value, json};

use crate::args::parse_duration;
use crate::describe::{failure_reason, shown_bootstrap};

mod render;
pub use render::{render, to_json};

/// Arguments of `mck plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The metadata file in force now, then the one about to replace it.
    #[arg(value_name = "OLD NEW", num_args = 0..=2)]
    pub files: Vec<PathBuf>,
    /// The two files as options instead (`--metadata OLD --metadata NEW`).
    #[arg(long = "metadata", value_name = "FILE")]
    pub metadata: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Do not contact any cluster: list clusters, topics and properties only, without
    /// splits or start offsets.
    #[arg(long)]
    pub offline: bool,
    /// Only the streams a source subscribed to these ids would read (all when none is
    /// given).
    #[arg(long = "stream", value_name = "ID")]
    pub streams: Vec<String>,
    /// The source's group, for new splits that start at committed offsets (default: the
    /// cluster's `group.id` property).
    #[arg(long = "group", value_name = "ID")]
    pub group: Option<String>,
    /// Timeout of each call to a cluster (e.g. 500ms, 10s, 1m). A cluster that does not
    /// answer in time is shown as unreachable.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Reads both files, plans, asks the clusters (unless offline), prints. Exit 0 with or
/// without changes; 1 for a bad file.
pub fn run(args: PlanArgs) -> Result<ExitCode, String> {
    let paths: Vec<&PathBuf> = args.files.iter().chain(&args.metadata).collect();
    let [old_path, new_path] = paths[..] else {
        crate::args::usage_error(format!(
            "plan compares two metadata files (OLD NEW, or --metadata OLD --metadata NEW); {} given",
            paths.len()
        ));
    };
    let mut files = Vec::with_capacity(2);
    for path in [old_path, new_path] {
        match read_metadata(path) {
            Ok(s) => files.push(s),
            Err(e) => {
                eprintln!("mck: invalid metadata: {e}");
                return Ok(ExitCode::from(1));
            }
        }
    }
    let (old, new) = (
        select(&files[0], &args.streams),
        select(&files[1], &args.streams),
    );
    if !args.streams.is_empty() {
        let unknown: Vec<&str> = args
            .streams
            .iter()
            .filter(|s| !files[0].contains_key(*s) && !files[1].contains_key(*s))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "unknown stream id(s): {} (in neither file)",
                unknown.join(", ")
            ));
        }
    }
    let mut changes = changes(&old, &new);
    if !args.offline {
        let queries = changes
            .clusters
            .iter()
            .filter_map(|c| c.query(args.timeout, args.group.as_deref()))
            .collect();
        let reports = inspect_clusters(queries);
        for c in &mut changes.clusters {
            if let Some(r) = reports.get(&c.cluster) {
                c.splits = splits(c, r);
            }
        }
    }
    if args.json {
        let v = to_json(old_path, new_path, &changes);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render(old_path, new_path, &changes));
    }
    Ok(ExitCode::SUCCESS)
}

fn select(all: &BTreeMap<String, KafkaStream>, ids: &[String]) -> BTreeMap<String, KafkaStream> {
    all.iter()
        .filter(|(id, _)| ids.is_empty() || ids.contains(id))
        .map(|(id, s)| (id.clone(), s.clone()))
        .collect()
}

/// Everything the command shows.
#[derive(Debug, Default)]
pub struct Changes {
    /// Stream ids only in the new file.
    pub streams_added: BTreeSet<String>,
    /// Stream ids only in the old file.
    pub streams_removed: BTreeSet<String>,
    /// Clusters added, removed or changed, by id.
    pub clusters: Vec<ClusterPlan>,
    /// Clusters in both files that stay as they are.
    pub unchanged: BTreeSet<String>,
}

/// How a cluster changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only in the new file.
    Added,
    /// Only in the old file.
    Removed,
    /// In both, with a difference.
    Changed,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::Changed => "changed",
        }
    }
}

/// One property key that differs; values only when not secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyChange {
    /// The key.
    pub key: String,
    /// "added", "removed" or "changed".
    pub change: &'static str,
    /// True when the value is a secret (then neither value is shown).
    pub secret: bool,
    /// The old value, when shown.
    pub old: Option<String>,
    /// The new value, when shown.
    pub new: Option<String>,
}

/// Where the new splits of a cluster start, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartRule {
    /// The starting offsets that apply.
    pub offsets: StartingOffsets,
    /// Where they come from.
    pub from: &'static str,
}

/// What is known about a cluster's splits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Splits {
    /// Not looked up (`--offline`).
    NotLookedUp,
    /// The cluster did not answer.
    Unreachable(String),
    /// What the cluster reported.
    Known {
        /// New splits: topic, partition, and where each would start (or why not known).
        added: Vec<(String, i32, Result<i64, String>)>,
        /// Splits no longer read.
        removed: Vec<(String, i32)>,
        /// Topics to add or remove that the cluster does not have.
        missing: BTreeSet<String>,
    },
}

/// The change to one cluster.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    /// Logical cluster id.
    pub cluster: String,
    /// Added, removed or changed.
    pub kind: Kind,
    /// `bootstrap.servers` as shown (redacted if secret), from the new file when there.
    pub bootstrap: String,
    /// Topics read from now on (every topic of an added cluster).
    pub topics_added: BTreeSet<String>,
    /// Topics no longer read (every topic of a removed cluster).
    pub topics_removed: BTreeSet<String>,
    /// Property keys that differ (changed clusters only).
    pub properties: Vec<PropertyChange>,
    /// `(what, old, new)` for starting / stopping offsets that differ, per stream
    /// (`stoppingOffsets of stream orders`).
    pub offsets: Vec<(String, String, String)>,
    /// True when `bootstrap.servers` changed: the new list is asked, and flagged when
    /// it does not answer.
    pub bootstrap_changed: bool,
    /// Where the new splits start (when there are topics added).
    pub start: Option<StartRule>,
    /// The splits added and removed.
    pub splits: Splits,
    /// Properties to reach the cluster with, and the topics to ask about.
    lookup: Option<(ClientProperties, BTreeSet<String>)>,
}

impl ClusterPlan {
    fn query(&self, timeout: Duration, group: Option<&str>) -> Option<ClusterQuery> {
        let (properties, topics) = self.lookup.clone()?;
        let mut options = InspectOptions::new(timeout);
        if let Some(start) = &self.start {
            if start.offsets.needs_committed()
                && let Some(g) = group.or(properties.get("group.id"))
            {
                options = options.group(g);
            }
            if let Some(ts) = start.offsets.timestamp() {
                options = options.timestamp(ts);
            }
        }
        Some(ClusterQuery {
            cluster: self.cluster.clone(),
            properties,
            topics,
            options,
        })
    }
}

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
fn spec_text(spec: Option<Value>) -> String {
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
    let with_lookup = |topics: &BTreeSet<String>, props: &ClientProperties| {
        (!topics.is_empty()).then(|| (props.clone(), topics.clone()))
    };
    for (cluster, view) in &p.clusters_added {
        out.clusters.push(ClusterPlan {
            cluster: cluster.clone(),
            kind: Kind::Added,
            bootstrap: shown_bootstrap(&view.properties),
            topics_added: view.topics.clone(),
            topics_removed: BTreeSet::new(),
            properties: Vec::new(),
            offsets: Vec::new(),
            bootstrap_changed: false,
            start: Some(start_rule(Kind::Added, view)),
            splits: Splits::NotLookedUp,
            lookup: with_lookup(&view.topics, &view.properties),
        });
    }
    for cluster in &p.clusters_removed {
        let view = &before[cluster];
        out.clusters.push(ClusterPlan {
            cluster: cluster.clone(),
            kind: Kind::Removed,
            bootstrap: shown_bootstrap(&view.properties),
            topics_added: BTreeSet::new(),
            topics_removed: view.topics.clone(),
            properties: Vec::new(),
            offsets: Vec::new(),
            bootstrap_changed: false,
            start: None,
            splits: Splits::NotLookedUp,
            lookup: with_lookup(&view.topics, &view.properties),
        });
    }
    let mut offsets = stream_offset_changes(old, new);
    for (cluster, change) in &p.clusters_changed {
        let (was, view) = (&before[cluster], &after[cluster]);
        let touched: BTreeSet<String> = change
            .topics_added
            .union(&change.topics_removed)
            .cloned()
            .collect();
        let bootstrap_changed =
            was.properties.bootstrap_servers() != view.properties.bootstrap_servers();
        out.clusters.push(ClusterPlan {
            cluster: cluster.clone(),
            kind: Kind::Changed,
            bootstrap: shown_bootstrap(&view.properties),
            topics_added: change.topics_added.clone(),
            topics_removed: change.topics_removed.clone(),
            properties: if change.properties_changed {
                property_changes(&was.properties, &view.properties)
            } else {
                Vec::new()
            },
            offsets: offsets.remove(cluster).unwrap_or_default(),
            bootstrap_changed,
            start: (!change.topics_added.is_empty()).then(|| start_rule(Kind::Changed, view)),
            splits: if touched.is_empty() && !bootstrap_changed {
                Splits::Known {
                    added: Vec::new(),
                    removed: Vec::new(),
                    missing: BTreeSet::new(),
                }
            } else {
                Splits::NotLookedUp
            },
            lookup: if bootstrap_changed {
                with_lookup(&view.topics, &view.properties)
            } else {
                with_lookup(&touched, &view.properties)
            },
        });
    }
    // Offsets changed by a stream whose cluster's merged view (taken from the first
    // stream naming it) stayed the same: the cluster is shared with another stream.
    for (cluster, offsets) in offsets {
        if !after.contains_key(&cluster) || out.clusters.iter().any(|c| c.cluster == cluster) {
            continue;
        }
        out.clusters.push(ClusterPlan {
            cluster: cluster.clone(),
            kind: Kind::Changed,
            bootstrap: shown_bootstrap(&after[&cluster].properties),
            topics_added: BTreeSet::new(),
            topics_removed: BTreeSet::new(),
            properties: Vec::new(),
            offsets,
            bootstrap_changed: false,
            start: None,
            splits: Splits::Known {
                added: Vec::new(),
                removed: Vec::new(),
                missing: BTreeSet::new(),
            },
            lookup: None,
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use multicluster_kafka::inspect::PartitionReport;
    use multicluster_kafka::metadata::ClusterMetadata;

    fn stream(clusters: &[(&str, &str, &[&str])]) -> BTreeMap<String, KafkaStream> {
        let mut s = KafkaStream::new("s");
        for (id, bootstrap, topics) in clusters {
            let m = ClusterMetadata::builder(*bootstrap)
                .topics(topics.iter().copied())
                .build()
                .unwrap();
            s = s.with_cluster(*id, m);
        }
        BTreeMap::from([("s".to_string(), s)])
    }

    fn shared(stop_of_s2: Option<StoppingOffsets>) -> BTreeMap<String, KafkaStream> {
        let m = |stop: Option<StoppingOffsets>| {
            let mut b = ClusterMetadata::builder("a:1").topic("t");
            if let Some(stop) = stop {
                b = b.stopping_offsets(stop);
            }
            b.build().unwrap()
        };
        BTreeMap::from([
            (
                "s1".to_string(),
                KafkaStream::new("s1").with_cluster("a", m(None)),
            ),
            (
                "s2".to_string(),
                KafkaStream::new("s2").with_cluster("a", m(stop_of_s2)),
            ),
        ])
    }

    #[test]
    fn an_offset_change_of_the_second_stream_on_a_shared_cluster_is_shown() {
        let ch = changes(&shared(None), &shared(Some(StoppingOffsets::Latest)));
        assert_eq!(ch.clusters.len(), 1, "{ch:?}");
        let c = &ch.clusters[0];
        assert_eq!(c.kind, Kind::Changed);
        assert_eq!(
            c.offsets,
            [(
                "stoppingOffsets of stream s2".to_string(),
                "(source default)".to_string(),
                "latest".to_string()
            )]
        );
        assert!(ch.unchanged.is_empty());
        let text = render(Path::new("old"), Path::new("new"), &ch);
        assert!(
            text.contains("stoppingOffsets of stream s2 changed"),
            "{text}"
        );
    }

    #[test]
    fn a_changed_bootstrap_list_is_asked_and_flagged_when_it_does_not_answer() {
        let mut ch = changes(
            &stream(&[("a", "a:1", &["t"])]),
            &stream(&[("a", "b:2", &["t"])]),
        );
        let c = &mut ch.clusters[0];
        assert!(c.bootstrap_changed);
        let q = c
            .query(Duration::from_secs(1), None)
            .expect("the new list is asked");
        assert_eq!(q.properties.bootstrap_servers(), Some("b:2"));
        c.splits = splits(
            c,
            &Err(SourceError::Cluster {
                cluster: "a".into(),
                message: "metadata request: timed out".into(),
            }),
        );
        let text = render(Path::new("old"), Path::new("new"), &ch);
        assert!(
            text.contains("WARNING: the new bootstrap list b:2 does not answer"),
            "{text}"
        );
    }

    #[test]
    fn a_rotated_password_names_the_key_and_never_the_values() {
        let old: ClientProperties = [
            ("bootstrap.servers", "a:1"),
            ("sasl.password", "old-pw"),
            ("client.id", "x"),
        ]
        .into_iter()
        .collect();
        let new: ClientProperties = [
            ("bootstrap.servers", "a:1"),
            ("sasl.password", "new-pw"),
            ("client.rack", "r1"),
        ]
        .into_iter()
        .collect();
        let changes = property_changes(&old, &new);
        let keys: Vec<(&str, &str)> = changes.iter().map(|c| (c.key.as_str(), c.change)).collect();
        assert_eq!(
            keys,
            [
                ("client.id", "removed"),
                ("client.rack", "added"),
                ("sasl.password", "changed")
            ]
        );
        let pw = &changes[2];
        assert!(pw.secret && pw.old.is_none() && pw.new.is_none(), "{pw:?}");
        assert_eq!(changes[1].new.as_deref(), Some("r1"));
    }

    #[test]
    fn added_clusters_start_at_their_own_offsets_and_added_topics_at_earliest() {
        let mut view = clusters_of_streams(stream(&[("a", "a:1", &["t"])]).values())["a"].clone();
        assert_eq!(
            start_rule(Kind::Added, &view).offsets,
            StartingOffsets::Earliest
        );
        view.starting_offsets = Some(StartingOffsets::Latest);
        assert_eq!(
            start_rule(Kind::Added, &view).offsets,
            StartingOffsets::Latest
        );
        assert_eq!(
            start_rule(Kind::Changed, &view).offsets,
            StartingOffsets::Earliest
        );
    }

    #[test]
    fn offline_text_lists_clusters_and_topics_without_splits() {
        let old = stream(&[
            ("a", "a:1", &["t1", "t2"]),
            ("b", "b:1", &["x"]),
            ("keep", "k:1", &["k"]),
        ]);
        let new = stream(&[
            ("a", "a:1", &["t2", "t3"]),
            ("c", "c:1", &["y"]),
            ("keep", "k:1", &["k"]),
        ]);
        let ch = changes(&old, &new);
        let text = render(Path::new("old.yaml"), Path::new("new.yaml"), &ch);
        assert!(
            text.contains(
                "cluster a: changed (bootstrap a:1)\n  topics added: t3\n  topics removed: t1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("cluster b: removed (bootstrap b:1)\n  topics: x\n"),
            "{text}"
        );
        assert!(text.contains("cluster c: added (bootstrap c:1)\n  topics: y\n  new splits start at: earliest (the source's default for a new cluster)\n"), "{text}");
        assert_eq!(
            text.matches("splits: not looked up (--offline)").count(),
            3,
            "{text}"
        );
        assert!(text.contains("unchanged clusters: keep"), "{text}");
    }

    #[test]
    fn splits_come_from_the_report_with_resolved_start_offsets() {
        let old = stream(&[("a", "a:1", &["t1"])]);
        let new = stream(&[("a", "a:1", &["t2"])]);
        let ch = changes(&old, &new);
        let part = |partition, earliest, latest| PartitionReport {
            partition,
            earliest,
            latest,
            committed: None,
            at_timestamp: None,
        };
        let report = ClusterReport {
            cluster: "a".into(),
            kafka_cluster_id: "K".into(),
            topics: BTreeMap::from([
                ("t1".to_string(), vec![part(0, 0, 9)]),
                ("t2".to_string(), vec![part(0, 4, 9), part(1, 0, 0)]),
            ]),
            missing_topics: BTreeSet::new(),
            group: None,
        };
        let s = splits(&ch.clusters[0], &Ok(report));
        assert_eq!(
            s,
            Splits::Known {
                added: vec![("t2".into(), 0, Ok(4)), ("t2".into(), 1, Ok(0))],
                removed: vec![("t1".into(), 0)],
                missing: BTreeSet::new(),
            }
        );
        let unreachable = splits(
            &ch.clusters[0],
            &Err(SourceError::Cluster {
                cluster: "a".into(),
                message: "timed out".into(),
            }),
        );
        assert_eq!(unreachable, Splits::Unreachable("timed out".into()));
    }

    #[test]
    fn identical_files_plan_nothing() {
        let s = stream(&[("a", "a:1", &["t"])]);
        let ch = changes(&s, &s);
        assert!(ch.clusters.is_empty());
        let v = to_json(Path::new("o"), Path::new("n"), &ch);
        assert_eq!(v["changed"], false);
        assert!(
            render(Path::new("o"), Path::new("n"), &ch).contains("no change to any cluster read")
        );
    }
}
