//! The two file layouts as serde types that keep their source positions, and the
//! conversion of YAML / JSON parser errors into located [`MetadataError::Syntax`].
//!
//! Nothing here checks meaning (ids, references, consistency): that is `build.rs`.

use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, Spanned};

use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::metadata::{MetadataError, MirrorOf, SourceLocation};

/// What the top-level visitor expects; also recognises its own error message.
const EXPECTING_DOCUMENT: &str =
    "a list of streams (Flink layout) or a map with `clusters` and `streams`";

/// The entries of a YAML mapping in file order, keys with their positions.
///
/// Repeated keys are kept, so the caller can report them with the right error.
#[derive(Debug)]
pub(super) struct Entries<V>(pub Vec<(Spanned<String>, V)>);

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    entries.push((key, map.next_value()?));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// A parsed file in one of the two layouts.
#[derive(Debug)]
pub(super) enum Document {
    /// Flink's `YamlFileMetadataService` layout: a list of streams.
    Flink(Vec<FlinkStream>),
    /// Our layout: clusters defined once, referenced by streams.
    Rich(RichDocument),
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DocumentVisitor;
        impl<'de> Visitor<'de> for DocumentVisitor {
            type Value = Document;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTING_DOCUMENT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Document, A::Error> {
                Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(Document::Flink)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Document, A::Error> {
                Deserialize::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Document::Rich)
            }
        }
        deserializer.deserialize_any(DocumentVisitor)
    }
}

/// Property values as written (any scalar, kept as its source text).
pub(super) type RawProperties = Entries<Spanned<String>>;

/// One entry of the Flink layout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FlinkStream {
    pub stream_id: Spanned<String>,
    pub cluster_metadata_list: Spanned<Vec<FlinkCluster>>,
}

/// One cluster of a Flink-layout stream (`properties` and offsets are our extension).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FlinkCluster {
    pub cluster_id: Spanned<String>,
    pub bootstrap_servers: Option<Spanned<String>>,
    pub topics: Spanned<Vec<Spanned<String>>>,
    pub properties: Option<RawProperties>,
    pub starting_offsets: Option<Spanned<StartingOffsets>>,
    pub stopping_offsets: Option<Spanned<StoppingOffsets>>,
    pub replaces: Option<Spanned<String>>,
    pub mirror_of: Option<Spanned<MirrorOf>>,
}

/// The richer layout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RichDocument {
    pub version: Option<Spanned<u32>>,
    pub clusters: Entries<RichCluster>,
    pub streams: Entries<RichStream>,
}

/// A cluster definition of the richer layout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RichCluster {
    pub bootstrap_servers: Option<Spanned<String>>,
    pub properties: Option<RawProperties>,
    pub starting_offsets: Option<Spanned<StartingOffsets>>,
    pub stopping_offsets: Option<Spanned<StoppingOffsets>>,
    pub replaces: Option<Spanned<String>>,
}

/// A stream of the richer layout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RichStream {
    pub clusters: Entries<RichStreamCluster>,
}

/// What a stream reads on one cluster, with optional overrides.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RichStreamCluster {
    pub topics: Spanned<Vec<Spanned<String>>>,
    pub properties: Option<RawProperties>,
    pub starting_offsets: Option<Spanned<StartingOffsets>>,
    pub stopping_offsets: Option<Spanned<StoppingOffsets>>,
    pub mirror_of: Option<Spanned<MirrorOf>>,
}

/// Converts a parser position to ours.
pub(super) fn location(path: &Path, at: &serde_saphyr::Location) -> SourceLocation {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    SourceLocation::new(path, clamp(at.line()), clamp(at.column()))
}

