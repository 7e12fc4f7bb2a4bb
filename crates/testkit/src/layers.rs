//! A crate's layers, checked over its source as text: each folder of `src/` (and each
//! file at its root) is one layer; no `use` (or inline `crate::` / `super::` path)
//! goes from a file up to a higher layer; folders kept apart do not use each other;
//! and neither two files nor two folders use each other, directly or round a circle.
//!
//! The check follows `use` trees and inline paths that start at `crate`, `super`,
//! `self` or a child module, and resolves each to the file of the deepest module it
//! names. Unit-test modules (`tests.rs`, `tests/` folders and an inline
//! `#[cfg(test)] mod tests`) are left out: tests may reach across layers.
//!
//! Why a test and not a tool: `cargo-modules` draws the graph and finds cycles, but it
//! builds rust-analyzer (minutes on the 2-core CI machine) and knows nothing of
//! layers; this check is std only and runs in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The files of a crate's `src/` and which files each uses.
pub struct Graph {
    /// Path relative to `src/` → module path (`kafka/client.rs` → `["kafka", "client"]`).
    files: BTreeMap<String, Vec<String>>,
    /// Module path → file.
    modules: BTreeMap<Vec<String>, String>,
    /// File → files it uses.
    edges: BTreeMap<String, BTreeSet<String>>,
    /// File → files it depends on, for the circles: what it uses, except its folder's
    /// `mod.rs` and, for a `mod.rs`, what it re-exports (`pub use`) from its own folder.
    /// A folder's `mod.rs` is the core its files share (`super::`) and their interface;
    /// a circle between two of them, or out of the folder and back, counts.
    depends: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Reads every file under `src`.
    pub fn read(src: &Path) -> Self {
        let mut paths = Vec::new();
        walk(src, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with("tests.rs") || rel.contains("/tests/") || rel.starts_with("tests/") {
                continue;
            }
            files.insert(rel.clone(), module_path(&rel));
        }
        let modules = files.iter().map(|(f, m)| (m.clone(), f.clone())).collect();
        let mut graph = Graph {
            files,
            modules,
            edges: BTreeMap::new(),
            depends: BTreeMap::new(),
        };
        for (file, module) in graph.files.clone() {
            let text = fs::read_to_string(src.join(&file)).unwrap();
            let code = without_tests(&strip(&text));
            let mut uses = BTreeSet::new();
            let mut depends = BTreeSet::new();
            for (path, reexport) in paths_in(&code) {
                let Some(target) = graph
                    .absolute(&module, &path)
                    .and_then(|p| graph.resolve(&p))
                else {
                    continue;
                };
                if target != file {
                    uses.insert(target.clone());
                    let own_child = reexport && is_within(&target, &file);
                    if !own_child && target != parent_module(&file) {
                        depends.insert(target);
                    }
                }
            }
            graph.edges.insert(file.clone(), uses);
            graph.depends.insert(file, depends);
        }
        graph
    }

    /// `path` made absolute from inside `module`, or `None` for another crate's path.
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        // The module that `self` names: a file `a/b.rs` is module a::b, and so is `a/b/mod.rs`.
        let mut base: Vec<String> = module.to_vec();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &path[1..];
            }
            Some("self") => rest = &path[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                // A child module named without `self::` (edition 2018 paths).
                let mut child = module.to_vec();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file of the deepest module that `path` names.
    fn resolve(&self, path: &[String]) -> Option<String> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]).cloned())
    }

    /// How many files were read.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// What breaks the layers: a file whose folder has no layer in `layers`, a use
    /// that climbs, a use between folders kept `apart`, and circles of files and of
    /// folders. Empty when the layers hold.
    pub fn problems(&self, layers: &[(&str, u8)], apart: &[(&str, &str)]) -> Vec<String> {
        let mut problems = Vec::new();
        for (file, uses) in &self.edges {
            let Some(from) = layer(layers, file) else {
                problems.push(format!(
                    "{file}: no layer; add its folder to the table of layers"
                ));
                continue;
            };
            for target in uses {
                let to = layer(layers, target).unwrap_or(u8::MAX);
                if to > from {
                    problems.push(format!("{file} (layer {from}) uses {target} (layer {to})"));
                }
                for (a, b) in apart {
                    if file.starts_with(a) && target.starts_with(b) {
                        problems.push(format!("{file} uses {target}: {a} and {b} stay apart"));
                    }
                }
            }
        }
        for (members, circle) in circles_of(&self.units()) {
            let mut line = format!("circle of folders: {}", circle.join(" -> "));
            if members.len() > circle.len() - 1 {
                line += &format!(" (one of the circles among {})", members.join(", "));
            }
            problems.push(line);
        }
        for (members, circle) in circles_of(&self.depends) {
            let mut line = format!("circle: {}", circle.join(" -> "));
            if members.len() > circle.len() - 1 {
                line += &format!(" (one of the circles among {})", members.join(", "));
            }
            problems.push(line);
        }
        problems
    }

    /// Which folders (and files at the root) each uses: `kafka/` uses `native/` when
    /// one of its files uses one of `native/`'s.
    fn units(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut units: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (file, uses) in &self.depends {
            let from = unit(file);
            let entry = units.entry(from.clone()).or_default();
            for target in uses {
                let to = unit(target);
                if to != from && to != "lib.rs" {
                    entry.insert(to);
                }
            }
        }
        units
    }
}

