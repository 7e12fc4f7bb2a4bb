//! Metadata files as the tests write them: the rich layout (`clusters:` and
//! `streams:`) and Flink's layout (a list of `streamId` and `clusterMetadataList`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::{KafkaCluster, Listener, TestCluster};

/// The client properties that reach `listener` of `cluster`, with `changes` applied (a
/// value of `None` removes the key). A client key file is copied into `dir` as
/// `<id>-client.key` and given as `ssl.key.pem: ${file:<id>-client.key}` instead.
pub fn listener_properties_in(
    cluster: &KafkaCluster,
    listener: Listener,
    dir: &Path,
    id: &str,
    changes: &[(&str, Option<&str>)],
) -> BTreeMap<String, String> {
    let mut props: BTreeMap<String, String> =
        cluster.listener_properties(listener).into_iter().collect();
    for (k, v) in changes {
        match v {
            Some(v) => props.insert(k.to_string(), v.to_string()),
            None => props.remove(*k),
        };
    }
    if let Some(key) = props.remove("ssl.key.location") {
        let name = format!("{id}-client.key");
        std::fs::copy(key, dir.join(&name)).unwrap();
        props.insert("ssl.key.pem".into(), format!("${{file:{name}}}"));
    }
    props
}

/// A cluster's entry under the rich layout's `clusters:`, given only by properties.
pub fn rich_cluster_entry(id: &str, props: &BTreeMap<String, String>) -> String {
    let mut yaml = format!("  {id}:\n    properties:\n");
    for (k, v) in props {
        yaml.push_str(&format!("      {k}: \"{v}\"\n"));
    }
    yaml
}

/// A rich-layout metadata file with one stream `s` over `clusters`: (id, the
/// cluster's entry under `clusters:`, the stream's topics on it).
pub fn rich_metadata(clusters: &[(&str, String, Vec<String>)]) -> String {
    let mut yaml = String::from("clusters:\n");
    for (_, entry, _) in clusters {
        yaml.push_str(entry);
    }
    yaml.push_str("streams:\n  s:\n    clusters:\n");
    for (id, _, topics) in clusters {
        yaml.push_str(&format!(
            "      {id}: {{ topics: [{}] }}\n",
            topics.join(", ")
        ));
    }
    yaml
}

/// A metadata file in Flink's layout mapping `stream` to the given clusters' topics,
/// each cluster under its logical id.
pub fn flink_metadata(stream: &str, clusters: &[(&dyn TestCluster, &[&str])]) -> String {
    let mut yaml = flink_header(stream);
    for (c, topics) in clusters {
        yaml.push_str(&flink_entry(c.logical_id(), &c.bootstrap_servers(), topics));
    }
    yaml
}

/// Like [`flink_metadata`], with each cluster given as (logical id, bootstrap servers,
/// topics): for an address that is not the cluster's own (a proxy's, one where
/// nothing answers) or an id other than its logical one.
pub fn flink_metadata_at(stream: &str, clusters: &[(&str, &str, &[&str])]) -> String {
    let mut yaml = flink_header(stream);
    for (id, bootstrap, topics) in clusters {
        yaml.push_str(&flink_entry(id, bootstrap, topics));
    }
    yaml
}

fn flink_header(stream: &str) -> String {
    format!("- streamId: {stream}\n  clusterMetadataList:\n")
}

fn flink_entry(id: &str, bootstrap: &str, topics: &[&str]) -> String {
    format!(
        "    - clusterId: {id}\n      bootstrapServers: {bootstrap}\n      topics: [{}]\n",
        topics.join(", ")
    )
}

/// Writes `text` to `path` through a temporary file beside it and a rename, so a
/// reader or a file watch never sees half a file.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
