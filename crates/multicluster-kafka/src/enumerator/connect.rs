//! Connecting to clusters off the enumerator's path: each cluster to be read is
//! connected on a blocking thread of its own, and the answer comes back to the run
//! loop. A cluster that does not answer is tried again with backoff, by itself, while
//! the others are read; one whose properties librdkafka refuses waits for the next
//! change of its metadata.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;

use super::clients::client;
use super::cluster::{ClusterState, WantedCluster};
use super::spare::Spare;
use super::{Enumerator, START_GRACE};
use crate::base::plan::ClusterView;
use crate::base::properties::ClientProperties;
use crate::base::protocol::ReaderEvent;
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;
use crate::kafka::client::{close_detached, detached};
use crate::metrics as m;

/// What a connection attempt gave.
pub(super) enum Connected {
    /// The cluster answered with its Kafka `cluster.id`.
    Answered(ClusterClient, String),
    /// librdkafka refused the client (a property): tried again only when the
    /// cluster's metadata changes.
    Refused(SourceError),
    /// The cluster did not answer: tried again after a backoff.
    NoAnswer(SourceError),
    /// The cluster answered and refused the client (authentication or TLS failed):
    /// fatal where start-up waits for every cluster, else tried again after a backoff
    /// (the cluster's side may be fixed).
    Rejected(SourceError),
}

impl Connected {
    /// The client and Kafka cluster.id of an answer; else the error, and whether to
    /// try again after a backoff (not for a client librdkafka refused).
    fn into_answer(self) -> Result<(ClusterClient, String), (SourceError, bool)> {
        match self {
            Connected::Answered(client, id) => Ok((client, id)),
            Connected::Refused(e) => Err((e, false)),
            Connected::NoAnswer(e) | Connected::Rejected(e) => Err((e, true)),
        }
    }
}

/// The clusters of the metadata not read yet, and the attempts to connect them.
#[derive(Default)]
pub(super) struct Connecting {
    /// Clusters of the metadata not read yet: being connected, or waiting to be
    /// tried again.
    pending: BTreeMap<Arc<str>, Pending>,
    /// The running connection attempts.
    attempts: JoinSet<(Arc<str>, Connected)>,
    /// A start that waits for every cluster is under way (what a cluster that cannot
    /// be reached is told).
    waiting_at_start: bool,
    /// The clusters not answering that were said so, with their last error (empty
    /// before the first one): said again only when the error changes.
    unreachable: BTreeMap<Arc<str>, String>,
}

impl Connecting {
    /// How many clusters of the metadata are not read yet.
    pub(super) fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Whether `cluster` is in the metadata but not read yet.
    pub(super) fn is_pending(&self, cluster: &str) -> bool {
        self.pending.contains_key(cluster)
    }

    /// Whether an attempt runs.
    pub(super) fn attempting(&self) -> bool {
        !self.attempts.is_empty()
    }

    /// The answer of the next attempt that ends (`None` when none runs).
    pub(super) async fn next_answer(&mut self) -> Option<Result<(Arc<str>, Connected), JoinError>> {
        self.attempts.join_next().await
    }

    /// Says, once, of each cluster being tried that it has not answered yet, and that
    /// the run starts once it does and `until`.
    pub(super) fn say_no_answer_yet(&mut self, until: &str) {
        for (cluster, p) in &self.pending {
            if p.in_flight && !self.unreachable.contains_key(cluster) {
                let bootstrap = p.view.properties.shown("bootstrap.servers").unwrap_or("?");
                tracing::warn!(cluster = %cluster, bootstrap, "no answer from a cluster yet; the run starts once every cluster answers, and {until}");
                self.unreachable.insert(cluster.clone(), String::new());
            }
        }
    }

    /// Says of each cluster still being tried that the run starts without it.
    pub(super) fn say_left_behind(&mut self) {
        for (cluster, p) in &self.pending {
            if p.in_flight {
                tracing::warn!(cluster = %cluster, "no answer from a cluster within {:?} of the others; reading them and taking it up when it answers", START_GRACE);
                self.unreachable.insert(cluster.clone(), String::new());
            }
        }
    }

