//! The repository's maps stay true: every path that CONTRIBUTING.md's "Where things
//! live" names exists, every crate and every part of the library's `src/` is named
//! there, and the relative links of the top-level documents and `docs/` lead to files.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The paths in the first column of the map's table, with `…/` read as the library's
/// folder.
fn map_paths(contributing: &str) -> Vec<String> {
    let section = contributing
        .split("\n## ")
        .find(|s| s.starts_with("Where things live"))
        .expect("CONTRIBUTING.md has no \"## Where things live\" section");
    let mut paths = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let first = line.split('|').nth(1).unwrap_or("");
        for (i, piece) in first.split('`').enumerate() {
            if i % 2 == 1 {
                paths.push(piece.replace("…/", "crates/multicluster-kafka/"));
            }
        }
    }
    paths
}

#[test]
fn every_path_the_map_names_exists() {
    let root = root();
    let text = fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let paths = map_paths(&text);
    assert!(paths.len() > 10, "the map names only {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !root.join(p.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's map names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_map_links_every_document_and_names_every_fuzz_target() {
    let root = root();
    let text = fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Where things live"))
        .unwrap();
    let mut unnamed = Vec::new();
    for entry in fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !section.contains(&format!("(docs/{name})")) {
            unnamed.push(format!("docs/{name}"));
        }
    }
    for entry in fs::read_dir(root.join("fuzz/fuzz_targets")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let target = name.trim_end_matches(".rs");
        if !section.contains(&format!("`{target}`")) {
            unnamed.push(format!("the fuzz target {target}"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "CONTRIBUTING.md's map leaves out {unnamed:?}"
    );
}

#[test]
fn the_map_names_every_crate_and_every_part_of_the_library() {
    let root = root();
    let text = fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let named = map_paths(&text);
    let is_named = |path: &str| named.iter().any(|n| n.trim_end_matches('/') == path);
    let mut unnamed = Vec::new();
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let path = format!("crates/{name}");
        if !is_named(&path) {
            unnamed.push(path);
        }
    }
    let src = root.join("crates/multicluster-kafka/src");
    for entry in fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "lib.rs" {
            continue;
        }
        let path = format!("crates/multicluster-kafka/src/{name}");
        if !is_named(&path) {
            unnamed.push(path);
        }
    }
    assert!(
        unnamed.is_empty(),
        "CONTRIBUTING.md's map does not name: {unnamed:?}"
    );
}

#[test]
fn relative_links_in_the_documents_lead_somewhere() {
    let root = root();
    let documents = documents(
        &root,
        &[
            "README.md",
            "CONTRIBUTING.md",
            "BENCHMARKS.md",
            "CHANGELOG.md",
        ],
    );
    let mut broken = Vec::new();
    for document in &documents {
        let text = fs::read_to_string(document).unwrap();
        for target in links(&text) {
            let file = target.split('#').next().unwrap();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !document.parent().unwrap().join(file).exists() {
                broken.push(format!(
                    "{}: {target}",
                    document.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(documents.len() > 5);
    assert!(
        broken.is_empty(),
        "links to files that do not exist: {broken:?}"
    );
}

/// The targets of the Markdown links `[text](target)` outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn the_map_parser_reads_backticked_paths_of_the_first_column() {
    let text = "# C\n\n## Where things live\n\n| path | what |\n|---|---|\n| `crates/a`, `…/src/b.rs` | `not/this` |\n\n## Next\n| `nor/this` | x |\n";
    assert_eq!(
        map_paths(text),
        ["crates/a", "crates/multicluster-kafka/src/b.rs"]
    );
    assert_eq!(
        links("see [x](docs/a.md#b) and [y](https://e.org)\n```\n[z](no.md)\n```"),
        ["docs/a.md#b", "https://e.org"]
    );
}

/// The documents `top` (at the repository's root) and every Markdown file of docs/.
fn documents(root: &Path, top: &[&str]) -> Vec<PathBuf> {
    let mut documents: Vec<PathBuf> = top.iter().map(|d| root.join(d)).collect();
    for entry in fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    documents
}

/// The backticked words of `text` (code blocks included) that look like a path in
/// the repository: no spaces, no `://`, and ending in `/` or a file name with one of
/// the repository's extensions.
fn backticked_paths(text: &str) -> Vec<String> {
    const EXTENSIONS: &[&str] = &[
        ".rs", ".md", ".toml", ".yaml", ".yml", ".json", ".xml", ".go", ".java", ".sh",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|w| w.trim())
        .filter(|w| {
            w.contains('/')
                && !w.contains("://")
                && !w.contains(char::is_whitespace)
                && !w.contains(['*', '<', '{', '$', '='])
                // `..data/x`: a name of Kubernetes' volume, not of the tree.
                && (!w.starts_with("..") || w.starts_with("../"))
                && (w.ends_with('/') || EXTENSIONS.iter().any(|e| w.ends_with(e)))
        })
        .map(str::to_string)
        .collect()
}

/// Whether `path`, as a document names it, is in the tree: from the root, from a
/// crate, from a crate's `src/` or `tests/`, or from the library's `src/` (`…/`
/// stands for the library's folder, as in CONTRIBUTING's map, and `client/` for the
/// Kafka client crate's `src/`, as in docs/native-fetch.md).
fn names_something(root: &Path, path: &str) -> bool {
    let path = path.replace("…/", "crates/multicluster-kafka/");
    let path = match path.strip_prefix("client/") {
        Some(rest) => format!("crates/multicluster-kafka-client/src/{rest}"),
        None => path,
    };
    let path = path.trim_start_matches("./").trim_end_matches('/');
    let mut bases = vec![root.to_path_buf()];
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let krate = entry.unwrap().path();
        bases.push(krate.join("src"));
        bases.push(krate.join("tests"));
        bases.push(krate);
    }
    bases.push(root.join("docs"));
    bases.iter().any(|b| b.join(path).exists())
}

#[test]
fn every_path_the_guides_name_in_backticks_exists() {
    let root = root();
    // What the tools make and git ignores (`/fuzz/corpus`) is named, not kept.
    let ignored: Vec<String> = fs::read_to_string(root.join(".gitignore"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('/'))
        .map(|l| l.trim_start_matches('/').to_string())
        .collect();
    let mut gone = Vec::new();
    let mut seen = 0;
    // The documents a newcomer reads.
    for document in documents(&root, &["README.md", "CONTRIBUTING.md"]) {
        let text = fs::read_to_string(&document).unwrap();
        for path in backticked_paths(&text) {
            seen += 1;
            if ignored.iter().any(|i| path.starts_with(i.as_str())) {
                continue;
            }
            if !names_something(&root, &path) {
                gone.push(format!(
                    "{}: `{path}`",
                    document.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(seen > 20, "found only {seen} paths in the guides");
    assert!(
        gone.is_empty(),
        "the guides name paths that are not in the tree: {gone:#?}"
    );
}

#[test]
fn backticked_paths_are_told_from_other_code() {
    assert_eq!(
        backticked_paths(
            "`native/lookup.rs`, `east/t/0`, `a b/c.rs`, `https://x/y.md`, `docs/`, `{k}/x.rs`"
        ),
        ["native/lookup.rs", "docs/"]
    );
    let root = root();
    assert!(names_something(&root, "native/lookups.rs"));
    assert!(names_something(&root, "…/src/lib.rs"));
    assert!(!names_something(&root, "native/gone.rs"));
}
