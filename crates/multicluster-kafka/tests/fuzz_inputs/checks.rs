//! What every input to the metadata parser and the checkpoint decoder must satisfy,
//! whatever its bytes: no panic, and an error that says where it is.
//!
//! Shared by the short proptest run (`tests/it/fuzz_inputs.rs`) and the cargo-fuzz
//! targets (`fuzz/fuzz_targets/`), which include this file with `#[path]`; it uses only
//! the library, its dependencies and `std`.
//!
//! "Located" means:
//!
//! - metadata: every error but `Io` carries a [`SourceLocation`] in the file that was
//!   parsed, with a line and a column of at least 1 that lie inside the text (the line
//!   at most one past the last line break, the column at most one past the longest
//!   line, lines ending as YAML ends them, or as JSON does in a `.json` file); its
//!   message starts with that location and is one line (a multi-line message breaks
//!   the one-line log it goes into);
//! - checkpoints: every error is a `Decode` error whose origin is the file (or
//!   `<bytes>` for an in-memory decode), its message starts with that origin and is one
//!   line.
//!
//! Errors must also never show a value read through a `${env:…}` or `${file:…}`
//! reference: the environment given to the parser answers with [`SECRET`].

#![allow(dead_code)] // each includer uses its own part

use std::fs;
use std::path::{Path, PathBuf};

use multicluster_kafka::checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, FileCheckpointStore,
};
use multicluster_kafka::metadata::file::{parse_metadata_with, read_metadata};
use multicluster_kafka::metadata::{KafkaStream, MetadataError, check_consistent};

/// Part of every value the test environment and the scratch secret file hold.
pub const SECRET: &str = "fz-secret-9f41c";

/// The secret file the scratch directory holds, for `${file:pw}`.
pub const SECRET_FILE: &str = "pw";

/// The environment the parser sees: a variable is set when its name has an even
/// length, so both resolved and unresolved references occur.
pub fn env(name: &str) -> Option<String> {
    name.len()
        .is_multiple_of(2)
        .then(|| format!("{SECRET}-{name}"))
}

/// A directory for the files the checks write: `root/pw` (a secret for
/// `${file:pw}`), `root/store` (a store with an older good checkpoint beside the one
/// under test) and `root/alone` (a store with only the one under test).
pub struct Scratch {
    root: PathBuf,
}

/// The sequence of the good checkpoint, and of the file under test after it.
const OLDER: &str = "checkpoint-00000000000000000001.json";
const NEWEST: &str = "checkpoint-00000000000000000002.json";

impl Scratch {
    /// Prepares `root` (which should be empty and is not removed afterwards).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        fs::create_dir_all(root.join("store")).unwrap();
        fs::create_dir_all(root.join("alone")).unwrap();
        fs::write(root.join(SECRET_FILE), format!("{SECRET}-file\n")).unwrap();
        fs::write(root.join("store").join(OLDER), good_checkpoint().encode()).unwrap();
        Self { root }
    }

    /// The directory metadata files are named in (relative `${file:…}` start here).
    pub fn dir(&self) -> &Path {
        &self.root
    }
}

/// The good checkpoint the store falls back to.
pub fn good_checkpoint() -> Checkpoint {
    let mut cp: Checkpoint = Checkpoint::decode(
        br#"{"format":"multicluster-kafka/checkpoint","version":1,"checkpoint":{
            "clusters":{"east":{"kafkaClusterId":"k1","initialDiscoveryDone":true,
            "splits":[{"topic":"orders","partition":0,"nextOffset":42}]}}}}"#,
    )
    .unwrap();
    cp.user_data.insert("fallback".into(), "yes".into());
    cp
}

/// Runs `data` through the metadata parser as a YAML file and as a JSON file (and,
/// when it is not UTF-8, through [`read_metadata`]), checking each outcome.
pub fn check_metadata(data: &[u8], scratch: &Scratch) {
    match std::str::from_utf8(data) {
        Ok(text) => {
            for name in ["streams.yaml", "streams.json"] {
                let path = scratch.dir().join(name);
                let outcome = parse_metadata_with(text, &path, &env);
                check_metadata_outcome(&outcome, &path, text.as_bytes());
            }
        }
        Err(_) => {
            let path = scratch.dir().join("bytes.yaml");
            fs::write(&path, data).unwrap();
            let outcome = read_metadata(&path);
            check_metadata_outcome(&outcome, &path, data);
        }
    }
}

