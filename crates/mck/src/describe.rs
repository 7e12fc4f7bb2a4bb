//! `mck describe`: streams → clusters → topics → partitions, with earliest and latest
//! offsets and, for a group, committed offsets and lag. Every cluster is asked at once
//! (one thread each); an unreachable cluster is marked, not fatal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use multicluster_kafka::error::SourceError;
use multicluster_kafka::inspect::{
    ClusterQuery, ClusterReport, InspectOptions, PartitionReport, inspect_clusters,
};
use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::metadata::file::read_metadata;
use multicluster_kafka::plan::clusters_of_streams;
use multicluster_kafka::properties::{BOOTSTRAP_SERVERS, ClientProperties};
use serde_json::{Value, json};

use crate::args::{MetadataFile, parse_duration};

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
}

/// Reads the file, asks every cluster, prints the result. Exit 0 also when clusters
/// are unreachable; 1 for a bad file or an unknown stream id.
pub fn run(args: DescribeArgs) -> Result<ExitCode, String> {
    let all = match read_metadata(args.metadata.required()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mck: invalid metadata: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let streams = select_streams(&all, &args.streams)?;
    let mut options = InspectOptions::new(args.timeout);
    if let Some(g) = &args.group {
        options = options.group(g.clone());
    }
    let queries = clusters_of_streams(streams.values())
        .into_iter()
        .map(|(cluster, view)| ClusterQuery {
            cluster,
            properties: view.properties,
            topics: view.topics,
            options: options.clone(),
        })
        .collect();
    let reports = inspect_clusters(queries);
    if args.json {
        let v = to_json(&streams, &reports, args.group.as_deref());
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render(&streams, &reports, args.group.as_deref()));
    }
    Ok(ExitCode::SUCCESS)
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

/// `bootstrap.servers` as a person may see it (redacted if it came from a secret
/// reference).
pub fn shown_bootstrap(props: &ClientProperties) -> String {
    props
        .redacted()
        .find(|(k, _)| *k == BOOTSTRAP_SERVERS)
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

/// The reason a cluster lookup failed, without the `cluster `id`:` prefix the text
/// already shows.
pub fn failure_reason(e: &SourceError) -> String {
    match e {
        SourceError::Cluster { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Rows as right-aligned columns, each line indented.
fn table(rows: &[Vec<String>], indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        let _ = writeln!(out, "{indent}{}", cells.join("  "));
    }
    out
}

fn partition_rows(parts: &[PartitionReport], group: bool) -> Vec<Vec<String>> {
    let mut header = vec!["partition".to_string(), "earliest".into(), "latest".into()];
    if group {
        header.extend(["committed".to_string(), "lag".into()]);
    }
    let mut rows = vec![header];
    for p in parts {
        let mut row = vec![
            p.partition.to_string(),
            p.earliest.to_string(),
            p.latest.to_string(),
        ];
        if group {
            row.extend([opt(p.committed), opt(p.lag())]);
        }
        rows.push(row);
    }
    rows
}

/// The person-readable tree.
pub fn render(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Result<ClusterReport, SourceError>>,
    group: Option<&str>,
) -> String {
    let mut out = String::new();
    if let Some(g) = group {
        let _ = writeln!(out, "group {g}");
    }
    for (id, stream) in streams {
        let _ = writeln!(out, "stream {id}");
        for (cid, meta) in &stream.clusters {
            let bootstrap = shown_bootstrap(&meta.properties);
            match reports.get(cid) {
                Some(Ok(r)) => {
                    let _ = writeln!(
                        out,
                        "  cluster {cid}  bootstrap {bootstrap}  kafka cluster.id {}",
                        r.kafka_cluster_id
                    );
                    for topic in &meta.topics {
                        match r.topics.get(topic) {
                            Some(parts) => {
                                let mut line =
                                    format!("    topic {topic}  {} partition(s)", parts.len());
                                if group.is_some() {
                                    let _ = write!(line, "  lag {}", opt(r.topic_lag(topic)));
                                }
                                let _ = writeln!(out, "{line}");
                                out.push_str(&table(
                                    &partition_rows(parts, group.is_some()),
                                    "      ",
                                ));
                            }
                            None => {
                                let _ = writeln!(out, "    topic {topic}  missing on this cluster");
                            }
                        }
                    }
                }
                Some(Err(e)) => {
                    let _ = writeln!(
                        out,
                        "  cluster {cid}  bootstrap {bootstrap}  unreachable: {}",
                        failure_reason(e)
                    );
                    for topic in &meta.topics {
                        let _ =
                            writeln!(out, "    topic {topic}  (not known: cluster unreachable)");
                    }
                }
                None => {
                    let _ = writeln!(out, "  cluster {cid}  bootstrap {bootstrap}  not asked");
                }
            }
        }
    }
    out
}

/// The same as JSON: `{group, streams: [{stream, clusters: [{cluster, bootstrapServers,
/// reachable, error, kafkaClusterId, topics: [{topic, missing, lag, partitions: [{partition,
/// earliest, latest, committed, lag}]}]}]}]}`.
pub fn to_json(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Result<ClusterReport, SourceError>>,
    group: Option<&str>,
) -> Value {
    let streams: Vec<Value> = streams
        .iter()
        .map(|(id, stream)| {
            let clusters: Vec<Value> = stream
                .clusters
                .iter()
                .map(|(cid, meta)| {
                    let mut c = json!({
                        "cluster": cid,
                        "bootstrapServers": shown_bootstrap(&meta.properties),
                    });
                    match reports.get(cid) {
                        Some(Ok(r)) => {
                            let topics: Vec<Value> = meta
                                .topics
                                .iter()
                                .map(|t| match r.topics.get(t) {
                                    Some(parts) => json!({
                                        "topic": t,
                                        "missing": false,
                                        "lag": group.and(r.topic_lag(t)),
                                        "partitions": parts.iter().map(|p| json!({
                                            "partition": p.partition,
                                            "earliest": p.earliest,
                                            "latest": p.latest,
                                            "committed": p.committed,
                                            "lag": p.lag(),
                                        })).collect::<Vec<_>>(),
                                    }),
                                    None => json!({ "topic": t, "missing": true, "lag": null, "partitions": [] }),
                                })
                                .collect();
                            c["reachable"] = json!(true);
                            c["error"] = Value::Null;
                            c["kafkaClusterId"] = json!(r.kafka_cluster_id);
                            c["topics"] = json!(topics);
                        }
                        Some(Err(e)) => {
                            c["reachable"] = json!(false);
                            c["error"] = json!(failure_reason(e));
                            c["kafkaClusterId"] = Value::Null;
                            c["topics"] = json!(meta
                                .topics
                                .iter()
                                .map(|t| json!({ "topic": t }))
                                .collect::<Vec<_>>());
                        }
                        None => {
                            c["reachable"] = Value::Null;
                        }
                    }
                    c
                })
                .collect();
            json!({ "stream": id, "clusters": clusters })
        })
        .collect();
    json!({ "group": group, "streams": streams })
}

#[cfg(test)]
mod tests {
    use super::*;
    use multicluster_kafka::metadata::ClusterMetadata;
    use std::collections::BTreeSet;

    fn streams() -> BTreeMap<String, KafkaStream> {
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

    fn reports() -> BTreeMap<String, Result<ClusterReport, SourceError>> {
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
        };
        let west = SourceError::Cluster {
            cluster: "west".into(),
            message: "metadata request: timed out".into(),
        };
        BTreeMap::from([
            ("east".to_string(), Ok(east)),
            ("west".to_string(), Err(west)),
        ])
    }

    #[test]
    fn the_tree_shows_offsets_lag_missing_topics_and_unreachable_clusters() {
        let text = render(&streams(), &reports(), Some("g"));
        assert!(
            text.contains("cluster east  bootstrap east:9092  kafka cluster.id K1"),
            "{text}"
        );
        assert!(
            text.contains("topic orders  2 partition(s)  lag 34"),
            "{text}"
        );
        assert!(
            text.contains("partition  earliest  latest  committed  lag"),
            "{text}"
        );
        assert!(
            text.contains("        0         0    1234       1200   34"),
            "{text}"
        );
        assert!(
            text.contains("        1         3       7          -    -"),
            "{text}"
        );
        assert!(
            text.contains("topic gone  missing on this cluster"),
            "{text}"
        );
        assert!(
            text.contains(
                "cluster west  bootstrap west:9092  unreachable: metadata request: timed out"
            ),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn without_a_group_there_are_no_committed_or_lag_columns() {
        let text = render(&streams(), &reports(), None);
        assert!(text.contains("partition  earliest  latest\n"), "{text}");
        assert!(
            !text.contains("committed") && !text.contains("lag"),
            "{text}"
        );
    }

    #[test]
    fn json_has_every_field_and_marks_the_unreachable_cluster() {
        let v = to_json(&streams(), &reports(), Some("g"));
        let clusters = &v["streams"][0]["clusters"];
        assert_eq!(clusters[0]["kafkaClusterId"], "K1");
        assert_eq!(clusters[0]["topics"][1]["topic"], "orders");
        assert_eq!(clusters[0]["topics"][1]["lag"], 34);
        assert_eq!(clusters[0]["topics"][1]["partitions"][0]["committed"], 1200);
        assert_eq!(
            clusters[0]["topics"][1]["partitions"][1]["committed"],
            Value::Null
        );
        assert_eq!(clusters[0]["topics"][0]["missing"], true);
        assert_eq!(clusters[1]["reachable"], false);
        assert_eq!(clusters[1]["error"], "metadata request: timed out");
        assert!(!v.to_string().contains("hunter2"));
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
