//! Rendering a record, or a history-file record, in a layout.

use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use multicluster_kafka::file_source::FileRecord;
use multicluster_kafka::record::{Record, RecordRef};

use super::fields::Fields;
use super::json::{JsonParts, json_bytes, json_int, json_str, write_json, write_json_with};
use super::layout::{Layout, Piece, Template};

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

/// A record of a batch read without values: its value as fetched, from the batch.
impl Printable for RecordRef<'_, ()> {
    fn fields(&self) -> Fields<'_> {
        Fields {
            cluster: self.cluster,
            topic: self.topic,
            partition: self.partition.into(),
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key,
            value: self.raw_value(),
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

/// [`append`], for the records of a batch one after the other: JSON's parts shared by
/// a partition's records are kept in `parts` between them.
#[inline]
pub fn append_with(
    record: &impl Printable,
    layout: &Layout,
    parts: &mut JsonParts,
    out: &mut Vec<u8>,
) {
    let fields = record.fields();
    match layout {
        Layout::Template(t) => write_template(t, &fields, out),
        Layout::Json => write_json_with(&fields, parts, out),
    }
}

/// The cluster of a history-file record: none.
static NO_CLUSTER: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));
/// Its streams: none.
static NO_STREAMS: LazyLock<Arc<[Arc<str>]>> = LazyLock::new(|| Arc::from([]));

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
                cluster: &NO_CLUSTER,
                topic: &record.file,
                partition: -1,
                offset: i64::try_from(record.line).unwrap_or(i64::MAX),
                timestamp: Some(record.timestamp),
                key: None,
                value: Some(&record.value),
                headers: &[],
                streams: &NO_STREAMS,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Format;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
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
        let mut all = Vec::new();
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
            all.push(r);
        }
        // One after the other with the parts kept between them: each line the same,
        // whether the record before had another cluster, topic, partition or
        // streams, or the same.
        let base = all[1].clone();
        for change in 0..4 {
            let mut other = base.clone();
            match change {
                0 => other.partition += 1,
                1 => other.streams = Arc::from([Arc::from("s0\"1"), Arc::from("t")]),
                2 => other.topic = Arc::from("x"),
                _ => other.cluster = Arc::from("c\"2\\"),
            }
            all.extend([base.clone(), other]);
        }
        all.push(base);
        let mut parts = JsonParts::default();
        let mut lines = Vec::new();
        let mut want = Vec::new();
        for r in all.iter().chain(&all).chain(all.iter().rev()) {
            for _ in 0..2 {
                append_with(r, &Layout::Json, &mut parts, &mut lines);
                want.extend(json_by_map(r));
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&lines),
            String::from_utf8_lossy(&want)
        );
    }

    /// Keys and values of bytes around every boundary the one-scan check draws
    /// (control characters, quote, backslash, DEL, non-ASCII, broken UTF-8), at
    /// lengths around its 16-byte chunks: each line is serde_json's.
    #[test]
    fn json_lines_of_mixed_bytes_are_those_of_a_serde_json_map() {
        let pick = [
            b'a', b'Z', b' ', b'~', 0x00, 0x1f, 0x20, b'"', b'\\', 0x7f, 0x80, 0xc3, 0xa9, 0xe2,
            0xff,
        ];
        // xorshift: the same bytes every run.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parts = JsonParts::default();
        let (mut lines, mut want) = (Vec::new(), Vec::new());
        for i in 0..2_000 {
            let len = (next() % 40) as usize;
            // Mostly plain text, with one odd byte now and then.
            let odd = (next() % 4 == 0).then(|| (next() as usize % len.max(1), next()));
            let text: Vec<u8> = (0..len)
                .map(|k| match odd {
                    Some((at, b)) if at == k => pick[b as usize % pick.len()],
                    _ => pick[next() as usize % 4],
                })
                .collect();
            let mut r = record(Some(&text[..len / 2]), &text);
            r.offset = i;
            r.headers.truncate(i as usize % 4);
            append_with(&r, &Layout::Json, &mut parts, &mut lines);
            want.extend(json_by_map(&r));
        }
        assert_eq!(
            String::from_utf8_lossy(&lines),
            String::from_utf8_lossy(&want)
        );
        assert_eq!(lines, want);
    }

    /// Offsets and timestamps are written from the digits of the record before when
    /// they follow it or repeat it: every line must still be serde_json's.
    #[test]
    fn offsets_and_timestamps_in_runs_are_the_numbers_of_each_record() {
        let mut r = record(Some(b"k"), b"v");
        r.headers.clear();
        let offsets = [
            0,
            1,
            2,
            8,
            9,
            10,
            11,
            98,
            99,
            100,
            101,
            101,
            100,
            999,
            1000,
            1001,
            -1,
            0,
            1,
            9_999_999,
            10_000_000,
            999_999_999_999_999,
            1_000_000_000_000_000,
            9_999_999_999_999_998,
            9_999_999_999_999_999,
            10_000_000_000_000_000,
            10_000_000_000_000_001,
            i64::MAX - 1,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
            7,
        ];
        let timestamps = [
            Some(1_700_000_000_000),
            Some(1_700_000_000_000),
            Some(1_699_999_999_999),
            Some(1_700_000_000_000),
            None,
            Some(1_700_000_000_000),
            Some(-1),
            Some(0),
            Some(9),
            Some(10),
        ];
        let mut parts = JsonParts::default();
        let (mut lines, mut want) = (Vec::new(), Vec::new());
        for (i, &offset) in offsets.iter().enumerate() {
            r.offset = offset;
            r.timestamp = timestamps[i % timestamps.len()];
            append_with(&r, &Layout::Json, &mut parts, &mut lines);
            want.extend(json_by_map(&r));
        }
        assert_eq!(
            String::from_utf8_lossy(&lines),
            String::from_utf8_lossy(&want)
        );
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
}
