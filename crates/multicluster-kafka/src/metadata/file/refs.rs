//! `${env:NAME}` and `${file:PATH}` references inside property values.
//!
//! A value may hold any number of references mixed with literal text
//! (`username="app" password="${env:KAFKA_PASSWORD}"`). `$${` stands for a literal
//! `${`. Resolved text is never re-scanned, and no error message ever contains a
//! resolved value.

use std::path::Path;

use crate::metadata::{MetadataError, SourceLocation};

/// Looks up an environment variable; `None` when it is not set.
pub(super) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The longest reference text quoted back in an error message.
const MAX_QUOTED: usize = 80;

/// A value after its references were replaced.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    /// The text with every reference replaced.
    pub value: String,
    /// True when at least one reference was replaced: the value then counts as a
    /// secret whatever its key.
    pub referenced: bool,
}

/// Replaces references, reading the environment through `env` and files relative to
/// `base_dir` (the metadata file's directory).
pub(super) struct Resolver<'a> {
    base_dir: &'a Path,
    env: EnvLookup<'a>,
}

impl<'a> Resolver<'a> {
    pub(super) fn new(base_dir: &'a Path, env: EnvLookup<'a>) -> Self {
        Self { base_dir, env }
    }

    /// Resolves every reference in `raw`, a value found at `at`.
    pub(super) fn resolve(
        &self,
        raw: &str,
        at: &SourceLocation,
    ) -> Result<Resolved, MetadataError> {
        let mut value = String::with_capacity(raw.len());
        let mut referenced = false;
        let mut rest = raw;
        while let Some(dollar) = rest.find('$') {
            value.push_str(&rest[..dollar]);
            let tail = &rest[dollar..];
            if let Some(after) = tail.strip_prefix("$${") {
                value.push_str("${");
                rest = after;
            } else if let Some(after) = tail.strip_prefix("${") {
                let Some(end) = after.find('}') else {
                    return Err(MetadataError::Invalid {
                        location: Some(at.clone()),
                        message: "unterminated `${` reference (write `$${` for a literal `${`)"
                            .into(),
                    });
                };
                value.push_str(&self.lookup(&after[..end], at)?);
                referenced = true;
                rest = &after[end + 1..];
            } else {
                value.push('$');
                rest = &tail[1..];
            }
        }
        value.push_str(rest);
        Ok(Resolved { value, referenced })
    }

    fn lookup(&self, reference: &str, at: &SourceLocation) -> Result<String, MetadataError> {
        // The reason may name the file read, whose path comes from the reference.
        let fail = |reason: String| MetadataError::UnresolvedReference {
            location: Some(at.clone()),
            reference: quoted(reference),
            reason: reason.replace(char::is_control, "?"),
        };
        match reference.split_once(':') {
            Some(("env", name)) => {
                if !is_env_name(name) {
                    return Err(fail("not a valid environment variable name".into()));
                }
                (self.env)(name).ok_or_else(|| fail("the environment variable is not set".into()))
            }
            Some(("file", file)) => {
                if file.is_empty() {
                    return Err(fail("the file path is empty".into()));
                }
                let path = self.base_dir.join(file);
                let bytes = super::read::read_bounded(&path, MAX_REFERENCED_FILE, false)
                    .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
                let mut text = String::from_utf8(bytes)
                    .map_err(|_| fail(format!("{} is not UTF-8 text", path.display())))?;
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                Ok(text)
            }
            _ => Err(fail(
                "unknown reference kind; expected `${env:NAME}` or `${file:PATH}`".into(),
            )),
        }
    }
}

/// The largest file a `${file:…}` reference reads (a password, a key, a certificate
/// chain).
const MAX_REFERENCED_FILE: u64 = 1 << 20;

/// True for a conventional environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The reference as quoted in an error: shortened, without control characters.
fn quoted(reference: &str) -> String {
    let mut out: String = reference
        .chars()
        .take(MAX_QUOTED)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if reference.chars().count() > MAX_QUOTED {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "PW" => Some("s3cret-value".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn at() -> SourceLocation {
        SourceLocation::new("streams.yaml", 7, 9)
    }

    fn resolve_in(dir: &Path, raw: &str) -> Result<Resolved, MetadataError> {
        Resolver::new(dir, &env).resolve(raw, &at())
    }

    fn resolve(raw: &str) -> Result<Resolved, MetadataError> {
        resolve_in(Path::new("."), raw)
    }

    #[test]
    fn text_without_references_is_kept_as_is_and_not_secret() {
        let r = resolve("plain $ text $5 {x}").unwrap();
        assert_eq!(r.value, "plain $ text $5 {x}");
        assert!(!r.referenced);
    }

    #[test]
    fn env_references_are_replaced_inside_longer_text() {
        let r = resolve(r#"user="a" password="${env:PW}";"#).unwrap();
        assert_eq!(r.value, r#"user="a" password="s3cret-value";"#);
        assert!(r.referenced);
        assert_eq!(resolve("${env:EMPTY}").unwrap().value, "");
    }

    #[test]
    fn a_double_dollar_escapes_a_literal_reference() {
        let r = resolve("$${env:PW} and ${env:PW}").unwrap();
        assert_eq!(r.value, "${env:PW} and s3cret-value");
    }

    #[test]
    fn a_missing_variable_is_unresolved_at_the_value_location() {
        let err = resolve("${env:NOPE}").unwrap_err();
        match &err {
            MetadataError::UnresolvedReference {
                location,
                reference,
                ..
            } => {
                assert_eq!(reference, "env:NOPE");
                assert_eq!(location.as_ref().unwrap().line, 7);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "streams.yaml:7:9: cannot resolve `${env:NOPE}`: the environment variable is not set"
        );
    }

    #[test]
    fn malformed_references_are_errors_that_show_no_value() {
        for raw in [
            "${env:PW",
            "x ${",
            "${vault:x}",
            "${env:}",
            "${env:A-B}",
            "${file:}",
        ] {
            let err = resolve(raw).unwrap_err();
            let shown = err.to_string();
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(!shown.contains('\n'), "{shown}");
            assert_eq!(err.location().map(|l| l.line), Some(7), "{raw}: {shown}");
        }
    }

    #[test]
    fn file_references_resolve_against_the_base_directory_and_trim_one_newline() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "from-file\n\n").unwrap();
        std::fs::write(dir.path().join("crlf"), "windows\r\n").unwrap();
        let r = resolve_in(dir.path(), "${file:pw}").unwrap();
        assert_eq!(r.value, "from-file\n");
        assert!(r.referenced);
        assert_eq!(
            resolve_in(dir.path(), "${file:crlf}").unwrap().value,
            "windows"
        );
        let absolute = format!("${{file:{}}}", dir.path().join("pw").display());
        assert_eq!(resolve("a").unwrap().value, "a");
        assert_eq!(resolve(&absolute).unwrap().value, "from-file\n");
    }

    #[test]
    fn an_unreadable_file_names_the_path_but_not_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve_in(dir.path(), "${file:missing.txt}").unwrap_err();
        assert!(matches!(err, MetadataError::UnresolvedReference { .. }));
        assert!(err.to_string().contains("missing.txt"), "{err}");
    }

    #[test]
    fn long_references_are_shortened_in_errors() {
        let long = format!("${{{}}}", "x".repeat(500));
        let shown = resolve(&long).unwrap_err().to_string();
        assert!(shown.len() < 300, "{shown}");
    }
}