/// The parser's outcome for `text`, read as the file `path`.
pub fn check_metadata_outcome(
    outcome: &Result<std::collections::BTreeMap<String, KafkaStream>, MetadataError>,
    path: &Path,
    text: &[u8],
) {
    match outcome {
        Ok(streams) => check_streams(streams),
        Err(e) => check_metadata_error(e, path, text),
    }
}

/// What the parser promises about metadata it accepts.
fn check_streams(streams: &std::collections::BTreeMap<String, KafkaStream>) {
    for (id, stream) in streams {
        assert_eq!(&stream.stream_id, id);
        assert!(!id.trim().is_empty(), "an empty stream id was accepted");
        assert!(!stream.clusters.is_empty(), "stream `{id}` has no cluster");
        for (cluster, meta) in &stream.clusters {
            assert!(
                !cluster.trim().is_empty(),
                "an empty cluster id was accepted"
            );
            assert!(!meta.topics.is_empty(), "`{id}`/`{cluster}` has no topic");
            assert!(!meta.bootstrap_servers().trim().is_empty());
        }
    }
    if let Err(e) = check_consistent(streams.values()) {
        panic!("the parser accepted inconsistent metadata: {e}");
    }
}

/// A metadata error names the file, a line and a column inside `text`, on one line,
/// without a secret.
pub fn check_metadata_error(e: &MetadataError, path: &Path, text: &[u8]) {
    let shown = e.to_string();
    assert_one_line(&shown);
    assert_no_secret(&shown, text);
    let Some(at) = e.location() else {
        panic!("error without a location: {e:?}");
    };
    assert_eq!(at.path, path, "error located in another file: {shown}");
    assert!(at.line >= 1 && at.column >= 1, "no line and column: {e:?}");
    let line_breaks = text.iter().filter(|b| matches!(b, b'\n' | b'\r')).count();
    assert!(
        at.line as usize <= line_breaks + 1,
        "line {} is past the end of the text ({line_breaks} line breaks): {shown}",
        at.line
    );
    // YAML ends a line at `\r` too; serde_json (the syntax check of `.json` files)
    // only at `\n`.
    let json = path.extension().is_some_and(|e| e == "json");
    let longest = text
        .split(|b| *b == b'\n' || (*b == b'\r' && !json))
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    assert!(
        at.column as usize <= longest + 1,
        "column {} is past the longest line ({longest} bytes): {shown}",
        at.column
    );
    assert!(
        shown.starts_with(&format!("{at}: ")),
        "the message does not start with its location: {shown}"
    );
}

/// Decodes `data` in memory, then reads it as the newest file of a store twice: with
/// an older good checkpoint beside it, and alone.
pub fn check_checkpoint(data: &[u8], scratch: &Scratch) {
    let decoded = Checkpoint::decode(data);
    match &decoded {
        Ok(cp) => {
            let again = Checkpoint::decode(&cp.encode())
                .unwrap_or_else(|e| panic!("a decoded checkpoint does not round-trip: {e}"));
            assert_eq!(&again, cp, "a decoded checkpoint changes through encode");
        }
        Err(e) => check_checkpoint_error(e, "<bytes>"),
    }

    // With a good older checkpoint: the newest if it decodes, else the older one.
    let store_dir = scratch.root.join("store");
    let newest = store_dir.join(NEWEST);
    fs::write(&newest, data).unwrap();
    let store = FileCheckpointStore::open(&store_dir, 10).unwrap();
    let latest = store
        .latest()
        .unwrap_or_else(|e| panic!("no fallback to the older checkpoint: {e}"));
    match &decoded {
        Ok(cp) => assert_eq!(latest.as_ref(), Some(cp)),
        Err(_) => assert_eq!(latest, Some(good_checkpoint())),
    }

    // Alone: the same outcome, or an error naming the file.
    let alone_dir = scratch.root.join("alone");
    let alone = alone_dir.join(NEWEST);
    fs::write(&alone, data).unwrap();
    let store = FileCheckpointStore::open(&alone_dir, 10).unwrap();
    match (store.latest(), &decoded) {
        (Ok(Some(got)), Ok(cp)) => assert_eq!(&got, cp),
        (Err(e), Err(_)) => check_checkpoint_error(&e, &alone.display().to_string()),
        (got, want) => panic!("the store read {got:?}, the decoder {want:?}"),
    }
}

