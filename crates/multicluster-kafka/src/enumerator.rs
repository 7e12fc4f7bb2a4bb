//! The enumerator: the single coordinator. It reads the metadata service, discovers
//! partitions on every cluster, resolves where new splits start, assigns splits to
//! readers, rediscovers partitions on an interval, reassigns the splits of readers
//! that went away, and commits checkpointed offsets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::assignment::{AssignmentStrategy, assign};
use crate::checkpoint::Checkpoint;
use crate::cluster_client::ClusterClient;
use crate::error::SourceError;
use crate::metadata::{KafkaMetadataService, KafkaStream};
use crate::metrics as m;
use crate::offsets::{StartingOffsets, StoppingOffsets, resolve_start, resolve_stop};
use crate::plan::{ClusterView, Plan, clusters_of_streams, plan};
use crate::properties::ClientProperties;
use crate::reader::{ReaderEvent, ReaderNotice};
use crate::split::{KafkaSplit, SplitId};

/// Which streams a source reads.
#[derive(Clone, Debug)]
pub(crate) enum Subscription {
    Ids(Vec<String>),
    Pattern(regex::Regex),
}

/// Everything the builder decided.
#[derive(Clone, Debug)]
pub(crate) struct SourceConfig {
    pub subscription: Subscription,
    pub group_id: Option<String>,
    pub starting: StartingOffsets,
    pub stopping: Option<StoppingOffsets>,
    pub properties: ClientProperties,
    pub parallelism: usize,
    pub partition_discovery: Option<Duration>,
    pub strategy: AssignmentStrategy,
    pub restore: Option<Checkpoint>,
    pub discard_mismatched_positions: bool,
    pub client_timeout: Duration,
    pub max_batch: usize,
    pub poll_timeout: Duration,
    pub include_headers: bool,
    /// How often to re-read the metadata service (unbounded mode).
    pub metadata_discovery: Option<Duration>,
    /// Consecutive metadata failures tolerated on the last good metadata.
    pub metadata_failure_threshold: u32,
    /// Where partitions found after a cluster's first discovery start (new
    /// partitions, and every partition of a topic added to a known cluster).
    pub new_partition_start: StartingOffsets,
    /// How long positions of removed topics and clusters are kept (zero: not kept).
    pub retention: Duration,
    /// Shortest time between two client rebuilds of one cluster.
    pub rebuild_interval: Duration,
    /// The program's hooks for each cluster's librdkafka clients.
    pub client_hooks: Option<crate::client_context::ClientHooksFactory>,
}

impl SourceConfig {
    pub fn bounded(&self) -> bool {
        self.stopping.is_some()
    }
}

/// Requests from the source handles.
pub(crate) enum Command {
    Commit(Checkpoint, oneshot::Sender<Result<(), SourceError>>),
}

struct ClusterState {
    reader_props: ClientProperties,
    topics: BTreeSet<String>,
    client: Arc<ClusterClient>,
    kafka_cluster_id: Option<String>,
    initial_discovery_done: bool,
    start: StartingOffsets,
    stop: Option<StoppingOffsets>,
    known: BTreeSet<(String, i32)>,
}

/// Warnings that repeat while a state lasts (a missing topic, a cluster that does not
/// answer), by cluster: each is said when it starts or its text changes, not at every
/// retry.
#[derive(Default)]
struct Said {
    missing_topics: BTreeMap<Arc<str>, BTreeSet<String>>,
    discovery_failed: BTreeMap<Arc<str>, String>,
    unreachable_added: BTreeMap<Arc<str>, String>,
}

pub(crate) struct Enumerator {
    cfg: Arc<SourceConfig>,
    service: Arc<dyn KafkaMetadataService>,
    clusters: BTreeMap<Arc<str>, ClusterState>,
    owners: BTreeMap<SplitId, usize>,
    unassigned: Vec<KafkaSplit>,
    readers: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>,
    notices: mpsc::UnboundedReceiver<ReaderNotice>,
    commands: mpsc::Receiver<Command>,
    /// The metadata applied last, per cluster (the input of the next plan).
    views: BTreeMap<String, ClusterView>,
    /// The metadata applied last, per stream (what the change lines compare).
    streams: BTreeMap<String, KafkaStream>,
    /// Repeating warnings already said.
    said: Said,
    /// Subscribed stream ids the metadata lacked at the last read.
    missing_streams: Vec<String>,
    /// Consecutive failed metadata reads.
    metadata_failures: u32,
    /// Metadata changes applied so far.
    generation: u64,
    /// Positions of removed splits, shared with the readers.
    retained: crate::retention::Retained,
    active: crate::active::ActiveClusters,
    /// When each cluster's clients were last rebuilt for a property change.
    last_rebuild: BTreeMap<Arc<str>, tokio::time::Instant>,
    /// When to read the metadata again to apply property changes held back by the
    /// rebuild interval.
    held_back_until: Option<tokio::time::Instant>,
}

/// What the source reads on one cluster, merged over the subscribed streams.
#[derive(Clone, Debug)]
pub(crate) struct WantedCluster {
    pub props: ClientProperties,
    pub topics: BTreeSet<String>,
    pub start: StartingOffsets,
    pub stop: Option<StoppingOffsets>,
}

/// The clusters of the subscribed streams (see [`clusters_of_streams`]), with the
/// source's properties under the cluster's and its default offsets where the cluster
/// sets none.
fn clusters_of(
    cfg: &SourceConfig,
    streams: &BTreeMap<String, KafkaStream>,
) -> BTreeMap<Arc<str>, WantedCluster> {
    clusters_of_streams(streams.values())
        .into_iter()
        .map(|(cluster, view)| {
            let mut props = cfg.properties.merged_with(&view.properties);
            if let Some(g) = &cfg.group_id {
                props.set("group.id", g.clone());
            }
            let wanted = WantedCluster {
                props,
                topics: view.topics,
                start: view
                    .starting_offsets
                    .unwrap_or_else(|| cfg.starting.clone()),
                // Stopping offsets apply in bounded mode, or when set per cluster.
                stop: view.stopping_offsets.or_else(|| cfg.stopping.clone()),
            };
            (Arc::from(cluster.as_str()), wanted)
        })
        .collect()
}

