//! `mck describe`: streams → clusters → topics → partitions, with earliest and latest
//! offsets and, for a group, committed offsets and lag. Every cluster is asked at once
//! (one thread each) and shown with its state in the words `mck consume` and the
//! source use: connected, unreachable (with its bootstrap list and the reason),
//! rejected (credentials or TLS refused) or refused (a property librdkafka refuses,
//! by key). An unreachable or rejecting cluster is marked, not fatal; a refused
//! property is an error of the file, named on stderr, and the exit status is 1.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use multicluster_kafka::error::SourceError;
use multicluster_kafka::inspect::{
    ClusterQuery, ClusterReport, ClusterState, GroupProtocol, GroupReport, InspectOptions,
    Inspection, PartitionReport, SyncWanted, inspect_cluster_states, mirror_maker_syncs,
    newest_timestamps,
};
use multicluster_kafka::metadata::file::read_metadata;
use multicluster_kafka::metadata::{KafkaStream, Translate};
use multicluster_kafka::properties::RefusedProperty;
use multicluster_kafka::unstable::plan::{every_cluster_of_streams, is_standby};
use multicluster_kafka::unstable::translate::OffsetSync;
use serde_json::{Value, json};

use crate::args::{MetadataFile, parse_duration};
use crate::clusters::{failure_reason, shown_bootstrap};

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

/// What tells how far each mirror is behind its source, beyond the offsets.
#[derive(Debug, Default)]
pub struct MirrorPositions {
    /// MirrorMaker 2's newest offset sync at or below each source partition's last
    /// record, by (mirror cluster, topic on the mirror, partition).
    pub syncs: BTreeMap<(String, String, i32), OffsetSync>,
    /// For a timestamp mirror, by (mirror cluster, topic on the mirror): how much
    /// older the mirror's newest record is than the source's, in milliseconds (the
    /// most over the partitions; 0 when it is not older).
    pub behind_ms: BTreeMap<(String, String), i64>,
}

