//! The command line's layers, checked over its source with the library's check
//! (`mck_testkit::layers`): each folder of `src/` (and each file at its root) is one
//! layer, no use climbs, and neither files nor folders use each other round a circle.

use std::path::Path;

use mck_testkit::layers::Graph;

/// Where each part of `src/` sits, bottom to top.
const LAYERS: &[(&str, u8)] = &[
    // 0: what every command uses: stdout and stderr, the allocator's settings,
    // diagnostics, shared arguments, how clusters and records are shown.
    ("stdio.rs", 0),
    ("allocator.rs", 0),
    ("logging.rs", 0),
    ("args.rs", 0),
    ("clusters.rs", 0),
    ("output/", 0),
    ("progress.rs", 0),
    ("endpoint.rs", 0),
    // 1: the subcommands, one module each.
    ("validate.rs", 1),
    ("describe/", 1),
    ("plan/", 1),
    ("consume/", 1),
    ("demo.rs", 1),
    // 2: the entry point.
    ("main.rs", 2),
];

#[test]
fn no_import_climbs_a_layer_and_no_files_or_folders_form_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    assert!(
        graph.file_count() > 20,
        "read only {} files",
        graph.file_count()
    );
    let problems = graph.problems(LAYERS, &[]);
    assert!(
        problems.is_empty(),
        "mck's layers are broken:\n{}",
        problems.join("\n")
    );
}
