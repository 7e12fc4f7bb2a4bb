//! A bounded source over a directory of newline-delimited JSON files: the history a
//! [`HybridSource`](crate::hybrid::HybridSource) reads before it switches to Kafka.
//!
//! - Every regular, non-hidden file of the directory is read (not subdirectories).
//!   Files ending in `.gz` are gzip, `.zst` / `.zstd` zstd; the rest plain text.
//! - Each non-empty line is one JSON object; its event timestamp comes from a named
//!   field holding milliseconds since the epoch (a number, or a string of digits).
//! - Files are read in parallel, each by one thread at a time, so lines of one file
//!   come out in order; lines of different files interleave.
//! - Positions are (file, byte offset after the last line handed out, lines read), so a
//!   checkpoint resumes in the middle of a file. In a compressed file the offset counts
//!   decompressed bytes: resuming decompresses and skips up to it.
//! - A malformed line (not a JSON object, no usable timestamp field, not UTF-8) is
//!   reported with its file and line number. By default it fails the source (the
//!   position stays before it, so a fixed file resumes there); with
//!   [`MalformedLines::Skip`] it is skipped and counted.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::error::{ConfigError, SourceError};

/// Counter of malformed lines skipped, per source directory (label `dir`).
pub const LINES_SKIPPED: &str = "mck_file_lines_skipped_total";
/// Counter of records read from files.
pub const FILE_RECORDS: &str = "mck_file_records_total";

/// What to do with a malformed line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MalformedLines {
    /// Fail the source with the file and line number (the default).
    #[default]
    Fail,
    /// Skip the line, count it ([`FileSource::skipped`], metric `mck_file_lines_skipped_total`)
    /// and log it.
    Skip,
}

/// One record read from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// The file, relative to the source directory.
    pub file: Arc<str>,
    /// 1-based line number.
    pub line: u64,
    /// The event timestamp (ms since the epoch) from the timestamp field.
    pub timestamp: i64,
    /// The line, without its newline: one JSON object.
    pub value: Bytes,
}

/// Where one file stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePosition {
    /// Bytes (decompressed) consumed: the start of the next line to read.
    pub offset: u64,
    /// Lines consumed (the next line's number is `lines + 1`).
    pub lines: u64,
    /// True once every line of the file was handed out.
    pub done: bool,
}

/// Positions of a file source, consistent with the records handed out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileCheckpoint {
    /// File (relative to the directory) → position. Files not listed start at 0.
    pub files: BTreeMap<String, FilePosition>,
    /// The largest event timestamp handed out so far.
    pub max_timestamp: Option<i64>,
    /// Malformed lines skipped so far.
    #[serde(default)]
    pub skipped: u64,
}

/// Configures a [`FileSource`].
#[derive(Clone, Debug)]
pub struct FileSourceBuilder {
    dir: PathBuf,
    timestamp_field: String,
    parallelism: usize,
    malformed: MalformedLines,
    restore: Option<FileCheckpoint>,
    capacity: usize,
}

impl FileSourceBuilder {
    /// Reads `timestamp_field` of each line as its event timestamp (required).
    pub fn timestamp_field(mut self, name: impl Into<String>) -> Self {
        self.timestamp_field = name.into();
        self
    }

    /// Files read at the same time (default: 2).
    pub fn parallelism(mut self, threads: usize) -> Self {
        self.parallelism = threads;
        self
    }

    /// What to do with malformed lines (default: fail).
    pub fn malformed_lines(mut self, policy: MalformedLines) -> Self {
        self.malformed = policy;
        self
    }

    /// Resumes at a checkpoint's positions.
    pub fn restore_from(mut self, checkpoint: FileCheckpoint) -> Self {
        self.restore = Some(checkpoint);
        self
    }

    /// Lines buffered between the reading threads and the consumer (default 4096):
    /// bounds memory.
    pub fn buffer(mut self, lines: usize) -> Self {
        self.capacity = lines;
        self
    }

