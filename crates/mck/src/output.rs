//! How `mck consume` writes records: one line per record, and an output that counts
//! the bytes it has written so a checkpoint can record the file's length.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use multicluster_kafka::file_source::FileRecord;
use multicluster_kafka::record::{Record, RecordRef};

/// `--format`: the ready-made layouts (`-f` gives any other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line: cluster, topic, partition, offset, timestamp, key,
    /// value, headers and the streams the record belongs to (null key, null value and
    /// null header values as `null`).
    Json,
    /// The value bytes as they are, then a newline (a tombstone prints an empty line).
    Value,
    /// The key, a tab, the value, a newline (`-f '%k\t%s\n'`).
    Kv,
    /// Cluster, topic, partition, offset, timestamp, headers, key and value on one line
    /// (`-f '%c %t [%p] @%o %T %h key=%k: %s\n'`).
    Full,
}

impl Format {
    /// The template of a layout other than JSON.
    pub fn template(self) -> Option<Template> {
        let text = match self {
            Format::Json => return None,
            Format::Value => "%s\\n",
            Format::Kv => "%k\\t%s\\n",
            Format::Full => "%c %t [%p] @%o %T %h key=%k: %s\\n",
        };
        Some(Template::parse(text).expect("the presets are valid templates"))
    }
}

/// One part of a `-f` template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    Value,
    ValueLength,
    Key,
    KeyLength,
    Topic,
    Partition,
    Offset,
    Timestamp,
    Headers,
    Cluster,
}

/// A kcat-style format string, parsed once: `%s` value, `%S` value length, `%k` key,
/// `%K` key length, `%t` topic, `%p` partition, `%o` offset, `%T` timestamp (ms, -1 when
/// none), `%h` headers (`k=v,k2=v2`), `%c` cluster, `%%` a percent sign; `\n`, `\t`,
/// `\r`, `\\` escapes. Like kcat, nothing is added at the end: write `\n` yourself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

impl Template {
    /// Parses `text`; an unknown placeholder or escape is an error naming it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            let piece = match c {
                '%' => match chars.next() {
                    Some('%') => {
                        lit.push(b'%');
                        continue;
                    }
                    Some('s') => Piece::Value,
                    Some('S') => Piece::ValueLength,
                    Some('k') => Piece::Key,
                    Some('K') => Piece::KeyLength,
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('T') => Piece::Timestamp,
                    Some('h') => Piece::Headers,
                    Some('c') => Piece::Cluster,
                    other => {
                        return Err(format!(
                            "unknown placeholder `%{}` in the format string; use %s %S %k %K %t %p %o %T %h %c or %%",
                            other.map(String::from).unwrap_or_default()
                        ));
                    }
                },
                '\\' => {
                    match chars.next() {
                        Some('n') => lit.push(b'\n'),
                        Some('t') => lit.push(b'\t'),
                        Some('r') => lit.push(b'\r'),
                        Some('\\') => lit.push(b'\\'),
                        other => {
                            return Err(format!(
                                "unknown escape `\\{}` in the format string; use \\n \\t \\r or \\\\",
                                other.map(String::from).unwrap_or_default()
                            ));
                        }
                    }
                    continue;
                }
                c => {
                    let mut buf = [0; 4];
                    lit.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
            };
            if !lit.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut lit)));
            }
            pieces.push(piece);
        }
        if !lit.is_empty() {
            pieces.push(Piece::Text(lit));
        }
        Ok(Template(pieces))
    }
}

/// How each record becomes bytes: JSON, or a template.
#[derive(Clone, Debug)]
pub enum Layout {
    /// `--format json`.
    Json,
    /// A preset or `-f`.
    Template(Template),
}

impl Layout {
    /// `-f` when given, else the `--format` preset.
    pub fn new(format: Format, format_string: Option<&str>) -> Result<Self, String> {
        match format_string {
            Some(f) => Template::parse(f).map(Layout::Template),
            None => Ok(format.template().map_or(Layout::Json, Layout::Template)),
        }
    }

