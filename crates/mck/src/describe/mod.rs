//! `mck describe`: streams → clusters → topics → partitions, with earliest and latest
//! offsets and, for a group, committed offsets and lag. Every cluster is asked at once
//! (one thread each) and shown with its state in the words `mck consume` and the
//! source use: connected, unreachable (with its bootstrap list and the reason),
//! rejected (credentials or TLS refused) or refused (a property librdkafka refuses,
//! by key). An unreachable or rejecting cluster is marked, not fatal; a refused
//! property is an error of the file, named on stderr, and the exit status is 1.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use multicluster_kafka::inspect::{
    ClusterQuery, ClusterState, InspectOptions, inspect_cluster_states,
};
use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::metadata::file::read_metadata;
use multicluster_kafka::properties::RefusedProperty;
use multicluster_kafka::unstable::plan::every_cluster_of_streams;

use crate::args::{MetadataFile, parse_duration};

mod checkpoint;
mod json;
mod mirrors;
mod text;

use checkpoint::{mark_read, read_clusters, with_roles_from};
pub use json::to_json;
use mirrors::mirror_positions;
pub use text::render;

/// Arguments of `mck describe`.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub metadata: MetadataFile,
    /// Streams to show (all when none is given).
    #[arg(long = "stream", value_name = "ID")]
    pub streams: Vec<String>,
    /// Consumer group whose committed offsets and lag to show.
    #[arg(long = "group", value_name = "ID")]
    pub group: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Timeout of each call to a cluster (e.g. 500ms, 10s, 1m). A cluster that does not
    /// answer in time is shown as unreachable.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Where a running (or stopped) `mck consume` reads: the newest checkpoint in this
    /// directory. Mirrors are then shown as read or standby by what it holds, which
    /// tells a failover (the metadata still names the source) apart from a standby.
    #[arg(long, value_name = "DIR", conflicts_with = "checkpoint")]
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// Like --checkpoint-dir, from this checkpoint file.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<std::path::PathBuf>,
}

/// Reads the file, asks every cluster, prints the result. Exit 0 also when clusters
/// are unreachable or reject the client; 1 for a bad file, an unknown stream id or a
/// property librdkafka refuses (each named on stderr with the file and the cluster).
pub fn run(args: DescribeArgs) -> Result<ExitCode, String> {
    let file = args.metadata.required();
    let all = match read_metadata(file) {
        Ok(s) => s,
        Err(e) => {
            crate::stdio::say!("mck: error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let streams = select_streams(&all, &args.streams)?;
    let positions =
        crate::plan::read_positions(args.checkpoint_dir.as_deref(), args.checkpoint.as_deref())?;
    let read_here = positions.as_ref().map(|p| read_clusters(&p.checkpoint));
    let mut options = InspectOptions::new(args.timeout);
    if let Some(g) = &args.group {
        options = options.group(g.clone());
    }
    let queries = every_cluster_of_streams(streams.values())
        .into_iter()
        .map(|(cluster, view)| ClusterQuery {
            cluster,
            properties: view.properties,
            topics: view.topics,
            options: options.clone(),
        })
        .collect();
    let reports = inspect_cluster_states(queries);
    let mirrors = mirror_positions(&streams, &reports, &options);
    if args.json {
        let mut v = to_json(&streams, &reports, &mirrors, args.group.as_deref());
        if let Some(read) = &read_here {
            mark_read(&mut v, read);
        }
        crate::stdio::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ))?;
    } else {
        let mut text = render(&streams, &reports, &mirrors, args.group.as_deref());
        if let (Some(p), Some(read)) = (&positions, &read_here) {
            text = format!(
                "checkpoint {}: the source reads {}\n{}",
                p.file.display(),
                if read.is_empty() {
                    "nothing yet".to_string()
                } else {
                    read.iter().cloned().collect::<Vec<_>>().join(", ")
                },
                with_roles_from(&text, read)
            );
        }
        crate::stdio::print(&text)?;
    }
    let refused: Vec<String> = reports
        .iter()
        .filter_map(|(cluster, i)| match &i.state {
            ClusterState::Refused(r) => Some(refused_line(file, cluster, r)),
            _ => None,
        })
        .collect();
    if refused.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(refused.join("; "))
    }
}

/// A property librdkafka refuses, located: `FILE: cluster `ID`: property `KEY`
/// refused by librdkafka: REASON`. Never holds the value. `mck consume` fails with the
/// same line.
pub fn refused_line(file: &Path, cluster: &str, refused: &RefusedProperty) -> String {
    format!("{}: cluster `{cluster}`: {refused}", file.display())
}

