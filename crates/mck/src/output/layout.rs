//! The layouts a record can be printed in: the `--format` presets and `-f` templates.

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
pub(super) enum Piece {
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
pub struct Template(pub(super) Vec<Piece>);

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
    /// `-f` when given, else the `--format` preset. A `-f` that is only a preset's
    /// name (`-f value`, meant as `--format value`) is refused: it would print that
    /// word for every record.
    pub fn new(format: Format, format_string: Option<&str>) -> Result<Self, String> {
        match format_string {
            Some(f) => {
                let t = Template::parse(f)?;
                let literal = t.0.iter().all(|p| matches!(p, Piece::Text(_)));
                let preset = <Format as clap::ValueEnum>::value_variants()
                    .iter()
                    .filter_map(clap::ValueEnum::to_possible_value)
                    .any(|v| v.get_name() == f.trim());
                if literal && preset {
                    return Err(format!(
                        "`{f}` has no placeholder, so every record would print as `{f}`; \
                         -f takes a kcat format string such as '%s\\n', the preset is --format {}",
                        f.trim()
                    ));
                }
                Ok(Layout::Template(t))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_string_that_is_only_a_preset_s_name_is_refused_naming_the_preset() {
        for name in ["value", "json", "kv", "full"] {
            let e = Layout::new(Format::Json, Some(name)).unwrap_err();
            assert!(e.contains(&format!("--format {name}")), "{e}");
        }
        // Literal text that is no preset's name stays valid, as in kcat.
        assert!(Layout::new(Format::Json, Some("tick\\n")).is_ok());
        assert!(Layout::new(Format::Json, Some("value=%s\\n")).is_ok());
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
