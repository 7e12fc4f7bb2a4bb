//! The seam of a cluster's lookups: what the enumerator, `inspect` and the metadata
//! services ask of one cluster (its `cluster.id`, topics and partitions, offsets by
//! position or time, a partition's records, the newest records' timestamps). Two
//! implementations: the native path's connections (`native/lookups.rs`) and a
//! librdkafka client (`kafka/lookups.rs`). [`crate::kafka::client::ClusterClient`]
//! picks one per cluster; groups and commits stay on librdkafka on both.
//!
//! Every method blocks: they are called on the enumerator's lookup threads, never on
//! an async worker thread.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::SourceError;

/// When a metadata request gives up before the client timeout: both only once every
/// broker the client knows failed since its last answer, never while one of them is
/// still connecting for the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndEarly {
    /// When the cluster refused the client (credentials, certificates) since its
    /// last answer; brokers that only do not answer are asked again until the
    /// timeout.
    OnRefusal,
    /// Whatever the brokers' errors (a refused connection, a name that does not
    /// resolve, a refusal), but a failed token provider's: for a first contact,
    /// whose caller tries again with backoff and should say why meanwhile.
    OnAnyError,
}

/// Each partition's offsets: `(earliest, latest)`.
pub(crate) type Bounds = BTreeMap<(String, i32), (i64, i64)>;

/// The first offset at or after a timestamp (or `None`), or the newest record's
/// timestamp (or `None`), of each partition.
pub(crate) type PerPartition = BTreeMap<(String, i32), Option<i64>>;

/// What [`Lookups::describe`] found for a set of topics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TopicPartitions {
    /// Topic → partition ids, for topics that exist.
    pub partitions: BTreeMap<String, Vec<i32>>,
    /// Requested topics the cluster does not have (yet), or does not show this
    /// client.
    pub missing: BTreeSet<String>,
    /// Those of `missing` the cluster refused to describe to this client's principal
    /// (no DESCRIBE permission): they may exist.
    pub unauthorized: BTreeSet<String>,
}

/// What [`Lookups::read_partition`] hands each record to: its offset, key and value.
pub(crate) type EachRecord<'a> = dyn FnMut(i64, Option<&[u8]>, Option<&[u8]>) + 'a;

/// One cluster's lookups, each within the client timeout.
pub(crate) trait Lookups: Send + Sync {
    /// Which path they take, for logs and `Debug`: `native` or `librdkafka`.
    fn path(&self) -> &'static str;

    /// The Kafka `cluster.id`, from a metadata answer.
    fn cluster_id(&self, end_early: EndEarly) -> Result<String, SourceError>;

    /// The partitions of `topics`, which of them are missing, and which of those the
    /// cluster refused to describe.
    fn describe(&self, topics: &BTreeSet<String>) -> Result<TopicPartitions, SourceError>;

    /// The names of all the cluster's topics.
    fn topic_names(&self) -> Result<Vec<String>, SourceError>;

    /// The earliest and latest offsets of every partition.
    fn bounds(&self, partitions: &[(String, i32)]) -> Result<Bounds, SourceError>;

    /// The first offset at or after each partition's own timestamp (`None` where no
    /// record is that late), for a non-empty `queries`.
    fn offsets_at_times(&self, queries: &[(String, i32, i64)])
    -> Result<PerPartition, SourceError>;

    /// Hands each record of `topic`/`partition` from `from` up to (not including)
    /// `to` to `each`, in offset order; returns how many it handed.
    fn read_partition(
        &self,
        topic: &str,
        partition: i32,
        range: (i64, i64),
        each: &mut EachRecord<'_>,
    ) -> Result<u64, SourceError>;

    /// The timestamp of the record at each partition's last offset (`None` for an
    /// empty partition, or one whose last offset holds no record handed out, such as
    /// a transaction marker), for a non-empty `partitions`.
    fn newest_timestamps(&self, partitions: &[(String, i32)]) -> Result<PerPartition, SourceError>;

    /// True when the cluster refused the client (authentication or TLS failed) since
    /// its last metadata answer, as opposed to not answering at all (or a token
    /// provider that failed).
    fn rejected(&self) -> bool;

    /// Whether a reader fetches with the same client: then a lookup waits behind the
    /// reader's fetch on the broker, and the client cannot be assigned partitions.
    fn is_read(&self) -> bool {
        false
    }

    /// The client's last error, said as the cause of a request that failed without
    /// one of its own (a refused cluster only times out).
    fn last_error(&self) -> Option<String> {
        None
    }
}
