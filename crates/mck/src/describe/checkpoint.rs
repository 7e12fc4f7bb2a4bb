//! What a checkpoint tells of the mirrors: the clusters the source that wrote it
//! reads, shown as each mirror's role in the tree and in the JSON.

use serde_json::{Value, json};

/// The clusters a checkpoint holds positions of its own on (not retained ones): what
/// the source that wrote it was reading.
pub(super) fn read_clusters(
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
pub(super) fn with_roles_from(text: &str, read: &std::collections::BTreeSet<String>) -> String {
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
pub(super) fn mark_read(v: &mut Value, read: &std::collections::BTreeSet<String>) {
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
