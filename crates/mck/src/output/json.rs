//! Records as JSON lines, written byte by byte in the key order serde_json's map
//! printed them.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::fields::Fields;

/// Writes `s` as a JSON string (quoted and escaped) at the end of `out`.
pub(super) fn json_str(out: &mut Vec<u8>, s: &str) {
    if plain(s.as_bytes()) {
        quoted(out, s.as_bytes());
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// `b` between quotes, as it is.
#[inline]
fn quoted(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() + 2);
    out.push(b'"');
    out.extend_from_slice(b);
    out.push(b'"');
}

/// True when every byte of `b` is printable ASCII other than a quote or a backslash:
/// the bytes are UTF-8 and a JSON string as they are. One scan answers both questions
/// for most keys and values: whole 16-byte chunks are folded without an early exit,
/// which the compiler turns into vector compares, and what is left is taken with the
/// chunk that ends the bytes (overlapping the one before) or, below 16 bytes, eight
/// at a time in a word.
#[inline]
fn plain(b: &[u8]) -> bool {
    let Some(last) = b.len().checked_sub(16) else {
        return plain_short(b);
    };
    let chunk_plain = |chunk: &[u8]| !chunk.iter().fold(false, |acc, &c| acc | special(c));
    let mut chunks = b.chunks_exact(16);
    for chunk in &mut chunks {
        if !chunk_plain(chunk) {
            return false;
        }
    }
    chunks.remainder().is_empty() || chunk_plain(&b[last..])
}

/// Whether `c` keeps bytes from being a JSON string as they are: below 0x20 (a
/// control character) or from 0x80 (not ASCII), in one compare, or a quote or a
/// backslash.
#[inline(always)]
fn special(c: u8) -> bool {
    (c.wrapping_sub(0x20) >= 0x60) | (c == b'"') | (c == b'\\')
}

/// [`plain`] for fewer than 16 bytes: from 8 on, the first and the last eight as
/// words (overlapping), checked a byte per lane at once.
#[inline]
fn plain_short(b: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of a lane is set where a byte is zero (exact for "any lane").
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let word_plain = |x: u64| {
        // Below 0x20 (exact for "any lane" when no byte is 0x80 or above, which `x`
        // itself marks), a quote, a backslash.
        let below = x.wrapping_sub(ONES * 0x20) & !x;
        (x | below | zero(x ^ (ONES * 0x22)) | zero(x ^ (ONES * 0x5c))) & HIGH == 0
    };
    match b.len().checked_sub(8) {
        Some(last) => {
            let word =
                |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("eight bytes"));
            word_plain(word(0)) && word_plain(word(last))
        }
        None => !b.iter().any(|&c| special(c)),
    }
}

/// Writes an integer at the end of `out`, as serde_json prints it (both use itoa;
/// this skips serde's writer around it).
pub(super) fn json_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes `"<name>":` and the bytes (see [`json_value`]).
pub(super) fn json_bytes(out: &mut Vec<u8>, name: &str, bytes: Option<&[u8]>) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    json_value(out, name, bytes);
}

