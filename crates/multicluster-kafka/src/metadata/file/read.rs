//! Reading a metadata file from disk: once ([`read_metadata`]), or once with the
//! client properties of its clusters checked ([`check_metadata`]); always with a size
//! cap, as the files that `${file:…}` references name are read too ([`read_bounded`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::{parse_metadata, parse_placed, syntax};
use crate::metadata::{KafkaStream, MetadataError};

/// Reads and parses a metadata file once (see [`parse_metadata`]).
pub fn read_metadata(
    path: impl AsRef<Path>,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    let path = path.as_ref();
    let text = read_text(path)?;
    parse_metadata(&text, path)
}

/// Reads a metadata file once as [`read_metadata`] does, then checks the client
/// properties of every cluster of the streams `select` takes, offline, as the
/// source's clients would take them on either fetch path
/// ([`ClientProperties::check`](crate::properties::ClientProperties::check)): what
/// passes here is not refused for its properties once the source runs. A refused
/// property is a [`MetadataError::RefusedProperty`] located at its key (a stream's
/// own override where it has one).
///
/// Loads the certificate and key files the properties name; no network call.
///
/// ```
/// use std::io::Write;
/// use multicluster_kafka::metadata::file::check_metadata;
///
/// let mut file = tempfile::NamedTempFile::new().unwrap();
/// write!(file, "
/// clusters:
///   east:
///     bootstrapServers: east-1:9092
///     properties:
///       fetch.max.bytes: lots
/// streams:
///   orders:
///     clusters:
///       east: {{ topics: [orders] }}
/// ").unwrap();
/// let err = check_metadata(file.path(), |_| true).unwrap_err().to_string();
/// assert!(err.contains(":6:7: cluster `east`: property `fetch.max.bytes` refused by librdkafka: \
///                       Invalid value for configuration property \"fetch.max.bytes\" (accepted: "), "{err}");
/// // A stream not selected is not checked.
/// assert!(check_metadata(file.path(), |stream| stream != "orders").is_ok());
/// ```
pub fn check_metadata(
    path: impl AsRef<Path>,
    select: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let (streams, places) = parse_placed(&text, path, &|name| std::env::var(name).ok())?;
    // One check for each distinct set of properties: a cluster read by many streams
    // is checked once.
    let mut checked: Vec<&crate::base::properties::ClientProperties> = Vec::new();
    for ((stream, cluster), place) in &places {
        if !select(stream) {
            continue;
        }
        let Some(properties) = streams
            .get(stream)
            .and_then(|s| s.clusters.get(cluster))
            .map(|c| &c.properties)
        else {
            continue;
        };
        if checked.contains(&properties) {
            continue;
        }
        if let Err(refused) = properties.check() {
            let location = refused
                .key
                .as_ref()
                .and_then(|k| place.keys.get(k))
                .unwrap_or(&place.at)
                .clone();
            return Err(MetadataError::RefusedProperty {
                location: Some(location),
                cluster: cluster.clone(),
                refused: Box::new(refused),
            });
        }
        checked.push(properties);
    }
    Ok(streams)
}

/// A metadata file's text, read with a size cap.
fn read_text(path: &Path) -> Result<String, MetadataError> {
    // A pipe is fine here (`mck validate <(generate-metadata)`); the size cap ends a
    // device that never does.
    let bytes = read_bounded(path, MAX_METADATA_FILE, true).map_err(|e| MetadataError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    String::from_utf8(bytes).map_err(|e| syntax::utf8_error(e.as_bytes(), &e.utf8_error(), path))
}

/// The largest metadata file read.
const MAX_METADATA_FILE: u64 = 16 << 20;

/// Reads a file of at most `limit` bytes: a regular file, or with `pipes` anything
/// but a directory. Anything else (a FIFO that would block, a device such as
/// `/dev/zero` that never ends, a directory, a huge file) is an error, not a hang.
pub(super) fn read_bounded(path: &Path, limit: u64, pipes: bool) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() || (!pipes && !meta.is_file()) {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    if meta.len() > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {} KiB", limit >> 10),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {} KiB", limit >> 10),
        ));
    }
    Ok(bytes)
}
