//! Partition discovery: the partitions of each cluster's topics that the enumerator
//! does not know yet, with where they start and stop; run on every cluster at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::Enumerator;
use super::mirror_carry::{MakeClient, Mm2Clients, carry_to_mirror};
use crate::base::metadata::{MirrorOf, Translate};
use crate::base::offsets::{StartingOffsets, StoppingOffsets};
use crate::base::protocol::ReaderEvent;
use crate::base::resolve::{resolve_start, resolve_stop};
use crate::base::split::{KafkaSplit, SplitId};
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;
use crate::kafka::client::{close_detached, detached};

/// Splits found on one cluster that the enumerator did not know yet.
struct Discovery {
    cluster: Arc<str>,
    client: Arc<ClusterClient>,
    /// For a discovery that someone waits for (a topic added to a cluster being
    /// read): a client of its own to look up with instead of `client`, whose requests
    /// would wait behind its reader's fetches, for up to `fetch.wait.max.ms` each
    /// (500 ms by default) when the cluster is idle.
    aside: Option<MakeClient>,
    topics: BTreeSet<String>,
    known: BTreeSet<(String, i32)>,
    start: StartingOffsets,
    stop: Option<StoppingOffsets>,
    initial_discovery_done: bool,
    new_start: StartingOffsets,
    /// A sharded source's shard: only its partitions are looked at.
    shard: Option<crate::base::shard::Shard>,
    /// On a mirror (`mirrorOf`): the source's positions, carried across for new
    /// partitions whose source split left the stream.
    mirror: Option<(MirrorOf, crate::base::retention::Retained)>,
    /// On a MirrorMaker 2 mirror: makes the client MirrorMaker's offset syncs and
    /// checkpoints are read with (a client of its own: reading assigns partitions,
    /// and a reader may fetch with `client`), and the source's group, whose
    /// checkpoints count. Made only when positions are carried.
    mm2: Option<Mm2Clients>,
}

/// Subscribed topics a cluster does not show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Absent {
    /// Every topic not shown (not there, or not shown to this principal).
    pub missing: BTreeSet<String>,
    /// Those the cluster refused to describe (no DESCRIBE permission).
    pub unauthorized: BTreeSet<String>,
    /// The topics the discovery looked for: an answer to a discovery started before
    /// the cluster's topics changed says nothing of the topics it reads now.
    pub asked: BTreeSet<String>,
}

/// The new splits of a cluster, and the subscribed topics it does not show (yet).
type Discovered = (Vec<KafkaSplit>, Absent);

fn discover_blocking(d: &mut Discovery) -> Result<Discovered, SourceError> {
    // Without a client of its own (librdkafka refused to make one), the shared client
    // answers, only later.
    let aside = d.aside.take().and_then(|make| {
        make()
            .inspect_err(|e| {
                tracing::debug!(cluster = %d.cluster, error = %e, "no client of its own for this discovery; using the shared one");
            })
            .ok()
    });
    let mm2 = d.mm2.take();
    let found = discover_with(d, aside.as_ref().unwrap_or(&d.client), mm2);
    if let Some(client) = aside {
        // Closing waits for librdkafka's threads; the answer does not.
        close_detached(client);
    }
    found
}

