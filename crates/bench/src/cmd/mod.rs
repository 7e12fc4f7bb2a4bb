//! One module per measurement, each with the entry point its subcommand runs.

pub mod blackhole;
pub mod compare;
pub mod handover;
pub mod isolation;
pub mod output;
pub mod soak;
pub mod throughput;
pub mod tls;

/// The topic the throughput and isolation measures read.
pub const TOPIC: &str = "bench";

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
