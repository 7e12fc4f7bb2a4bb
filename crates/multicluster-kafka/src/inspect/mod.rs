//! Looking at clusters from outside a source: which topics and partitions a cluster
//! has, their earliest and latest offsets, and a consumer group's committed offsets
//! and lag. This is what `mck describe` and `mck plan` show.
//!
//! Every function here **blocks** on network calls bounded by
//! [`InspectOptions::timeout`]; call them from a plain thread or `spawn_blocking`,
//! never from an async worker thread. [`inspect_clusters`] asks several clusters at
//! once, one thread each, so a slow or unreachable cluster costs its own timeout and
//! does not delay the others.
//!
//! Errors are [`SourceError::Cluster`]: one line, naming the logical cluster id, and
//! never containing a secret property value.
//!
//! ```no_run
//! use std::collections::BTreeSet;
//! use std::time::Duration;
//! use multicluster_kafka::inspect::{InspectOptions, inspect_cluster};
//! use multicluster_kafka::properties::ClientProperties;
//!
//! let props: ClientProperties = [("bootstrap.servers", "127.0.0.1:9092")].into_iter().collect();
//! let topics = BTreeSet::from(["orders".to_string()]);
//! let options = InspectOptions::new(Duration::from_secs(10)).group("orders-reader");
//! let report = inspect_cluster("east", &props, &topics, &options)?;
//! for (topic, partitions) in &report.topics {
//!     for p in partitions {
//!         println!("{topic}/{}: {}..{} lag {:?}", p.partition, p.earliest, p.latest, p.lag());
//!     }
//! }
//! # Ok::<(), multicluster_kafka::error::SourceError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::base::offsets::PartitionFacts;
use crate::base::properties::{ClientProperties, REDACTED, RefusedProperty};
use crate::base::translate::OffsetSync;
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;
pub use crate::kafka::group_describe::{GroupProtocol, GroupReport};

/// What to look up, and how long each cluster call may take.
///
/// ```
/// use std::time::Duration;
/// use multicluster_kafka::inspect::InspectOptions;
/// let o = InspectOptions::new(Duration::from_secs(5)).group("g").timestamp(1_700_000_000_000);
/// assert_eq!(o.group.as_deref(), Some("g"));
/// assert_eq!(o.timeout, Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectOptions {
    /// Timeout of each call to a cluster (metadata, watermarks, committed offsets).
    pub timeout: Duration,
    /// Consumer group whose committed offsets to look up; none when `None`.
    pub group: Option<String>,
    /// Look up, for each partition, the first offset at or after this timestamp (ms
    /// since the Unix epoch); none when `None`.
    pub timestamp: Option<i64>,
}

impl InspectOptions {
    /// Options with this timeout, no group and no timestamp.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            group: None,
            timestamp: None,
        }
    }

    /// Also looks up this group's committed offsets.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Also looks up the offset of each partition at this timestamp (ms).
    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

impl Default for InspectOptions {
    /// A 10 s timeout, no group, no timestamp.
    fn default() -> Self {
        Self::new(Duration::from_secs(10))
    }
}

/// One partition as the cluster reported it.
///
/// ```
/// use multicluster_kafka::inspect::PartitionReport;
/// let p = PartitionReport { partition: 0, earliest: 10, latest: 50, committed: Some(40), at_timestamp: None };
/// assert_eq!(p.lag(), Some(10));
/// assert_eq!(p.records(), 40);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReport {
    /// Partition number.
    pub partition: i32,
    /// Earliest offset still in the log.
    pub earliest: i64,
    /// End of the log (high watermark: the offset the next record will get).
    pub latest: i64,
    /// The group's committed offset (the next record it would read), when a group was
    /// asked and it has one.
    pub committed: Option<i64>,
    /// The first offset at or after the asked timestamp, when one was asked and such a
    /// record exists.
    pub at_timestamp: Option<i64>,
}

