//! How `mck consume` writes records: one line per record, and an output that counts
//! the bytes it has written so a checkpoint can record the file's length.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use multicluster_kafka::file_source::FileRecord;
use multicluster_kafka::record::Record;
use serde_json::{Map, Value};

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line: cluster, topic, partition, offset, timestamp, key,
    /// value, headers.
    Json,
    /// The value bytes as they are, then a newline.
    Value,
}

/// Text when the bytes are UTF-8, base64 otherwise; the second value says which.
fn text_or_base64(bytes: &[u8]) -> (Value, Option<&'static str>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (Value::String(s.to_string()), None),
        Err(_) => (Value::String(BASE64.encode(bytes)), Some("base64")),
    }
}

/// Puts `name` (text or base64, or null) into `obj`, with `<name>Encoding: "base64"`
/// when the bytes are not UTF-8.
fn put_bytes(obj: &mut Map<String, Value>, name: &str, bytes: Option<&[u8]>) {
    match bytes {
        None => {
            obj.insert(name.to_string(), Value::Null);
        }
        Some(b) => {
            let (v, enc) = text_or_base64(b);
            obj.insert(name.to_string(), v);
            if let Some(enc) = enc {
                obj.insert(format!("{name}Encoding"), Value::String(enc.to_string()));
            }
        }
    }
}

/// Appends one record as a line in `format` to `line` (which is cleared first).
pub fn render(record: &Record<Bytes>, format: Format, line: &mut Vec<u8>) {
    line.clear();
    match format {
        Format::Value => line.extend_from_slice(&record.value),
        Format::Json => {
            let mut obj = Map::new();
            obj.insert("cluster".into(), Value::String(record.cluster.to_string()));
            obj.insert("topic".into(), Value::String(record.topic.to_string()));
            obj.insert("partition".into(), record.partition.into());
            obj.insert("offset".into(), record.offset.into());
            obj.insert(
                "timestamp".into(),
                record.timestamp.map(Value::from).unwrap_or(Value::Null),
            );
            put_bytes(&mut obj, "key", record.key.as_deref());
            put_bytes(&mut obj, "value", Some(&record.value));
            let headers: Vec<Value> = record
                .headers
                .iter()
                .map(|(k, v)| {
                    let mut h = Map::new();
                    h.insert("key".into(), Value::String(k.clone()));
                    put_bytes(&mut h, "value", v.as_deref());
                    Value::Object(h)
                })
                .collect();
            obj.insert("headers".into(), Value::Array(headers));
            // Serializing a Value into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *line, &Value::Object(obj));
        }
    }
    line.push(b'\n');
}

/// Appends one history-file record (of `mck consume --backfill`) as a line: in
/// `json`, an object with `file`, `line`, `timestamp` and `value` (the file's line,
/// which is a JSON object, as text); in `value`, the line itself.
pub fn render_file(record: &FileRecord, format: Format, line: &mut Vec<u8>) {
    line.clear();
    match format {
        Format::Value => line.extend_from_slice(&record.value),
        Format::Json => {
            let mut obj = Map::new();
            obj.insert("file".into(), Value::String(record.file.to_string()));
            obj.insert("line".into(), record.line.into());
            obj.insert("timestamp".into(), record.timestamp.into());
            put_bytes(&mut obj, "value", Some(&record.value));
            let _ = serde_json::to_writer(&mut *line, &Value::Object(obj));
        }
    }
    line.push(b'\n');
}

/// Where records go: standard output, or a file whose length is tracked.
pub enum Output {
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
    /// A file, appended to; `len` is its length including buffered bytes.
    File {
        path: PathBuf,
        writer: BufWriter<File>,
        len: u64,
    },
}

impl Output {
    /// Standard output.
    pub fn stdout() -> Self {
        Output::Stdout(BufWriter::with_capacity(1 << 16, io::stdout()))
    }