/// Reads, for every mirror whose cluster and source both answered, what tells how far
/// it is behind: for `translate: mm2` MirrorMaker 2's offset syncs on the mirror for
/// the source's last records ([`behind_source`] estimates the distance with them),
/// for `translate: timestamp` the newest record's timestamp of each partition on both
/// sides. A mirror whose syncs cannot be read (or are kept on the source cluster), or
/// whose records cannot be read, gets none, and no distance.
fn mirror_positions(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Inspection>,
    options: &InspectOptions,
) -> MirrorPositions {
    let mut out = MirrorPositions::default();
    let mut asked = std::collections::BTreeSet::new();
    for stream in streams.values() {
        for (cid, meta) in &stream.clusters {
            let Some(mirror) = meta.mirror_of.as_ref() else {
                continue;
            };
            if mirror.translate == Translate::Identical || !asked.insert(cid.clone()) {
                continue;
            }
            let (Some(Ok(here)), Some(Ok(there))) = (
                reports.get(cid).map(|i| i.result.as_ref()),
                reports.get(&mirror.cluster).map(|i| i.result.as_ref()),
            ) else {
                continue;
            };
            let mut wanted = Vec::new();
            for topic in &meta.topics {
                let (Some(parts), Some(source_topic)) =
                    (here.topics.get(topic), mirror.source_topic(topic))
                else {
                    continue;
                };
                let Some(source_parts) = there.topics.get(&source_topic) else {
                    continue;
                };
                for p in parts {
                    if let Some(s) = source_parts.iter().find(|s| s.partition == p.partition) {
                        wanted.push(SyncWanted {
                            topic: topic.clone(),
                            source_topic: source_topic.clone(),
                            partition: p.partition,
                            upstream: (s.latest - 1).max(0),
                        });
                    }
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let options = InspectOptions::new(options.timeout);
            if mirror.translate == Translate::Timestamp {
                let here: Vec<(String, i32)> = wanted
                    .iter()
                    .map(|w| (w.topic.clone(), w.partition))
                    .collect();
                let there: Vec<(String, i32)> = wanted
                    .iter()
                    .map(|w| (w.source_topic.clone(), w.partition))
                    .collect();
                let source_props = &stream.clusters[&mirror.cluster].properties;
                let (Ok(here_ts), Ok(there_ts)) = (
                    newest_timestamps(cid, &meta.properties, &here, &options),
                    newest_timestamps(&mirror.cluster, source_props, &there, &options),
                ) else {
                    continue;
                };
                for w in &wanted {
                    let mine = here_ts
                        .get(&(w.topic.clone(), w.partition))
                        .copied()
                        .flatten();
                    let theirs = there_ts
                        .get(&(w.source_topic.clone(), w.partition))
                        .copied()
                        .flatten();
                    // A source partition with no timestamp has nothing to be behind.
                    let Some(theirs) = theirs else { continue };
                    // A mirror partition that holds nothing yet has no time to compare.
                    let Some(mine) = mine else { continue };
                    let behind = (theirs - mine).max(0);
                    let slot = out
                        .behind_ms
                        .entry((cid.clone(), w.topic.clone()))
                        .or_insert(0);
                    *slot = (*slot).max(behind);
                }
                continue;
            }
            if let Ok(found) =
                mirror_maker_syncs(cid, &meta.properties, mirror.alias(), wanted, &options)
            {
                for ((topic, partition), (sync, _)) in found.found {
                    out.syncs.insert((cid.clone(), topic, partition), sync);
                }
            }
        }
    }
    out
}

/// How many records a mirror lacks of its source's copy of `topic`, over the
/// partitions both report: the source's end minus the mirror's for identical
/// offsets; for MirrorMaker 2, the source's end minus the source offset the mirror's
/// end stands for by the newest offset sync (an estimate: gaps after the sync, from
/// transactions or compaction, are counted as records). `None` for other entries,
/// timestamp mirrors (their offsets tell nothing: `mck plan` translates positions),
/// a source not described, or a partition without an offset sync.
fn behind_source(
    cluster: &str,
    meta: &multicluster_kafka::metadata::ClusterMetadata,
    topic: &str,
    parts: &[PartitionReport],
    reports: &BTreeMap<String, Inspection>,
    mirrors: &MirrorPositions,
) -> Option<i64> {
    let mirror = meta.mirror_of.as_ref()?;
    let source = reports.get(&mirror.cluster)?.result.as_ref().ok()?;
    let source_parts = source.topics.get(&mirror.source_topic(topic)?)?;
    let mut behind = 0;
    for p in parts {
        let s = source_parts.iter().find(|s| s.partition == p.partition)?;
        let copied_to = match mirror.translate {
            Translate::Identical => p.latest,
            Translate::Mm2 => {
                let sync =
                    mirrors
                        .syncs
                        .get(&(cluster.to_string(), topic.to_string(), p.partition))?;
                sync.upstream + (p.latest - sync.downstream).max(0)
            }
            Translate::Timestamp => return None,
        };
        behind += (s.latest - copied_to).max(0);
    }
    Some(behind)
}

/// The clusters a checkpoint holds positions of its own on (not retained ones): what
/// the source that wrote it was reading.
fn read_clusters(
    checkpoint: &multicluster_kafka::checkpoint::Checkpoint,
) -> std::collections::BTreeSet<String> {
    checkpoint
        .clusters
        .iter()
        .filter(|(_, c)| c.splits.iter().any(|s| s.retained_until_ms.is_none()))
        .map(|(id, _)| id.clone())
        .collect()
}

/// The tree with each mirror's role as the checkpoint shows it: a mirror the source
/// reads although the metadata still names its source was failed over to.
fn with_roles_from(text: &str, read: &std::collections::BTreeSet<String>) -> String {
    let mut out = String::new();
    let mut cluster: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("  cluster ") {
            cluster = rest.split_whitespace().next().map(str::to_string);
        }
        let read_by_source = cluster.as_ref().is_some_and(|c| read.contains(c));
        let line = match line.split_once("  standby (not read while its source is in the stream)") {
            Some((head, _)) if read_by_source => {
                format!(
                    "{head}  read: failed over (the checkpoint reads the mirror, the metadata still names its source)"
                )
            }
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `mirrorOf.readInCheckpoint` of each mirror in describe's JSON.
fn mark_read(v: &mut Value, read: &std::collections::BTreeSet<String>) {
    let Some(streams) = v["streams"].as_array_mut() else {
        return;
    };
    for s in streams {
        let Some(clusters) = s["clusters"].as_array_mut() else {
            continue;
        };
        for c in clusters {
            let id = c["cluster"].as_str().unwrap_or_default().to_string();
            if c["mirrorOf"].is_object() {
                c["mirrorOf"]["readInCheckpoint"] = json!(read.contains(&id));
            }
        }
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

/// The same as JSON: `{group, streams: [{stream, clusters: [{cluster, bootstrapServers,
/// mirrorOf: {cluster, translate, standby}, state, reachable, error, refusedProperty,
/// kafkaClusterId, topics: [{topic, missing, lag, behindSource, behindSourceSeconds,
/// partitions: [{partition, earliest, latest, committed, lag}]}], group: {protocol,
/// state, members} or {error}}]}]}`. `state` is
/// `connected`, `unreachable`, `rejected` or `refused`; `refusedProperty` the key
/// librdkafka refused (or null); `error` why the cluster could not be described;
/// `behindSource` the records a mirror lacks, `behindSourceSeconds` how much older a
/// timestamp mirror's newest record is (each null where not known).
pub fn to_json(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Inspection>,
    mirrors: &MirrorPositions,
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
                    let Some(inspection) = reports.get(cid) else {
                        c["state"] = Value::Null;
                        c["reachable"] = Value::Null;
                        return c;
                    };
                    c["mirrorOf"] = meta.mirror_of.as_ref().map_or(Value::Null, |m| {
                        json!({
                            "cluster": m.cluster,
                            "translate": m.translate.as_str(),
                            "standby": is_standby(stream, meta),
                        })
                    });
                    c["state"] = json!(inspection.state.name());
                    c["reachable"] = json!(inspection.state == ClusterState::Connected);
                    c["refusedProperty"] = match &inspection.state {
                        ClusterState::Refused(r) => json!(r.key),
                        _ => Value::Null,
                    };
                    match &inspection.result {
                        Ok(r) => {
                            let topics: Vec<Value> = meta
                                .topics
                                .iter()
                                .map(|t| match r.topics.get(t) {
                                    Some(parts) => json!({
                                        "topic": t,
                                        "missing": false,
                                        "lag": group.and(r.topic_lag(t)),
                                        "behindSource": behind_source(cid, meta, t, parts, reports, mirrors),
                                        "behindSourceSeconds": mirrors.behind_ms.get(&(cid.clone(), t.clone())).map(|ms| *ms as f64 / 1000.0),
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
                            c["error"] = Value::Null;
                            c["kafkaClusterId"] = json!(r.kafka_cluster_id);
                            c["group"] = match &r.group {
                                Some(Ok(d)) => json!({
                                    "protocol": d.protocol.name(),
                                    "state": d.state,
                                    "members": d.members,
                                }),
                                Some(Err(e)) => json!({ "error": e }),
                                None => Value::Null,
                            };
                            c["topics"] = json!(topics);
                        }
                        Err(e) => {
                            c["error"] = json!(match &inspection.state {
                                ClusterState::Refused(r) => r.to_string(),
                                _ => failure_reason(e),
                            });
                            c["kafkaClusterId"] = Value::Null;
                            c["topics"] = json!(meta
                                .topics
                                .iter()
                                .map(|t| json!({ "topic": t }))
                                .collect::<Vec<_>>());
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
    use multicluster_kafka::properties::RefusedBy;
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

    fn reports() -> BTreeMap<String, Inspection> {
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

    #[test]
    fn json_has_every_field_and_marks_the_unreachable_cluster() {
        let v = to_json(
            &streams(),
            &reports(),
            &MirrorPositions::default(),
            Some("g"),
        );
        let clusters = &v["streams"][0]["clusters"];
        assert_eq!(clusters[0]["kafkaClusterId"], "K1");
        assert_eq!(clusters[0]["group"]["protocol"], "consumer");
        assert_eq!(clusters[0]["group"]["members"], 3);
        assert_eq!(clusters[0]["topics"][1]["topic"], "orders");
        assert_eq!(clusters[0]["topics"][1]["lag"], 34);
        assert_eq!(clusters[0]["topics"][1]["partitions"][0]["committed"], 1200);
        assert_eq!(
            clusters[0]["topics"][1]["partitions"][1]["committed"],
            Value::Null
        );
        assert_eq!(clusters[0]["topics"][0]["missing"], true);
        assert_eq!(clusters[1]["reachable"], false);
        assert_eq!(clusters[1]["state"], "unreachable");
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