impl PartitionReport {
    /// Records the group has still to read (`latest − committed`, never negative), or
    /// `None` when it has no committed offset here.
    pub fn lag(&self) -> Option<i64> {
        self.committed.map(|c| (self.latest - c).max(0))
    }

    /// Records in the log now (`latest − earliest`).
    pub fn records(&self) -> i64 {
        (self.latest - self.earliest).max(0)
    }

    /// The facts [`crate::unstable::resolve_start`] needs to decide where a split of
    /// this partition would start.
    pub fn facts(&self) -> PartitionFacts {
        PartitionFacts {
            earliest: self.earliest,
            latest: self.latest,
            committed: self.committed,
            at_timestamp: self.at_timestamp,
        }
    }
}

/// What one cluster reported for the asked topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterReport {
    /// The logical cluster id (the name the metadata uses).
    pub cluster: String,
    /// The Kafka `cluster.id`: the physical identity of the cluster.
    pub kafka_cluster_id: String,
    /// Topic → its partitions in partition order, for asked topics that exist.
    pub topics: BTreeMap<String, Vec<PartitionReport>>,
    /// Asked topics the cluster does not have.
    pub missing_topics: BTreeSet<String>,
    /// When a group was asked: what its coordinator says of it (the protocol its
    /// members use, its state, its members), or why it could not say.
    pub group: Option<Result<GroupReport, String>>,
}

impl ClusterReport {
    /// The group's total lag on `topic`, or `None` when no partition has a committed
    /// offset (or the topic is missing).
    pub fn topic_lag(&self, topic: &str) -> Option<i64> {
        self.topics
            .get(topic)?
            .iter()
            .filter_map(PartitionReport::lag)
            .reduce(|a, b| a + b)
    }
}

/// Where a cluster stands, in the words of the source's per-cluster state machine
/// (`docs/design.md`, "A cluster, in the enumerator") and of `mck consume`.
///
/// ```
/// use multicluster_kafka::inspect::ClusterState;
/// assert_eq!(ClusterState::Unreachable.name(), "unreachable");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterState {
    /// The cluster answered with its Kafka `cluster.id`.
    Connected,
    /// No broker of the bootstrap list answered within the timeout.
    Unreachable,
    /// The cluster answered and refused the client: authentication or TLS failed.
    Rejected,
    /// librdkafka refused the client's properties; the cluster was not tried.
    Refused(RefusedProperty),
}

impl ClusterState {
    /// `connected`, `unreachable`, `rejected` or `refused`.
    pub fn name(&self) -> &'static str {
        match self {
            ClusterState::Connected => "connected",
            ClusterState::Unreachable => "unreachable",
            ClusterState::Rejected => "rejected",
            ClusterState::Refused(_) => "refused",
        }
    }
}

/// What asking one cluster gave: its state, and its report or why there is none (a
/// connected cluster may still fail a later request).
#[derive(Debug)]
pub struct Inspection {
    /// Where the cluster stands.
    pub state: ClusterState,
    /// The report, or the error: one line naming the cluster, never a secret.
    pub result: Result<ClusterReport, SourceError>,
}

/// Asks one cluster about `topics`: its Kafka `cluster.id`, the partitions of each
/// topic with their earliest and latest offsets, and, as `options` asks, the group's
/// committed offsets and the offsets at a timestamp. Topics the cluster does not have
/// are listed in [`ClusterReport::missing_topics`], not an error.
///
/// `properties` are the cluster's client properties (`bootstrap.servers` and whatever
/// security settings it needs). Blocks for up to a few times `options.timeout`.
///
/// # Errors
///
/// [`SourceError::Cluster`] when the cluster cannot be reached or refuses a request.
/// The message names `cluster` and never contains a secret property value.
pub fn inspect_cluster(
    cluster: &str,
    properties: &ClientProperties,
    topics: &BTreeSet<String>,
    options: &InspectOptions,
) -> Result<ClusterReport, SourceError> {
    inspect_cluster_state(cluster, properties, topics, options).result
}