fn discover_with(
    d: &Discovery,
    client: &ClusterClient,
    mm2: Option<Mm2Clients>,
) -> Result<Discovered, SourceError> {
    let Discovery {
        cluster,
        topics,
        known,
        start,
        stop,
        initial_discovery_done,
        new_start,
        shard,
        mirror,
        ..
    } = d;
    let cluster: &str = cluster;
    let stop = stop.as_ref();
    let found = client.describe(topics)?;
    let missing = Absent {
        missing: found.missing.clone(),
        unauthorized: found.unauthorized.clone(),
        asked: topics.clone(),
    };
    let new: Vec<(String, i32)> = found
        .partitions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .filter(|tp| !known.contains(tp))
        .filter(|(t, p)| shard.is_none_or(|s| s.owns(cluster, t, *p)))
        .collect();
    if new.is_empty() {
        return Ok((Vec::new(), missing));
    }
    // Partitions found after a cluster's first discovery are new (new partitions, or
    // a topic added to the cluster): they start at `new_start`, earliest by default,
    // so nothing produced to them is missed.
    let start = if *initial_discovery_done {
        new_start
    } else {
        start
    };
    // A shard takes a partition it did not read before from the group's committed
    // offset where there is one: another shard read it up to there before the
    // layout changed.
    let needs_committed = shard.is_some()
        || start.needs_committed()
        || stop.is_some_and(StoppingOffsets::needs_committed);
    let start_facts = client.facts(&new, needs_committed, start.timestamp())?;
    let stop_facts = match stop.and_then(StoppingOffsets::timestamp) {
        Some(ts) => Some(client.facts(&new, false, Some(ts))?),
        None => None,
    };
    let carried = match mirror {
        Some((mirror, retained)) => {
            carry_to_mirror(cluster, client, mirror, retained, &new, &start_facts, mm2)?
        }
        None => BTreeMap::new(),
    };
    let mut out = Vec::with_capacity(new.len());
    for (topic, p) in new {
        let facts = &start_facts[&(topic.clone(), p)];
        let carried = carried.get(&(topic.clone(), p));
        let next_offset = match (facts.committed, carried) {
            (_, Some((next_offset, _))) => *next_offset,
            (Some(committed), None) if shard.is_some() => committed,
            _ => resolve_start(start, &topic, cluster, p, facts)?,
        };
        let stop_offset = match stop {
            Some(spec) => {
                let f = stop_facts
                    .as_ref()
                    .map(|s| &s[&(topic.clone(), p)])
                    .unwrap_or(facts);
                Some(resolve_stop(spec, &topic, cluster, p, f)?)
            }
            None => None,
        };
        out.push(KafkaSplit {
            id: SplitId::new(cluster, &topic, p),
            next_offset,
            stop_offset,
            last: carried.and_then(|(_, last)| last.clone()),
        });
    }
    Ok((out, missing))
}

/// Where each of `partitions` stops under `stop` (in their order), from one lookup on
/// the cluster.
pub(super) fn stops_blocking(
    cluster: &str,
    client: &ClusterClient,
    stop: &StoppingOffsets,
    partitions: &[(String, i32)],
) -> Result<Vec<i64>, SourceError> {
    let facts = client.facts(partitions, stop.needs_committed(), stop.timestamp())?;
    partitions
        .iter()
        .map(|(topic, p)| {
            Ok(resolve_stop(
                stop,
                topic,
                cluster,
                *p,
                &facts[&(topic.clone(), *p)],
            )?)
        })
        .collect()
}

/// A discovery's answer: the cluster, and its new splits with the topics it lacks.
pub(super) type DiscoveryAnswer = (Arc<str>, Result<Discovered, SourceError>);

/// The discoveries running in the background, and the repeating warnings of
/// discovery said so far.
#[derive(Default)]
pub(super) struct Discovering {
    /// The running background discoveries.
    running: tokio::task::JoinSet<DiscoveryAnswer>,
    /// The clusters of the running background discoveries.
    clusters: BTreeSet<Arc<str>>,
    /// The topics each cluster did not show, as said last (said again only when this
    /// changes).
    missing_topics: BTreeMap<Arc<str>, Absent>,
    /// Each cluster's failed discovery, as said last (said again only when the error
    /// changes).
    failed: BTreeMap<Arc<str>, String>,
}

impl Discovering {
    /// Whether a background discovery runs.
    pub(super) fn running(&self) -> bool {
        !self.running.is_empty()
    }

    /// The answer of the next background discovery that ends (`None` when none
    /// runs); its cluster may be discovered again from then on.
    pub(super) async fn next_answer(
        &mut self,
    ) -> Option<Result<DiscoveryAnswer, tokio::task::JoinError>> {
        let joined = self.running.join_next().await;
        if let Some(Ok((cluster, _))) = &joined {
            self.clusters.remove(cluster);
        }
        joined
    }

    /// Whether topics of `cluster` were said to be missing.
    #[cfg(test)]
    pub(super) fn said_missing(&self, cluster: &str) -> bool {
        self.missing_topics.contains_key(cluster)
    }
}

