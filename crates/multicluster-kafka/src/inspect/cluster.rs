//! Asking one cluster: its Kafka `cluster.id`, the asked topics' partitions and
//! offsets, the group's committed offsets, and offsets at a timestamp (one for all
//! partitions, or each partition's own).

use std::collections::{BTreeMap, BTreeSet};

use super::InspectOptions;
use super::client::with_own_client;
use super::report::{ClusterReport, Inspection, PartitionReport};
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;

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
    let (state, result) = with_own_client(cluster, properties, options, |client, id| {
        report(cluster, client, id, topics, options)
    });
    Inspection { state, result }
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
/// answer at the timeout, with
/// [`ClusterState::Unreachable`](super::ClusterState::Unreachable).
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::inspect::report::ClusterState;

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
