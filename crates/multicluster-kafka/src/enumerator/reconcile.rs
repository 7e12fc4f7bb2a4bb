//! Live reconciliation: reading the metadata again, holding back property changes
//! that come too soon, and applying the plan of what changed to the clusters it names.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::Enumerator;
use super::changes::{CHANGES_TARGET, applied_streams, change_lines};
use super::clients::client;
use super::cluster::WantedCluster;
use super::subscription::subscribed_streams;
use crate::base::plan::{ClusterView, Plan, clusters_of_streams_with, plan};
use crate::base::protocol::ReaderEvent;
use crate::error::SourceError;
use crate::kafka::client::{close_detached, detached};
use crate::metrics as m;

/// What becomes of a cluster whose new bootstrap list leads to another Kafka cluster
/// than the one it was read on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnotherKafkaCluster {
    /// The metadata names the old `cluster.id` in the cluster's `replaces`: the new
    /// one is read afresh.
    Replaces,
    /// The metadata sets the cluster's starting offsets: the new one is read afresh
    /// from them.
    StartsFresh,
    /// Neither: the new properties are refused and the old clients read on.
    Refused,
}

/// The rule for a cluster with metadata `view` whose new bootstrap list leads away from
/// Kafka cluster.id `expected`.
pub(super) fn on_another_kafka_cluster(view: &ClusterView, expected: &str) -> AnotherKafkaCluster {
    if view.replaces.as_deref() == Some(expected) {
        AnotherKafkaCluster::Replaces
    } else if view.starting_offsets.is_some() {
        AnotherKafkaCluster::StartsFresh
    } else {
        AnotherKafkaCluster::Refused
    }
}

impl Enumerator {
    /// Reads the metadata again and applies what changed.
    pub(super) async fn refresh_metadata(&mut self) {
        let read_began = std::time::Instant::now();
        let streams = match subscribed_streams(&self.cfg, self.links.service().as_ref(), false)
            .await
        {
            Ok(s) => {
                self.applied.metadata_answered();
                s
            }
            Err(SourceError::Metadata(e)) => {
                let failures = self.applied.metadata_failed();
                let threshold = self.cfg.metadata_failure_threshold;
                // Debug only: the service says why itself (the file service warns once
                // per new error, the CLI prints its own line), and past the threshold
                // the readers return the error.
                tracing::debug!(failures, threshold, error = %e, "metadata service failed; keeping the last good metadata");
                if failures > threshold {
                    self.readers
                        .tell_all(|| ReaderEvent::MetadataFailed(e.clone()));
                }
                return;
            }
            Err(other) => {
                // Not produced without `strict`; kept total rather than panicking.
                tracing::warn!(error = %other, "metadata refresh failed");
                return;
            }
        };
        let read = read_began.elapsed();
        let plan_began = std::time::Instant::now();
        self.report_missing(&streams);
        self.applied.set_latest(streams.clone());
        self.failover.prune(&streams);
        let mut new_views = clusters_of_streams_with(streams.values(), self.failover.taken_over());
        // Errors of clusters leaving (or reported inactive) are dropped from now on,
        // before the plan closes their consumers.
        self.refresh_active(&new_views).await;
        // Clusters no longer in the metadata are no longer waited for; those still
        // being connected are not planned again (their latest view is kept for when
        // they answer).
        self.unwant_clusters(|c| new_views.contains_key(c));
        let mut p = plan(self.applied.views(), &new_views);
        p.clusters_added.retain(|cluster, view| {
            let key: Arc<str> = Arc::from(cluster.as_str());
            if self.connecting.is_pending(&key) {
                self.want_cluster(key, view.clone());
                false
            } else {
                true
            }
        });
        let mut held = self.hold_back(&mut p, &mut new_views);
        if p.is_empty() {
            let applied = applied_streams(self.applied.streams(), streams, &held, |_| true);
            self.apply_streams(applied);
            return;
        }
        m::phase("read", read);
        m::phase("plan", plan_began.elapsed());
        let began = std::time::Instant::now();
        tracing::debug!(
            added = ?p.clusters_added.keys().collect::<Vec<_>>(),
            removed = ?p.clusters_removed,
            changed = ?p.clusters_changed.keys().collect::<Vec<_>>(),
            "applying a metadata change"
        );
        let refused = self.apply_plan(p, &new_views).await;
        held.extend(refused);
        // Added clusters that could not be reached are planned again at the next read,
        // and said then. Entries the plan does not read (a standby mirror, a source
        // failed over) stay as the metadata has them, and so does a standby that now
        // takes over (it was in the stream already): not said to come or go.
        let applied = applied_streams(self.applied.streams(), streams, &held, |c| {
            self.applied.views().contains_key(c)
                || !new_views.contains_key(c)
                || self
                    .applied
                    .streams()
                    .values()
                    .any(|s| s.clusters.contains_key(c))
        });
        for line in change_lines(self.applied.streams(), &applied, &self.split_counts()) {
            tracing::info!(target: CHANGES_TARGET, "{line}");
        }
        self.apply_streams(applied);
        let generation = self.applied.next_generation();
        metrics::gauge!(m::METADATA_GENERATION).set(generation as f64);
        metrics::counter!(m::RECONCILIATIONS).increment(1);
        metrics::histogram!(m::RECONCILIATION_SECONDS).record(began.elapsed().as_secs_f64());
    }