/// Writes the bytes of the field `name` (whose key is written): a string when they
/// are UTF-8, else base64 and `,"<name>Encoding":"base64"` after it; `null` for none.
#[inline(always)]
fn json_value(out: &mut Vec<u8>, name: &str, bytes: Option<&[u8]>) {
    let Some(b) = bytes else {
        out.extend_from_slice(b"null");
        return;
    };
    if plain(b) {
        return quoted(out, b);
    }
    match std::str::from_utf8(b) {
        // Writing into a Vec cannot fail.
        Ok(s) => drop(serde_json::to_writer(&mut *out, s)),
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

/// An integer and its decimal digits, kept to write the next one cheaply: a
/// partition's offsets come one after the other, and records of a batch often share
/// their timestamp.
#[derive(Default)]
struct Decimal {
    /// The number the digits are of: none at first, or when it has more than 16.
    of: Option<i64>,
    /// Its digits (and sign) as bytes from the lowest, zero after `len`. In one
    /// register: a number written byte by byte into memory and read back whole
    /// stalls the load.
    digits: u128,
    len: usize,
}

impl Decimal {
    /// Writes `n` at the end of `out`, as itoa does.
    #[inline(always)]
    fn write(&mut self, out: &mut Vec<u8>, n: i64) {
        let was = self.of;
        match was {
            Some(last) if last == n => {}
            Some(last) if last >= 0 && n.checked_sub(1) == Some(last) && self.increment() => {
                self.of = Some(n);
            }
            _ => return self.set(out, n),
        }
        // All 16 bytes, then cut back: a copy of fixed size, which needs no call.
        let end = out.len() + self.len;
        out.extend_from_slice(&self.digits.to_le_bytes());
        out.truncate(end);
    }

    /// Adds one to the digits of a number ≥ 0; false when that needs one more digit.
    #[inline]
    fn increment(&mut self) -> bool {
        let mut digits = self.digits;
        for i in (0..self.len).rev() {
            let shift = 8 * i;
            if (digits >> shift) as u8 == b'9' {
                // '9' becomes '0' and the one carries left.
                digits -= 9 << shift;
            } else {
                self.digits = digits + (1 << shift);
                return true;
            }
        }
        false
    }

    /// Writes `n` with itoa and keeps its digits when they fit.
    fn set(&mut self, out: &mut Vec<u8>, n: i64) {
        let mut buffer = itoa::Buffer::new();
        let s = buffer.format(n).as_bytes();
        out.extend_from_slice(s);
        let mut bytes = [0; 16];
        match bytes.get_mut(..s.len()) {
            Some(head) => {
                head.copy_from_slice(s);
                (self.of, self.digits, self.len) = (Some(n), u128::from_le_bytes(bytes), s.len());
            }
            None => self.of = None,
        }
    }
}

/// Who a record's shared parts are of: its cluster, topic, partition and streams.
struct PartsOf {
    cluster: Arc<str>,
    topic: Arc<str>,
    partition: i64,
    streams: Arc<[Arc<str>]>,
}

impl PartsOf {
    fn new(f: &Fields<'_>) -> Self {
        Self {
            cluster: f.cluster.clone(),
            topic: f.topic.clone(),
            partition: f.partition,
            streams: f.streams.clone(),
        }
    }

    /// Whether `f` has these parts. The names held here are kept alive, so the same
    /// allocations are the same names; others are compared by their text.
    #[inline]
    fn matches(&self, f: &Fields<'_>) -> bool {
        if self.partition != f.partition {
            return false;
        }
        let same = Arc::ptr_eq(&self.cluster, f.cluster)
            && Arc::ptr_eq(&self.topic, f.topic)
            && Arc::ptr_eq(&self.streams, f.streams);
        same || self.same_text(f)
    }

    #[cold]
    fn same_text(&self, f: &Fields<'_>) -> bool {
        *self.cluster == **f.cluster
            && *self.topic == **f.topic
            && self.streams.len() == f.streams.len()
            && self
                .streams
                .iter()
                .zip(f.streams.iter())
                .all(|(a, b)| **a == **b)
    }
}

/// The parts of a JSON line that every record of one partition shares (its cluster,
/// partition, streams and topic), rendered once for a run of its records: a batch's
/// records come in runs per partition. Also the last offset and timestamp written.
#[derive(Default)]
pub struct JsonParts {
    /// Cluster, topic, partition and streams they were rendered for.
    of: Option<PartsOf>,
    /// `{"cluster":…,"headers":[`
    head: Vec<u8>,
    /// `,"partition":…,"streams":[…],"timestamp":`
    middle: Vec<u8>,
    /// `,"topic":…,"value":`
    tail: Vec<u8>,
    offset: Decimal,
    timestamp: Decimal,
}

impl JsonParts {
    /// Renders the parts anew unless they are those of `f`'s partition.
    #[inline]
    fn update(&mut self, f: &Fields<'_>) {
        if !self.of.as_ref().is_some_and(|of| of.matches(f)) {
            self.render(f);
        }
    }

    #[cold]
    fn render(&mut self, f: &Fields<'_>) {
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
        self.tail.extend_from_slice(b",\"value\":");
        self.of = Some(PartsOf::new(f));
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
#[inline]
pub(super) fn write_json_with(f: &Fields<'_>, parts: &mut JsonParts, out: &mut Vec<u8>) {
    parts.update(f);
    // Room for the line when key and value need no escape, so the writes below grow
    // the buffer at most rarely.
    out.reserve(
        parts.head.len()
            + parts.middle.len()
            + parts.tail.len()
            + f.key.map_or(0, <[u8]>::len)
            + f.value.map_or(0, <[u8]>::len)
            + 96,
    );
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
    out.extend_from_slice(b"],\"key\":");
    json_value(out, "key", f.key);
    out.extend_from_slice(b",\"offset\":");
    parts.offset.write(out, f.offset);
    out.extend_from_slice(&parts.middle);
    match f.timestamp {
        Some(t) => parts.timestamp.write(out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(&parts.tail);
    json_value(out, "value", f.value);
    out.extend_from_slice(b"}\n");
}
