//! The library's integration tests, one module per capability, linked into one
//! binary. Tests against real Kafka share the brokers the test kit starts
//! (`mck_testkit::shared_cluster`), each on topics of its own; a test that changes
//! something process-wide (the global `tracing` subscriber or `metrics` recorder, or
//! that counts the process's threads) runs in a child process of its own
//! (`rusty_fork_test!`).
//!
//! Run one module with a filter: `cargo test -p multicluster-kafka --test it -- mirror_real::`.

mod support;

mod authorization_real;
mod batch_real;
mod bootstrap_switch;
mod broker_failover;
mod builtin_features;
mod change_lines;
mod client_hooks;
mod commit_isolation;
mod discovered_flag;
mod file_metadata;
mod fuzz_inputs;
mod group_mode_real;
mod hybrid_real;
mod inactive_real;
mod lag;
mod layers;
mod metrics;
mod mirror_failover_silent;
mod mirror_mm2_failover;
mod mirror_mm2_real;
mod mirror_real;
mod native_path;
mod network_faults;
mod out_of_range_real;
mod rebootstrap_real;
mod reconcile_real;
mod removals_real;
mod secrets;
mod secured;
mod shard_lock_real;
mod single_cluster_metadata;
mod source_mock;
mod source_real;
mod startup;
mod streams;
mod threads;
mod token_hook_real;
mod topic_gone_real;
mod watermarks_real;