    /// The error of a start whose clusters did not all answer within `timeout`: it
    /// names the first pending cluster, its bootstrap list and its last error.
    pub(super) fn no_answer_within(&self, timeout: Duration) -> SourceError {
        let (cluster, p) = self
            .pending
            .iter()
            .next()
            .expect("the loop runs while some are pending");
        let bootstrap = p.view.properties.shown("bootstrap.servers").unwrap_or("?");
        let last = self
            .unreachable
            .get(cluster)
            .filter(|e| !e.is_empty())
            .map_or_else(|| "no answer yet".to_string(), Clone::clone);
        // The error's text names the cluster already, as this one does.
        let prefix = format!("cluster `{cluster}`: ");
        let last = last.strip_prefix(&prefix).unwrap_or(&last).to_string();
        let others = self.pending.len() - 1;
        SourceError::Cluster {
            cluster: cluster.to_string(),
            message: format!(
                "did not answer within the start-up timeout of {timeout:?} (bootstrap {bootstrap}){}: {last}",
                if others > 0 {
                    format!(", nor did {others} other cluster(s)")
                } else {
                    String::new()
                },
            ),
        }
    }

    /// The pending cluster `cluster`.
    #[cfg(test)]
    pub(super) fn pending(&self, cluster: &str) -> &Pending {
        &self.pending[cluster]
    }

    /// Whether no cluster is pending and none is said to be unreachable.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.unreachable.is_empty()
    }

    /// The last error said of `cluster`, if it was said to be unreachable.
    #[cfg(test)]
    pub(super) fn said_unreachable(&self, cluster: &str) -> Option<&str> {
        self.unreachable.get(cluster).map(String::as_str)
    }

    /// Makes `cluster` pending with an attempt at `view` running, as
    /// [`Enumerator::want_cluster`] does, without starting one.
    #[cfg(test)]
    pub(super) fn attempt_as_if(
        &mut self,
        cluster: Arc<str>,
        view: ClusterView,
        tried: ClientProperties,
    ) {
        self.pending.insert(
            cluster,
            Pending {
                view,
                in_flight: true,
                failures: 0,
                retry_at: None,
                tried: Some(tried),
                spare: Spare::default(),
            },
        );
    }

    /// Marks the attempt at `cluster` as running (one ended in a test, another began).
    #[cfg(test)]
    pub(super) fn set_in_flight(&mut self, cluster: &str) {
        if let Some(p) = self.pending.get_mut(cluster) {
            p.in_flight = true;
        }
    }

    /// Says that `cluster` does not answer, with `text` as its last error.
    #[cfg(test)]
    pub(super) fn say_unreachable(&mut self, cluster: Arc<str>, text: &str) {
        self.unreachable.insert(cluster, text.to_string());
    }
}

/// A cluster of the metadata that is not being read yet.
pub(super) struct Pending {
    /// Its metadata, as last read.
    view: ClusterView,
    /// An attempt is running.
    in_flight: bool,
    /// Failed attempts in a row.
    failures: u32,
    /// When to try again (`None`: not scheduled).
    retry_at: Option<Instant>,
    /// The client properties of the last attempt (`None`: none made yet). An answer
    /// to properties the metadata changed meanwhile is not taken.
    tried: Option<ClientProperties>,
    /// The client of the last attempt that got no answer, tried again by the next
    /// attempt (while the properties stay the same) rather than made anew: a cluster
    /// down for hours costs one client, not a client and its threads per attempt.
    spare: Spare,
}

#[cfg(test)]
impl Pending {
    /// Its metadata, as last read.
    pub(super) fn view(&self) -> &ClusterView {
        &self.view
    }

    /// Whether an attempt is running.
    pub(super) fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// Failed attempts in a row.
    pub(super) fn failures(&self) -> u32 {
        self.failures
    }

    /// When it is tried again (`None`: not scheduled).
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Closing a client blocks.
        self.spare.discard();
    }
}

/// The wait before attempt `failures + 1`: 1 s, doubled per failure, at most 30 s.
pub(super) fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(5);
    Duration::from_secs(secs.min(30))
}

impl Enumerator {
    /// Wants `cluster` read with `view`: starts connecting unless an attempt is running
    /// or scheduled. A cluster refused for its properties is tried again only when its
    /// view changed.
    pub(super) fn want_cluster(&mut self, cluster: Arc<str>, view: ClusterView) {
        let p = self
            .connecting
            .pending
            .entry(cluster.clone())
            .or_insert(Pending {
                view: view.clone(),
                in_flight: false,
                failures: 0,
                retry_at: Some(Instant::now()),
                tried: None,
                spare: Spare::default(),
            });
        if p.view != view {
            p.view = view;
            if !p.in_flight {
                p.retry_at = Some(Instant::now());
            }
        }
        if !p.in_flight && p.retry_at.is_some_and(|at| at <= Instant::now()) {
            self.start_connect(&cluster);
        }
    }