    /// Whether the lines show record headers: when not, the source need not take
    /// them from librdkafka (parsing each record's headers costs per record).
    pub fn shows_headers(&self) -> bool {
        match self {
            Layout::Json => true,
            Layout::Template(t) => t.0.contains(&Piece::Headers),
        }
    }
}

/// The parts of a record a layout can show.
pub struct Fields<'a> {
    cluster: &'a str,
    topic: &'a str,
    partition: i64,
    offset: i64,
    timestamp: Option<i64>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [(String, Option<Vec<u8>>)],
    /// The subscribed streams the record belongs to (in JSON only).
    streams: &'a [Arc<str>],
}

fn write_template(t: &Template, f: &Fields<'_>, line: &mut Vec<u8>) {
    use std::io::Write as _;
    for piece in &t.0 {
        // Writing into a Vec cannot fail.
        let _ = match piece {
            Piece::Text(b) => line.write_all(b),
            Piece::Value => line.write_all(f.value.unwrap_or_default()),
            Piece::ValueLength => write!(line, "{}", f.value.map_or(-1, |v| v.len() as i64)),
            Piece::Key => line.write_all(f.key.unwrap_or_default()),
            Piece::KeyLength => write!(line, "{}", f.key.map_or(-1, |k| k.len() as i64)),
            Piece::Topic => line.write_all(f.topic.as_bytes()),
            Piece::Partition => write!(line, "{}", f.partition),
            Piece::Offset => write!(line, "{}", f.offset),
            Piece::Timestamp => write!(line, "{}", f.timestamp.unwrap_or(-1)),
            Piece::Cluster => line.write_all(f.cluster.as_bytes()),
            Piece::Headers => {
                for (i, (k, v)) in f.headers.iter().enumerate() {
                    if i > 0 {
                        line.push(b',');
                    }
                    line.extend_from_slice(k.as_bytes());
                    line.push(b'=');
                    line.extend_from_slice(v.as_deref().unwrap_or_default());
                }
                Ok(())
            }
        };
    }
}

/// Writes `s` as a JSON string (quoted and escaped) at the end of `out`.
///
/// Most strings need no escape: a scan the compiler vectorises finds those, and they
/// are copied as they are; any other goes through serde_json's escaper.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// True when a byte of `b` must be escaped in a JSON string: a control character, a
/// quote or a backslash. Whole 16-byte chunks are folded without an early exit, which
/// the compiler turns into vector compares.
fn needs_escape(b: &[u8]) -> bool {
    let special = |c: u8| (c < 0x20) | (c == b'"') | (c == b'\\');
    let mut chunks = b.chunks_exact(16);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |acc, &c| acc | special(c)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&c| special(c))
}

/// Writes an integer at the end of `out`, as serde_json prints it.
fn json_int(out: &mut Vec<u8>, n: i64) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &n);
}

/// Writes `"<name>":` and the bytes: a string when they are UTF-8, else base64 and
/// `,"<name>Encoding":"base64"` after it; `null` for none.
fn json_bytes(out: &mut Vec<u8>, name: &str, bytes: Option<&[u8]>) {
    json_key(out, name);
    let Some(b) = bytes else {
        out.extend_from_slice(b"null");
        return;
    };
    match std::str::from_utf8(b) {
        Ok(s) => json_str(out, s),
        Err(_) => {
            // Base64 needs no escape.
            out.push(b'"');
            let at = out.len();
            let n = base64::encoded_len(b.len(), true).expect("a record's length in base64 fits");
            out.resize(at + n, 0);
            let written = BASE64
                .encode_slice(b, &mut out[at..])
                .expect("the buffer has the encoded length");
            debug_assert_eq!(written, n);
            out.extend_from_slice(b"\",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"Encoding\":\"base64\"");
        }
    }
}