impl Enumerator {
    /// What discovering `cluster` needs, taken from its state now. `urgent`: someone
    /// waits for the answer, so a client a reader fetches with is not used for it
    /// (see [`Discovery::aside`]).
    fn discovery_of(&self, cluster: &Arc<str>, urgent: bool) -> Option<Discovery> {
        let state = self.clusters.get(cluster)?;
        if let Some(mirror) = self
            .applied
            .view(cluster)
            .and_then(|v| v.mirror_of.as_ref())
            && !self.confirmed(&mirror.cluster)
        {
            // The source's readers have not said where they stopped yet: the mirror's
            // splits wait for that (a confirmation starts the discovery again).
            tracing::debug!(cluster = %cluster, source = %mirror.cluster, "the mirror's discovery waits for its source's last positions");
            return None;
        }
        let aside: Option<MakeClient> = (urgent && state.client().is_read()).then(|| {
            Box::new(super::clients::client_aside(
                &self.cfg,
                cluster,
                state.reader_props(),
            )) as MakeClient
        });
        let mirror_of = self.applied.view(cluster).and_then(|v| v.mirror_of.clone());
        let mm2 = mirror_of
            .as_ref()
            .filter(|m| m.translate == Translate::Mm2)
            .map(|m| {
                let make = super::clients::client_aside(&self.cfg, cluster, state.reader_props());
                // The source's settings, while known and it was not failed over (a
                // dead cluster would hold the discovery for the client timeout): those
                // it was read with, else its definition in the metadata (after a
                // restart, when it left the streams before).
                let source = self
                    .applied
                    .gone_props(m.cluster.as_str())
                    .or(m.source_properties.as_ref())
                    .filter(|_| !self.failover.taken_over().contains(&m.cluster))
                    .map(|props| {
                        let id: Arc<str> = Arc::from(m.cluster.as_str());
                        Box::new(super::clients::client_aside(&self.cfg, &id, props)) as MakeClient
                    });
                Mm2Clients {
                    mirror: Box::new(make),
                    group: self.cfg.group_id.clone(),
                    source,
                }
            });
        Some(Discovery {
            cluster: cluster.clone(),
            client: state.client().clone(),
            aside,
            topics: state.topics().clone(),
            known: state.known().clone(),
            start: state.start().clone(),
            stop: state.stop().clone(),
            initial_discovery_done: state.initial_discovery_done(),
            new_start: self.cfg.new_partition_start.clone(),
            shard: self.cfg.shard,
            mirror: mirror_of.map(|m| (m, self.links.retained().clone())),
            mm2,
        })
    }

