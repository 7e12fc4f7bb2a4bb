//! The command line's integration tests, one module per capability, linked into one
//! binary. Each runs the `mck` binary as a user would; tests against real Kafka share
//! the brokers the test kit starts (`mck_testkit::shared_cluster`), each on topics of
//! its own.
//!
//! Run one module with a filter: `cargo test -p mck --test it -- restarts::`.

mod support;

mod broker_failover;
mod closed_pipes;
mod cluster_states;
mod commit_off_path;
mod consume_real;
mod demo;
mod deploy_manifests;
mod describe_plan;
mod event_time;
mod group_mode;
mod layers;
mod live;
mod mirrors;
mod mirrors_mm2;
mod network_faults;
mod out_of_range;
mod plan_mirror;
mod probes;
mod protect;
mod restarts;
mod secured;
mod shards;
mod time_faults;
mod validate;
