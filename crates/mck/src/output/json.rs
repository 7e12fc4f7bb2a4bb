//! Records as JSON lines, written byte by byte in the key order serde_json's map
//! printed them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::render::Fields;

/// Writes `s` as a JSON string (quoted and escaped) at the end of `out`.
///
/// Most strings need no escape: a scan the compiler vectorises finds those, and they
/// are copied as they are; any other goes through serde_json's escaper.
pub(super) fn json_str(out: &mut Vec<u8>, s: &str) {
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

/// Writes an integer at the end of `out`, as serde_json prints it (both use itoa;
/// this skips serde's writer around it).
pub(super) fn json_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes `"<name>":` and the bytes: a string when they are UTF-8, else base64 and
/// `,"<name>Encoding":"base64"` after it; `null` for none.
pub(super) fn json_bytes(out: &mut Vec<u8>, name: &str, bytes: Option<&[u8]>) {
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

/// The parts of a JSON line that every record of one partition shares (its cluster,
/// partition, streams and topic), rendered once for a run of its records: a batch's
/// records come in runs per partition.
#[derive(Default)]
pub struct JsonParts {
    /// Cluster, topic, partition and streams they were rendered for.
    of: Option<(String, String, i64, Vec<String>)>,
    /// `{"cluster":…,"headers":[`
    head: Vec<u8>,
    /// `,"partition":…,"streams":[…],"timestamp":`
    middle: Vec<u8>,
    /// `,"topic":…,`
    tail: Vec<u8>,
}

impl JsonParts {
    /// Renders the parts anew unless they are those of `f`'s partition.
    fn update(&mut self, f: &Fields<'_>) {
        if let Some((cluster, topic, partition, streams)) = &self.of
            && cluster == f.cluster
            && topic == f.topic
            && *partition == f.partition
            && streams.len() == f.streams.len()
            && streams.iter().zip(f.streams).all(|(a, b)| **a == **b)
        {
            return;
        }
        self.head.clear();
        self.head.extend_from_slice(b"{\"cluster\":");
        json_str(&mut self.head, f.cluster);
        self.head.extend_from_slice(b",\"headers\":[");
        self.middle.clear();
        self.middle.extend_from_slice(b",\"partition\":");
        json_int(&mut self.middle, f.partition);
        self.middle.extend_from_slice(b",\"streams\":[");
        for (i, stream) in f.streams.iter().enumerate() {
            if i > 0 {
                self.middle.push(b',');
            }
            json_str(&mut self.middle, stream);
        }
        self.middle.extend_from_slice(b"],\"timestamp\":");
        self.tail.clear();
        self.tail.extend_from_slice(b",\"topic\":");
        json_str(&mut self.tail, f.topic);
        self.tail.push(b',');
        self.of = Some((
            f.cluster.to_string(),
            f.topic.to_string(),
            f.partition,
            f.streams.iter().map(|s| s.to_string()).collect(),
        ));
    }
}

/// Writes one record as a JSON line. The keys come in the order serde_json's map
/// printed them before (sorted: `cluster`, `headers`, `key`, `offset`, `partition`,
/// `streams`, `timestamp`, `topic`, `value`), each `…Encoding` right after its field.
pub(super) fn write_json(f: &Fields<'_>, out: &mut Vec<u8>) {
    write_json_with(f, &mut JsonParts::default(), out);
}

/// [`write_json`], with the parts of the record's partition from `parts` (rendered
/// there when they are another partition's).
pub(super) fn write_json_with(f: &Fields<'_>, parts: &mut JsonParts, out: &mut Vec<u8>) {
    parts.update(f);
    out.extend_from_slice(&parts.head);
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
    out.extend_from_slice(&parts.middle);
    match f.timestamp {
        Some(t) => json_int(out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(&parts.tail);
    json_bytes(out, "value", f.value);
    out.extend_from_slice(b"}\n");
}
