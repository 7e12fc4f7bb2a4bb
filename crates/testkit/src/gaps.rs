//! Records that leave gaps in a partition's offsets, as real clusters have them:
//! transactions (each ends with a marker that takes an offset, and an aborted one's
//! records are skipped by committed readers) and deleted records (the log start moves
//! up). A copy of such a partition made by MirrorMaker 2 holds the same records at
//! other offsets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::util::{block_on, produce_records_in};
use crate::{Produced, TestCluster, TestRecord, TestkitError};

/// How [`produce_transaction`] ends its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionEnd {
    /// Commit: every reader sees the records; a commit marker follows them.
    Commit,
    /// Abort: only `read_uncommitted` readers see the records; an abort marker follows
    /// them.
    Abort,
}

/// Produces `records` to `topic` in one transaction of a fresh transactional producer
/// (its own `transactional.id`), ended as `end` says once every record is
/// acknowledged. Returns where each record landed; the marker of each partition
/// written to takes the offset after its last record.
pub fn produce_transaction(
    cluster: &dyn TestCluster,
    topic: &str,
    records: &[TestRecord],
    end: TransactionEnd,
) -> Result<Vec<Produced>, TestkitError> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let id = format!(
        "mck-testkit-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    produce_records_in(
        cluster.logical_id(),
        &cluster.bootstrap_servers(),
        topic,
        records,
        &[],
        Some((&id, end)),
    )
}

/// Deletes the records of `topic`/`partition` below `before` with the admin API (as
/// `kafka-delete-records` or retention would): the partition's log start moves there.
pub fn delete_records_before(
    cluster: &dyn TestCluster,
    topic: &str,
    partition: i32,
    before: i64,
) -> Result<(), TestkitError> {
    let fail = |message: String| TestkitError::Kafka {
        cluster: cluster.logical_id().to_string(),
        message: format!("delete the records of {topic}/{partition} below {before}: {message}"),
    };
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .create()
        .map_err(|e| fail(e.to_string()))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(before))
        .map_err(|e| fail(e.to_string()))?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let done = block_on(admin.delete_records(&tpl, &opts)).map_err(|e| fail(e.to_string()))?;
    for e in done.elements() {
        e.error().map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// What [`stage_offset_gaps`] left in a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedGaps {
    /// The records a `read_committed` reader sees, as `(offset, value)` in offset
    /// order: the values are `<prefix>-2` to `<prefix>-9`.
    pub visible: Vec<(i64, String)>,
    /// The offsets of the aborted records (values `<prefix>-aborted-<i>`).
    pub aborted: Vec<i64>,
    /// The offsets taken by transaction markers (first the abort, then the commit).
    pub markers: Vec<i64>,
    /// The partition's log start: the records below it were deleted.
    pub log_start: i64,
    /// The partition's end (high watermark) once staged.
    pub end: i64,
}

/// Writes to `topic`/`partition` (which must exist and be empty) records whose offsets
/// have every kind of gap, and returns where everything is:
///
/// | offsets | what |
/// |---|---|
/// | 0–1 | `<prefix>-0`, `<prefix>-1`, then deleted (log start 2) |
/// | 2–4 | `<prefix>-2` … `<prefix>-4`, plain |
/// | 5–7 | `<prefix>-aborted-0` … `-2`, an aborted transaction |
/// | 8 | its abort marker |
/// | 9–11 | `<prefix>-5` … `<prefix>-7`, a committed transaction |
/// | 12 | its commit marker |
/// | 13–14 | `<prefix>-8`, `<prefix>-9`, plain |
///
/// A `read_committed` copy of it starting at an empty partition (MirrorMaker 2 with
/// `consumer.isolation.level=read_committed`) holds the 8 visible records at offsets
/// 0–7. Keys are `k<n>` with the number of the value.
pub fn stage_offset_gaps(
    cluster: &dyn TestCluster,
    topic: &str,
    partition: i32,
    prefix: &str,
) -> Result<StagedGaps, TestkitError> {
    let record = |name: String, n: usize| {
        TestRecord::value(format!("{prefix}-{name}"))
            .with_key(format!("k{n}"))
            .to_partition(partition)
    };
    let plain = |range: std::ops::Range<usize>| -> Vec<TestRecord> {
        range.map(|i| record(i.to_string(), i)).collect()
    };
    let mut visible = Vec::new();
    let mut keep = |produced: &[Produced], range: std::ops::Range<usize>| {
        for (p, i) in produced.iter().zip(range) {
            visible.push((p.offset, format!("{prefix}-{i}")));
        }
    };
    let head = cluster.produce(topic, &plain(0..5))?;
    let log_start = head[2].offset;
    delete_records_before(cluster, topic, partition, log_start)?;
    keep(&head[2..], 2..5);
    let aborted_records: Vec<TestRecord> =
        (0..3).map(|i| record(format!("aborted-{i}"), i)).collect();
    let aborted = produce_transaction(cluster, topic, &aborted_records, TransactionEnd::Abort)?;
    let committed = produce_transaction(cluster, topic, &plain(5..8), TransactionEnd::Commit)?;
    keep(&committed, 5..8);
    let tail = cluster.produce(topic, &plain(8..10))?;
    keep(&tail, 8..10);
    let aborted: Vec<i64> = aborted.iter().map(|p| p.offset).collect();
    let markers = vec![
        aborted.last().map_or(0, |o| o + 1),
        committed.last().map_or(0, |p| p.offset + 1),
    ];
    Ok(StagedGaps {
        end: tail.last().map_or(0, |p| p.offset + 1),
        visible,
        aborted,
        markers,
        log_start,
    })
}