/// [`inspect_cluster`], and where the cluster stands: properties librdkafka refuses
/// are found first, without a connection ([`ClientProperties::check`]); a cluster
/// that does not answer is told apart from one that refuses the client.
pub fn inspect_cluster_state(
    cluster: &str,
    properties: &ClientProperties,
    topics: &BTreeSet<String>,
    options: &InspectOptions,
) -> Inspection {
    let refused = |r: RefusedProperty| Inspection {
        result: Err(SourceError::Cluster {
            cluster: cluster.to_string(),
            message: r.to_string(),
        }),
        state: ClusterState::Refused(r),
    };
    if let Err(r) = properties.check() {
        return refused(r);
    }
    let client = match ClusterClient::new(
        None,
        Arc::from(cluster),
        properties,
        options.group.as_deref(),
        options.timeout,
        Default::default(),
        None,
    ) {
        Ok(client) => client,
        Err(e) => {
            let reason = match &e {
                SourceError::Cluster { message, .. } | SourceError::Kafka { message, .. } => {
                    message.clone()
                }
                other => other.to_string(),
            };
            return refused(properties.refusal(&reason));
        }
    };
    let inspection = inspect_with(cluster, &client, properties, topics, options);
    // Destroying a consumer takes rust-rdkafka up to 100 ms of polling: not waited for.
    crate::kafka::client::close_detached(client);
    inspection
}

/// [`inspect_cluster_state`] once its client is made.
fn inspect_with(
    cluster: &str,
    client: &ClusterClient,
    properties: &ClientProperties,
    topics: &BTreeSet<String>,
    options: &InspectOptions,
) -> Inspection {
    // A cluster that refuses connections is said to be unreachable about a second
    // after librdkafka says why, not at the timeout.
    let kafka_cluster_id = match client.first_contact() {
        Ok(id) => id,
        Err(e) => {
            let state = if client.rejected() {
                ClusterState::Rejected
            } else {
                ClusterState::Unreachable
            };
            return Inspection {
                state,
                result: Err(scrub(e, properties)),
            };
        }
    };
    Inspection {
        state: ClusterState::Connected,
        result: report(cluster, client, kafka_cluster_id, topics, options)
            .map_err(|e| scrub(e, properties)),
    }
}

fn report(
    cluster: &str,
    client: &ClusterClient,
    kafka_cluster_id: String,
    topics: &BTreeSet<String>,
    options: &InspectOptions,
) -> Result<ClusterReport, SourceError> {
    let found = client.describe(topics)?;
    let partitions: Vec<(String, i32)> = found
        .partitions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect();
    let facts = client.facts(&partitions, options.group.is_some(), options.timestamp)?;
    let mut report = ClusterReport {
        cluster: cluster.to_string(),
        kafka_cluster_id,
        topics: BTreeMap::new(),
        missing_topics: found.missing,
        group: options.group.as_deref().map(|g| client.describe_group(g)),
    };
    for ((topic, partition), f) in facts {
        report
            .topics
            .entry(topic)
            .or_default()
            .push(PartitionReport {
                partition,
                earliest: f.earliest,
                latest: f.latest,
                committed: f.committed,
                at_timestamp: f.at_timestamp,
            });
    }
    Ok(report)
}

/// One cluster to ask in [`inspect_clusters`].
#[derive(Clone, Debug)]
pub struct ClusterQuery {
    /// The logical cluster id.
    pub cluster: String,
    /// Its client properties.
    pub properties: ClientProperties,
    /// The topics to describe.
    pub topics: BTreeSet<String>,
    /// What to look up there, and the timeout of each call.
    pub options: InspectOptions,
}