    /// Opens `path` for appending after cutting it to `keep` bytes (0: a fresh file).
    /// A file shorter than `keep` is an error: records a checkpoint covers are gone.
    pub fn file(path: &Path, keep: u64) -> Result<Self, String> {
        let at = |e: io::Error| format!("output file {}: {e}", path.display());
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .read(true)
            .open(path)
            .map_err(at)?;
        let len = file.metadata().map_err(at)?.len();
        if len < keep {
            return Err(format!(
                "output file {} is {len} bytes, shorter than the {keep} bytes the checkpoint covers; \
                 records the checkpoint counts as written are missing (restore the file or start with a new checkpoint directory)",
                path.display()
            ));
        }
        file.set_len(keep).map_err(at)?;
        file.sync_all().map_err(at)?;
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        io::Seek::seek(&mut writer, io::SeekFrom::Start(keep)).map_err(at)?;
        Ok(Output::File {
            path: path.to_path_buf(),
            writer,
            len: keep,
        })
    }

    /// Writes one rendered line.
    pub fn write(&mut self, line: &[u8]) -> Result<(), String> {
        match self {
            Output::Stdout(w) => w.write_all(line).map_err(|e| format!("stdout: {e}")),
            Output::File { path, writer, len } => {
                writer
                    .write_all(line)
                    .map_err(|e| format!("output file {}: {e}", path.display()))?;
                *len += line.len() as u64;
                Ok(())
            }
        }
    }

    /// Flushes buffered lines; for a file, also makes them durable (fsync) and returns
    /// the file's length.
    pub fn sync(&mut self) -> Result<Option<u64>, String> {
        match self {
            Output::Stdout(w) => {
                w.flush().map_err(|e| format!("stdout: {e}"))?;
                Ok(None)
            }
            Output::File { path, writer, len } => {
                let at = |e: io::Error| format!("output file {}: {e}", path.display());
                writer.flush().map_err(at)?;
                writer.get_ref().sync_data().map_err(at)?;
                Ok(Some(*len))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(key: Option<&[u8]>, value: &[u8]) -> Record<Bytes> {
        Record {
            cluster: Arc::from("east"),
            topic: Arc::from("orders"),
            partition: 2,
            offset: 41,
            timestamp: Some(1_700_000_000_000),
            key: key.map(Bytes::copy_from_slice),
            headers: vec![
                ("trace".into(), Some(b"abc".to_vec())),
                ("bin".into(), Some(vec![0xff, 0x00])),
                ("none".into(), None),
            ],
            value: Bytes::copy_from_slice(value),
        }
    }

    fn json(r: &Record<Bytes>) -> Value {
        let mut line = Vec::new();
        render(r, Format::Json, &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        serde_json::from_slice(&line).unwrap()
    }

    #[test]
    fn json_lines_carry_every_field_and_mark_base64() {
        let v = json(&record(Some(b"k-1"), &[0xc3, 0x28]));
        assert_eq!(v["cluster"], "east");
        assert_eq!(v["topic"], "orders");
        assert_eq!(v["partition"], 2);
        assert_eq!(v["offset"], 41);
        assert_eq!(v["timestamp"], 1_700_000_000_000_i64);
        assert_eq!(v["key"], "k-1");
        assert!(v.get("keyEncoding").is_none());
        assert_eq!(v["valueEncoding"], "base64");
        assert_eq!(
            BASE64.decode(v["value"].as_str().unwrap()).unwrap(),
            vec![0xc3, 0x28]
        );
        let h = v["headers"].as_array().unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h[0]["value"], "abc");
        assert_eq!(h[1]["valueEncoding"], "base64");
        assert!(h[2]["value"].is_null());
    }

    #[test]
    fn a_value_with_a_newline_stays_on_one_json_line_and_null_keys_are_null() {
        let v = json(&record(None, b"line one\nline two"));
        assert!(v["key"].is_null());
        assert_eq!(v["value"], "line one\nline two");
    }

    #[test]
    fn value_format_is_the_bytes_and_a_newline() {
        let mut line = Vec::new();
        render(&record(None, b"hello"), Format::Value, &mut line);
        assert_eq!(line, b"hello\n");
    }

    #[test]
    fn a_file_output_is_cut_to_the_checkpointed_length_and_refuses_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, b"one\ntwo\nthree-partial").unwrap();
        let mut out = Output::file(&path, 8).unwrap();
        out.write(b"three\n").unwrap();
        assert_eq!(out.sync().unwrap(), Some(14));
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
        drop(out);
        let err = Output::file(&path, 100).err().unwrap();
        assert!(err.contains("14 bytes, shorter than the 100"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            14,
            "a refused file is left as it was"
        );
    }
}