    /// Discovers new partitions on `clusters` (every cluster when `None`), all at
    /// once, and waits for their answers. At start-up (`strict`) the splits are
    /// returned and any failure is; later, each cluster's new splits are handed out
    /// as soon as that cluster answers (nothing is returned), and a failing cluster
    /// is reported and retried at the next discovery while the others go on.
    pub(super) async fn discover_now(
        &mut self,
        clusters: Option<&BTreeSet<Arc<str>>>,
        strict: bool,
    ) -> Result<Vec<KafkaSplit>, SourceError> {
        let mut tasks = tokio::task::JoinSet::new();
        let ids: Vec<Arc<str>> = match clusters {
            Some(c) => c.iter().cloned().collect(),
            None => self.clusters.keys().cloned().collect(),
        };
        for cluster in ids {
            if let Some(mut d) = self.discovery_of(&cluster, true) {
                tasks.spawn(detached(move || {
                    let r = discover_blocking(&mut d);
                    (d.cluster, r)
                }));
            }
        }
        let mut out = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (cluster, result) =
                joined.map_err(|e| SourceError::internal("a discovery task", e))?;
            out.extend(self.take_discovery(cluster, result, strict).await?);
        }
        Ok(out)
    }

    /// Starts a discovery of every cluster that has none running; the answers come
    /// back to the run loop one cluster at a time ([`Self::take_discovery`]), so a
    /// cluster that does not answer holds no other.
    pub(super) fn discover_in_background(&mut self) {
        let ids: Vec<Arc<str>> = self
            .clusters
            .keys()
            .filter(|c| !self.discovery.clusters.contains(*c))
            .cloned()
            .collect();
        for cluster in ids {
            // Periodic: waiting behind a reader's fetch costs nothing here.
            if let Some(mut d) = self.discovery_of(&cluster, false) {
                self.discovery.clusters.insert(cluster);
                self.discovery.running.spawn(detached(move || {
                    let r = discover_blocking(&mut d);
                    (d.cluster, r)
                }));
            }
        }
    }

    /// Tells the readers of a bounded run's splits that their topics are gone.
    fn topics_gone(&self, cluster: &Arc<str>, topics: Vec<String>, absent: &Absent) {
        for topic in topics {
            let unauthorized = absent.unauthorized.contains(&topic);
            let readers = self
                .readers
                .owners_of(|id| id.cluster == *cluster && *id.topic == *topic);
            for r in readers {
                self.readers.tell(
                    r,
                    ReaderEvent::TopicGone {
                        cluster: cluster.clone(),
                        topic: topic.clone(),
                        unauthorized,
                    },
                );
            }
        }
    }

    /// Applies one cluster's discovery answer. Splits found meanwhile by another
    /// discovery, of topics no longer read, or of a cluster no longer read are
    /// dropped. Returns the splits with `strict`, else hands them out.
    pub(super) async fn take_discovery(
        &mut self,
        cluster: Arc<str>,
        result: Result<Discovered, SourceError>,
        strict: bool,
    ) -> Result<Vec<KafkaSplit>, SourceError> {
        match result {
            Ok((mut splits, absent)) => {
                let Some(state) = self.clusters.get_mut(&cluster) else {
                    return Ok(Vec::new());
                };
                if self.cfg.bounded() && !strict {
                    // A bounded run reads the partitions found at start; it looks again
                    // only to notice topics deleted under it.
                    let gone: Vec<String> = absent
                        .missing
                        .iter()
                        .filter(|t| state.known().iter().any(|(k, _)| k == *t))
                        .cloned()
                        .collect();
                    if let Some(stops) = self.group.as_mut().and_then(|g| g.stops_mut()) {
                        stops.forget_topics(&cluster, &gone);
                    }
                    self.topics_gone(&cluster, gone, &absent);
                    return Ok(Vec::new());
                }
                splits.retain(|s| {
                    state.topics().contains(&*s.id.topic)
                        && state.know(s.id.topic.to_string(), s.id.partition)
                });
                // The readers learn that the cluster counts as discovered only after
                // they got its splits: a checkpoint taken in between must not make a
                // restore treat its partitions as new ones.
                let first = state.mark_discovered();
                let kafka_cluster_id = state.kafka_cluster_id().clone();
                self.discovery.failed.remove(&cluster);
                if absent.asked != *state.topics() {
                    // Started before the topics changed: the next discovery tells.
                } else if absent.missing.is_empty() {
                    self.discovery.missing_topics.remove(&cluster);
                } else if self.discovery.missing_topics.get(&cluster) != Some(&absent) {
                    let unauthorized = &absent.unauthorized;
                    let missing: BTreeSet<&String> =
                        absent.missing.difference(unauthorized).collect();
                    if !unauthorized.is_empty() {
                        tracing::warn!(cluster = %cluster, ?unauthorized, "the cluster refuses to describe topics to this client's principal (topic authorization failed: it needs DESCRIBE and READ ACLs on them); looking again at each discovery (said again only when this changes)");
                        metrics::counter!(crate::metrics::CLUSTER_ERRORS, "cluster" => cluster.to_string(), "kind" => "authorization").increment(1);
                    }
                    if !missing.is_empty() {
                        tracing::warn!(cluster = %cluster, ?missing, "topics not found on the cluster (yet); looking again at each discovery (said again only when this changes)");
                    }
                    self.discovery
                        .missing_topics
                        .insert(cluster.clone(), absent);
                }
                if strict {
                    // Start-up hands the splits out and then says every cluster's
                    // facts (`broadcast_cluster_info`).
                    return Ok(splits);
                }
                if !splits.is_empty() {
                    tracing::info!(cluster = %cluster, count = splits.len(), "new partitions discovered");
                    self.hand_out(splits);
                }
                if first {
                    self.readers.tell_all(|| ReaderEvent::ClusterInfo {
                        cluster: cluster.clone(),
                        kafka_cluster_id: kafka_cluster_id.clone(),
                        initial_discovery_done: true,
                    });
                }
            }
            Err(e) if strict => return Err(e),
            Err(e) => {
                let active = self
                    .links
                    .service()
                    .is_cluster_active(&cluster)
                    .await
                    .unwrap_or(true);
                let text = e.to_string();
                if active && self.discovery.failed.get(&cluster) != Some(&text) {
                    tracing::warn!(cluster = %cluster, error = %e, "partition discovery failed; retrying at each interval (said again only when the error changes)");
                    self.discovery.failed.insert(cluster.clone(), text);
                }
            }
        }
        Ok(Vec::new())
    }
}
