//! `mck plan OLD NEW`: what a running source would do if the metadata changed from
//! OLD to NEW. The change itself comes from the library's pure
//! [`multicluster_kafka::unstable::plan::plan`]; this command adds what only the clusters know
//! (the splits added and removed, and the offsets new splits would start at) and
//! renders it for a person or as JSON. A stream moving onto a mirror of a cluster
//! taken out of it is shown partition by partition, with the position from a
//! checkpoint translated onto the mirror (`switch/`).

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
use multicluster_kafka::unstable::plan::{ClusterChange, ClusterView, clusters_of_streams, plan};
use multicluster_kafka::unstable::resolve_start;
use serde_json::{Value, json};

use crate::args::parse_duration;
use crate::clusters::{failure_reason, shown_bootstrap};

mod changes;
mod model;
mod positions;
mod render;
mod switch;

use changes::{changes, spec_text, splits};
pub use model::{Changes, ClusterPlan, Kind, PropertyChange, Splits, StartRule};
pub use positions::read_positions;
pub use render::{render, to_json};
pub use switch::{Switch, SwitchPartition, SwitchStatus};

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
    /// Where a stream moving onto a mirror is now: the newest checkpoint in this
    /// directory (as `mck consume --checkpoint-dir` writes them). Each partition's
    /// position is translated onto the mirror.
    #[arg(long, value_name = "DIR", conflicts_with = "checkpoint")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Like --checkpoint-dir, from this checkpoint file.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,
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
                crate::stdio::say!("mck: error: {e}");
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
    let positions = read_positions(args.checkpoint_dir.as_deref(), args.checkpoint.as_deref())?;
    let mut changes = changes(&old, &new);
    changes.switches = switch::switches(&old, &new, positions.as_ref());
    if !args.offline {
        let queries = changes
            .clusters
            .iter()
            .filter_map(|c| c.query(args.timeout, args.group.as_deref()))
            .collect();
        // The mirrors are asked beside the clusters, each on a thread of its own: a
        // mirror that does not answer costs its own timeout only.
        let reports = std::thread::scope(|scope| {
            for s in &mut changes.switches {
                let (positions, group) = (positions.as_ref(), args.group.as_deref());
                scope.spawn(move || s.look_up(positions, group, args.timeout));
            }
            inspect_clusters(queries)
        });
        for c in &mut changes.clusters {
            if let Some(r) = reports.get(&c.cluster) {
                c.splits = splits(c, r);
            }
        }
    }
    if args.json {
        let v = to_json(old_path, new_path, &changes);
        crate::stdio::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ))?;
    } else {
        crate::stdio::print(&render(old_path, new_path, &changes))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn select(all: &BTreeMap<String, KafkaStream>, ids: &[String]) -> BTreeMap<String, KafkaStream> {
    all.iter()
        .filter(|(id, _)| ids.is_empty() || ids.contains(id))
        .map(|(id, s)| (id.clone(), s.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::changes::{property_changes, start_rule};
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
