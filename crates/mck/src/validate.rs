//! `mck validate FILE`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::metadata::file::check_metadata;

/// Parses `file` and checks every cluster's client properties offline, as `consume`
/// does before reading; prints the streams on stdout, or the located error on stderr.
pub fn run(file: &Path, json: bool) -> Result<ExitCode, String> {
    match check_metadata(file, |_| true) {
        Ok(streams) => {
            if json {
                crate::stdio::print(&format!("{}\n", to_json(&streams)))?;
            } else {
                crate::stdio::print(&render(file, &streams))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            crate::stdio::say!("mck: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The streams as JSON, with secret property values redacted.
pub fn to_json(streams: &BTreeMap<String, KafkaStream>) -> String {
    let value: serde_json::Value = streams
        .iter()
        .map(|(id, s)| {
            let clusters: serde_json::Map<String, serde_json::Value> = s
                .clusters
                .iter()
                .map(|(cid, c)| {
                    let props: serde_json::Map<String, serde_json::Value> = c
                        .properties
                        .redacted()
                        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                        .collect();
                    let mut m = serde_json::Map::new();
                    m.insert("topics".into(), serde_json::json!(c.topics));
                    m.insert("properties".into(), props.into());
                    if let Some(o) = &c.starting_offsets {
                        m.insert("startingOffsets".into(), serde_json::json!(o));
                    }
                    if let Some(o) = &c.stopping_offsets {
                        m.insert("stoppingOffsets".into(), serde_json::json!(o));
                    }
                    if let Some(o) = &c.mirror_of {
                        m.insert("mirrorOf".into(), serde_json::json!(o));
                    }
                    (cid.clone(), serde_json::Value::Object(m))
                })
                .collect();
            (id.clone(), serde_json::json!({ "clusters": clusters }))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// A person-readable tree of the streams, with secret property values redacted.
pub fn render(file: &Path, streams: &BTreeMap<String, KafkaStream>) -> String {
    let mut out = String::new();
    let clusters: std::collections::BTreeSet<&String> =
        streams.values().flat_map(|s| s.clusters.keys()).collect();
    let _ = writeln!(
        out,
        "{}: valid: {} stream(s), {} cluster(s)",
        file.display(),
        streams.len(),
        clusters.len()
    );
    for (id, s) in streams {
        let _ = writeln!(out, "stream {id}");
        for (cid, c) in &s.clusters {
            let topics: Vec<&str> = c.topics.iter().map(String::as_str).collect();
            let _ = writeln!(out, "  cluster {cid}  topics: {}", topics.join(", "));
            for (k, v) in c.properties.redacted() {
                let _ = writeln!(out, "    {k} = {v}");
            }
            if let Some(o) = &c.starting_offsets {
                let _ = writeln!(out, "    starting offsets: {}", serde_json::json!(o));
            }
            if let Some(o) = &c.stopping_offsets {
                let _ = writeln!(out, "    stopping offsets: {}", serde_json::json!(o));
            }
            if let Some(o) = &c.mirror_of {
                let _ = writeln!(out, "    mirror of: {}", serde_json::json!(o));
            }
        }
    }
    out
}
