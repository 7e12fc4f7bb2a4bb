//! Metric names, reported through the [`metrics`](https://docs.rs/metrics) facade.
//! Install any recorder (Prometheus exporter, …) to collect them. Labels never carry
//! property values.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `mck_records_total` | counter | `cluster` |
//! | `mck_bytes_total` | counter | `cluster` |
//! | `mck_active_splits` | gauge | `reader` |
//! | `mck_clusters` | gauge | |
//! | `mck_split_lag` | gauge | `cluster`, `topic`, `partition` |
//! | `mck_commits_succeeded_total` | counter | `cluster` |
//! | `mck_commits_failed_total` | counter | `cluster` |
//! | `mck_metadata_generation` | gauge | |
//! | `mck_reconciliations_total` | counter | |
//! | `mck_reconciliation_seconds` | histogram | |
//! | `mck_cluster_active` | gauge | `cluster` |
//! | `mck_consumers_created_total` | counter | `cluster` |

/// Records handed out, per cluster.
pub const RECORDS: &str = "mck_records_total";
/// Key + value bytes handed out, per cluster.
pub const BYTES: &str = "mck_bytes_total";
/// Splits a reader owns that are not finished.
pub const ACTIVE_SPLITS: &str = "mck_active_splits";
/// Clusters the source reads.
pub const CLUSTERS: &str = "mck_clusters";
/// High watermark minus the next offset to hand out, per split.
pub const SPLIT_LAG: &str = "mck_split_lag";
/// Successful offset commits, per cluster.
pub const COMMITS_SUCCEEDED: &str = "mck_commits_succeeded_total";
/// Failed offset commits, per cluster.
pub const COMMITS_FAILED: &str = "mck_commits_failed_total";
/// Metadata changes applied since start.
pub const METADATA_GENERATION: &str = "mck_metadata_generation";
/// Reconciliations run.
pub const RECONCILIATIONS: &str = "mck_reconciliations_total";
/// How long applying a metadata change took.
pub const RECONCILIATION_SECONDS: &str = "mck_reconciliation_seconds";
/// 1 while a cluster is read, 0 once it left the metadata.
pub const CLUSTER_ACTIVE: &str = "mck_cluster_active";
/// Consumers created, per cluster (a change to one cluster must not recreate the
/// others').
pub const CONSUMERS_CREATED: &str = "mck_consumers_created_total";
