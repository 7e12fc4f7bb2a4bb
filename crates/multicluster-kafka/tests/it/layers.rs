//! The library's layers, checked over its source: each folder of `src/` (and each file
//! at its root) is one layer, no `use` (or inline `crate::` / `super::` path) goes from
//! a file up to a higher layer, `reader/` and `enumerator/` do not use each other, and
//! neither two files nor two folders use each other, directly or round a circle.
//!
//! The layers, bottom to top, are drawn in docs/design.md ("Layers"). The check reads
//! the source as text: it follows `use` trees and inline paths that start at `crate`,
//! `super`, `self` or a child module, and resolves each to the file of the deepest
//! module it names. Unit-test modules (`tests.rs`, `tests/` folders and an inline
//! `#[cfg(test)] mod tests`) are left out: tests may reach across layers.
//!
//! The check itself is the test kit's (`mck_testkit::layers`), shared with `mck`.

use std::fs;
use std::path::Path;

use mck_testkit::layers::Graph;

/// Where each part of `src/` sits: a folder or a file at the root of `src/`, one layer
/// each.
const LAYERS: &[(&str, u8)] = &[
    // 0: plain data and pure decisions (splits, checkpoints, the metadata model,
    // offsets, properties, settings), shared by everything above. Imports nothing
    // above it.
    ("base/", 0),
    // 1: the public vocabulary built on it: records, deserializers, errors, metric
    // names.
    ("record/", 1),
    ("deserializer.rs", 1),
    ("error.rs", 1),
    ("metrics.rs", 1),
    // 2: one cluster's client machinery: the lookup seam, and its librdkafka and
    // native sides.
    ("lookups.rs", 2),
    ("kafka/", 2),
    ("native/", 2),
    // 3: the readers and the coordinator; neither uses the other.
    ("reader/", 3),
    ("enumerator/", 3),
    // 4: the builder and the handles a program holds.
    ("source/", 4),
    // 5: the metadata services, history files first, inspection.
    ("metadata/", 5),
    ("hybrid/", 5),
    ("file_source/", 5),
    ("inspect/", 5),
    // 6: the crate's root.
    ("lib.rs", 6),
];

/// Folders of one layer that must not use each other.
const APART: &[(&str, &str)] = &[("reader/", "enumerator/"), ("enumerator/", "reader/")];

#[test]
fn no_import_climbs_a_layer_and_no_files_form_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    assert!(
        graph.file_count() > 50,
        "read only {} files under {}",
        graph.file_count(),
        src.display()
    );
    let problems = graph.problems(LAYERS, APART);
    assert!(
        problems.is_empty(),
        "the library's layers (docs/design.md, \"Layers\") are broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_finds_a_climb_a_crossing_and_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let put = |path: &str, text: &str| {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    put(
        "lib.rs",
        "mod base;\nmod kafka;\nmod reader;\nmod enumerator;\n",
    );
    // A climb from the bottom layer, hidden in a brace group.
    put(
        "base/split.rs",
        "use crate::{kafka::{client::Client, shared}, base};\n",
    );
    // A re-export of a child is no dependency on it: no circle with the child.
    put(
        "kafka/mod.rs",
        "pub mod client;\npub mod shared;\npub use client::Client;\nuse crate::base::split;\npub struct Core;\nfn f() { client::Client; }\n",
    );
    put(
        "base/mod.rs",
        "pub mod split;\npub(crate) use crate::kafka::Client;\n",
    );
    // A circle of two siblings, one side by an inline path.
    // A file may use its folder's core, which uses it in turn: no circle.
    put(
        "kafka/client.rs",
        "use super::shared::Share;\nuse super::Core;\npub struct Client;\n",
    );
    put(
        "kafka/shared.rs",
        "pub fn f() { let _ = crate::kafka::client::Client; }\n",
    );
    put("reader/mod.rs", "use crate::enumerator::Plan;\n");
    // Tests are left out: this does not count.
    put(
        "enumerator/mod.rs",
        "pub struct Plan;\n#[cfg(test)]\nmod tests {\n    use crate::reader::X;\n}\n",
    );
    let problems = Graph::read(dir.path()).problems(LAYERS, APART);
    let all = problems.join("\n");
    assert!(
        all.contains("base/split.rs (layer 0) uses kafka/client.rs (layer 2)"),
        "{all}"
    );
    assert!(
        all.contains("base/split.rs (layer 0) uses kafka/shared.rs (layer 2)"),
        "{all}"
    );
    assert!(
        all.contains("reader/mod.rs uses enumerator/mod.rs"),
        "{all}"
    );
    assert!(
        all.contains("circle: kafka/client.rs -> kafka/shared.rs -> kafka/client.rs"),
        "{all}"
    );
    assert!(
        all.contains("base/mod.rs (layer 0) uses kafka/mod.rs (layer 2)"),
        "{all}"
    );
    // The climbs also make the two folders use each other.
    assert!(
        all.contains("circle of folders: base/ -> kafka/ -> base/"),
        "{all}"
    );
    assert_eq!(problems.len(), 6, "{all}");
}