/// Writes `"<name>":` (names here need no escape).
fn json_key(out: &mut Vec<u8>, name: &str) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Writes one record as a JSON line. The keys come in the order serde_json's map
/// printed them before (sorted: `cluster`, `headers`, `key`, `offset`, `partition`,
/// `streams`, `timestamp`, `topic`, `value`), each `…Encoding` right after its field.
fn write_json(f: &Fields<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"cluster\":");
    json_str(out, f.cluster);
    out.extend_from_slice(b",\"headers\":[");
    for (i, (k, v)) in f.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"key\":");
        json_str(out, k);
        out.push(b',');
        json_bytes(out, "value", v.as_deref());
        out.push(b'}');
    }
    out.extend_from_slice(b"],");
    json_bytes(out, "key", f.key);
    out.extend_from_slice(b",\"offset\":");
    json_int(out, f.offset);
    out.extend_from_slice(b",\"partition\":");
    json_int(out, f.partition);
    out.extend_from_slice(b",\"streams\":[");
    for (i, stream) in f.streams.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, stream);
    }
    out.extend_from_slice(b"],\"timestamp\":");
    match f.timestamp {
        Some(t) => json_int(out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"topic\":");
    json_str(out, f.topic);
    out.push(b',');
    json_bytes(out, "value", f.value);
    out.extend_from_slice(b"}\n");
}

/// A record the layouts can print: an owned [`Record`], or one read in place in its
/// batch ([`RecordRef`]).
pub trait Printable {
    /// The parts a layout shows.
    fn fields(&self) -> Fields<'_>;
}

impl Printable for Record<Option<Bytes>> {
    fn fields(&self) -> Fields<'_> {
        Fields {
            cluster: &self.cluster,
            topic: &self.topic,
            partition: self.partition.into(),
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
            streams: &self.streams,
        }
    }
}

impl Printable for RecordRef<'_, Option<Bytes>> {
    fn fields(&self) -> Fields<'_> {
        Fields {
            cluster: self.cluster,
            topic: self.topic,
            partition: self.partition.into(),
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key,
            value: self.value.as_deref(),
            headers: self.headers,
            streams: self.streams,
        }
    }
}

/// Renders one record in `layout` into `line` (which is cleared first).
pub fn render(record: &impl Printable, layout: &Layout, line: &mut Vec<u8>) {
    line.clear();
    append(record, layout, line);
}

/// Renders one record in `layout` at the end of `out`, after what it holds: the
/// records of a batch go out in a few large writes.
pub fn append(record: &impl Printable, layout: &Layout, out: &mut Vec<u8>) {
    let fields = record.fields();
    match layout {
        Layout::Template(t) => write_template(t, &fields, out),
        Layout::Json => write_json(&fields, out),
    }
}