/// Asks every cluster at once, one thread per cluster, each with its own
/// [`ClusterQuery::options`], and returns each cluster's report or error by logical
/// cluster id. An unreachable cluster costs its own timeout
/// only: the others are asked meanwhile.
///
/// ```no_run
/// use std::time::Duration;
/// use multicluster_kafka::inspect::{ClusterQuery, InspectOptions, inspect_clusters};
/// let query = |id: &str, bootstrap: &str| ClusterQuery {
///     cluster: id.into(),
///     properties: [("bootstrap.servers", bootstrap)].into_iter().collect(),
///     topics: ["orders".to_string()].into(),
///     options: InspectOptions::new(Duration::from_secs(5)),
/// };
/// let reports = inspect_clusters(vec![query("east", "east-1:9092"), query("west", "west-1:9092")]);
/// for (cluster, report) in &reports {
///     match report {
///         Ok(r) => println!("{cluster}: Kafka cluster.id {}", r.kafka_cluster_id),
///         Err(e) => println!("{cluster}: unreachable: {e}"),
///     }
/// }
/// ```
pub fn inspect_clusters(
    queries: Vec<ClusterQuery>,
) -> BTreeMap<String, Result<ClusterReport, SourceError>> {
    inspect_cluster_states(queries)
        .into_iter()
        .map(|(cluster, i)| (cluster, i.result))
        .collect()
}

