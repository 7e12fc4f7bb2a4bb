//! Asking several clusters at once, one thread each, so a slow or unreachable cluster
//! costs its own timeout only.

use std::collections::{BTreeMap, BTreeSet};

use super::InspectOptions;
use super::cluster::inspect_cluster_state;
use super::report::{ClusterReport, ClusterState, Inspection};
use crate::base::properties::ClientProperties;
use crate::error::SourceError;

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
}