/// Renders one history-file record (of `mck consume --backfill`): in JSON, an object
/// with `file`, `line`, `timestamp` and `value` (the file's line, which is a JSON
/// object, as text); in a template, `%t` is the file, `%o` the line number and `%s` the
/// line.
pub fn render_file(record: &FileRecord, layout: &Layout, line: &mut Vec<u8>) {
    line.clear();
    match layout {
        Layout::Template(t) => write_template(
            t,
            &Fields {
                cluster: "",
                topic: &record.file,
                partition: -1,
                offset: i64::try_from(record.line).unwrap_or(i64::MAX),
                timestamp: Some(record.timestamp),
                key: None,
                value: Some(&record.value),
                headers: &[],
                streams: &[],
            },
            line,
        ),
        Layout::Json => {
            line.extend_from_slice(b"{\"file\":");
            json_str(line, &record.file);
            line.extend_from_slice(b",\"line\":");
            let _ = serde_json::to_writer(&mut *line, &record.line);
            line.extend_from_slice(b",\"timestamp\":");
            json_int(line, record.timestamp);
            line.push(b',');
            json_bytes(line, "value", Some(&record.value));
            line.extend_from_slice(b"}\n");
        }
    }
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

    /// Opens `path` for appending: cut back to the length a checkpoint covers, or
    /// started afresh. A file created here has its directory fsynced, so the file
    /// survives a crash along with the checkpoints that count its bytes.
    pub fn file(path: &Path, start: FileStart) -> Result<Self, String> {
        let at = |e: io::Error| format!("output file {}: {e}", path.display());
        let mut options = OpenOptions::new();
        options.write(true).truncate(false).read(true);
        let (file, created) = match options.open(path) {
            Ok(f) => (f, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                (options.create(true).open(path).map_err(at)?, true)
            }
            Err(e) => return Err(at(e)),
        };
        let len = file.metadata().map_err(at)?.len();
        let keep = match start {
            FileStart::Resume(keep) if len < keep => {
                return Err(format!(
                    "output file {} is {len} bytes, shorter than the {keep} bytes the checkpoint covers; \
                     records the checkpoint counts as written are missing (restore the file or start with a new checkpoint directory)",
                    path.display()
                ));
            }
            FileStart::Resume(keep) => keep,
            FileStart::Fresh { overwrite: false } if len > 0 => {
                return Err(format!(
                    "output file {} already holds {len} bytes and no checkpoint covers them; \
                     give --overwrite to replace it, or the --checkpoint-dir of the run that wrote it to resume",
                    path.display()
                ));
            }
            FileStart::Fresh { .. } => 0,
        };
        if len != keep {
            file.set_len(keep).map_err(at)?;
        }
        file.sync_all().map_err(at)?;
        if created {
            sync_parent(path).map_err(at)?;
        }
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        io::Seek::seek(&mut writer, io::SeekFrom::Start(keep)).map_err(at)?;
        Ok(Output::File {
            path: path.to_path_buf(),
            writer,
            len: keep,
        })
    }

    /// Writes one rendered line.
    pub fn write(&mut self, line: &[u8]) -> Result<(), WriteError> {
        match self {
            Output::Stdout(w) => w.write_all(line).map_err(|e| WriteError::stdout(&e)),
            Output::File { path, writer, len } => {
                writer.write_all(line).map_err(|e| {
                    WriteError::Failed(format!("output file {}: {e}", path.display()))
                })?;
                *len += line.len() as u64;
                Ok(())
            }
        }
    }

    /// Hands buffered lines to the operating system (no fsync), so a reader of the
    /// pipe, terminal or file sees them now.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        match self {
            Output::Stdout(w) => w.flush().map_err(|e| WriteError::stdout(&e)),
            Output::File { path, writer, .. } => writer
                .flush()
                .map_err(|e| WriteError::Failed(format!("output file {}: {e}", path.display()))),
        }
    }

    /// Flushes buffered lines; for a file, also makes them durable (fsync) and returns
    /// the file's length.
    pub fn sync(&mut self) -> Result<Option<u64>, WriteError> {
        match self {
            Output::Stdout(w) => {
                w.flush().map_err(|e| WriteError::stdout(&e))?;
                Ok(None)
            }
            Output::File { path, writer, len } => {
                let at = |e: io::Error| {
                    WriteError::Failed(format!("output file {}: {e}", path.display()))
                };
                writer.flush().map_err(at)?;
                writer.get_ref().sync_data().map_err(at)?;
                Ok(Some(*len))
            }
        }
    }

    /// True when standard output is a pipe whose reader has gone (`| head` ended): the
    /// run can end without waiting for a record to write.
    pub fn reader_gone(&self) -> bool {
        if !matches!(self, Output::Stdout(_)) {
            return false;
        }
        let mut fd = libc::pollfd {
            fd: libc::STDOUT_FILENO,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout; poll only reads and writes `fd`.
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        n == 1 && fd.revents & libc::POLLERR != 0
    }
}

