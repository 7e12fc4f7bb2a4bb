//! The native fetch path's Fetch response decoder on arbitrary bytes, at every version
//! it reads, with each partition's records through the batch decoder (see `checks.rs`
//! for what is asserted).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/multicluster-kafka/tests/fuzz_inputs/checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    checks::check_fetch_response(data);
});
