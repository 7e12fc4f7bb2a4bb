//! Metric names, reported through the [`metrics`](https://docs.rs/metrics) facade.
//! Install any recorder (Prometheus exporter, …) to collect them. Labels never carry
//! property values.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `mck_records_total` | counter | `cluster` | records handed out |
//! | `mck_bytes_total` | counter | `cluster` | key + value bytes handed out |
//! | `mck_active_splits` | gauge | `reader` | splits a reader owns that are not finished |
//! | `mck_clusters` | gauge | | clusters the source reads |
//! | `mck_split_lag` | gauge | `cluster`, `topic`, `partition` | records of the split not handed out yet (see [`SPLIT_LAG`]); NaN once the split left the reader |
//! | `mck_commits_succeeded_total` | counter | `cluster` | successful offset commits |
//! | `mck_commits_failed_total` | counter | `cluster` | failed offset commits |
//! | `mck_metadata_generation` | gauge | | metadata changes applied since start |
//! | `mck_reconciliations_total` | counter | | reconciliations run |
//! | `mck_reconciliation_seconds` | histogram | | how long applying a metadata change took |
//! | `mck_reconciliation_phase_seconds` | histogram | `phase` | each phase of a metadata change: `read`, `plan`, `apply`, `discover`, `assign` (see [`RECONCILIATION_PHASE_SECONDS`]) |
//! | `mck_cluster_active` | gauge | `cluster` | 1 while a cluster is read, 0 once it left the metadata |
//! | `mck_consumers_created_total` | counter | `cluster` | consumers created |
//! | `mck_mirror_failovers_total` | counter | `cluster`, `mirror` | failovers of a source cluster to its mirror after `failoverAfter` unreachable |
//! | `mck_mirror_searching` | gauge | `cluster`, `topic`, `partition` | 1 while a split on a mirror reads forward to (or waits for a lagging mirror to copy) the last record handed out from its source; 0 once its search ended |
//! | `mck_mirror_behind_seconds` | gauge | `cluster`, `topic`, `partition` | while a split on a mirror looks for its last record: how much older the newest record read there is (a lagging mirror's distance); 0 after |
//! | `mck_watermark_lag_seconds` | gauge | `stream`, `cluster` | with watermarks on: how far the lowest watermark of the stream's active splits on the cluster is behind the wall clock (see [`WATERMARK_LAG`]) |
//! | `mck_paused_splits` | gauge | `reader` | the reader's splits whose fetching is paused: their watermark ran too far ahead (alignment), or they hold many records waiting for the others (time order) |
//! | `mck_fetch_buffered_bytes` | gauge | | bytes of fetch answers the source's native fetches hold queued for their readers, every cluster's (see [`FETCH_BUFFERED_BYTES`]) |
//! | `mck_mirror_switches_total` | counter | `cluster`, `outcome` | splits on a mirror that ended their search for the last record handed out from the source: `found`, `diverged`, `lower_bound` (see [`MIRROR_SWITCHES`]) |

/// Splits on a mirror (`cluster`) whose search for the last record handed out from
/// the source ended, by `outcome`: `found` (reading continues right after it),
/// `diverged` (the split ended with an error) or `lower_bound` (reading continues at
/// the translated lower bound, as `mirrorOf.onMismatch: lowerBound` asks).
pub const MIRROR_SWITCHES: &str = "mck_mirror_switches_total";
/// 1 while a split on a mirror looks for the last record handed out from its
/// source (reading forward from the lower bound, or waiting for a mirror that lags
/// to copy it); 0 once the search ended ([`MIRROR_SWITCHES`] says how).
pub const MIRROR_SEARCHING: &str = "mck_mirror_searching";

/// Sets [`MIRROR_SEARCHING`] of `split`.
pub(crate) fn mirror_searching(split: &crate::base::split::SplitId, searching: bool) {
    metrics::gauge!(MIRROR_SEARCHING, "cluster" => split.cluster.to_string(), "topic" => split.topic.to_string(), "partition" => split.partition.to_string())
        .set(if searching { 1.0 } else { 0.0 });
}

/// While a split on a mirror looks for the last record handed out from its source:
/// how much older (in seconds) the newest record it read on the mirror is than that
/// record, i.e. how far a lagging mirror is behind; 0 once the search ended.
pub const MIRROR_BEHIND_SECONDS: &str = "mck_mirror_behind_seconds";

/// Sets [`MIRROR_BEHIND_SECONDS`] of `split` from a gap in milliseconds.
pub(crate) fn mirror_behind(split: &crate::base::split::SplitId, gap_ms: i64) {
    metrics::gauge!(MIRROR_BEHIND_SECONDS, "cluster" => split.cluster.to_string(), "topic" => split.topic.to_string(), "partition" => split.partition.to_string())
        .set(gap_ms.max(0) as f64 / 1000.0);
}