/// [`inspect_clusters`], with where each cluster stands ([`inspect_cluster_state`]).
pub fn inspect_cluster_states(queries: Vec<ClusterQuery>) -> BTreeMap<String, Inspection> {
    let ask =
        |q: &ClusterQuery| inspect_cluster_state(&q.cluster, &q.properties, &q.topics, &q.options);
    std::thread::scope(|scope| {
        let handles: Vec<_> = queries
            .iter()
            .map(|q| {
                let handle = std::thread::Builder::new()
                    .name(format!("inspect-{}", q.cluster))
                    .spawn_scoped(scope, move || ask(q));
                (q, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(q, handle)| {
                let inspection = match handle {
                    Ok(h) => h.join().unwrap_or_else(|_| Inspection {
                        state: ClusterState::Unreachable,
                        result: Err(SourceError::Cluster {
                            cluster: q.cluster.clone(),
                            message: "the lookup thread panicked".into(),
                        }),
                    }),
                    // No thread to spare: ask on this one.
                    Err(_) => ask(q),
                };
                (q.cluster.clone(), inspection)
            })
            .collect()
    })
}

/// Removes every secret property value from a cluster error's message, and a
/// secret bootstrap list's brokers one by one (librdkafka names them in its errors).
fn scrub(e: SourceError, properties: &ClientProperties) -> SourceError {
    let clean = |mut message: String| {
        for (k, v) in properties.iter() {
            if properties.is_secret(k) && !v.is_empty() {
                message = message.replace(v, REDACTED);
            }
        }
        crate::base::properties::hide_secrets(&message, &properties.secret_texts()).into_owned()
    };
    match e {
        SourceError::Cluster { cluster, message } => SourceError::Cluster {
            cluster,
            message: clean(message),
        },
        SourceError::Kafka {
            cluster,
            message,
            kind,
            retriable,
        } => SourceError::Kafka {
            cluster,
            message: clean(message),
            kind,
            retriable,
        },
        other => other,
    }
}

/// Asks one cluster, as [`inspect_cluster_state`] does, about `topics` (their
/// partitions with earliest and latest offsets, and the group's committed offsets when
/// `options` names a group), and looks up for each partition in `timestamps` the first
/// offset at or after that partition's own timestamp: its
/// [`PartitionReport::at_timestamp`], `None` when no record there is that late.
/// Partitions not in `timestamps` get the offset at `options.timestamp`, as
/// [`inspect_cluster`] gives it.
///
/// This is what carrying positions onto a mirror needs
/// ([`crate::unstable::translate::carry`]): each partition's last record handed out
/// has a timestamp of its own. Entries of `timestamps` for partitions the cluster
/// does not have are ignored.
///
/// Blocks: a few calls, each bounded by `options.timeout`; a cluster that refuses
/// connections fails about a second after librdkafka says why, and one that does not
/// answer at the timeout, with [`ClusterState::Unreachable`].
///
/// ```no_run
/// use std::collections::{BTreeMap, BTreeSet};
/// use multicluster_kafka::inspect::{InspectOptions, inspect_at_times};
/// use multicluster_kafka::properties::ClientProperties;
///
/// let props: ClientProperties = [("bootstrap.servers", "west-1:9092")].into_iter().collect();
/// let topics = BTreeSet::from(["orders".to_string()]);
/// let at = BTreeMap::from([(("orders".to_string(), 0), 1_700_000_000_000)]);
/// let found = inspect_at_times("west", &props, &topics, &at, &InspectOptions::default());
/// for p in &found.result?.topics["orders"] {
///     println!("orders/{}: {}..{}, at the timestamp {:?}", p.partition, p.earliest, p.latest, p.at_timestamp);
/// }
/// # Ok::<(), multicluster_kafka::error::SourceError>(())
/// ```
pub fn inspect_at_times(
    cluster: &str,
    properties: &ClientProperties,
    topics: &BTreeSet<String>,
    timestamps: &BTreeMap<(String, i32), i64>,
    options: &InspectOptions,
) -> Inspection {
    let (state, result) =
        with_own_client(cluster, properties, options, |client, kafka_cluster_id| {
            let mut found = report(cluster, client, kafka_cluster_id, topics, options)?;
            let queries: Vec<(String, i32, i64)> = timestamps
                .iter()
                .filter(|((topic, partition), _)| {
                    found
                        .topics
                        .get(topic)
                        .is_some_and(|ps| ps.iter().any(|p| p.partition == *partition))
                })
                .map(|((topic, partition), ts)| (topic.clone(), *partition, *ts))
                .collect();
            let at = client.offsets_at_times(&queries)?;
            for (topic, partitions) in &mut found.topics {
                for p in partitions {
                    if let Some(offset) = at.get(&(topic.clone(), p.partition)) {
                        p.at_timestamp = *offset;
                    }
                }
            }
            Ok(found)
        });
    Inspection { state, result }
}

/// One partition of a mirror whose source position is to be translated with
/// MirrorMaker 2's offset syncs and checkpoints ([`mirror_maker_syncs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncWanted {
    /// The topic on the mirror (MirrorMaker's checkpoints name it).
    pub topic: String,
    /// The topic it copies on the source (the offset syncs name it).
    pub source_topic: String,
    /// The partition (the same on both sides).
    pub partition: i32,
    /// The source offset to translate: the last record handed out there, or the next
    /// offset when none was.
    pub upstream: i64,
}

/// What MirrorMaker 2's topics on a mirror cluster say of the wanted partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorMakerSyncs {
    /// By (topic on the mirror, partition): the newest offset sync at or below the
    /// wanted offset, or the group's newest checkpoint when that is closer, and
    /// whether it is the checkpoint. Partitions with neither are left out.
    pub found: BTreeMap<(String, i32), (OffsetSync, bool)>,
    /// Offset syncs and checkpoints read.
    pub read: (u64, u64),
    /// How many records of those topics did not decode.
    pub skipped: u64,
    /// The first of them: where each is and what was wrong, byte by byte.
    pub first_skipped: Vec<String>,
}

