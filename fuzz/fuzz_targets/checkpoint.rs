//! The checkpoint decoder on arbitrary bytes, in memory and through the file store's
//! read path with its fallback (see `checks.rs` for what is asserted).

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/multicluster-kafka/tests/fuzz_inputs/checks.rs"]
mod checks;

static SCRATCH: LazyLock<checks::Scratch> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("mck-fuzz-checkpoint-{}", std::process::id()));
    checks::Scratch::new(dir)
});

fuzz_target!(|data: &[u8]| {
    checks::check_checkpoint(data, &SCRATCH);
});
