//! The file metadata service against real files: the documented examples (golden
//! outputs), hot reload after every way a file gets replaced, last-good-on-error,
//! and secrets kept out of `Debug` and error messages.
//!
//! Regenerate the golden outputs with `UPDATE_GOLDEN=1 cargo test -p
//! multicluster-kafka --test file_metadata`; otherwise a difference fails the test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use multicluster_kafka::metadata::file::{FileWatchOptions, parse_metadata};
use multicluster_kafka::metadata::{
    FileMetadataService, KafkaMetadataService, KafkaStream, MetadataError,
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Generous: only a broken watch ever waits this long.
const PATIENCE: Duration = Duration::from_secs(30);

const SECRET: &str = "S3CRET-from-a-file";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn examples_dir() -> PathBuf {
    manifest_dir().join("../../docs/examples")
}

/// Parses an example as `mck validate` does: process environment, files next to it.
fn parse_example(path: &Path) -> BTreeMap<String, KafkaStream> {
    let text = std::fs::read_to_string(path).unwrap();
    parse_metadata(&text, path).unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

/// The parsed streams as stable JSON, secret values redacted.
fn canonical(streams: &BTreeMap<String, KafkaStream>) -> Value {
    let mut out = serde_json::Map::new();
    for (id, stream) in streams {
        let mut clusters = serde_json::Map::new();
        for (cluster_id, cluster) in &stream.clusters {
            let properties: serde_json::Map<String, Value> = cluster
                .properties
                .redacted()
                .map(|(k, v)| (k.to_string(), Value::from(v)))
                .collect();
            let mut entry = json!({ "topics": cluster.topics, "properties": properties });
            if let Some(o) = &cluster.starting_offsets {
                entry["startingOffsets"] = serde_json::to_value(o).unwrap();
            }
            if let Some(o) = &cluster.stopping_offsets {
                entry["stoppingOffsets"] = serde_json::to_value(o).unwrap();
            }
            clusters.insert(cluster_id.clone(), entry);
        }
        out.insert(id.clone(), json!({ "clusters": clusters }));
    }
    Value::Object(out)
}

#[test]
fn every_documented_example_matches_its_golden_output() {
    let examples = examples_dir();
    let golden_dir = manifest_dir().join("tests/golden");
    let example_secret = std::fs::read_to_string(examples.join("secrets/east-password")).unwrap();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for example in entries {
        let name = example.file_name().unwrap().to_string_lossy().to_string();
        if !(name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")) {
            continue;
        }
        let streams = parse_example(&example);
        let actual = serde_json::to_string_pretty(&canonical(&streams)).unwrap() + "\n";
        assert!(
            !actual.contains(example_secret.trim()),
            "{name}: secret in the canonical output"
        );
        let golden = golden_dir.join(format!("{name}.json"));
        if update {
            std::fs::write(&golden, &actual).unwrap();
        } else {
            let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
                panic!(
                    "{} is missing; run with UPDATE_GOLDEN=1 to create it",
                    golden.display()
                )
            });
            assert_eq!(
                actual,
                expected,
                "{name} differs from {}; if the change is intended, rerun with UPDATE_GOLDEN=1",
                golden.display()
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 3,
        "expected at least three examples, found {checked}"
    );
}

#[test]
fn the_yaml_and_json_rich_examples_describe_the_same_streams() {
    let yaml = parse_example(&examples_dir().join("rich-layout.yaml"));
    let json = parse_example(&examples_dir().join("rich-layout.json"));
    assert_eq!(yaml, json);
    let east = &yaml["orders"].clusters["east"];
    assert!(east.properties.is_secret("sasl.password"));
    assert_eq!(
        east.properties.get("sasl.password"),
        Some("example-password-not-a-real-secret")
    );
}

// --- hot reload --------------------------------------------------------------

fn stream_file(topic: &str) -> String {
    format!(
        "- streamId: orders\n  clusterMetadataList:\n    - clusterId: east\n      \
         bootstrapServers: east-1:9092\n      topics: [{topic}]\n"
    )
}

fn topics(streams: &BTreeMap<String, KafkaStream>) -> Vec<String> {
    streams["orders"].clusters["east"]
        .topics
        .iter()
        .cloned()
        .collect()
}

/// File events only: a poll would hide a broken watch.
fn events_only() -> FileWatchOptions {
    FileWatchOptions::new()
        .poll_interval(Duration::from_secs(3600))
        .debounce(Duration::from_millis(20))
}

async fn next_change(rx: &mut watch::Receiver<u64>) -> u64 {
    tokio::time::timeout(PATIENCE, rx.changed())
        .await
        .expect("no change observed")
        .expect("the service went away");
    *rx.borrow_and_update()
}

/// Waits until the service reports `expected` as its last error.
async fn until_error(service: &FileMetadataService, expected: &MetadataError) {
    let mut reloads = service.reloads();
    let wait = async {
        while service.last_error().as_ref() != Some(expected) {
            reloads.changed().await.expect("the service went away");
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("the error was not reported");
}

#[tokio::test]
async fn an_in_place_write_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(&path, stream_file("v1")).unwrap();
    let service = FileMetadataService::watch_with(&path, events_only()).unwrap();
    let mut changes = service.changes().unwrap();

    std::fs::write(&path, stream_file("v2")).unwrap();
    assert_eq!(next_change(&mut changes).await, 1);
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v2"]);
    assert_eq!(service.generation(), 1);
    service.close().await.unwrap();
}

#[tokio::test]
async fn an_atomic_rename_over_the_file_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(&path, stream_file("v1")).unwrap();
    let service = FileMetadataService::watch_with(&path, events_only()).unwrap();
    let mut changes = service.changes().unwrap();

    mck_testkit::write_atomically(&path, &stream_file("v2"));
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v2"]);

    // The new inode is followed too.
    mck_testkit::write_atomically(&path, &stream_file("v3"));
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v3"]);
}

/// Lays out a Kubernetes ConfigMap volume: `..<version>/streams.yaml`, `..data` →
/// `..<version>`, and `streams.yaml` → `..data/streams.yaml`.
struct ConfigMapDir {
    root: PathBuf,
}

impl ConfigMapDir {
    fn new(root: &Path, text: &str) -> Self {
        let dir = Self {
            root: root.to_path_buf(),
        };
        let first = dir.version("..2026_01_01_00_00_00.000000001", text);
        std::os::unix::fs::symlink(first, root.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/streams.yaml", root.join("streams.yaml")).unwrap();
        dir
    }

    fn version(&self, name: &str, text: &str) -> String {
        std::fs::create_dir(self.root.join(name)).unwrap();
        std::fs::write(self.root.join(name).join("streams.yaml"), text).unwrap();
        name.to_string()
    }

    /// What the kubelet does: new directory, `..data_tmp` symlink renamed over
    /// `..data`, old directory removed.
    fn update(&self, name: &str, text: &str) {
        let old = std::fs::read_link(self.root.join("..data")).unwrap();
        let new = self.version(name, text);
        std::os::unix::fs::symlink(new, self.root.join("..data_tmp")).unwrap();
        std::fs::rename(self.root.join("..data_tmp"), self.root.join("..data")).unwrap();
        std::fs::remove_dir_all(self.root.join(old)).unwrap();
    }

    fn path(&self) -> PathBuf {
        self.root.join("streams.yaml")
    }
}

#[tokio::test]
async fn a_configmap_data_symlink_swap_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let configmap = ConfigMapDir::new(dir.path(), &stream_file("v1"));
    let service = FileMetadataService::watch_with(configmap.path(), events_only()).unwrap();
    let mut changes = service.changes().unwrap();
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v1"]);

    configmap.update("..2026_01_01_00_00_00.000000002", &stream_file("v2"));
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v2"]);

    configmap.update("..2026_01_01_00_00_00.000000003", &stream_file("v3"));
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v3"]);
}

#[tokio::test]
async fn an_in_place_write_to_a_symlink_target_elsewhere_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::fs::create_dir(dir.path().join("mount")).unwrap();
    let target = dir.path().join("real/streams.yaml");
    std::fs::write(&target, stream_file("v1")).unwrap();
    let link = dir.path().join("mount/streams.yaml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let service = FileMetadataService::watch_with(&link, events_only()).unwrap();
    let mut changes = service.changes().unwrap();

    std::fs::write(&target, stream_file("v2")).unwrap();
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v2"]);
}

#[tokio::test]
async fn without_file_events_the_periodic_read_sees_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(&path, stream_file("v1")).unwrap();
    let options = FileWatchOptions::new()
        .file_events(false)
        .poll_interval(Duration::from_millis(20));
    let service = FileMetadataService::watch_with(&path, options).unwrap();
    let mut changes = service.changes().unwrap();

    std::fs::write(&path, stream_file("v2")).unwrap();
    next_change(&mut changes).await;
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v2"]);
}

#[tokio::test]
async fn a_bad_file_keeps_the_last_good_metadata_until_it_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(&path, stream_file("v1")).unwrap();
    let service = FileMetadataService::watch_with(&path, events_only()).unwrap();
    let mut changes = service.changes().unwrap();

    let bad = stream_file("v2").replace("      bootstrapServers: east-1:9092\n", "");
    let expected = parse_metadata(&bad, &path).unwrap_err();
    assert!(matches!(
        expected,
        MetadataError::MissingBootstrapServers { .. }
    ));
    std::fs::write(&path, &bad).unwrap();
    until_error(&service, &expected).await;

    let error = service.last_error().unwrap();
    let at = error.location().unwrap();
    assert_eq!((at.path.as_path(), at.line), (path.as_path(), 3));
    assert_eq!(
        topics(&service.all_streams().await.unwrap()),
        ["v1"],
        "last good kept"
    );
    assert_eq!(service.generation(), 0);
    assert!(!changes.has_changed().unwrap());

    mck_testkit::write_atomically(&path, &stream_file("v3"));
    next_change(&mut changes).await;
    assert_eq!(service.last_error(), None);
    assert_eq!(topics(&service.all_streams().await.unwrap()), ["v3"]);
}