/// Reads, on the mirror `cluster`, MirrorMaker 2's offset syncs of the flow from the
/// source MirrorMaker calls `source_alias` (`mm2-offset-syncs.<alias>.internal`,
/// written there with `offset-syncs.topic.location=target`) and, when `options`
/// names a group, that group's checkpoints (`<alias>.checkpoints.internal`), and
/// returns for each of `wanted` what to translate its position with
/// ([`crate::unstable::translate::MirrorFacts::sync`]). Topics the cluster does not
/// have hold nothing: no error. Records that do not decode are skipped and counted.
///
/// Blocks: each topic partition is read from its start to its end as the read
/// starts, within `options.timeout`, on a client of its own.
///
/// # Errors
///
/// [`SourceError::Cluster`] when the cluster cannot be reached or a read does not end
/// in time. The message names `cluster` and never contains a secret property value.
pub fn mirror_maker_syncs(
    cluster: &str,
    properties: &ClientProperties,
    source_alias: &str,
    wanted: Vec<SyncWanted>,
    options: &InspectOptions,
) -> Result<MirrorMakerSyncs, SourceError> {
    let wanted = wanted
        .into_iter()
        .map(|w| crate::kafka::mm2::Wanted {
            topic: w.topic,
            source_topic: w.source_topic,
            partition: w.partition,
            upstream: w.upstream,
        })
        .collect();
    with_own_client(cluster, properties, options, |client, _| {
        let lookup =
            crate::kafka::mm2::look_up(client, source_alias, options.group.as_deref(), wanted)?;
        Ok(MirrorMakerSyncs {
            found: lookup
                .found()
                .into_iter()
                .filter_map(|(key, f)| f.best().map(|best| (key, best)))
                .collect(),
            read: lookup.read,
            skipped: lookup.skipped_count,
            first_skipped: lookup.skipped.iter().map(ToString::to_string).collect(),
        })
    })
    .1
}

/// The timestamp of the newest record of each of `partitions` on `cluster` (`None`
/// for an empty partition, or one whose last offset holds no record, such as a
/// transaction marker), on a client of its own: what `mck describe` compares a
/// timestamp mirror with its source by.
///
/// # Errors
///
/// [`SourceError::Cluster`] (or [`SourceError::Kafka`]) when the cluster cannot be
/// reached or refuses the client. The message names `cluster` and never contains a
/// secret property value.
pub fn newest_timestamps(
    cluster: &str,
    properties: &ClientProperties,
    partitions: &[(String, i32)],
    options: &InspectOptions,
) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
    with_own_client(cluster, properties, options, |client, _| {
        client.newest_timestamps(partitions)
    })
    .1
}

