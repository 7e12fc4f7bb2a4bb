//! A source file's code as text: comments and string and char literals taken out, and
//! the inline unit-test module cut off.

/// The source without comments, string and char literals (replaced by spaces).
pub(super) fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r'
            && (b[i + 1..].starts_with(b"\"") || b[i + 1..].starts_with(b"#"))
            && !ident_byte(b.get(i.wrapping_sub(1)).copied())
        {
            // A raw string: r"…" or r#"…"#.
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let end: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&end) {
                i += 1;
            }
            i += end.len();
            out.push(' ');
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if b[i] == b'\'' && char_literal_len(&b[i..]).is_some() {
            i += char_literal_len(&b[i..]).unwrap();
            out.push(' ');
        } else {
            // Copy one whole UTF-8 character.
            let len = text[i..].chars().next().unwrap().len_utf8();
            out.push_str(&text[i..i + len]);
            i += len;
        }
    }
    out
}

fn ident_byte(b: Option<u8>) -> bool {
    b.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The length of a char literal at the start of `b` ('a', '\n', '\''), or `None` for a
/// lifetime.
fn char_literal_len(b: &[u8]) -> Option<usize> {
    if b.get(1) == Some(&b'\\') {
        let close = b[2..].iter().position(|&c| c == b'\'')?;
        return Some(close + 3);
    }
    let ch_len = std::str::from_utf8(&b[1..b.len().min(5)])
        .ok()
        .or_else(|| std::str::from_utf8(&b[1..2]).ok())
        .and_then(|s| s.chars().next())
        .map(char::len_utf8)?;
    (b.get(1 + ch_len) == Some(&b'\'')).then_some(ch_len + 2)
}

/// The code before an inline `#[cfg(test)]` module.
pub(super) fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                let next = next.trim();
                next.starts_with("mod ") && next.ends_with('{')
            })
        {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