    /// Lists the directory and starts the reading threads.
    ///
    /// Fails when the directory cannot be listed, the timestamp field is not set, or
    /// the parallelism is 0. A checkpointed file that is gone is an error too: its
    /// records would silently go missing.
    pub fn open(self) -> Result<FileSource, SourceError> {
        let dir_err = |message: String| SourceError::File {
            path: self.dir.display().to_string(),
            line: None,
            message,
        };
        if self.timestamp_field.is_empty() {
            return Err(SourceError::Config(ConfigError::new(
                "timestamp_field",
                "a file source needs a timestamp field",
            )));
        }
        if self.parallelism == 0 {
            return Err(SourceError::Config(ConfigError::new(
                "parallelism",
                "a file source needs at least one reading thread",
            )));
        }
        let mut names = Vec::new();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| dir_err(e.to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| dir_err(e.to_string()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
            if is_file && !name.starts_with('.') {
                names.push(name);
            }
        }
        names.sort();
        let mut checkpoint = self.restore.unwrap_or_default();
        if let Some(gone) = checkpoint
            .files
            .keys()
            .find(|f| names.binary_search(f).is_err())
        {
            return Err(SourceError::File {
                path: self.dir.join(gone).display().to_string(),
                line: None,
                message: "the checkpoint has a position in this file, but it is gone".into(),
            });
        }
        let mut work = Vec::new();
        for name in &names {
            let pos = checkpoint.files.entry(name.clone()).or_default();
            if !pos.done {
                work.push(Task {
                    name: Arc::from(name.as_str()),
                    path: self.dir.join(name),
                    start: pos.clone(),
                });
            }
        }
        let queue = Arc::new(Mutex::new(work));
        let (tx, rx) = mpsc::channel((self.capacity / CHUNK).max(2));
        let field: Arc<str> = Arc::from(self.timestamp_field.as_str());
        let threads = self.parallelism.min(names.len().max(1));
        for i in 0..threads {
            let queue = queue.clone();
            let tx = tx.clone();
            let field = field.clone();
            std::thread::Builder::new()
                .name(format!("mck-file-{i}"))
                .spawn(move || read_files(queue, tx, field))
                .map_err(|e| dir_err(format!("cannot start a reading thread: {e}")))?;
        }
        Ok(FileSource {
            dir: self.dir,
            rx,
            chunk: Vec::new().into_iter(),
            checkpoint,
            malformed: self.malformed,
            failed: false,
        })
    }
}

/// A bounded source of newline-delimited JSON records from a directory's files. See
/// the [module docs](self).
///
/// ```no_run
/// # async fn run() -> Result<(), multicluster_kafka::error::SourceError> {
/// use multicluster_kafka::file_source::FileSource;
/// let mut files = FileSource::builder("history/").timestamp_field("ts").open()?;
/// while let Some(record) = files.next().await {
///     let record = record?;
///     println!("{}:{} {}", record.file, record.line, record.timestamp);
/// }
/// # Ok(()) }
/// ```
pub struct FileSource {
    dir: PathBuf,
    rx: mpsc::Receiver<Vec<Item>>,
    /// The chunk being handed out.
    chunk: std::vec::IntoIter<Item>,
    checkpoint: FileCheckpoint,
    malformed: MalformedLines,
    failed: bool,
}

impl fmt::Debug for FileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSource")
            .field("dir", &self.dir)
            .field("files", &self.checkpoint.files.len())
            .finish()
    }
}

impl FileSource {
    /// Starts a builder for the files of `dir`.
    pub fn builder(dir: impl Into<PathBuf>) -> FileSourceBuilder {
        FileSourceBuilder {
            dir: dir.into(),
            timestamp_field: String::new(),
            parallelism: 2,
            malformed: MalformedLines::Fail,
            restore: None,
            capacity: 4096,
        }
    }