/// How [`Output::file`] starts a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStart {
    /// Cut back to the length a checkpoint covers (a shorter file is refused: records
    /// the checkpoint counts as written are gone).
    Resume(u64),
    /// Empty. An existing non-empty file is refused unless `overwrite`.
    Fresh {
        /// Replace what the file holds.
        overwrite: bool,
    },
}

/// Fsyncs the directory holding `path`, making its entry (a new or renamed file)
/// durable.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Why a line could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Standard output's reader has gone (a broken pipe): the run ends quietly.
    Closed,
    /// Anything else, located.
    Failed(String),
}

impl WriteError {
    fn stdout(e: &io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            WriteError::Closed
        } else {
            WriteError::Failed(format!("stdout: {e}"))
        }
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Closed => f.write_str("stdout: the reader has gone (broken pipe)"),
            WriteError::Failed(e) => f.write_str(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};
    use std::sync::Arc;

    fn record(key: Option<&[u8]>, value: &[u8]) -> Record<Option<Bytes>> {
        Record {
            streams: Arc::from([Arc::from("orders")]),
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
            value: Some(Bytes::copy_from_slice(value)),
        }
    }

    fn json(r: &Record<Option<Bytes>>) -> Value {
        let mut line = Vec::new();
        render(r, &Layout::Json, &mut line);
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
        assert_eq!(v["streams"], serde_json::json!(["orders"]));
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

    /// The JSON line as it was built before: a `serde_json::Map` per record, printed
    /// by serde_json. The direct writer must print the same bytes.
    fn json_by_map(r: &Record<Option<Bytes>>) -> Vec<u8> {
        fn put(obj: &mut Map<String, Value>, name: &str, bytes: Option<&[u8]>) {
            let Some(b) = bytes else {
                obj.insert(name.into(), Value::Null);
                return;
            };
            match std::str::from_utf8(b) {
                Ok(s) => {
                    obj.insert(name.into(), s.into());
                }
                Err(_) => {
                    obj.insert(name.into(), BASE64.encode(b).into());
                    obj.insert(format!("{name}Encoding"), "base64".into());
                }
            }
        }
        let mut obj = Map::new();
        obj.insert("cluster".into(), r.cluster.to_string().into());
        obj.insert("topic".into(), r.topic.to_string().into());
        obj.insert("partition".into(), r.partition.into());
        obj.insert("offset".into(), r.offset.into());
        obj.insert(
            "timestamp".into(),
            r.timestamp.map_or(Value::Null, Value::from),
        );
        put(&mut obj, "key", r.key.as_deref());
        put(&mut obj, "value", r.value.as_deref());
        let headers = r
            .headers
            .iter()
            .map(|(k, v)| {
                let mut h = Map::new();
                h.insert("key".into(), k.clone().into());
                put(&mut h, "value", v.as_deref());
                Value::Object(h)
            })
            .collect();
        obj.insert("headers".into(), Value::Array(headers));
        let streams = r.streams.iter().map(|s| Value::from(&**s)).collect();
        obj.insert("streams".into(), Value::Array(streams));
        let mut line = serde_json::to_vec(&Value::Object(obj)).unwrap();
        line.push(b'\n');
        line
    }

    #[test]
    fn json_lines_are_byte_for_byte_those_of_a_serde_json_map() {
        let texts: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"x".repeat(100),
            b"plain text of exactly 16 bytes!!".to_vec(),
            b"a \"quote\" and a back\\slash".to_vec(),
            b"0123456789abcdef\"".to_vec(),
            b"0123456789abcde\n0123456789abcdef".to_vec(),
            (0u8..0x80).collect(),
            "caf\u{e9} \u{1F600} \u{2028} \u{7f}".as_bytes().to_vec(),
            vec![0xff, 0x00, 0x80],
            vec![0xc3; 40],
            b"{\"nested\":\"json\",\"n\":[1,2]}".to_vec(),
        ];
        for (i, text) in texts.iter().enumerate() {
            let mut r = record(Some(text), text);
            r.cluster = Arc::from(format!("c\"{i}\\"));
            r.topic = Arc::from(String::from_utf8_lossy(text).into_owned());
            r.partition = i32::MAX - i as i32;
            r.offset = if i % 2 == 0 { i64::MIN } else { i as i64 };
            r.timestamp = (i % 3 != 0).then_some(-(i as i64));
            r.headers.push((
                String::from_utf8_lossy(text).into_owned(),
                Some(text.clone()),
            ));
            r.streams = (0..i % 3)
                .map(|n| Arc::from(format!("s{n}\"{i}")))
                .collect();
            if i % 4 == 0 {
                r.headers.clear();
                r.key = None;
                r.value = None;
            }
            let mut line = Vec::new();
            render(&r, &Layout::Json, &mut line);
            assert_eq!(
                String::from_utf8_lossy(&line),
                String::from_utf8_lossy(&json_by_map(&r)),
                "text {i}"
            );
            assert_eq!(line, json_by_map(&r), "text {i}");
        }
    }