#[tokio::test]
async fn a_bad_first_file_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(&path, "- streamId: orders\n  clusterMetadataList: [\n").unwrap();
    let err = FileMetadataService::watch(&path).unwrap_err();
    assert_eq!(err.location().map(|l| l.line), Some(2), "{err}");
}

// --- secrets -----------------------------------------------------------------

#[tokio::test]
async fn secrets_from_files_stay_out_of_debug_output_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("east.password"), format!("{SECRET}\n")).unwrap();
    let path = dir.path().join("streams.yaml");
    let good = "\
clusters:
  east:
    bootstrapServers: east-1:9092
    properties:
      sasl.password: ${file:east.password}
      sasl.jaas.config: 'PlainLoginModule required password=\"${file:east.password}\";'
streams:
  orders:
    clusters:
      east: {topics: [orders]}
";
    std::fs::write(&path, good).unwrap();
    let service = FileMetadataService::watch_with(&path, events_only()).unwrap();
    let streams = service.all_streams().await.unwrap();
    let east = &streams["orders"].clusters["east"];
    assert_eq!(
        east.properties.get("sasl.password"),
        Some(SECRET),
        "one newline trimmed"
    );
    assert_eq!(
        east.properties.get("sasl.jaas.config").unwrap(),
        format!("PlainLoginModule required password=\"{SECRET}\";")
    );
    let shown = format!("{streams:?} {service:?}");
    assert!(!shown.contains(SECRET), "{shown}");

    // Every kind of error, with the secret resolvable in the same file.
    let bad_files = [
        good.replace("east-1:9092", "''"),
        good.replace("${file:east.password}\n", "${file:missing}\n"),
        good.replace("{topics: [orders]}", "{topics: []}"),
        good.replace("      east: {", "      west: {"),
        good.replace("streams:", "streams: ["),
        format!("{good}  orders:\n    clusters:\n      east: {{topics: [x]}}\n"),
    ];
    for bad in bad_files {
        let err = parse_metadata(&bad, &path).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains('\n'), "{shown}");
    }
}