/// True when the file is read as strict JSON (by its extension).
pub(super) fn is_json_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Parses the text of `path` (YAML, or strict JSON when the name ends in `.json`).
pub(super) fn parse_document(text: &str, path: &Path) -> Result<Document, MetadataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if yaml_lines(text).all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---"
    }) {
        return Err(MetadataError::Syntax {
            location: Some(SourceLocation::new(path, 1, 1)),
            message: format!("the file is empty: {WHAT_A_FILE_IS}"),
        });
    }
    if is_json_path(path) {
        check_json(text, path)?;
    }
    // Repeated keys reach our own visitors, which report them by kind (a repeated
    // stream id is a `DuplicateStream`, not a syntax error).
    let first = match parse_with(text, DuplicateKeyPolicy::PassThrough) {
        Ok(doc) => return Ok(doc),
        Err(e) => e,
    };
    // The parser meets a field's name before the syntax after it: a broken document
    // (an unclosed `[`) is said as such, not as the field it broke off in.
    if let Err(broken) = parse_any(text) {
        return Err(yaml_error(&broken, text, path));
    }
    // Serde reports a repeated struct field without a position (or with the first
    // one): the strict policy pins it to the repeated key.
    if (first.location().is_none() || first.to_string().starts_with("duplicate field"))
        && let Err(strict) = parse_with(text, DuplicateKeyPolicy::Error)
        && strict.location().is_some()
    {
        return Err(yaml_error(&strict, text, path));
    }
    Err(yaml_error(&first, text, path))
}

fn parse_with(text: &str, duplicates: DuplicateKeyPolicy) -> Result<Document, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.duplicate_keys = duplicates;
    serde_saphyr::from_str_with_options(text, options)
}

/// Parses the YAML alone, for its syntax: any shape, repeated keys allowed.
fn parse_any(text: &str) -> Result<de::IgnoredAny, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.duplicate_keys = DuplicateKeyPolicy::PassThrough;
    serde_saphyr::from_str_with_options(text, options)
}

/// What a metadata file holds, for errors about its shape.
const WHAT_A_FILE_IS: &str = "a metadata file is a list of streams (Flink's layout) or a \
                              mapping with `clusters` and `streams`";

/// The text at a parser position, as a person would quote it: up to the line's end
/// or a comment, at most 40 characters.
fn found_at(text: &str, at: &serde_saphyr::Location) -> Option<String> {
    let line = yaml_lines(text).nth(usize::try_from(at.line()).ok()?.checked_sub(1)?)?;
    let rest: String = line
        .chars()
        .skip(usize::try_from(at.column()).ok()?.saturating_sub(1))
        .collect();
    let rest = rest.split(" #").next().unwrap_or_default().trim();
    if rest.is_empty() {
        return None;
    }
    let mut quoted: String = rest.chars().take(40).collect();
    if rest.chars().count() > 40 {
        quoted.push('…');
    }
    Some(quoted)
}

/// The parser's words about a value of the wrong shape, in a person's: what belongs
/// there and what was found.
fn shape_message(message: &str, found: Option<&str>) -> Option<String> {
    let wanted = match message {
        "expected mapping start" => "a mapping (`key: value` lines or `{key: value}`)",
        "expected sequence start" => "a list (`- item` lines or `[a, b]`)",
        _ => return None,
    };
    Some(match found {
        Some(found) => format!("expected {wanted} here, found `{found}`"),
        None => format!("expected {wanted} here"),
    })
}

fn yaml_error(err: &serde_saphyr::Error, text: &str, path: &Path) -> MetadataError {
    let message = clean_message(&err.without_snippet().to_string());
    let found = err.location().and_then(|at| found_at(text, &at));
    let message = shape_message(&message, found.as_deref()).unwrap_or(message);
    let location = match err.location() {
        Some(at) if at.line() > 0 => Some(location(path, &at)),
        // The top-level type error has no position: it is about the first value.
        _ if message.contains(EXPECTING_DOCUMENT) => {
            let (line, column) = first_content(text);
            Some(SourceLocation::new(path, line, column))
        }
        _ => Some(SourceLocation::new(path, 0, 0)),
    };
    MetadataError::Syntax { location, message }
}

/// Checks strict JSON syntax, reporting serde_json's line and column.
fn check_json(text: &str, path: &Path) -> Result<(), MetadataError> {
    match serde_json::from_str::<de::IgnoredAny>(text) {
        Ok(_) => Ok(()),
        Err(e) => {
            let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            // serde_json counts the characters read on the line, so an error before the
            // line's first character (an empty file, a file ending after a line break)
            // has column 0: that is the start of the line, column 1.
            Err(MetadataError::Syntax {
                location: Some(SourceLocation::new(
                    path,
                    clamp(e.line()).max(1),
                    clamp(e.column()).max(1),
                )),
                message: format!("invalid JSON: {}", clean_message(&e.to_string())),
            })
        }
    }
}