/// A checkpoint error is a decode error naming `origin`, on one line.
pub fn check_checkpoint_error(e: &CheckpointError, origin: &str) {
    let shown = e.to_string();
    assert_one_line(&shown);
    match e {
        CheckpointError::Decode { origin: got, .. } => {
            assert_eq!(got, origin, "error about another checkpoint: {shown}")
        }
        other => panic!("decoding failed with a non-decode error: {other:?}"),
    }
    assert!(
        shown.starts_with(&format!("{origin}: ")),
        "the message does not start with its origin: {shown}"
    );
}

fn assert_one_line(shown: &str) {
    assert!(
        !shown.contains(['\n', '\r']),
        "the message is not one line: {shown:?}"
    );
}

/// Unless the input itself holds the marker, an error showing it leaked a secret.
fn assert_no_secret(shown: &str, input: &[u8]) {
    let marker = SECRET.as_bytes();
    if !input.windows(marker.len()).any(|w| w == marker) {
        assert!(
            !shown.contains(SECRET),
            "the message shows a secret: {shown}"
        );
    }
}

/// The decompressed bytes one batch may have in [`check_record_batches`].
pub const BATCH_LIMIT: usize = 1 << 20;

/// Runs `data` as a partition's records through the native path's batch decoder:
/// every batch, its CRC check, its records (decompressed within [`BATCH_LIMIT`]),
/// their headers. Nothing may panic; the decoder's promises hold: a batch
/// it yields lies inside `data`, the bytes it leaves over are a cut-off batch at the
/// end, a record's offset lies within its batch, and no batch decompresses beyond the
/// limit.
pub fn check_record_batches(data: &[u8]) {
    use multicluster_kafka_client::{Batches, DecodeError, LOG_OVERHEAD};
    let mut batches = Batches::new(data);
    let mut scratch = Vec::new();
    let mut failed = false;
    for batch in batches.by_ref() {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                assert_one_line(&e.to_string());
                failed = true;
                continue;
            }
        };
        let _ = batch.check_crc();
        match batch.records_in(&mut scratch, BATCH_LIMIT) {
            Ok(records) => {
                for r in records {
                    match r {
                        Ok(r) => {
                            let delta = r.offset.wrapping_sub(batch.base_offset);
                            assert!(
                                (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&delta),
                                "offset {} outside batch {}",
                                r.offset,
                                batch.base_offset
                            );
                            for h in r.headers() {
                                let _ = h;
                            }
                        }
                        Err(e) => assert_one_line(&e.to_string()),
                    }
                }
            }
            Err(DecodeError::TooLarge { limit, .. }) => assert_eq!(limit, BATCH_LIMIT),
            Err(e) => assert_one_line(&e.to_string()),
        }
        assert!(scratch.len() <= BATCH_LIMIT, "{} bytes kept", scratch.len());
    }
    if !failed {
        // What is left over is a batch cut off by the fetch's byte limit: less than its
        // own length says.
        let left = batches.partial();
        assert!(left <= data.len());
        if left >= LOG_OVERHEAD {
            let tail = &data[data.len() - left..];
            let length = i32::from_be_bytes(tail[8..12].try_into().unwrap());
            assert!(
                length as usize + LOG_OVERHEAD > left,
                "a whole batch of {length} bytes was left over"
            );
        }
    }
}

/// Runs `data` as a Fetch response body through the native path's decoder at every
/// version it reads. Nothing may panic or allocate beyond the input; a decoded
/// partition's records lie inside `data` and go through [`check_record_batches`].
pub fn check_fetch_response(data: &[u8]) {
    use multicluster_kafka_client::{
        FETCH_RESPONSE_MAX, FETCH_RESPONSE_MIN, decode_fetch_response,
    };
    let body = bytes::Bytes::copy_from_slice(data);
    for version in FETCH_RESPONSE_MIN..=FETCH_RESPONSE_MAX {
        match decode_fetch_response(&body, version) {
            Ok(r) => {
                for t in &r.topics {
                    for p in &t.partitions {
                        let start = body.as_ptr() as usize;
                        let at = p.records.as_ptr() as usize;
                        assert!(
                            p.records.is_empty()
                                || (at >= start && at + p.records.len() <= start + body.len()),
                            "records outside the response"
                        );
                        check_record_batches(&p.records);
                    }
                }
            }
            Err(e) => assert_one_line(&e.to_string()),
        }
    }
}