/// The fenced YAML and JSON blocks of a Markdown text, with the line each starts on.
fn fenced_examples(text: &str) -> Vec<(usize, &'static str, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, &'static str, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match open.as_mut() {
            None => {
                let kind = match fence {
                    "```yaml" | "```yml" => "yaml",
                    "```json" => "json",
                    _ => continue,
                };
                open = Some((n + 2, kind, String::new()));
            }
            Some(_) if fence.starts_with("```") => out.extend(open.take()),
            Some((_, _, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    out
}

/// `${file:…}` references of `text` moved under `dir`, each file made there.
fn files_under(text: &str, dir: &Path) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${file:") {
        let (before, from) = rest.split_at(at + "${file:".len());
        let end = from.find('}').unwrap_or(from.len());
        let named = &from[..end];
        let file = dir.join(named.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "from-a-file\n").unwrap();
        out.push_str(before);
        out.push_str(&file.display().to_string());
        rest = &from[end..];
    }
    out.push_str(rest);
    out
}

/// Every YAML and JSON example of the README and docs/ parses with the real parser:
/// whole metadata files as they are, a file's `clusters:` alone with a stream that
/// reads its first cluster, a cluster's `properties:` inside a cluster definition.
/// The files `${file:…}` references name are made, every variable is answered.
#[test]
fn every_yaml_and_json_example_in_the_docs_parses() {
    let root = manifest_dir().join("../..");
    let mut documents = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    let env = |_: &str| Some("env-value".to_string());
    let mut parsed = 0;
    let mut failures = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        for (line, kind, body) in fenced_examples(&text) {
            if body.contains("apiVersion:") {
                continue; // a Kubernetes manifest (deploy_manifests.rs checks those)
            }
            let dir = tempfile::tempdir().unwrap();
            let body = files_under(&body, dir.path());
            let start = body.trim_start();
            let whole = if start.starts_with("properties:") {
                let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
                format!(
                    "clusters:\n  c:\n    bootstrapServers: h:9092\n{indented}\
                     streams:\n  s:\n    clusters:\n      c: {{topics: [t]}}\n"
                )
            } else if start.starts_with("clusters:") && !body.contains("\nstreams:") {
                let first = body
                    .lines()
                    .find_map(|l| {
                        let id = l.strip_prefix("  ")?.strip_suffix(':')?;
                        (!id.starts_with(' ')).then_some(id)
                    })
                    .unwrap_or("?");
                format!("{body}streams:\n  s:\n    clusters:\n      {first}: {{topics: [t]}}\n")
            } else {
                body
            };
            let name = dir.path().join(if kind == "json" {
                "example.json"
            } else {
                "example.yaml"
            });
            match multicluster_kafka::metadata::file::parse_metadata_with(&whole, &name, &env) {
                Ok(streams) if !streams.is_empty() => parsed += 1,
                Ok(_) => failures.push(format!("{}:{line}: no streams", document.display())),
                Err(e) => failures.push(format!("{}:{line}: {e}", document.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "examples that do not parse:\n{}",
        failures.join("\n")
    );
    assert!(
        parsed >= 15,
        "only {parsed} examples found: is the fence detection broken?"
    );
}