/// One line, without the parser's own position suffix and developer hints.
fn clean_message(raw: &str) -> String {
    let mut message = raw.replace(", set DuplicateKeyPolicy in Options if acceptable", "");
    // "… at line 4, column 5" (YAML) or "… at line 4 column 5" (JSON).
    if let Some(i) = message.rfind(" at line ") {
        let tail = message[i + " at line ".len()..].replace(',', "");
        let words: Vec<&str> = tail.split_whitespace().collect();
        let is_position = matches!(words.as_slice(), [l, "column", c]
            if l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok());
        if is_position {
            message.truncate(i);
        }
    }
    let one_line: Vec<&str> = message.split_whitespace().collect();
    one_line.join(" ")
}

/// The lines of `text` as YAML counts them (and so the positions of the parser's
/// errors): a line break is `\r\n`, `\n` or a lone `\r`.
fn yaml_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\r', '\n']) {
            Some(at) => {
                let width = if text[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&text[at + width..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// 1-based line and column of the first character that is not blank or a comment.
fn first_content(text: &str) -> (u32, u32) {
    for (n, line) in yaml_lines(text).enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        let column = line.chars().count() - trimmed.chars().count() + 1;
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        return (clamp(n + 1), clamp(column));
    }
    (1, 1)
}

/// The position just after the last valid UTF-8 byte, for an undecodable file.
pub(super) fn utf8_error(bytes: &[u8], err: &std::str::Utf8Error, path: &Path) -> MetadataError {
    let valid = std::str::from_utf8(&bytes[..err.valid_up_to()]).unwrap_or_default();
    // Lines as the parser counts them, so this position agrees with its errors.
    let (line, last) = yaml_lines(valid).fold((0, ""), |(n, _), line| (n + 1, line));
    let column = last.chars().count() + 1;
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    MetadataError::Syntax {
        location: Some(SourceLocation::new(path, clamp(line), clamp(column))),
        message: "the file is not valid UTF-8".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syntax_at(text: &str, name: &str) -> (u32, u32, String) {
        match parse_document(text, Path::new(name)) {
            Err(MetadataError::Syntax {
                location: Some(l),
                message,
            }) => (l.line, l.column, message),
            other => panic!("expected a located syntax error, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_file_a_scalar_for_a_mapping_and_a_broken_list_say_so() {
        for (text, name) in [
            ("", "m.yaml"),
            ("# nothing\n---\n\n", "m.yaml"),
            ("\n", "m.json"),
        ] {
            let (line, column, message) = syntax_at(text, name);
            assert_eq!((line, column), (1, 1), "{text:?}");
            assert!(message.starts_with("the file is empty: "), "{message}");
        }
        let mirror = "clusters:\n  east: {bootstrapServers: \"e:1\"}\n  west: {bootstrapServers: \"w:1\"}\n\
                      streams:\n  o:\n    clusters:\n      east: {topics: [t]}\n      west:\n\
                      \x20       topics: [t]\n        mirrorOf: north # the source\n";
        assert_eq!(
            syntax_at(mirror, "m.yaml"),
            (
                10,
                19,
                "expected a mapping (`key: value` lines or `{key: value}`) here, found `north`"
                    .into()
            )
        );
        let (line, column, message) =
            syntax_at("- streamId: x\n  clusterMetadataList: nope\n", "m.yaml");
        assert_eq!((line, column), (2, 24));
        assert_eq!(
            message,
            "expected a list (`- item` lines or `[a, b]`) here, found `nope`"
        );
        // The broken list is said, not the field it broke off in.
        let (line, column, message) = syntax_at("a: [\n", "m.yaml");
        assert_eq!((line, column), (1, 4));
        assert!(message.contains("unclosed bracket"), "{message}");
        assert!(!message.contains("unknown field"), "{message}");
    }

    #[test]
    fn a_top_level_list_is_the_flink_layout_and_a_map_the_rich_one() {
        let flink = "- streamId: s\n  clusterMetadataList: []\n";
        assert!(
            matches!(parse_document(flink, Path::new("a.yaml")), Ok(Document::Flink(v)) if v.len() == 1)
        );
        let rich = "clusters: {}\nstreams: {}\n";
        assert!(matches!(
            parse_document(rich, Path::new("a.yaml")),
            Ok(Document::Rich(_))
        ));
    }

    #[test]
    fn unknown_fields_are_located_syntax_errors() {
        let text =
            "clusters:\n  east:\n    bootstrapServers: a:1\n    bootstrap: a:2\nstreams: {}\n";
        let (line, column, message) = syntax_at(text, "s.yaml");
        assert_eq!((line, column), (4, 5));
        assert!(message.contains("unknown field `bootstrap`"), "{message}");
        assert!(!message.contains("line"), "{message}");
    }

    #[test]
    fn a_repeated_field_points_at_the_repetition() {
        let text = "clusters: {}\nstreams: {}\nclusters: {}\n";
        let (line, _, message) = syntax_at(text, "s.yaml");
        assert_eq!(line, 3, "{message}");
        assert!(!message.contains("DuplicateKeyPolicy"), "{message}");
    }

    #[test]
    fn a_scalar_document_points_at_its_first_value() {
        let (line, column, message) = syntax_at("# comment\n\n  42\n", "s.yaml");
        assert_eq!((line, column), (3, 3));
        assert!(message.contains("list of streams"), "{message}");
    }

    #[test]
    fn json_files_are_strict_and_report_json_positions() {
        let (line, _, message) = syntax_at("{\"clusters\": {},\n \"streams\": {},\n}", "s.json");
        assert_eq!(line, 3, "{message}");
        assert!(message.starts_with("invalid JSON"), "{message}");
        // The same text is accepted as YAML (flow mappings allow a trailing comma).
        assert!(
            parse_document(
                "{\"clusters\": {},\n \"streams\": {},\n}",
                Path::new("s.yaml")
            )
            .is_ok()
        );
    }

    #[test]
    fn a_json_error_before_a_line_s_first_character_is_at_column_1() {
        let (line, column, message) = syntax_at("", "s.json");
        assert_eq!((line, column), (1, 1), "{message}");
        let (line, column, message) = syntax_at("{\"clusters\": {},\n", "s.json");
        assert_eq!((line, column), (2, 1), "{message}");
    }

    #[test]
    fn valid_json_with_tabs_parses() {
        let text = "{\n\t\"clusters\": {},\n\t\"streams\": {}\n}\n";
        assert!(parse_document(text, Path::new("s.json")).is_ok());
    }

    #[test]
    fn the_first_content_skips_comments_and_blank_lines() {
        assert_eq!(first_content("\n# x\n---\n   - a\n"), (4, 4));
        assert_eq!(first_content(""), (1, 1));
        // A lone carriage return ends a line in YAML.
        assert_eq!(first_content("\r# x\r\n  - a\r"), (3, 3));
        let (line, column, _) = syntax_at("# x\r\r  42\r", "s.yaml");
        assert_eq!((line, column), (3, 3));
    }

    #[test]
    fn utf8_errors_point_at_the_bad_byte() {
        let mut bytes = b"a: 1\nbb: ".to_vec();
        bytes.extend([0xff, b'\n']);
        let err = std::str::from_utf8(&bytes).unwrap_err();
        let e = utf8_error(&bytes, &err, Path::new("x.yaml"));
        assert_eq!(e.location().map(|l| (l.line, l.column)), Some((2, 5)));
    }

    #[test]
    fn utf8_errors_count_lines_as_the_yaml_parser_does() {
        let at = |bytes: &[u8]| {
            let err = std::str::from_utf8(bytes).unwrap_err();
            let e = utf8_error(bytes, &err, Path::new("x.yaml"));
            e.location().map(|l| (l.line, l.column))
        };
        assert_eq!(at(b"a: 1\rbb: \xff"), Some((2, 5)));
        assert_eq!(at(b"a: 1\r\nbb: \xff"), Some((2, 5)));
        assert_eq!(at(b"a: 1\r\xff"), Some((2, 1)));
        assert_eq!(at(b"\xff"), Some((1, 1)));
        assert_eq!(at(b"\xc3\xa9\xc3"), Some((1, 2)));
    }
}