/// The folder of `file` at the root of `src/` (`kafka/client.rs` → `kafka/`), or the
/// file itself when it is at the root.
fn unit(file: &str) -> String {
    match file.find('/') {
        Some(i) => file[..=i].to_string(),
        None => file.to_string(),
    }
}

/// Each group of nodes of `depends` that use each other round a circle (Tarjan's
/// strongly connected components): the group's nodes and one circle through it.
fn circles_of(depends: &BTreeMap<String, BTreeSet<String>>) -> Vec<(Vec<String>, Vec<String>)> {
    let names: Vec<&String> = depends.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let next: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            depends[*n]
                .iter()
                .filter_map(|t| index.get(t).copied())
                .collect()
        })
        .collect();
    let mut tarjan = Tarjan {
        next: &next,
        index: vec![None; names.len()],
        low: vec![0; names.len()],
        on: vec![false; names.len()],
        stack: Vec::new(),
        counter: 0,
        groups: Vec::new(),
    };
    for v in 0..names.len() {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    tarjan
        .groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|group| {
            let members: BTreeSet<usize> = group.iter().copied().collect();
            let start = *members.iter().next().unwrap();
            let mut circle = vec![names[start].clone()];
            let path = path_back(&next, &members, start);
            circle.extend(path.into_iter().map(|v| names[v].clone()));
            (members.iter().map(|&v| names[v].clone()).collect(), circle)
        })
        .collect()
}

/// A shortest way from `start` round to itself, inside `members` (breadth first).
fn path_back(next: &[Vec<usize>], members: &BTreeSet<usize>, start: usize) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &next[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start];
                let mut at = v;
                while at != start {
                    path.push(at);
                    at = came_from[&at];
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected group has a circle through each member")
}

struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    groups: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on[v] = true;
        for &w in &self.next[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on[w] => self.low[v] = self.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut group = Vec::new();
            loop {
                let w = self.stack.pop().unwrap();
                self.on[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

fn layer(layers: &[(&str, u8)], file: &str) -> Option<u8> {
    let unit = unit(file);
    layers
        .iter()
        .find(|(named, _)| *named == unit)
        .map(|(_, layer)| *layer)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `target` lies inside the folder of the module file `file` (a `mod.rs` or
/// `lib.rs` and its folder's other files).
fn is_within(target: &str, file: &str) -> bool {
    if file == "lib.rs" {
        return true;
    }
    file.strip_suffix("mod.rs")
        .is_some_and(|folder| target.starts_with(folder))
}

/// The `mod.rs` of the folder that `file` is in (`lib.rs` at the top).
fn parent_module(file: &str) -> String {
    let folder = file.strip_suffix("/mod.rs").unwrap_or(file);
    match folder.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/mod.rs"),
        None => "lib.rs".to_string(),
    }
}

fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    // A crate's root is `lib.rs` or, for a binary, `main.rs`.
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) || rel == "main.rs" {
        parts.pop();
    }
    parts
}

/// The source without comments, string and char literals (replaced by spaces).
fn strip(text: &str) -> String {
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
fn without_tests(code: &str) -> String {
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

/// Every path in `code` that a `use` tree spells out, and every inline path of two or
/// more segments, as segments (`crate::kafka::client::Client` → 4 segments), each
/// with whether it is re-exported (`pub use`, `pub(crate) use`).
fn paths_in(code: &str) -> Vec<(Vec<String>, bool)> {
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