    /// Forgets pending clusters no longer in the metadata (a late answer is dropped).
    pub(super) fn unwant_clusters(&mut self, wanted: impl Fn(&str) -> bool) {
        self.connecting.pending.retain(|c, _| wanted(c));
        self.connecting.unreachable.retain(|c, _| wanted(c));
    }

    /// Starts an attempt for a pending cluster.
    fn start_connect(&mut self, cluster: &Arc<str>) {
        let Some(p) = self.connecting.pending.get_mut(cluster) else {
            return;
        };
        p.in_flight = true;
        p.retry_at = None;
        let wanted = WantedCluster::new(&self.cfg, &p.view);
        if p.tried.as_ref() != Some(&wanted.props) {
            // A client made for other properties is not the one wanted now.
            p.spare.discard();
        }
        p.tried = Some(wanted.props.clone());
        let make = client(&self.cfg, self.links.clients(), cluster, &wanted.props);
        let spare = p.spare.clone();
        let cluster = cluster.clone();
        self.connecting.attempts.spawn(detached(move || {
            let made = match spare.take() {
                Some(client) => Ok(client),
                None => make(),
            };
            let connected = match made {
                Err(e) => Connected::Refused(e),
                // Ends at librdkafka's first error: a start says why it waits, and
                // the cluster is tried again with backoff.
                Ok(client) => match client.first_contact() {
                    Ok(id) => Connected::Answered(client, id),
                    Err(e) => {
                        // librdkafka goes on connecting it in the background.
                        let rejected = client.rejected();
                        spare.put(client);
                        if rejected {
                            Connected::Rejected(e)
                        } else {
                            Connected::NoAnswer(e)
                        }
                    }
                },
            };
            (cluster, connected)
        }));
    }

