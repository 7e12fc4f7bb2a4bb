//! The file-backed metadata service: a YAML or JSON file, hot reloaded.
//!
//! Two layouts are accepted (see `docs/metadata-file.md` for the full schema):
//!
//! - **Flink's layout** (`YamlFileMetadataService`): a list of
//!   `{streamId, clusterMetadataList: [{clusterId, bootstrapServers, topics}]}`, so
//!   existing files work unchanged;
//! - **the richer layout**: a map with `clusters` (each defined once, with
//!   properties and offsets) and `streams` that reference them.
//!
//! Property values and bootstrap lists may hold `${env:NAME}` and `${file:PATH}`
//! references (relative paths start at the metadata file's directory, one trailing
//! newline is trimmed, `$${` is a literal `${`). Resolved values are secrets: `Debug`
//! shows them as `<redacted>` and no error message contains one.
//!
//! Every error names the file, line and column.
//!
//! ```
//! use std::path::Path;
//! use multicluster_kafka::metadata::file::parse_metadata;
//!
//! let text = "
//! - streamId: orders
//!   clusterMetadataList:
//!     - clusterId: east
//!       bootstrapServers: east-1:9092
//!       topics: [orders]
//! ";
//! let streams = parse_metadata(text, Path::new("streams.yaml")).unwrap();
//! assert_eq!(streams["orders"].clusters["east"].bootstrap_servers(), "east-1:9092");
//!
//! let err = parse_metadata("- streamId: orders\n  clusters: []\n", Path::new("streams.yaml"))
//!     .unwrap_err();
//! assert!(err.to_string().starts_with("streams.yaml:2:3: unknown field `clusters`"), "{err}");
//! ```

mod build;
mod read;
mod refs;
mod service;
mod syntax;
mod watcher;

use std::collections::BTreeMap;
use std::path::Path;

use super::{KafkaStream, MetadataError};
use refs::Resolver;

pub use read::{check_metadata, read_metadata};
pub use service::{FileMetadataService, FileWatchOptions};

/// Parses the text of a metadata file, resolving references from the process
/// environment and from files next to `path`.
///
/// `path` names the file in errors and anchors relative `${file:…}` references; it is
/// not read. Use it to validate a file without starting a service.
pub fn parse_metadata(
    text: &str,
    path: &Path,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    parse_metadata_with(text, path, &|name| std::env::var(name).ok())
}

/// Like [`parse_metadata`], with `env` answering `${env:NAME}` references instead of
/// the process environment.
///
/// ```
/// use std::path::Path;
/// use multicluster_kafka::metadata::file::parse_metadata_with;
///
/// let text = r#"
/// clusters:
///   east:
///     bootstrapServers: east-1:9092
///     properties: { sasl.password: "${env:EAST_PASSWORD}" }
/// streams:
///   orders:
///     clusters:
///       east: { topics: [orders] }
/// "#;
/// let env = |name: &str| (name == "EAST_PASSWORD").then(|| "hunter2".to_string());
/// let streams = parse_metadata_with(text, Path::new("streams.yaml"), &env).unwrap();
/// let east = &streams["orders"].clusters["east"];
/// assert_eq!(east.properties.get("sasl.password"), Some("hunter2"));
/// assert!(!format!("{streams:?}").contains("hunter2"));
/// ```
pub fn parse_metadata_with(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    parse_placed(text, path, env).map(|(streams, _)| streams)
}

/// Parses, and says where each stream's clusters and their properties are written.
fn parse_placed(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(BTreeMap<String, KafkaStream>, build::Places), MetadataError> {
    let doc = syntax::parse_document(text, path)?;
    let base_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    build::build(doc, path, &Resolver::new(base_dir, env))
}

#[cfg(test)]
mod tests;