    /// Applies a plan: clusters the plan does not name are not touched.
    /// Returns the clusters whose new properties librdkafka refused (they read on
    /// with the old ones).
    pub(super) async fn apply_plan(
        &mut self,
        p: Plan,
        new_views: &BTreeMap<String, ClusterView>,
    ) -> BTreeSet<String> {
        let began = std::time::Instant::now();
        let mut refused = BTreeSet::new();
        // Clusters whose bootstrap list now leads to another Kafka cluster that the
        // metadata marks as replaced (its own starting offsets): read afresh.
        let mut replaced: Vec<(Arc<str>, ClusterView)> = Vec::new();
        for cluster in &p.clusters_removed {
            let key: Arc<str> = Arc::from(cluster.as_str());
            self.remove_splits(|id| id.cluster == key, true);
            let gone = self.clusters.remove(&key).map(|state| {
                let props = state.reader_props().clone();
                self.leave(key.clone(), state);
                props
            });
            self.applied.removed(&key, gone);
            self.readers.tell_all(|| ReaderEvent::ForgetCluster {
                cluster: key.clone(),
            });
            metrics::gauge!(m::CLUSTER_ACTIVE, "cluster" => cluster.clone()).set(0.0);
        }
        for (cluster, change) in &p.clusters_changed {
            let key: Arc<str> = Arc::from(cluster.as_str());
            let view = &new_views[cluster];
            if !change.topics_removed.is_empty() {
                let removed = &change.topics_removed;
                self.remove_splits(|id| id.cluster == key && removed.contains(&*id.topic), true);
            }
            let wanted = WantedCluster::new(&self.cfg, view);
            let Some(state) = self.clusters.get_mut(&key) else {
                continue;
            };
            state.retain_known(|(t, _)| !change.topics_removed.contains(t));
            state.set_topics(view.topics.clone());
            if change.offsets_changed {
                state.set_offsets(wanted.start, wanted.stop);
            }
            if change.properties_changed {
                tracing::info!(
                    cluster,
                    "properties changed: rebuilding the cluster's clients at their positions"
                );
                self.applied.rebuilt(&key);
                let props = wanted.props;
                // A new bootstrap list may lead to another physical cluster: it is
                // asked for its Kafka cluster.id, like an added cluster.
                let bootstrap =
                    |v: &ClusterView| v.properties.get("bootstrap.servers").map(str::to_string);
                let bootstrap_changed =
                    self.applied.view(cluster).map(bootstrap) != Some(bootstrap(view));
                let make = client(&self.cfg, self.links.clients(), &key, &props);
                let made = tokio::spawn(detached(move || {
                    let c = make()?;
                    let id = if bootstrap_changed {
                        Some(c.kafka_cluster_id()?)
                    } else {
                        None
                    };
                    Ok::<_, SourceError>((c, id))
                }))
                .await
                .unwrap_or_else(|e| Err(SourceError::internal("a client rebuild task", e)));
                let expected = state.kafka_cluster_id().clone();
                let other = match &made {
                    Ok((_, Some(id))) if expected.as_ref().is_some_and(|e| e != id) => {
                        Some(id.clone())
                    }
                    _ => None,
                };
                if let Some(actual) = other {
                    let expected = expected.unwrap_or_default();
                    if let Ok((c, _)) = made {
                        close_detached(c);
                    }
                    let choice = on_another_kafka_cluster(view, &expected);
                    if choice == AnotherKafkaCluster::Replaces {
                        tracing::info!(
                            cluster,
                            expected,
                            actual,
                            "the new bootstrap list leads to another Kafka cluster, which the metadata says replaces the old one: starting it fresh there"
                        );
                        replaced.push((key.clone(), view.clone()));
                    } else if choice == AnotherKafkaCluster::StartsFresh {
                        tracing::info!(
                            cluster,
                            expected,
                            actual,
                            "the new bootstrap list leads to another Kafka cluster, and the metadata sets this cluster's starting offsets: starting it fresh there"
                        );
                        replaced.push((key.clone(), view.clone()));
                    } else {
                        tracing::warn!(
                            cluster,
                            expected,
                            actual,
                            replaces = view.replaces.as_deref().unwrap_or("(not set)"),
                            "the new bootstrap list leads to another Kafka cluster; reading on with the old one (set the cluster's `replaces` to the old cluster.id, or its startingOffsets, in the metadata to start fresh on the new one)"
                        );
                        metrics::counter!(m::CLUSTER_ERRORS, "cluster" => cluster.clone(), "kind" => "identity").increment(1);
                        self.applied.refused(&key, view);
                        refused.insert(cluster.clone());
                    }
                    continue;
                }
                match made {
                    Ok((client, _)) => {
                        let old = state.replace_client(client);
                        close_detached(old);
                        self.applied.accepted(&key);
                    }
                    Err(e) => {
                        // The readers keep their consumers: librdkafka would refuse
                        // theirs too. Tried again when the properties change again.
                        tracing::warn!(cluster, error = %e, "cannot apply the cluster's new properties; reading on with the old ones until they change again");
                        metrics::counter!(m::CLUSTER_ERRORS, "cluster" => cluster.clone(), "kind" => "properties").increment(1);
                        self.applied.refused(&key, view);
                        refused.insert(cluster.clone());
                        continue;
                    }
                }
                state.set_reader_props(props.clone());
                for reader in self.readers.owners_of(|id| id.cluster == key) {
                    self.readers.tell(
                        reader,
                        ReaderEvent::Rebuild {
                            cluster: key.clone(),
                            properties: props.clone(),
                        },
                    );
                }
            }
            self.applied.read(cluster, view.clone());
        }
        for (key, view) in replaced {
            // Positions of the old physical cluster mean nothing on the new one: not
            // retained.
            self.remove_splits(|id| id.cluster == key, false);
            let _ = self.links.retained().take(|id| id.cluster == key);
            if let Some(state) = self.clusters.remove(&key) {
                close_detached(state);
            }
            self.readers.tell_all(|| ReaderEvent::ForgetCluster {
                cluster: key.clone(),
            });
            self.applied.unread(&key);
            self.want_cluster(key, view);
        }
        // Added clusters are connected in the background (see `connect`); they are read
        // from when they answer.
        for (cluster, view) in &p.clusters_added {
            self.want_cluster(Arc::from(cluster.as_str()), view.clone());
        }
        metrics::gauge!(m::CLUSTERS).set(self.clusters.len() as f64);
        let resumed = self.resume_retained();
        self.hand_out(resumed);
        // Only the clusters with topics added have new partitions to look for now.
        let grown: BTreeSet<Arc<str>> = p
            .clusters_changed
            .iter()
            .filter(|(_, change)| !change.topics_added.is_empty())
            .map(|(cluster, _)| Arc::from(cluster.as_str()))
            .collect();
        m::phase("apply", began.elapsed());
        if !grown.is_empty() {
            let began = std::time::Instant::now();
            let _ = self.discover_now(Some(&grown), false).await;
            m::phase("discover", began.elapsed());
        }
        refused
    }
}
