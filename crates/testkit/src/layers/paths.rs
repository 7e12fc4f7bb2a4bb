//! The paths a file's code names: `use` trees expanded, and inline paths.

/// Every path in `code` that a `use` tree spells out, and every inline path of two or
/// more segments, as segments (`crate::kafka::client::Client` → 4 segments), each
/// with whether it is re-exported (`pub use`, `pub(crate) use`).
pub(super) fn paths_in(code: &str) -> Vec<(Vec<String>, bool)> {
    let tokens = tokenize(code);
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" && (i == 0 || tokens[i - 1] != "::") {
            let end = (i..tokens.len())
                .find(|&j| tokens[j] == ";")
                .unwrap_or(tokens.len());
            let reexport = i > 0
                && (tokens[i - 1] == "pub"
                    || (tokens[i - 1] == ")" && i >= 4 && tokens[i - 4] == "pub"));
            let mut tree = Vec::new();
            use_tree(&tokens[i + 1..end], &[], &mut tree);
            paths.extend(tree.into_iter().map(|p| (p, reexport)));
            i = end;
            continue;
        }
        if is_ident(&tokens[i])
            && tokens.get(i + 1).map(String::as_str) == Some("::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).map(String::as_str) == Some("::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            if path.len() > 1 {
                paths.push((path, false));
            }
            i = j;
            continue;
        }
        i += 1;
    }
    paths
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn use_tree(tokens: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "::" | "pub" | "(" | ")" => {}
            "{" => {
                // Split the group at top-level commas.
                let mut depth = 0;
                let mut start = i + 1;
                let mut j = i + 1;
                while j < tokens.len() {
                    match tokens[j].as_str() {
                        "{" => depth += 1,
                        "}" if depth == 0 => break,
                        "}" => depth -= 1,
                        "," if depth == 0 => {
                            use_tree(&tokens[start..j], &path, out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                use_tree(&tokens[start..j], &path, out);
                return;
            }
            "as" => break,
            "*" => break,
            _ if is_ident(t) => {
                if path.is_empty() && i > 0 && tokens[i - 1] == "(" {
                    // `pub(crate)`, `pub(super)`: visibility, not a path.
                } else {
                    path.push(t.to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}