/// Makes a client of its own for `cluster` (properties librdkafka refuses are found
/// first, without a connection), makes first contact, and hands it with the Kafka
/// `cluster.id` to `ask`. Returns where the cluster stands and the answer; errors
/// lose every secret value, as in [`inspect_cluster_state`].
fn with_own_client<T>(
    cluster: &str,
    properties: &ClientProperties,
    options: &InspectOptions,
    ask: impl FnOnce(&ClusterClient, String) -> Result<T, SourceError>,
) -> (ClusterState, Result<T, SourceError>) {
    let refused = |r: RefusedProperty| {
        let e = SourceError::Cluster {
            cluster: cluster.to_string(),
            message: r.to_string(),
        };
        (ClusterState::Refused(r), Err(e))
    };
    if let Err(r) = properties.check() {
        return refused(r);
    }
    let client = match ClusterClient::new(
        None,
        Arc::from(cluster),
        properties,
        options.group.as_deref(),
        options.timeout,
        Default::default(),
        None,
    ) {
        Ok(client) => client,
        Err(e) => {
            let reason = match &e {
                SourceError::Cluster { message, .. } | SourceError::Kafka { message, .. } => {
                    message.clone()
                }
                other => other.to_string(),
            };
            return refused(properties.refusal(&reason));
        }
    };
    let answer = match client.first_contact() {
        Ok(kafka_cluster_id) => (
            ClusterState::Connected,
            ask(&client, kafka_cluster_id).map_err(|e| scrub(e, properties)),
        ),
        Err(e) => {
            let state = if client.rejected() {
                ClusterState::Rejected
            } else {
                ClusterState::Unreachable
            };
            (state, Err(scrub(e, properties)))
        }
    };
    // Destroying a consumer takes rust-rdkafka up to 100 ms of polling: not waited for.
    crate::kafka::client::close_detached(client);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(committed: Option<i64>) -> PartitionReport {
        PartitionReport {
            partition: 0,
            earliest: 5,
            latest: 20,
            committed,
            at_timestamp: None,
        }
    }

    #[test]
    fn lag_is_what_the_group_has_left_and_never_negative() {
        assert_eq!(partition(Some(12)).lag(), Some(8));
        assert_eq!(partition(None).lag(), None);
        assert_eq!(partition(Some(25)).lag(), Some(0));
        assert_eq!(partition(None).records(), 15);
    }

    #[test]
    fn a_topic_lag_sums_partitions_with_a_committed_offset() {
        let mut second = partition(None);
        second.partition = 1;
        let report = ClusterReport {
            cluster: "east".into(),
            kafka_cluster_id: "k".into(),
            topics: BTreeMap::from([("t".to_string(), vec![partition(Some(10)), second])]),
            missing_topics: BTreeSet::new(),
            group: None,
        };
        assert_eq!(report.topic_lag("t"), Some(10));
        assert_eq!(report.topic_lag("absent"), None);
    }

    #[test]
    fn cluster_errors_lose_secret_values() {
        let mut props = ClientProperties::new();
        props.set("bootstrap.servers", "a:1");
        props.set("sasl.password", "hunter2");
        let e = SourceError::Cluster {
            cluster: "east".into(),
            message: "auth failed for password hunter2 at a:1".into(),
        };
        let shown = scrub(e, &props).to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("a:1") && shown.contains(REDACTED), "{shown}");
    }

    #[test]
    fn an_unreachable_cluster_is_an_error_naming_it_and_the_others_are_still_asked() {
        // Port 1 on loopback refuses connections: both lookups fail within the timeout,
        // side by side.
        let query = |id: &str| ClusterQuery {
            cluster: id.into(),
            properties: [
                ("bootstrap.servers", "127.0.0.1:1"),
                ("sasl.password", "s3cret"),
            ]
            .into_iter()
            .collect(),
            topics: BTreeSet::from(["t".to_string()]),
            options: InspectOptions::new(Duration::from_millis(300)),
        };
        let out = inspect_clusters(vec![query("a"), query("b")]);
        assert_eq!(out.len(), 2);
        for (id, r) in &out {
            let e = r
                .as_ref()
                .expect_err("nothing listens on port 1")
                .to_string();
            assert!(e.starts_with(&format!("cluster `{id}`:")), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn states_tell_a_refused_property_from_a_cluster_that_does_not_answer() {
        let topics = BTreeSet::from(["t".to_string()]);
        let options = InspectOptions::new(Duration::from_millis(300));
        let mut props: ClientProperties =
            [("bootstrap.servers", "127.0.0.1:1")].into_iter().collect();
        let down = inspect_cluster_state("a", &props, &topics, &options);
        assert_eq!(down.state, ClusterState::Unreachable);
        props.set("fetch.max.bytes", "banana");
        let refused = inspect_cluster_state("a", &props, &topics, &options);
        let ClusterState::Refused(r) = &refused.state else {
            panic!("{:?}", refused.state)
        };
        assert_eq!(r.key.as_deref(), Some("fetch.max.bytes"));
        let e = refused.result.unwrap_err().to_string();
        assert!(
            e.starts_with("cluster `a`: property `fetch.max.bytes` refused"),
            "{e}"
        );
        assert!(!e.contains("banana"), "{e}");
    }

    #[test]
    fn lookups_at_times_on_a_cluster_that_does_not_answer_say_so_without_a_secret() {
        let props: ClientProperties = [
            ("bootstrap.servers", "127.0.0.1:1"),
            ("sasl.password", "s3cret"),
        ]
        .into_iter()
        .collect();
        let topics = BTreeSet::from(["t".to_string()]);
        let at = BTreeMap::from([(("t".to_string(), 0), 5)]);
        let options = InspectOptions::new(Duration::from_millis(300));
        let found = inspect_at_times("west", &props, &topics, &at, &options);
        assert_eq!(found.state, ClusterState::Unreachable);
        let e = found.result.unwrap_err().to_string();
        assert!(e.starts_with("cluster `west`:"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
}
