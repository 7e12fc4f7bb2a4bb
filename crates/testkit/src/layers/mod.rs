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
//!
//! `text` takes comments, literals and unit-test modules out of a file, `paths` finds
//! the paths its code names, and `circles` finds the circles among files and folders.

mod circles;
mod paths;
mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use circles::circles_of;
use paths::paths_in;
use text::{strip, without_tests};

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