/// Failovers to a mirror, by source `cluster` and `mirror`: the source had been
/// unreachable for longer than the mirror's `failoverAfter`.
pub const MIRROR_FAILOVERS: &str = "mck_mirror_failovers_total";
/// Records handed out, per cluster.
pub const RECORDS: &str = "mck_records_total";
/// Key + value bytes handed out, per cluster.
pub const BYTES: &str = "mck_bytes_total";
/// Splits a reader owns that are not finished.
pub const ACTIVE_SPLITS: &str = "mck_active_splits";
/// Clusters the source reads.
pub const CLUSTERS: &str = "mck_clusters";
/// Clusters of the metadata the source does not read yet: being connected, or
/// waiting to be tried again after they did not answer or refused the client. 0 once
/// every cluster is read (what a readiness probe waits for).
pub const CLUSTERS_WAITING: &str = "mck_clusters_waiting";
/// Records of a split not handed out yet: the latest high watermark known (capped
/// at the split's stop offset in bounded mode) minus the offset after the last record
/// handed out; 0 once everything is handed out, and for a finished split.
///
/// Updated once per batch handed out, for the splits in it, and when a poll brings
/// high watermarks: each cluster's consumer reports the watermark of every split it
/// reads about once a second, records or not (so while catching up the figure can be
/// up to a second of traffic low; it never goes below 0). A split has no series until
/// its first watermark is known (after its first fetch).
///
/// When a split leaves the reader (its topic or cluster left the metadata, the reader
/// closed, or the split moved to another reader, which then reports it), its series is
/// set to NaN once and not updated again: the `metrics` facade cannot remove a series,
/// so NaN is how the source says "no longer read here". A recorder that can delete
/// series should treat NaN on this gauge as removal (`mck`'s does, from its live line
/// and its Prometheus endpoint); others show NaN.
pub const SPLIT_LAG: &str = "mck_split_lag";
/// With [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks): the wall
/// clock less the lowest watermark of a stream's splits on a cluster, in seconds, over
/// the splits that hold the watermark (neither idle nor finished; a series keeps its
/// last value while all of them are idle). Set at most once a second per reader.
pub const WATERMARK_LAG: &str = "mck_watermark_lag_seconds";
/// A reader's splits whose fetching is paused: with
/// [`WatermarkStrategy::with_alignment`](crate::WatermarkStrategy::with_alignment),
/// because their watermark ran ahead of the source's by more than the drift; in
/// [`ReadOrder::Time`](crate::ReadOrder::Time), because they hold many records that
/// wait for the other splits.
pub const PAUSED_SPLITS: &str = "mck_paused_splits";
/// In [`ReadOrder::Time`](crate::ReadOrder::Time): the records a reader holds for
/// the merge (fetched, not yet handed out), what its memory follows.
pub const HELD_RECORDS: &str = "mck_held_records";
/// In [`ReadOrder::Time`](crate::ReadOrder::Time): records handed out after a newer
/// one, per cluster. A record is late when its split could not hold the merge back
/// for it: a cluster idle (or down) for its idle timeout that comes back with records
/// older than what went out meanwhile. After a restore, records at or before the
/// checkpoint's watermark count too (they come after newer ones handed out before
/// the restart). Late records are handed out at once, in offset order per split,
/// never dropped.
pub const LATE_RECORDS: &str = "mck_late_records_total";
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
/// How long each phase of a metadata change took, by `phase`, to see which one grows
/// when a change is slow:
///
/// - `read`: reading the metadata from the service (only reads that changed something);
/// - `plan`: asking the service which clusters are active (`is_cluster_active`, once per
///   cluster), comparing the metadata with what is read, holding back early property
///   changes;
/// - `apply`: removing splits, rebuilding the clients of clusters whose properties
///   changed, letting removed clusters go;
/// - `discover`: looking up the partitions of topics added to clusters being read, and
///   sending the new splits to the readers;
/// - `assign`: from a reader being sent splits until its consumer of their cluster has
///   them, for every assignment (the first ones at start included). The splits are sent
///   at the end of `discover`, so the two overlap a little; a reader applies what it
///   was sent when its program asks it for records, so at start this includes the
///   program's own wait before its first `next`. The first record then comes with the
///   consumer's next fetch.
///
/// `read` + `plan` + `apply` + `discover` is a change's time in the enumerator
/// ([`RECONCILIATION_SECONDS`] is `apply` + `discover`). An added cluster is connected
/// in the background and has no phase here: its splits are assigned when it answers.
pub const RECONCILIATION_PHASE_SECONDS: &str = "mck_reconciliation_phase_seconds";
/// 1 while a cluster is read, 0 once it left the metadata.
pub const CLUSTER_ACTIVE: &str = "mck_cluster_active";
/// Consumers created, per cluster (a change to one cluster must not recreate the
/// others'): librdkafka consumers and native fetchers alike.
pub const CONSUMERS_CREATED: &str = "mck_consumers_created_total";
/// Errors that kept a change from a cluster, by `cluster` and `kind` (`properties`:
/// librdkafka refused the cluster's new properties, which are not applied).
pub const CLUSTER_ERRORS: &str = "mck_cluster_errors_total";
/// Bytes of fetch answers the source's native fetches hold queued for their readers,
/// all clusters together: within the largest `queued.max.messages.kbytes` of the
/// clusters plus one answer per cluster (docs/native-fetch.md). Set about once a
/// second by each reader that fetches natively.
pub const FETCH_BUFFERED_BYTES: &str = "mck_fetch_buffered_bytes";
/// Positions reset by the out-of-range policy, by `cluster` and `topic`.
pub const OFFSET_RESETS: &str = "mck_offset_resets_total";

/// Records how long one phase of a metadata change took
/// ([`RECONCILIATION_PHASE_SECONDS`]).
pub(crate) fn phase(name: &'static str, took: std::time::Duration) {
    metrics::histogram!(RECONCILIATION_PHASE_SECONDS, "phase" => name).record(took.as_secs_f64());
}