/// Resolves the subscription against the metadata service. With `strict` (start-up)
/// an unknown stream id is an error; while running it counts as a stream with no
/// clusters (the caller reports it).
pub(crate) async fn subscribed_streams(
    cfg: &SourceConfig,
    service: &dyn KafkaMetadataService,
    strict: bool,
) -> Result<BTreeMap<String, KafkaStream>, SourceError> {
    match &cfg.subscription {
        Subscription::Ids(ids) => {
            let found = service.describe_streams(ids).await?;
            let missing: Vec<String> = ids
                .iter()
                .filter(|id| !found.contains_key(*id))
                .cloned()
                .collect();
            if !missing.is_empty() && strict {
                return Err(SourceError::UnknownStreams(missing));
            }
            Ok(found)
        }
        Subscription::Pattern(re) => Ok(service
            .all_streams()
            .await?
            .into_iter()
            .filter(|(id, _)| re.is_match(id))
            .collect()),
    }
}

/// Splits found on one cluster that the enumerator did not know yet.
struct Discovery {
    cluster: Arc<str>,
    client: Arc<ClusterClient>,
    topics: BTreeSet<String>,
    known: BTreeSet<(String, i32)>,
    start: StartingOffsets,
    stop: Option<StoppingOffsets>,
    initial_discovery_done: bool,
    new_start: StartingOffsets,
}

/// The new splits of a cluster, and the subscribed topics it does not have (yet).
type Discovered = (Vec<KafkaSplit>, BTreeSet<String>);

fn discover_blocking(d: &Discovery) -> Result<Discovered, SourceError> {
    let Discovery {
        cluster,
        client,
        topics,
        known,
        start,
        stop,
        initial_discovery_done,
        new_start,
    } = d;
    let cluster: &str = cluster;
    let stop = stop.as_ref();
    let found = client.describe(topics)?;
    let missing = found.missing.clone();
    let new: Vec<(String, i32)> = found
        .partitions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .filter(|tp| !known.contains(tp))
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
    let needs_committed =
        start.needs_committed() || stop.is_some_and(StoppingOffsets::needs_committed);
    let start_facts = client.facts(&new, needs_committed, start.timestamp())?;
    let stop_facts = match stop.and_then(StoppingOffsets::timestamp) {
        Some(ts) => Some(client.facts(&new, false, Some(ts))?),
        None => None,
    };
    let mut out = Vec::with_capacity(new.len());
    for (topic, p) in new {
        let facts = &start_facts[&(topic.clone(), p)];
        let next_offset = resolve_start(start, &topic, cluster, p, facts)?;
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
        });
    }
    Ok((out, missing))
}

