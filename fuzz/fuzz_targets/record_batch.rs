//! The native fetch path's record-batch decoder on arbitrary bytes read as a
//! partition's records: batches, CRC checks, records of every codec decompressed within
//! a bound, headers and hashes (see `checks.rs` for what is asserted).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/multicluster-kafka/tests/fuzz_inputs/checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    checks::check_record_batches(data);
});