    #[test]
    fn appended_lines_follow_each_other_and_a_render_starts_afresh() {
        let mut tombstone = record(Some(b"k"), b"");
        tombstone.value = None;
        let records = [
            record(Some(b"k-1"), b"one"),
            record(None, &[0xff, 0x00]),
            tombstone,
        ];
        for layout in [
            Layout::Json,
            Layout::new(Format::Value, None).unwrap(),
            Layout::new(Format::Full, None).unwrap(),
        ] {
            let mut appended = b"before|".to_vec();
            let mut expected = b"before|".to_vec();
            let mut line = b"left over".to_vec();
            for r in &records {
                append(r, &layout, &mut appended);
                render(r, &layout, &mut line);
                assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
                expected.extend_from_slice(&line);
            }
            assert_eq!(
                String::from_utf8_lossy(&appended),
                String::from_utf8_lossy(&expected),
                "{layout:?}"
            );
        }
    }

    #[test]
    fn file_records_in_json_keep_their_layout() {
        let mut line = Vec::new();
        let mut record = FileRecord {
            file: Arc::from("2024/01/a\"b.jsonl"),
            line: u64::MAX,
            timestamp: -5,
            value: Bytes::from_static(b"{\"id\":1,\"s\":\"t\\n\"}"),
        };
        render_file(&record, &Layout::Json, &mut line);
        let mut obj = Map::new();
        obj.insert("file".into(), record.file.to_string().into());
        obj.insert("line".into(), record.line.into());
        obj.insert("timestamp".into(), record.timestamp.into());
        obj.insert(
            "value".into(),
            String::from_utf8(record.value.to_vec()).unwrap().into(),
        );
        let mut expected = serde_json::to_vec(&Value::Object(obj)).unwrap();
        expected.push(b'\n');
        assert_eq!(
            String::from_utf8_lossy(&line),
            String::from_utf8_lossy(&expected)
        );
        record.value = Bytes::from_static(&[0xfe]);
        render_file(&record, &Layout::Json, &mut line);
        assert!(
            line.ends_with(b"\"value\":\"/g==\",\"valueEncoding\":\"base64\"}\n"),
            "{}",
            String::from_utf8_lossy(&line)
        );
    }

    fn templated(r: &Record<Option<Bytes>>, format: Format, string: Option<&str>) -> String {
        let mut line = Vec::new();
        render(r, &Layout::new(format, string).unwrap(), &mut line);
        String::from_utf8_lossy(&line).into_owned()
    }

    #[test]
    fn value_format_is_the_bytes_and_a_newline() {
        assert_eq!(
            templated(&record(None, b"hello"), Format::Value, None),
            "hello\n"
        );
    }