/// Where each of `partitions` stops under `stop` (in their order), from one lookup on
/// the cluster.
fn stops_blocking(
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

/// The tracing target of the lines [`change_lines`] makes, one event per line.
pub const CHANGES_TARGET: &str = "multicluster_kafka::changes";

/// What the source now reads as applied, per stream: `new`, without the clusters
/// `applied` rejects (an added cluster that could not be reached), and with the old
/// properties of clusters whose property change was `held` back.
fn applied_streams(
    old: &BTreeMap<String, KafkaStream>,
    mut new: BTreeMap<String, KafkaStream>,
    held: &BTreeSet<String>,
    applied: impl Fn(&str) -> bool,
) -> BTreeMap<String, KafkaStream> {
    for (id, stream) in new.iter_mut() {
        stream.clusters.retain(|cluster, _| applied(cluster));
        for cluster in held {
            let before = old.get(id).and_then(|s| s.clusters.get(cluster));
            if let (Some(meta), Some(before)) = (stream.clusters.get_mut(cluster), before) {
                meta.properties = before.properties.clone();
            }
        }
    }
    new
}

/// One plain line per stream whose metadata changed from `old` to `new`, e.g.
/// `stream orders: + cluster west (3 splits), - topic orders-v2 on east, ~ cluster
/// east properties`. `splits` holds the split count per topic of every discovered
/// cluster (a cluster not in it gets no count). Property values are never shown.
pub(crate) fn change_lines(
    old: &BTreeMap<String, KafkaStream>,
    new: &BTreeMap<String, KafkaStream>,
    splits: &BTreeMap<String, BTreeMap<String, usize>>,
) -> Vec<String> {
    let count = |cluster: &str, topics: &mut dyn Iterator<Item = &String>| -> String {
        let Some(per_topic) = splits.get(cluster) else {
            return String::new();
        };
        let n: usize = topics.map(|t| per_topic.get(t).copied().unwrap_or(0)).sum();
        format!(" ({n} split{})", if n == 1 { "" } else { "s" })
    };
    let empty = KafkaStream::new("");
    let ids: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut lines = Vec::new();
    for id in ids {
        let mut items = Vec::new();
        let before = match (old.get(id), new.get(id)) {
            (None, Some(_)) => {
                items.push("new stream".to_string());
                &empty
            }
            (Some(before), None) => {
                items.push("gone from the metadata".to_string());
                before
            }
            (Some(before), Some(_)) => before,
            (None, None) => continue,
        };
        let after = new.get(id).unwrap_or(&empty);
        for (cluster, meta) in &after.clusters {
            if !before.clusters.contains_key(cluster) {
                let n = count(cluster, &mut meta.topics.iter());
                items.push(format!("+ cluster {cluster}{n}"));
            }
        }
        for cluster in before.clusters.keys() {
            if !after.clusters.contains_key(cluster) {
                items.push(format!("- cluster {cluster}"));
            }
        }
        for (cluster, meta) in &after.clusters {
            let Some(was) = before.clusters.get(cluster) else {
                continue;
            };
            for topic in meta.topics.difference(&was.topics) {
                let n = count(cluster, &mut std::iter::once(topic));
                items.push(format!("+ topic {topic} on {cluster}{n}"));
            }
            for topic in was.topics.difference(&meta.topics) {
                items.push(format!("- topic {topic} on {cluster}"));
            }
            let mut what = Vec::new();
            if meta.properties != was.properties {
                what.push("properties");
            }
            if meta.starting_offsets != was.starting_offsets {
                what.push("starting offsets");
            }
            if meta.stopping_offsets != was.stopping_offsets {
                what.push("stopping offsets");
            }
            if !what.is_empty() {
                items.push(format!("~ cluster {cluster} {}", what.join(" and ")));
            }
        }
        if !items.is_empty() {
            lines.push(format!("stream {id}: {}", items.join(", ")));
        }
    }
    lines
}

/// In a follow run, how long start-up waits for the other clusters once one cluster
/// answered; those that did not are taken up later, like clusters added to the
/// metadata.
const START_GRACE: Duration = Duration::from_secs(5);

impl Enumerator {
    /// Reads metadata, connects to every cluster, restores and discovers splits, and
    /// hands out the first assignment. Fails when a stream is unknown. A cluster that
    /// does not answer fails a bounded run (it could never end); a follow run starts
    /// with the clusters that answered (waiting up to [`START_GRACE`] for the others
    /// once one did) and takes the others up at later metadata reads, their
    /// checkpointed positions kept meanwhile.
    pub async fn start(
        cfg: Arc<SourceConfig>,
        service: Arc<dyn KafkaMetadataService>,
        readers: BTreeMap<usize, mpsc::UnboundedSender<ReaderEvent>>,
        notices: mpsc::UnboundedReceiver<ReaderNotice>,
        commands: mpsc::Receiver<Command>,
        retained: crate::retention::Retained,
        active: crate::active::ActiveClusters,
    ) -> Result<Enumerator, SourceError> {
        let streams = subscribed_streams(&cfg, service.as_ref(), true).await?;
        let wanted = clusters_of(&cfg, &streams);
        let wanted_ids: Vec<Arc<str>> = wanted.keys().cloned().collect();
        let mut connects = tokio::task::JoinSet::new();
        for (
            cluster,
            WantedCluster {
                props,
                topics,
                start,
                stop,
            },
        ) in wanted
        {
            let timeout = cfg.client_timeout;
            let group = cfg.group_id.clone();
            let setup =
                crate::client_context::ClientSetup::new(cfg.client_hooks.as_ref(), &cluster);
            connects.spawn_blocking(move || {
                // A client librdkafka refuses is a configuration error, fatal in any
                // run; a cluster that does not answer is not, in a follow run.
                let connected =
                    ClusterClient::new(cluster.clone(), &props, group.as_deref(), timeout, setup)
                        .map(|client| client.kafka_cluster_id().map(|id| (client, id)));
                (cluster, props, topics, start, stop, connected)
            });
        }
        let mut clusters = BTreeMap::new();
        // Clusters that did not answer: a bounded run fails (it would never end), a
        // follow run starts with the others and takes these up, like clusters added
        // to the metadata, at a later metadata read.
        let mut unreachable: BTreeMap<Arc<str>, String> = BTreeMap::new();
        let mut waiting: BTreeSet<Arc<str>> = wanted_ids.iter().cloned().collect();
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let next = match deadline {
                Some(at) => match tokio::time::timeout_at(at, connects.join_next()).await {
                    Ok(next) => next,
                    // The clusters still connecting are taken up later; their blocking
                    // lookups end by themselves within the client timeout.
                    Err(_) => {
                        for cluster in std::mem::take(&mut waiting) {
                            tracing::warn!(cluster = %cluster, "no answer from a cluster within {:?} of the others; reading them and retrying it at each metadata read", START_GRACE);
                            unreachable.insert(cluster, String::new());
                        }
                        connects.detach_all();
                        break;
                    }
                },
                None => connects.join_next().await,
            };
            let Some(joined) = next else { break };
            let (cluster, props, topics, start, stop, connected) = joined
                .map_err(|e| SourceError::Config(format!("cluster connect task failed: {e}")))?;
            waiting.remove(&cluster);
            let (client, id) = match connected? {
                Ok(c) => {
                    if !cfg.bounded() && deadline.is_none() {
                        deadline = Some(tokio::time::Instant::now() + START_GRACE);
                    }
                    c
                }
                Err(e) if cfg.bounded() => return Err(e),
                Err(e) => {
                    tracing::warn!(cluster = %cluster, error = %e, "cannot reach a cluster; reading the others and retrying it at each metadata read (said again only when the error changes)");
                    unreachable.insert(cluster, e.to_string());
                    continue;
                }
            };
            clusters.insert(
                cluster,
                ClusterState {
                    reader_props: props,
                    topics,
                    client: Arc::new(client),
                    kafka_cluster_id: Some(id),
                    initial_discovery_done: false,
                    start,
                    stop,
                    known: BTreeSet::new(),
                },
            );
        }
        metrics::gauge!(m::CLUSTERS).set(clusters.len() as f64);
        for cluster in clusters.keys() {
            metrics::gauge!(m::CLUSTER_ACTIVE, "cluster" => cluster.to_string()).set(1.0);
        }
        let mut e = Enumerator {
            cfg: cfg.clone(),
            service,
            clusters,
            owners: BTreeMap::new(),
            unassigned: Vec::new(),
            readers,
            notices,
            commands,
            views: clusters_of_streams(streams.values())
                .into_iter()
                .filter(|(c, _)| !unreachable.contains_key(c.as_str()))
                .collect(),
            streams: streams
                .iter()
                .map(|(id, s)| {
                    let mut s = s.clone();
                    s.clusters
                        .retain(|c, _| !unreachable.contains_key(c.as_str()));
                    (id.clone(), s)
                })
                .collect(),
            said: Said {
                unreachable_added: unreachable,
                ..Said::default()
            },
            missing_streams: Vec::new(),
            metadata_failures: 0,
            generation: 0,
            last_rebuild: BTreeMap::new(),
            held_back_until: None,
            retained,
            active,
        };
        let views = e.views.clone();
        e.refresh_active(&views).await;
        let restored = e.restore()?;
        let restored = e.stops_for_this_run(restored).await?;
        e.broadcast_cluster_info();
        let discovered = e.discover_all(true).await?;
        let mut splits = restored;
        splits.extend(discovered);
        e.hand_out(splits);
        if cfg.bounded() {
            for tx in e.readers.values() {
                let _ = tx.send(ReaderEvent::NoMoreSplits);
            }
        }
        Ok(e)
    }

    /// Positions from the checkpoint, for clusters and topics still subscribed.
    fn restore(&mut self) -> Result<Vec<KafkaSplit>, SourceError> {
        let Some(cp) = self.cfg.restore.clone() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let retain_until = crate::retention::now_ms() + self.cfg.retention.as_millis() as i64;
        for (cluster, saved) in &cp.clusters {
            let mut retain_later = Vec::new();
            let Some(state) = self.clusters.get_mut(cluster.as_str()) else {
                // No longer subscribed: keep the positions for the retention window.
                for sc in &saved.splits {
                    self.retain_saved(cluster, sc, saved, retain_until);
                }
                continue;
            };
            if let (Some(expected), Some(actual)) =
                (&saved.kafka_cluster_id, &state.kafka_cluster_id)
                && expected != actual
            {
                if self.cfg.discard_mismatched_positions {
                    tracing::warn!(
                        cluster,
                        expected,
                        actual,
                        "cluster identity changed; starting this cluster fresh as configured"
                    );
                    continue;
                }
                return Err(SourceError::ClusterIdentity {
                    cluster: cluster.clone(),
                    expected: expected.clone(),
                    actual: actual.clone(),
                });
            }
            state.initial_discovery_done = saved.initial_discovery_done;
            for s in &saved.splits {
                if !state.topics.contains(&s.topic) {
                    retain_later.push(s.clone());
                    continue;
                }
                state.known.insert((s.topic.clone(), s.partition));
                // Where to stop is this run's choice (`stops_for_this_run`), not the
                // checkpointed run's: a bounded run after a follow run ends, and a
                // re-run export reads what is new since.
                out.push(KafkaSplit {
                    id: SplitId::new(cluster, &s.topic, s.partition),
                    next_offset: s.next_offset,
                    stop_offset: None,
                });
            }
            // Topics no longer subscribed on a subscribed cluster: retained too.
            for sc in &retain_later {
                self.retain_saved(cluster, sc, saved, retain_until);
            }
        }
        Ok(out)
    }

    /// Gives restored splits the stops of this run's stopping offsets (per cluster, else
    /// the source's), looked up on every cluster concurrently, as discovery does for
    /// new splits. Without stopping offsets the splits stay unbounded.
    async fn stops_for_this_run(
        &self,
        mut splits: Vec<KafkaSplit>,
    ) -> Result<Vec<KafkaSplit>, SourceError> {
        let mut by_cluster: BTreeMap<Arc<str>, Vec<(String, i32)>> = BTreeMap::new();
        for s in &splits {
            by_cluster
                .entry(s.id.cluster.clone())
                .or_default()
                .push((s.id.topic.to_string(), s.id.partition));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (cluster, partitions) in by_cluster {
            let Some(state) = self.clusters.get(&cluster) else {
                continue;
            };
            let Some(stop) = state.stop.clone() else {
                continue;
            };
            let client = state.client.clone();
            tasks.spawn_blocking(move || {
                let stops = stops_blocking(&cluster, &client, &stop, &partitions);
                (cluster, partitions, stops)
            });
        }
        let mut stops: BTreeMap<(Arc<str>, String, i32), i64> = BTreeMap::new();
        while let Some(joined) = tasks.join_next().await {
            let (cluster, partitions, result) =
                joined.map_err(|e| SourceError::Config(format!("stop lookup task failed: {e}")))?;
            for ((topic, partition), stop) in partitions.into_iter().zip(result?) {
                stops.insert((cluster.clone(), topic, partition), stop);
            }
        }
        for s in &mut splits {
            s.stop_offset = stops
                .get(&(s.id.cluster.clone(), s.id.topic.to_string(), s.id.partition))
                .copied();
        }
        Ok(splits)
    }

    /// Keeps a checkpointed position of a split that is not read now, for the
    /// retention window (the checkpoint's own window if it had one).
    fn retain_saved(
        &self,
        cluster: &str,
        s: &crate::checkpoint::SplitCheckpoint,
        saved: &crate::checkpoint::ClusterCheckpoint,
        default_until: i64,
    ) {
        if self.cfg.retention.is_zero() {
            return;
        }
        let split = KafkaSplit {
            id: SplitId::new(cluster, &s.topic, s.partition),
            next_offset: s.next_offset,
            stop_offset: s.stop_offset,
        };
        let until = s.retained_until_ms.unwrap_or(default_until);
        self.retained
            .keep(&split, until, saved.kafka_cluster_id.clone());
    }

    fn broadcast_cluster_info(&self) {
        for (cluster, state) in &self.clusters {
            for tx in self.readers.values() {
                let _ = tx.send(ReaderEvent::ClusterInfo {
                    cluster: cluster.clone(),
                    kafka_cluster_id: state.kafka_cluster_id.clone(),
                    initial_discovery_done: true,
                });
            }
        }
    }

    /// Discovers new partitions on every cluster, concurrently. At start-up
    /// (`strict`) any failure is returned; later, a failing cluster is reported and
    /// retried at the next discovery while the others go on.
    async fn discover_all(&mut self, strict: bool) -> Result<Vec<KafkaSplit>, SourceError> {
        let mut tasks = tokio::task::JoinSet::new();
        for (cluster, state) in &self.clusters {
            let d = Discovery {
                cluster: cluster.clone(),
                client: state.client.clone(),
                topics: state.topics.clone(),
                known: state.known.clone(),
                start: state.start.clone(),
                stop: state.stop.clone(),
                initial_discovery_done: state.initial_discovery_done,
                new_start: self.cfg.new_partition_start.clone(),
            };
            tasks.spawn_blocking(move || {
                let r = discover_blocking(&d);
                (d.cluster, r)
            });
        }
        let mut out = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (cluster, result) =
                joined.map_err(|e| SourceError::Config(format!("discovery task failed: {e}")))?;
            match result {
                Ok((splits, missing)) => {
                    self.said.discovery_failed.remove(&cluster);
                    if missing.is_empty() {
                        self.said.missing_topics.remove(&cluster);
                    } else if self.said.missing_topics.get(&cluster) != Some(&missing) {
                        tracing::warn!(cluster = %cluster, ?missing, "topics not found on the cluster (yet); looking again at each discovery (said again only when this changes)");
                        self.said.missing_topics.insert(cluster.clone(), missing);
                    }
                    if let Some(state) = self.clusters.get_mut(&cluster) {
                        state.initial_discovery_done = true;
                        for s in &splits {
                            state.known.insert((s.id.topic.to_string(), s.id.partition));
                        }
                    }
                    out.extend(splits);
                }
                Err(e) if strict => return Err(e),
                Err(e) => {
                    let active = self
                        .service
                        .is_cluster_active(&cluster)
                        .await
                        .unwrap_or(true);
                    let text = e.to_string();
                    if active && self.said.discovery_failed.get(&cluster) != Some(&text) {
                        tracing::warn!(cluster = %cluster, error = %e, "partition discovery failed; retrying at each interval (said again only when the error changes)");
                        self.said.discovery_failed.insert(cluster.clone(), text);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Assigns splits to live readers and sends them, grouped by reader and cluster.
    fn hand_out(&mut self, mut splits: Vec<KafkaSplit>) {
        splits.append(&mut self.unassigned);
        if splits.is_empty() {
            return;
        }
        let alive: Vec<usize> = self.readers.keys().copied().collect();
        let ids: Vec<SplitId> = splits.iter().map(|s| s.id.clone()).collect();
        let chosen: BTreeMap<SplitId, usize> =
            assign(&self.owners, &ids, &alive, self.cfg.strategy)
                .into_iter()
                .collect();
        let mut per_reader: BTreeMap<(usize, Arc<str>), Vec<KafkaSplit>> = BTreeMap::new();
        for s in splits {
            match chosen.get(&s.id) {
                Some(r) => {
                    self.owners.insert(s.id.clone(), *r);
                    per_reader
                        .entry((*r, s.id.cluster.clone()))
                        .or_default()
                        .push(s);
                }
                None if self.owners.contains_key(&s.id) => {}
                None => self.unassigned.push(s),
            }
        }
        for ((reader, cluster), splits) in per_reader {
            let Some(state) = self.clusters.get(&cluster) else {
                continue;
            };
            if let Some(tx) = self.readers.get(&reader) {
                tracing::debug!(reader, cluster = %cluster, count = splits.len(), "assigning splits");
                let _ = tx.send(ReaderEvent::Assign {
                    cluster: cluster.clone(),
                    properties: state.reader_props.clone(),
                    splits,
                });
            }
        }
    }

    fn reader_closed(&mut self, reader: usize, splits: Vec<KafkaSplit>) {
        self.readers.remove(&reader);
        self.owners.retain(|_, r| *r != reader);
        tracing::info!(
            reader,
            splits = splits.len(),
            "reader closed; reassigning its splits"
        );
        let live: Vec<KafkaSplit> = splits
            .into_iter()
            .filter(|s| self.clusters.contains_key(&s.id.cluster))
            .collect();
        self.hand_out(live);
    }

    async fn commit(&self, cp: &Checkpoint) -> Result<(), SourceError> {
        if self.cfg.group_id.is_none() {
            return Err(SourceError::Config(
                "committing offsets needs a group id".into(),
            ));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (cluster, saved) in &cp.clusters {
            let Some(state) = self.clusters.get(cluster.as_str()) else {
                continue;
            };
            let offsets: Vec<(String, i32, i64)> = saved
                .splits
                .iter()
                .filter(|s| s.next_offset >= 0)
                .map(|s| (s.topic.clone(), s.partition, s.next_offset))
                .collect();
            let client = state.client.clone();
            let cluster = cluster.clone();
            tasks.spawn_blocking(move || (cluster.clone(), client.commit(&offsets)));
        }
        let mut failures = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let Ok((cluster, result)) = joined else {
                failures.push("a commit task panicked".to_string());
                continue;
            };
            match result {
                Ok(()) => {
                    metrics::counter!(m::COMMITS_SUCCEEDED, "cluster" => cluster).increment(1)
                }
                Err(e) => {
                    metrics::counter!(m::COMMITS_FAILED, "cluster" => cluster).increment(1);
                    failures.push(e.to_string());
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SourceError::Cluster {
                cluster: "commit".into(),
                message: failures.join("; "),
            })
        }
    }

    /// Clusters of `views` the service does not report inactive become the active set
    /// (readers drop the errors of the others).
    async fn refresh_active(&self, views: &BTreeMap<String, ClusterView>) {
        let mut active = BTreeSet::new();
        for cluster in views.keys() {
            if self
                .service
                .is_cluster_active(cluster)
                .await
                .unwrap_or(true)
            {
                active.insert(cluster.clone());
            }
        }
        self.active.set(active);
    }

    /// Reads the metadata again and applies what changed.
    async fn refresh_metadata(&mut self) {
        let streams = match subscribed_streams(&self.cfg, self.service.as_ref(), false).await {
            Ok(s) => {
                if self.metadata_failures > 0 {
                    tracing::debug!(
                        failures = self.metadata_failures,
                        "metadata service answers again"
                    );
                }
                self.metadata_failures = 0;
                s
            }
            Err(SourceError::Metadata(e)) => {
                self.metadata_failures += 1;
                let threshold = self.cfg.metadata_failure_threshold;
                // Debug only: the service says why itself (the file service warns once
                // per new error, the CLI prints its own line), and past the threshold
                // the readers return the error.
                tracing::debug!(failures = self.metadata_failures, threshold, error = %e, "metadata service failed; keeping the last good metadata");
                if self.metadata_failures > threshold {
                    for tx in self.readers.values() {
                        let _ = tx.send(ReaderEvent::MetadataFailed(e.clone()));
                    }
                }
                return;
            }
            Err(other) => {
                // Not produced without `strict`; kept total rather than panicking.
                tracing::warn!(error = %other, "metadata refresh failed");
                return;
            }
        };
        self.report_missing(&streams);
        let mut new_views = clusters_of_streams(streams.values());
        // Errors of clusters leaving (or reported inactive) are dropped from now on,
        // before the plan closes their consumers.
        self.refresh_active(&new_views).await;
        let mut p = plan(&self.views, &new_views);
        let held = self.hold_back(&mut p, &mut new_views);
        if p.is_empty() {
            self.streams = applied_streams(&self.streams, streams, &held, |_| true);
            return;
        }
        let began = std::time::Instant::now();
        tracing::debug!(
            added = ?p.clusters_added.keys().collect::<Vec<_>>(),
            removed = ?p.clusters_removed,
            changed = ?p.clusters_changed.keys().collect::<Vec<_>>(),
            "applying a metadata change"
        );
        self.apply_plan(p, &new_views).await;
        // Added clusters that could not be reached are planned again at the next read,
        // and said then.
        let applied = applied_streams(&self.streams, streams, &held, |c| {
            self.views.contains_key(c)
        });
        for line in change_lines(&self.streams, &applied, &self.split_counts()) {
            tracing::info!(target: CHANGES_TARGET, "{line}");
        }
        self.streams = applied;
        self.generation += 1;
        metrics::gauge!(m::METADATA_GENERATION).set(self.generation as f64);
        metrics::counter!(m::RECONCILIATIONS).increment(1);
        metrics::histogram!(m::RECONCILIATION_SECONDS).record(began.elapsed().as_secs_f64());
    }

    /// Takes out of `p` the property changes of clusters rebuilt less than the rebuild
    /// interval ago (dropping a cluster's entry when nothing else of it changed), keeps
    /// their old properties in `new_views` (so the views recorded as applied still
    /// differ from the metadata, and the next plan finds the change again), and
    /// schedules a metadata read for when the first of them may be applied.
    /// Returns the clusters whose property change was held back.
    fn hold_back(
        &mut self,
        p: &mut Plan,
        new_views: &mut BTreeMap<String, ClusterView>,
    ) -> BTreeSet<String> {
        let now = tokio::time::Instant::now();
        let mut held = BTreeSet::new();
        for (cluster, change) in p.clusters_changed.iter_mut() {
            if !change.properties_changed {
                continue;
            }
            let Some(due) = self
                .last_rebuild
                .get(cluster.as_str())
                .map(|at| *at + self.cfg.rebuild_interval)
                .filter(|due| *due > now)
            else {
                continue;
            };
            change.properties_changed = false;
            if let (Some(old), Some(new)) = (self.views.get(cluster), new_views.get_mut(cluster)) {
                new.properties = old.properties.clone();
            }
            self.held_back_until = Some(self.held_back_until.map_or(due, |h| h.min(due)));
            tracing::debug!(cluster, "property change held back by the rebuild interval");
            held.insert(cluster.clone());
        }
        p.clusters_changed.retain(|_, change| !change.is_empty());
        held
    }

    /// Warns when the subscribed stream ids the metadata lacks change (not at every
    /// read while they stay missing).
    fn report_missing(&mut self, found: &BTreeMap<String, KafkaStream>) {
        let Subscription::Ids(ids) = &self.cfg.subscription else {
            return;
        };
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !found.contains_key(*id))
            .cloned()
            .collect();
        if missing != self.missing_streams {
            if !missing.is_empty() {
                tracing::warn!(?missing, "subscribed streams are no longer in the metadata");
            }
            self.missing_streams = missing;
        }
    }

    /// Splits per topic of every cluster whose partitions were discovered.
    fn split_counts(&self) -> BTreeMap<String, BTreeMap<String, usize>> {
        let mut out: BTreeMap<String, BTreeMap<String, usize>> = self
            .clusters
            .iter()
            .filter(|(_, state)| state.initial_discovery_done)
            .map(|(cluster, _)| (cluster.to_string(), BTreeMap::new()))
            .collect();
        let ids = self
            .owners
            .keys()
            .chain(self.unassigned.iter().map(|s| &s.id));
        for id in ids {
            if let Some(topics) = out.get_mut(&*id.cluster) {
                *topics.entry(id.topic.to_string()).or_default() += 1;
            }
        }
        out
    }

    fn reader_props(&self, view: &ClusterView) -> ClientProperties {
        let mut props = self.cfg.properties.merged_with(&view.properties);
        if let Some(g) = &self.cfg.group_id {
            props.set("group.id", g.clone());
        }
        props
    }

    /// Tells each owner to forget the splits matching `which`; forgets them here too.
    fn remove_splits(&mut self, which: impl Fn(&SplitId) -> bool) {
        let mut per_reader: BTreeMap<usize, Vec<SplitId>> = BTreeMap::new();
        for (id, owner) in &self.owners {
            if which(id) {
                per_reader.entry(*owner).or_default().push(id.clone());
            }
        }
        self.owners.retain(|id, _| !which(id));
        self.unassigned.retain(|s| !which(&s.id));
        let retain_until_ms = (!self.cfg.retention.is_zero())
            .then(|| crate::retention::now_ms() + self.cfg.retention.as_millis() as i64);
        for (reader, ids) in per_reader {
            if let Some(tx) = self.readers.get(&reader) {
                let _ = tx.send(ReaderEvent::Remove {
                    ids,
                    retain_until_ms,
                });
            }
        }
    }

    /// Applies a plan: clusters the plan does not name are not touched.
    async fn apply_plan(&mut self, p: Plan, new_views: &BTreeMap<String, ClusterView>) {
        for cluster in &p.clusters_removed {
            let key: Arc<str> = Arc::from(cluster.as_str());
            self.remove_splits(|id| id.cluster == key);
            self.last_rebuild.remove(&key);
            if let Some(state) = self.clusters.remove(&key) {
                // Closing a client blocks.
                tokio::task::spawn_blocking(move || drop(state));
            }
            for tx in self.readers.values() {
                let _ = tx.send(ReaderEvent::ForgetCluster {
                    cluster: key.clone(),
                });
            }
            self.views.remove(cluster);
            metrics::gauge!(m::CLUSTER_ACTIVE, "cluster" => cluster.clone()).set(0.0);
        }
        for (cluster, change) in &p.clusters_changed {
            let key: Arc<str> = Arc::from(cluster.as_str());
            let view = &new_views[cluster];
            if !change.topics_removed.is_empty() {
                let removed = &change.topics_removed;
                self.remove_splits(|id| id.cluster == key && removed.contains(&*id.topic));
            }
            let props = self.reader_props(view);
            let Some(state) = self.clusters.get_mut(&key) else {
                continue;
            };
            state
                .known
                .retain(|(t, _)| !change.topics_removed.contains(t));
            state.topics = view.topics.clone();
            if change.offsets_changed {
                state.start = view
                    .starting_offsets
                    .clone()
                    .unwrap_or_else(|| self.cfg.starting.clone());
                state.stop = view
                    .stopping_offsets
                    .clone()
                    .or_else(|| self.cfg.stopping.clone());
            }
            if change.properties_changed {
                tracing::info!(
                    cluster,
                    "properties changed: rebuilding the cluster's clients at their positions"
                );
                self.last_rebuild
                    .insert(key.clone(), tokio::time::Instant::now());
                let (c, pr, g, t) = (
                    key.clone(),
                    props.clone(),
                    self.cfg.group_id.clone(),
                    self.cfg.client_timeout,
                );
                let h =
                    crate::client_context::ClientSetup::new(self.cfg.client_hooks.as_ref(), &key);
                match tokio::task::spawn_blocking(move || {
                    ClusterClient::new(c, &pr, g.as_deref(), t, h)
                })
                .await
                {
                    Ok(Ok(client)) => {
                        let old = std::mem::replace(&mut state.client, Arc::new(client));
                        tokio::task::spawn_blocking(move || drop(old));
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(cluster, error = %e, "cannot rebuild the lookup client; keeping the old one")
                    }
                    Err(e) => tracing::warn!(cluster, error = %e, "client rebuild task failed"),
                }
                state.reader_props = props.clone();
                let owners: std::collections::BTreeSet<usize> = self
                    .owners
                    .iter()
                    .filter(|(id, _)| id.cluster == key)
                    .map(|(_, r)| *r)
                    .collect();
                for reader in owners {
                    if let Some(tx) = self.readers.get(&reader) {
                        let _ = tx.send(ReaderEvent::Rebuild {
                            cluster: key.clone(),
                            properties: props.clone(),
                        });
                    }
                }
            }
            self.views.insert(cluster.clone(), view.clone());
        }
        for (cluster, view) in &p.clusters_added {
            let key: Arc<str> = Arc::from(cluster.as_str());
            let props = self.reader_props(view);
            let (c, pr, g, t) = (
                key.clone(),
                props.clone(),
                self.cfg.group_id.clone(),
                self.cfg.client_timeout,
            );
            let h = crate::client_context::ClientSetup::new(self.cfg.client_hooks.as_ref(), &key);
            let connected = tokio::task::spawn_blocking(move || {
                let client = ClusterClient::new(c, &pr, g.as_deref(), t, h)?;
                let id = client.kafka_cluster_id()?;
                Ok::<_, SourceError>((client, id))
            })
            .await;
            match connected {
                Ok(Ok((client, id))) => {
                    self.clusters.insert(
                        key.clone(),
                        ClusterState {
                            reader_props: props,
                            topics: view.topics.clone(),
                            client: Arc::new(client),
                            kafka_cluster_id: Some(id.clone()),
                            initial_discovery_done: false,
                            start: view
                                .starting_offsets
                                .clone()
                                .unwrap_or_else(|| self.cfg.starting.clone()),
                            stop: view
                                .stopping_offsets
                                .clone()
                                .or_else(|| self.cfg.stopping.clone()),
                            known: BTreeSet::new(),
                        },
                    );
                    self.views.insert(cluster.clone(), view.clone());
                    for tx in self.readers.values() {
                        let _ = tx.send(ReaderEvent::ClusterInfo {
                            cluster: key.clone(),
                            kafka_cluster_id: Some(id.clone()),
                            initial_discovery_done: true,
                        });
                    }
                    metrics::gauge!(m::CLUSTER_ACTIVE, "cluster" => cluster.clone()).set(1.0);
                    self.said.unreachable_added.remove(cluster.as_str());
                }
                // Not applied: the next metadata read plans this cluster again.
                Ok(Err(e)) => {
                    let text = e.to_string();
                    if self.said.unreachable_added.get(cluster.as_str()) != Some(&text) {
                        tracing::warn!(cluster, error = %e, "cannot reach an added cluster; retrying at each metadata read (said again only when the error changes)");
                        self.said
                            .unreachable_added
                            .insert(cluster.clone().into(), text);
                    }
                }
                Err(e) => tracing::warn!(cluster, error = %e, "cluster connect task failed"),
            }
        }
        metrics::gauge!(m::CLUSTERS).set(self.clusters.len() as f64);
        let mut splits = self.resume_retained();
        if let Ok(found) = self.discover_all(false).await {
            splits.extend(found);
        }
        self.hand_out(splits);
    }

    /// Takes back retained positions of splits whose cluster and topic are read again,
    /// so they resume where they were rather than at their starting offsets. Positions
    /// recorded for another physical cluster are refused (reported to the readers), or
    /// dropped when the user chose fresh starts.
    fn resume_retained(&mut self) -> Vec<KafkaSplit> {
        let mut out = Vec::new();
        let mut refused: BTreeSet<Arc<str>> = BTreeSet::new();
        for (cluster, state) in self.clusters.iter_mut() {
            let back = self
                .retained
                .take(|id| id.cluster == *cluster && state.topics.contains(&*id.topic));
            for (id, r) in back {
                if let (Some(expected), Some(actual)) =
                    (&r.kafka_cluster_id, &state.kafka_cluster_id)
                    && expected != actual
                {
                    if !self.cfg.discard_mismatched_positions && refused.insert(cluster.clone()) {
                        for tx in self.readers.values() {
                            let _ = tx.send(ReaderEvent::IdentityMismatch {
                                cluster: cluster.clone(),
                                expected: expected.clone(),
                                actual: actual.clone(),
                            });
                        }
                    }
                    continue;
                }
                state.known.insert((id.topic.to_string(), id.partition));
                out.push(KafkaSplit {
                    id,
                    next_offset: r.next_offset,
                    stop_offset: r.stop_offset,
                });
            }
        }
        if !out.is_empty() {
            tracing::info!(count = out.len(), "resuming retained positions");
        }
        out
    }

    /// Runs until every handle is gone.
    pub async fn run(mut self) {
        let interval = if self.cfg.bounded() {
            None
        } else {
            self.cfg.partition_discovery
        };
        let mut ticker = interval.map(|d| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let mut meta_ticker = (!self.cfg.bounded())
            .then_some(self.cfg.metadata_discovery)
            .flatten()
            .map(|d| {
                let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                t
            });
        let mut changes = if meta_ticker.is_some() {
            self.service.changes()
        } else {
            None
        };
        let mut handles_open = true;
        loop {
            tokio::select! {
                _ = async { meta_ticker.as_mut().expect("guarded").tick().await }, if meta_ticker.is_some() => {
                    self.refresh_metadata().await;
                }
                changed = async { changes.as_mut().expect("guarded").changed().await }, if changes.is_some() => {
                    if changed.is_err() {
                        changes = None; // the service stopped notifying; the interval remains
                    } else {
                        self.refresh_metadata().await;
                    }
                }
                _ = tokio::time::sleep_until(self.held_back_until.unwrap_or_else(tokio::time::Instant::now)), if self.held_back_until.is_some() => {
                    self.held_back_until = None;
                    self.refresh_metadata().await;
                }
                cmd = self.commands.recv(), if handles_open => match cmd {
                    Some(Command::Commit(cp, reply)) => {
                        let r = self.commit(&cp).await;
                        let _ = reply.send(r);
                    }
                    // The coordinator is gone; keep discovering for the readers.
                    None => handles_open = false,
                },
                notice = self.notices.recv() => match notice {
                    Some(ReaderNotice::Closed { reader, splits }) => self.reader_closed(reader, splits),
                    None => break,
                },
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    if let Ok(splits) = self.discover_all(false).await {
                        if !splits.is_empty() {
                            tracing::info!(count = splits.len(), "new partitions discovered");
                        }
                        self.hand_out(splits);
                    }
                }
            }
        }
        let _ = self.service.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::ClusterMetadata;

    fn meta(topics: &[&str]) -> ClusterMetadata {
        ClusterMetadata::builder("host:9092")
            .topics(topics.iter().copied())
            .build()
            .unwrap()
    }

    fn streams(list: &[(&str, &[(&str, ClusterMetadata)])]) -> BTreeMap<String, KafkaStream> {
        list.iter()
            .map(|(id, clusters)| {
                let mut s = KafkaStream::new(*id);
                for (c, m) in clusters.iter() {
                    s = s.with_cluster(*c, m.clone());
                }
                (id.to_string(), s)
            })
            .collect()
    }

    fn counts(list: &[(&str, &[(&str, usize)])]) -> BTreeMap<String, BTreeMap<String, usize>> {
        list.iter()
            .map(|(c, topics)| {
                let per_topic = topics.iter().map(|(t, n)| (t.to_string(), *n)).collect();
                (c.to_string(), per_topic)
            })
            .collect()
    }

    #[test]
    fn one_line_per_changed_stream_in_the_order_added_removed_changed() {
        let old = streams(&[
            ("orders", &[("east", meta(&["orders", "orders-v2"]))]),
            ("quiet", &[("east", meta(&["quiet"]))]),
        ]);
        let east = ClusterMetadata::builder("host:9092")
            .topic("orders")
            .property("client.id", "new")
            .build()
            .unwrap();
        let new = streams(&[
            (
                "orders",
                &[("east", east), ("west", meta(&["orders", "more"]))],
            ),
            ("quiet", &[("east", meta(&["quiet"]))]),
        ]);
        let splits = counts(&[
            ("east", &[("orders", 4), ("quiet", 1)]),
            ("west", &[("orders", 2), ("more", 1), ("other", 9)]),
        ]);
        assert_eq!(
            change_lines(&old, &new, &splits),
            [
                "stream orders: + cluster west (3 splits), - topic orders-v2 on east, ~ cluster east properties"
            ]
        );
        assert!(change_lines(&new, &new, &splits).is_empty());
    }

    #[test]
    fn removed_clusters_topics_offsets_new_and_gone_streams() {
        let with_offsets = ClusterMetadata::builder("host:9092")
            .topics(["a", "b"])
            .starting_offsets(StartingOffsets::Latest)
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap();
        let old = streams(&[
            ("s", &[("east", meta(&["a"])), ("west", meta(&["a"]))]),
            ("gone", &[("north", meta(&["x"]))]),
        ]);
        let new = streams(&[
            ("s", &[("east", with_offsets)]),
            ("fresh", &[("south", meta(&["y"]))]),
        ]);
        // South not discovered yet: no count.
        let splits = counts(&[("east", &[("a", 1), ("b", 1)])]);
        assert_eq!(
            change_lines(&old, &new, &splits),
            [
                "stream fresh: new stream, + cluster south",
                "stream gone: gone from the metadata, - cluster north",
                "stream s: - cluster west, + topic b on east (1 split), ~ cluster east starting offsets and stopping offsets",
            ]
        );
    }

    #[test]
    fn applied_streams_leave_out_unreached_clusters_and_held_back_properties() {
        let old = streams(&[("s", &[("east", meta(&["a"]))])]);
        let changed = ClusterMetadata::builder("other:9092")
            .topics(["a", "b"])
            .build()
            .unwrap();
        let new = streams(&[("s", &[("east", changed), ("west", meta(&["a"]))])]);
        let held = BTreeSet::from(["east".to_string()]);
        let applied = applied_streams(&old, new, &held, |c| c != "west");
        let east = &applied["s"].clusters["east"];
        assert_eq!(east.properties, old["s"].clusters["east"].properties);
        assert_eq!(east.topics.len(), 2, "topics are applied");
        assert!(!applied["s"].clusters.contains_key("west"));
        // What is said now: the topic; the rest when it is applied.
        assert_eq!(
            change_lines(&old, &applied, &BTreeMap::new()),
            ["stream s: + topic b on east"]
        );
    }
}