    /// The next record, or `None` once every file was read. Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<FileRecord, SourceError>> {
        if self.failed {
            return None;
        }
        loop {
            let item = match self.chunk.next() {
                Some(item) => item,
                None => {
                    self.chunk = self.rx.recv().await?.into_iter();
                    continue;
                }
            };
            let pos = self
                .checkpoint
                .files
                .entry(item.file.to_string())
                .or_default();
            match item.kind {
                Kind::Record { timestamp, value } => {
                    pos.offset = item.end;
                    pos.lines = item.line;
                    let max = self.checkpoint.max_timestamp.get_or_insert(timestamp);
                    *max = (*max).max(timestamp);
                    metrics::counter!(FILE_RECORDS).increment(1);
                    return Some(Ok(FileRecord {
                        file: item.file,
                        line: item.line,
                        timestamp,
                        value,
                    }));
                }
                Kind::Blank => {
                    pos.offset = item.end;
                    pos.lines = item.line;
                }
                Kind::Malformed(message) => {
                    let path = self.dir.join(&*item.file).display().to_string();
                    if self.malformed == MalformedLines::Skip {
                        pos.offset = item.end;
                        pos.lines = item.line;
                        self.checkpoint.skipped += 1;
                        metrics::counter!(LINES_SKIPPED, "dir" => self.dir.display().to_string())
                            .increment(1);
                        tracing::warn!(file = %path, line = item.line, "skipping a malformed line: {message}");
                        continue;
                    }
                    self.failed = true;
                    return Some(Err(SourceError::File {
                        path,
                        line: Some(item.line),
                        message,
                    }));
                }
                Kind::Eof => pos.done = true,
                Kind::Failed(message) => {
                    self.failed = true;
                    return Some(Err(SourceError::File {
                        path: self.dir.join(&*item.file).display().to_string(),
                        line: None,
                        message,
                    }));
                }
            }
        }
    }

    /// Positions consistent with the records handed out.
    pub fn checkpoint(&self) -> FileCheckpoint {
        self.checkpoint.clone()
    }

    /// The largest event timestamp handed out so far.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.checkpoint.max_timestamp
    }

    /// Malformed lines skipped so far (with [`MalformedLines::Skip`]).
    pub fn skipped(&self) -> u64 {
        self.checkpoint.skipped
    }
}

mod read;
mod timestamp;

use read::{CHUNK, Item, Kind, Task, read_files};

#[cfg(test)]
mod tests {
    use super::timestamp::timestamp_of;
    use super::*;
    use std::io::Write;