    /// The earliest scheduled retry.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        self.connecting
            .pending
            .values()
            .filter_map(|p| p.retry_at)
            .min()
    }

    /// Starts the attempts that are due.
    pub(super) fn retry_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Arc<str>> = self
            .connecting
            .pending
            .iter()
            .filter(|(_, p)| !p.in_flight && p.retry_at.is_some_and(|at| at <= now))
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in due {
            self.start_connect(&cluster);
        }
    }

    /// Takes an attempt's answer. Returns whether the cluster is now read; an error
    /// is returned only when `fatal` says this failure ends the source.
    pub(super) fn connected(
        &mut self,
        cluster: Arc<str>,
        connected: Connected,
        fatal: impl Fn(&Connected) -> bool,
    ) -> Result<bool, SourceError> {
        if !self.connecting.pending.contains_key(&cluster) {
            // Left the metadata meanwhile; closing a client blocks.
            close_detached(connected);
            return Ok(false);
        }
        if self.properties_changed_since_tried(&cluster) {
            // The metadata changed the cluster's properties while the attempt ran: its
            // answer (a client, or why there is none) is for the old ones.
            close_detached(connected);
            if let Some(p) = self.connecting.pending.get_mut(&cluster) {
                p.in_flight = false;
            }
            self.start_connect(&cluster);
            return Ok(false);
        }
        let is_fatal = fatal(&connected);
        let rejected = matches!(connected, Connected::Rejected(_));
        let (client, id) = match connected.into_answer() {
            Ok(answer) => answer,
            Err((e, _)) if is_fatal => return Err(e),
            Err((e, retry)) => {
                self.connect_failed(&cluster, e, retry, rejected);
                return Ok(false);
            }
        };
        let view = self
            .connecting
            .pending
            .remove(&cluster)
            .expect("checked above")
            .view
            .clone();
        if self.connecting.unreachable.remove(&cluster).is_some() {
            tracing::info!(cluster = %cluster, "cluster answers; reading it");
        }
        let wanted = WantedCluster::new(&self.cfg, &view);
        self.readers.tell_all(|| ReaderEvent::ClusterInfo {
            cluster: cluster.clone(),
            kafka_cluster_id: Some(id.clone()),
            // Said once its partitions were listed (see `take_discovery`).
            initial_discovery_done: false,
        });
        self.clusters.insert(
            cluster.clone(),
            ClusterState::new(wanted, Arc::new(client), id),
        );
        self.applied.read(&cluster, view);
        metrics::gauge!(m::CLUSTER_ACTIVE, "cluster" => cluster.to_string()).set(1.0);
        metrics::gauge!(m::CLUSTERS).set(self.clusters.len() as f64);
        Ok(true)
    }

    /// How a start that waits for every cluster ends for one that does not answer.
    pub(super) fn start_wait_words(&self) -> String {
        match self.cfg.startup_timeout {
            Some(t) => format!("fails if it does not answer within the start-up timeout of {t:?}"),
            None => "waits as long as it takes (no start-up timeout)".to_string(),
        }
    }

    /// Whether a pending cluster's client properties differ from its last attempt's.
    fn properties_changed_since_tried(&self, cluster: &Arc<str>) -> bool {
        self.connecting.pending.get(cluster).is_some_and(|p| {
            p.tried
                .as_ref()
                .is_some_and(|tried| *tried != WantedCluster::new(&self.cfg, &p.view).props)
        })
    }

    /// Says a failed attempt (once per distinct error) and schedules the next one.
    /// `rejected`: the cluster answered and refused the client.
    fn connect_failed(&mut self, cluster: &Arc<str>, e: SourceError, retry: bool, rejected: bool) {
        let Some(p) = self.connecting.pending.get_mut(cluster) else {
            return;
        };
        p.in_flight = false;
        p.failures += 1;
        p.retry_at = retry.then(|| Instant::now() + backoff(p.failures));
        let bootstrap = p
            .view
            .properties
            .shown("bootstrap.servers")
            .unwrap_or("?")
            .to_string();
        let text = e.to_string();
        let said = self.connecting.unreachable.get(cluster);
        if said.is_none_or(|said| same_error(said) != same_error(&text)) {
            let what = if rejected {
                "a cluster refuses the client (credentials or certificates)"
            } else {
                "cannot reach a cluster"
            };
            if retry && self.connecting.waiting_at_start {
                // A start that waits for every cluster reads none before they answer.
                let until = self.start_wait_words();
                tracing::warn!(cluster = %cluster, bootstrap, error = %e, "{what}; the run starts once every cluster answers, tries this one again with backoff, and {until} (said again only when the error changes)");
            } else if retry {
                tracing::warn!(cluster = %cluster, bootstrap, error = %e, "{what}; reading the others and trying it again with backoff (said again only when the error changes)");
            } else {
                tracing::warn!(cluster = %cluster, bootstrap, error = %e, "cannot make a client for a cluster; reading the others and trying it again when its metadata changes");
            }
        }
        // The latest text, for a start-up that gives up on the cluster.
        self.connecting.unreachable.insert(cluster.clone(), text);
    }

    /// Waits for the clusters at start. A client librdkafka refuses is a
    /// configuration error, fatal in any run. With a start-up timeout (bounded runs
    /// have one by default) every cluster must answer within it, tried again with
    /// backoff meanwhile; the first that did not fails the start, named with its
    /// bootstrap list and last error. Without one (follow runs by default) the source
    /// starts with the clusters that answered, [`START_GRACE`] after the first one
    /// did, and takes the others up in the background when they answer.
    pub(super) async fn connect_at_start(&mut self) -> Result<(), SourceError> {
        let wait_all = self.cfg.bounded() || self.cfg.startup_timeout.is_some();
        let give_up = self.cfg.startup_timeout.map(|t| Instant::now() + t);
        self.connecting.waiting_at_start = wait_all;
        let waited = self.connect_all_at_start(wait_all, give_up).await;
        self.connecting.waiting_at_start = false;
        waited
    }
}

/// An error's text without its numbers and without librdkafka's count of the
/// identical errors it suppressed: the count (absent the first time) and the
/// milliseconds spent change at every attempt while the error stays the same.
fn same_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out.replace(", # identical error(s) suppressed", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_that_differ_only_in_librdkafka_s_counts_are_the_same_error() {
        let at = |n: u32| {
            format!(
                "Connect to ipv4#127.0.0.1:42743 failed: Connection refused (after {n}ms in state CONNECT, {} identical error(s) suppressed)",
                n * 7
            )
        };
        assert_eq!(same_error(&at(0)), same_error(&at(2471)));
        assert_eq!(
            same_error(&at(3)),
            same_error(
                "Connect to ipv4#127.0.0.1:42743 failed: Connection refused (after 3ms in state CONNECT)"
            )
        );
        assert_ne!(
            same_error(&at(1)),
            same_error("Connect to ipv4#127.0.0.1:42743 failed: Connection timed out")
        );
    }

    #[test]
    fn backoff_doubles_from_one_second_and_stops_at_thirty() {
        let waits: Vec<u64> = (1..=8).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(30));
    }
}