    #[test]
    fn a_tombstone_is_null_in_json_and_an_empty_line_in_value_format() {
        let mut tombstone = record(Some(b"k"), b"");
        tombstone.value = None;
        let v = json(&tombstone);
        assert!(v["value"].is_null(), "{v}");
        assert_eq!(v["key"], "k");
        assert_eq!(
            json(&record(None, b""))["value"],
            "",
            "an empty value stays empty"
        );
        assert_eq!(templated(&tombstone, Format::Value, None), "\n");
        assert_eq!(
            templated(&tombstone, Format::Json, Some("%S|%K\\n")),
            "-1|1\n"
        );
    }

    #[test]
    fn format_strings_take_kcat_placeholders_and_escapes() {
        let r = record(Some(b"k-1"), b"v");
        assert_eq!(
            templated(
                &r,
                Format::Json,
                Some(r"%c/%t/%p@%o %T %k=%s (%S,%K) %h 100%%\t|\n")
            ),
            "east/orders/2@41 1700000000000 k-1=v (1,3) trace=abc,bin=\u{fffd}\u{0},none= 100%\t|\n",
        );
        assert_eq!(templated(&r, Format::Kv, None), "k-1\tv\n");
        assert!(
            templated(&r, Format::Full, None).starts_with("east orders [2] @41 1700000000000 ")
        );
        assert!(Template::parse("%x").unwrap_err().contains("%x"));
        assert!(Template::parse("\\q").unwrap_err().contains("\\q"));
        assert!(
            Template::parse("50%").is_err(),
            "a lone % at the end is refused"
        );
    }

    #[test]
    fn a_file_output_is_cut_to_the_checkpointed_length_and_refuses_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, b"one\ntwo\nthree-partial").unwrap();
        let mut out = Output::file(&path, FileStart::Resume(8)).unwrap();
        out.write(b"three\n").unwrap();
        assert_eq!(out.sync().unwrap(), Some(14));
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
        drop(out);
        let err = Output::file(&path, FileStart::Resume(100)).err().unwrap();
        assert!(err.contains("14 bytes, shorter than the 100"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            14,
            "a refused file is left as it was"
        );
    }

    #[test]
    fn a_fresh_start_refuses_a_non_empty_file_unless_told_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let fresh = FileStart::Fresh { overwrite: false };
        // A new file, and an empty one, are fine.
        let mut out = Output::file(&path, fresh).unwrap();
        assert_eq!(out.sync().unwrap(), Some(0));
        drop(out);
        Output::file(&path, fresh).unwrap();
        std::fs::write(&path, b"precious\n").unwrap();
        let err = Output::file(&path, fresh).err().unwrap();
        assert!(err.contains("out.jsonl already holds 9 bytes"), "{err}");
        assert!(err.contains("--overwrite"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious\n", "untouched");
        let mut out = Output::file(&path, FileStart::Fresh { overwrite: true }).unwrap();
        out.write(b"new\n").unwrap();
        assert_eq!(out.sync().unwrap(), Some(4));
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        // A directory that does not exist is an error naming the file.
        let err = Output::file(&dir.path().join("no/such.jsonl"), fresh)
            .err()
            .unwrap();
        assert!(err.contains("no/such.jsonl"), "{err}");
    }

    #[test]
    fn only_layouts_that_show_headers_ask_for_them() {
        assert!(Layout::new(Format::Json, None).unwrap().shows_headers());
        assert!(Layout::new(Format::Full, None).unwrap().shows_headers());
        assert!(!Layout::new(Format::Value, None).unwrap().shows_headers());
        assert!(!Layout::new(Format::Kv, None).unwrap().shows_headers());
        assert!(
            Layout::new(Format::Value, Some("%h %s\\n"))
                .unwrap()
                .shows_headers()
        );
        assert!(
            !Layout::new(Format::Json, Some("%k %s\\n"))
                .unwrap()
                .shows_headers()
        );
    }
}