    #[test]
    fn timestamps_come_from_the_named_field_of_a_whole_valid_object() {
        assert_eq!(timestamp_of(br#"{"a":[1,{"b":2}],"ts":17}"#, "ts"), Ok(17));
        assert_eq!(
            timestamp_of(br#"{"ts":"1700000000000"}"#, "ts"),
            Ok(1_700_000_000_000)
        );
        assert!(
            timestamp_of(br#"{"t":1}"#, "ts")
                .unwrap_err()
                .contains("no timestamp field `ts`")
        );
        assert!(
            timestamp_of(br#"{"ts":1.5}"#, "ts")
                .unwrap_err()
                .contains("whole number")
        );
        assert!(
            timestamp_of(br#"{"ts":1} trailing"#, "ts")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            timestamp_of(br#"[1,2]"#, "ts")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(timestamp_of(br#"{"ts":1,"#, "ts").is_err());
        assert!(timestamp_of(b"{\"ts\":\"\xff\"}", "ts").is_err());
    }

    fn write(dir: &Path, name: &str, lines: &[String]) {
        let text = lines.join("\n") + "\n";
        let path = dir.join(name);
        if name.ends_with(".gz") {
            let f = File::create(path).unwrap();
            let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap();
        } else if name.ends_with(".zst") {
            let bytes = zstd::stream::encode_all(text.as_bytes(), 3).unwrap();
            std::fs::write(path, bytes).unwrap();
        } else {
            std::fs::write(path, text).unwrap();
        }
    }

    fn lines(prefix: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!(r#"{{"id":"{prefix}-{i}","ts":{}}}"#, 1000 + i))
            .collect()
    }

    async fn drain(src: &mut FileSource, limit: usize) -> Vec<FileRecord> {
        let mut out = Vec::new();
        while out.len() < limit {
            match src.next().await {
                Some(r) => out.push(r.unwrap()),
                None => break,
            }
        }
        out
    }

    #[tokio::test]
    async fn plain_gzip_and_zstd_files_are_read_in_order_and_resume_mid_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.jsonl", &lines("a", 50));
        write(dir.path(), "b.jsonl.gz", &lines("b", 50));
        write(dir.path(), "c.jsonl.zst", &lines("c", 50));
        write(dir.path(), ".hidden", &["junk".to_string()]);
        let open = |cp: Option<FileCheckpoint>| {
            let mut b = FileSource::builder(dir.path())
                .timestamp_field("ts")
                .parallelism(3)
                .buffer(4);
            if let Some(cp) = cp {
                b = b.restore_from(cp);
            }
            b.open().unwrap()
        };
        let mut src = open(None);
        let mut got = drain(&mut src, 70).await;
        let cp = src.checkpoint();
        drop(src);
        let mut src = open(Some(cp.clone()));
        got.extend(drain(&mut src, usize::MAX).await);
        assert!(src.checkpoint().files.values().all(|p| p.done));
        assert_eq!(src.max_timestamp(), Some(1049));
        let mut per_file: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for r in &got {
            per_file.entry(&r.file).or_default().push(r.line);
        }
        assert_eq!(per_file.len(), 3);
        for (f, ls) in per_file {
            assert_eq!(
                ls,
                (1..=50).collect::<Vec<_>>(),
                "{f}: every line once, in order"
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&got[0].value).unwrap();
        assert!(v["id"].is_string());
    }

    #[tokio::test]
    async fn a_malformed_line_fails_with_its_location_or_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut ls = lines("a", 5);
        ls[2] = "{not json".into();
        ls.insert(4, String::new());
        write(dir.path(), "a.jsonl", &ls);
        let mut src = FileSource::builder(dir.path())
            .timestamp_field("ts")
            .open()
            .unwrap();
        let mut ok = 0;
        let err = loop {
            match src.next().await.unwrap() {
                Ok(_) => ok += 1,
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(ok, 2);
        assert!(err.contains("a.jsonl:3: not a JSON object"), "{err}");
        assert!(src.next().await.is_none(), "a failed source ends");
        assert_eq!(
            src.checkpoint().files["a.jsonl"].lines,
            2,
            "position stays before the bad line"
        );

        let mut src = FileSource::builder(dir.path())
            .timestamp_field("ts")
            .malformed_lines(MalformedLines::Skip)
            .open()
            .unwrap();
        let got = drain(&mut src, usize::MAX).await;
        assert_eq!(
            got.iter().map(|r| r.line).collect::<Vec<_>>(),
            vec![1, 2, 4, 6]
        );
        assert_eq!(src.skipped(), 1);
    }

    #[test]
    fn bad_configuration_and_vanished_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            FileSource::builder(dir.path()).open().is_err(),
            "no timestamp field"
        );
        let missing = FileSource::builder(dir.path().join("nope"))
            .timestamp_field("ts")
            .open();
        assert!(missing.unwrap_err().to_string().contains("nope"));
        let mut cp = FileCheckpoint::default();
        cp.files
            .insert("gone.jsonl".into(), FilePosition::default());
        let err = FileSource::builder(dir.path())
            .timestamp_field("ts")
            .restore_from(cp)
            .open()
            .unwrap_err();
        assert!(err.to_string().contains("gone.jsonl"), "{err}");
    }
}