/// The streams named by `ids` (all when empty); an id the file does not define is an
/// error naming it.
fn select_streams(
    all: &BTreeMap<String, KafkaStream>,
    ids: &[String],
) -> Result<BTreeMap<String, KafkaStream>, String> {
    if ids.is_empty() {
        return Ok(all.clone());
    }
    let unknown: Vec<&str> = ids
        .iter()
        .filter(|id| !all.contains_key(*id))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown stream id(s): {} (the file defines: {})",
            unknown.join(", "),
            all.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(all
        .iter()
        .filter(|(id, _)| ids.contains(id))
        .map(|(id, s)| (id.clone(), s.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::mirrors::MirrorPositions;
    use super::*;
    use multicluster_kafka::error::SourceError;
    use multicluster_kafka::inspect::{
        ClusterReport, GroupProtocol, GroupReport, Inspection, PartitionReport,
    };
    use multicluster_kafka::metadata::{ClusterMetadata, Translate};
    use multicluster_kafka::properties::RefusedBy;
    use multicluster_kafka::unstable::translate::OffsetSync;
    use serde_json::{Value, json};
    use std::collections::BTreeSet;

    pub(super) fn streams() -> BTreeMap<String, KafkaStream> {
        let east = ClusterMetadata::builder("east:9092")
            .topics(["orders", "gone"])
            .property("sasl.password", "hunter2")
            .build()
            .unwrap();
        let west = ClusterMetadata::builder("west:9092")
            .topic("orders")
            .build()
            .unwrap();
        let s = KafkaStream::new("s")
            .with_cluster("east", east)
            .with_cluster("west", west);
        BTreeMap::from([("s".to_string(), s)])
    }

    pub(super) fn reports() -> BTreeMap<String, Inspection> {
        let east = ClusterReport {
            cluster: "east".into(),
            kafka_cluster_id: "K1".into(),
            topics: BTreeMap::from([(
                "orders".to_string(),
                vec![
                    PartitionReport {
                        partition: 0,
                        earliest: 0,
                        latest: 1234,
                        committed: Some(1200),
                        at_timestamp: None,
                    },
                    PartitionReport {
                        partition: 1,
                        earliest: 3,
                        latest: 7,
                        committed: None,
                        at_timestamp: None,
                    },
                ],
            )]),
            missing_topics: BTreeSet::from(["gone".to_string()]),
            group: Some(Ok(GroupReport {
                protocol: GroupProtocol::Consumer,
                state: "Stable".into(),
                members: 3,
            })),
        };
        let west = SourceError::Cluster {
            cluster: "west".into(),
            message: "metadata request: timed out".into(),
        };
        BTreeMap::from([
            (
                "east".to_string(),
                Inspection {
                    state: ClusterState::Connected,
                    result: Ok(east),
                },
            ),
            (
                "west".to_string(),
                Inspection {
                    state: ClusterState::Unreachable,
                    result: Err(west),
                },
            ),
        ])
    }

    #[test]
    fn a_mirror_is_shown_with_its_source_its_role_and_how_far_behind_it_is() {
        use multicluster_kafka::metadata::{MirrorOf, Translate};
        let mut all = streams();
        let s = all.get_mut("s").unwrap();
        let west = s.clusters.get_mut("west").unwrap();
        west.mirror_of = Some(MirrorOf::new("east", Translate::Identical));
        let mut reports = reports();
        let copy = |latest: [i64; 2]| ClusterReport {
            cluster: "west".into(),
            kafka_cluster_id: "K2".into(),
            topics: BTreeMap::from([(
                "orders".to_string(),
                latest
                    .iter()
                    .enumerate()
                    .map(|(p, l)| PartitionReport {
                        partition: p as i32,
                        earliest: 0,
                        latest: *l,
                        committed: None,
                        at_timestamp: None,
                    })
                    .collect(),
            )]),
            missing_topics: BTreeSet::new(),
            group: None,
        };
        reports.insert(
            "west".into(),
            Inspection {
                state: ClusterState::Connected,
                result: Ok(copy([1200, 7])),
            },
        );
        let text = render(&all, &reports, &MirrorPositions::default(), None);
        assert!(
            text.contains("mirror of east  translate identical  standby"),
            "{text}"
        );
        assert!(text.contains("34 record(s) behind its source"), "{text}");
        let v = to_json(&all, &reports, &MirrorPositions::default(), None);
        let west = &v["streams"][0]["clusters"][1];
        assert_eq!(west["mirrorOf"]["standby"], json!(true));
        assert_eq!(west["topics"][0]["behindSource"], json!(34));
        // Taken out of the stream, the source is not asked: nothing to compare with.
        all.get_mut("s").unwrap().clusters.remove("east");
        let text = render(&all, &reports, &MirrorPositions::default(), None);
        assert!(
            text.contains("read (its source is not in the stream)"),
            "{text}"
        );
    }

    #[test]
    fn a_mirror_maker_copy_is_behind_by_its_newest_offset_syncs() {
        use multicluster_kafka::metadata::MirrorOf;
        let mut all = streams();
        let west = all.get_mut("s").unwrap().clusters.get_mut("west").unwrap();
        let mut of = MirrorOf::new("east", Translate::Mm2);
        of.topics.insert("orders".into(), "orders".into());
        west.mirror_of = Some(of);
        let mut reports = reports();
        let part = |partition: i32, latest: i64| PartitionReport {
            partition,
            earliest: 0,
            latest,
            committed: None,
            at_timestamp: None,
        };
        reports.insert(
            "west".into(),
            Inspection {
                state: ClusterState::Connected,
                result: Ok(ClusterReport {
                    cluster: "west".into(),
                    kafka_cluster_id: "K2".into(),
                    topics: BTreeMap::from([(
                        "orders".to_string(),
                        vec![part(0, 1100), part(1, 4)],
                    )]),
                    missing_topics: BTreeSet::new(),
                    group: None,
                }),
            },
        );
        let sync = |upstream, downstream| OffsetSync {
            upstream,
            downstream,
        };
        // East ends at 1234 and 7. West's 1100 stands for east's 1000 + 200 by the
        // sync; west's 4 for east's 5 + 2: 34 and 0 behind.
        let mut mirrors = MirrorPositions {
            syncs: BTreeMap::from([
                (("west".into(), "orders".into(), 0), sync(1000, 900)),
                (("west".into(), "orders".into(), 1), sync(5, 2)),
            ]),
            ..Default::default()
        };
        let text = render(&all, &reports, &mirrors, None);
        assert!(text.contains("34 record(s) behind its source"), "{text}");
        // A partition without a sync: no estimate.
        mirrors.syncs.remove(&("west".into(), "orders".into(), 1));
        let v = to_json(&all, &reports, &mirrors, None);
        assert_eq!(
            v["streams"][0]["clusters"][1]["topics"][0]["behindSource"],
            Value::Null
        );
    }

    fn cluster_error(cluster: &str, message: &str) -> SourceError {
        SourceError::Cluster {
            cluster: cluster.into(),
            message: message.into(),
        }
    }

    #[test]
    fn rejected_and_refused_clusters_say_so_with_the_reason_and_the_key() {
        let mut streams = streams();
        let s = streams.get_mut("s").unwrap();
        let west = s.clusters["west"].clone();
        s.clusters.insert("guarded".into(), west.clone());
        s.clusters.insert("odd".into(), west);
        let mut reports = reports();
        reports.insert(
            "guarded".into(),
            Inspection {
                state: ClusterState::Rejected,
                result: Err(cluster_error("guarded", "SASL authentication failed")),
            },
        );
        let refused = RefusedProperty {
            key: Some("fetch.max.bytes".into()),
            reason: "Invalid value for configuration property \"fetch.max.bytes\"".into(),
            by: RefusedBy::Librdkafka,
        };
        reports.insert(
            "odd".into(),
            Inspection {
                result: Err(cluster_error("odd", &refused.to_string())),
                state: ClusterState::Refused(refused),
            },
        );
        let text = render(&streams, &reports, &MirrorPositions::default(), None);
        assert!(
            text.contains(
                "cluster guarded  bootstrap west:9092  rejected (credentials or TLS refused): SASL authentication failed"
            ),
            "{text}"
        );
        assert!(
            text.contains("cluster odd  bootstrap west:9092  refused property `fetch.max.bytes`: Invalid value"),
            "{text}"
        );
        assert!(
            text.contains("topic orders  (not known: cluster refused)"),
            "{text}"
        );
        let v = to_json(&streams, &reports, &MirrorPositions::default(), None);
        let clusters = v["streams"][0]["clusters"].as_array().unwrap();
        let by = |id: &str| clusters.iter().find(|c| c["cluster"] == id).unwrap();
        assert_eq!(by("east")["state"], "connected");
        assert_eq!(by("west")["state"], "unreachable");
        assert_eq!(by("guarded")["state"], "rejected");
        assert_eq!(by("guarded")["reachable"], false);
        assert_eq!(by("odd")["state"], "refused");
        assert_eq!(by("odd")["refusedProperty"], "fetch.max.bytes");
        assert_eq!(
            refused_line(
                Path::new("m.yaml"),
                "odd",
                &RefusedProperty {
                    key: Some("k".into()),
                    reason: "r".into(),
                    by: RefusedBy::Librdkafka,
                }
            ),
            "m.yaml: cluster `odd`: property `k` refused by librdkafka: r"
        );
    }

    #[test]
    fn an_unknown_stream_id_is_named_in_the_error() {
        let e = select_streams(&streams(), &["nope".to_string()]).unwrap_err();
        assert!(e.contains("nope") && e.contains("defines: s"), "{e}");
        assert_eq!(
            select_streams(&streams(), &["s".to_string()])
                .unwrap()
                .len(),
            1
        );
    }
}
