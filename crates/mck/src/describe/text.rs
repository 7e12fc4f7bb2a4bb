//! The person-readable tree of `mck describe`: streams, clusters with their state,
//! topics and a table of partitions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use multicluster_kafka::error::SourceError;
use multicluster_kafka::inspect::{
    ClusterReport, ClusterState, GroupProtocol, GroupReport, Inspection, PartitionReport,
};
use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::unstable::plan::is_standby;

use super::mirrors::{MirrorPositions, behind_source};
use crate::clusters::{failure_reason, shown_bootstrap};

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

/// What the tree says after a cluster's bootstrap list: its state, and the reason
/// when it is not read.
fn state_text(i: &Inspection) -> String {
    match (&i.state, &i.result) {
        (ClusterState::Connected, Ok(r)) => {
            format!("connected  kafka cluster.id {}", r.kafka_cluster_id)
        }
        (ClusterState::Connected, Err(e)) => format!("connected, but {}", failure_reason(e)),
        (ClusterState::Unreachable, result) => {
            format!("unreachable: {}", reason_of(result))
        }
        (ClusterState::Rejected, result) => {
            format!(
                "rejected (credentials or TLS refused): {}",
                reason_of(result)
            )
        }
        (ClusterState::Refused(r), _) => match &r.key {
            Some(k) => format!("refused property `{k}`: {}", r.reason),
            None => format!("refused properties: {}", r.reason),
        },
    }
}

fn reason_of(result: &Result<ClusterReport, SourceError>) -> String {
    result
        .as_ref()
        .err()
        .map_or_else(String::new, failure_reason)
}

/// What a cluster's coordinator says of the group, in one line.
fn group_text(group: &str, described: &Result<GroupReport, String>) -> String {
    match described {
        Ok(d) => {
            let protocol = match d.protocol {
                GroupProtocol::Consumer => "consumer group protocol (KIP-848)",
                GroupProtocol::Classic => "classic group protocol",
                GroupProtocol::Unknown => "protocol not known",
            };
            format!(
                "group {group}  {protocol}  state {}  {} member(s)",
                d.state, d.members
            )
        }
        Err(e) => format!("group {group}  not described: {e}"),
    }
}

/// The person-readable tree.
pub fn render(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Inspection>,
    mirrors: &MirrorPositions,
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
            let Some(inspection) = reports.get(cid) else {
                let _ = writeln!(out, "  cluster {cid}  bootstrap {bootstrap}  not asked");
                continue;
            };
            let _ = writeln!(
                out,
                "  cluster {cid}  bootstrap {bootstrap}  {}",
                state_text(inspection)
            );
            if let Some(m) = &meta.mirror_of {
                let role = if is_standby(stream, meta) {
                    "standby (not read while its source is in the stream)"
                } else {
                    "read (its source is not in the stream)"
                };
                let _ = writeln!(
                    out,
                    "    mirror of {}  translate {}  {role}",
                    m.cluster,
                    m.translate.as_str()
                );
            }
            let r = match &inspection.result {
                Ok(r) => {
                    if let (Some(g), Some(described)) = (group, &r.group) {
                        let _ = writeln!(out, "    {}", group_text(g, described));
                    }
                    r
                }
                Err(_) => {
                    let why = match inspection.state {
                        ClusterState::Connected => "lookup failed",
                        ref other => other.name(),
                    };
                    for topic in &meta.topics {
                        let _ = writeln!(out, "    topic {topic}  (not known: cluster {why})");
                    }
                    continue;
                }
            };
            for topic in &meta.topics {
                match r.topics.get(topic) {
                    Some(parts) => {
                        let mut line = format!("    topic {topic}  {} partition(s)", parts.len());
                        if group.is_some() {
                            let _ = write!(line, "  lag {}", opt(r.topic_lag(topic)));
                        }
                        if let Some(behind) =
                            behind_source(cid, meta, topic, parts, reports, mirrors)
                        {
                            let _ = write!(line, "  {behind} record(s) behind its source");
                        }
                        if let Some(ms) = mirrors.behind_ms.get(&(cid.clone(), topic.clone())) {
                            let _ = write!(line, "  {:.1}s behind its source", *ms as f64 / 1000.0);
                        }
                        let _ = writeln!(out, "{line}");
                        out.push_str(&table(&partition_rows(parts, group.is_some()), "      "));
                    }
                    None => {
                        let _ = writeln!(out, "    topic {topic}  missing on this cluster");
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::tests::{reports, streams};

    #[test]
    fn the_tree_shows_offsets_lag_missing_topics_and_unreachable_clusters() {
        let text = render(
            &streams(),
            &reports(),
            &MirrorPositions::default(),
            Some("g"),
        );
        assert!(
            text.contains("cluster east  bootstrap east:9092  connected  kafka cluster.id K1"),
            "{text}"
        );
        assert!(
            text.contains(
                "    group g  consumer group protocol (KIP-848)  state Stable  3 member(s)"
            ),
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
        let text = render(&streams(), &reports(), &MirrorPositions::default(), None);
        assert!(text.contains("partition  earliest  latest\n"), "{text}");
        assert!(
            !text.contains("committed") && !text.contains("lag"),
            "{text}"
        );
    }
}
