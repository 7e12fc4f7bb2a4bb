//! The native fetch path: a cluster's records fetched with the source's own Kafka
//! connections ([`multicluster_kafka_client::cluster`], on the source's tokio runtime) and
//! decoded on the fetch thread, in place from the fetch answers, a partition at a
//! time ([`PartitionReader`]). Chosen per cluster by `fetch.backend`
//! ([`choose`]); docs/native-fetch.md says what it supports.

mod arrivals;
mod poll;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::offsets::OffsetReset;
use crate::base::properties::FETCH_SHARE;
use crate::base::split::SplitId;
use crate::error::SourceError;
use crate::native::settings::{self, Given};
use multicluster_kafka_client::cluster::{
    Arrival, ClusterFetch, ClusterOptions, OutOfRange, PartKey,
};
use multicluster_kafka_client::{PartitionOptions, PartitionReader};

use super::fetch_path::Opening;
use super::staging::{Slot, Staging};

/// What the native settings of `opening`'s cluster depend on.
fn given<'a>(opening: &'a Opening<'_>) -> Given<'a> {
    Given {
        cluster: &opening.cluster,
        props: opening.props,
        hooks: opening.hooks.as_ref(),
        runtime: opening.runtime.is_some(),
    }
}

/// Which path a cluster's fetcher takes: `Ok(true)` for the native one
/// ([`settings::choose`]).
pub(crate) fn choose(opening: &Opening<'_>) -> Result<bool, SourceError> {
    settings::choose(&given(opening))
}

/// The cluster's fetch settings from its properties, and the read policy; with the
/// size from which values are shared.
fn options(
    opening: &Opening<'_>,
) -> Result<(ClusterOptions, PartitionOptions, usize), SourceError> {
    let settings = settings::settings(&given(opening))?;
    let out_of_range = match opening.policy.out_of_range {
        OffsetReset::Earliest => OutOfRange::Earliest,
        OffsetReset::Latest => OutOfRange::Latest,
        _ => OutOfRange::Fail,
    };
    let cluster = ClusterOptions {
        cluster: opening.cluster.clone(),
        bootstrap: settings.bootstrap,
        connect: settings.connect,
        partition_max_bytes: settings.partition_max_bytes,
        fetch: settings.fetch,
        budget: settings.budget,
        shared_budget: opening.clients.native_budget(),
        out_of_range,
        lanes: settings.lanes,
        errors: settings.errors,
    };
    // Held records are read long after they were fetched: a copy would be written
    // now and read from memory gone cold by then, so values stay in the answers.
    let share_from = if opening.held && opening.props.get(FETCH_SHARE).is_none() {
        1
    } else {
        settings.share_from
    };
    Ok((cluster, settings.partition, share_from))
}
/// A partition as the fetch thread reads it. Arrivals of an assignment it no
/// longer has (removed, added again, sought) never reach it: the cluster's fetch
/// drops them ([`ClusterFetch::take`]).
struct Reading {
    reader: PartitionReader,
    stop: Option<i64>,
}

/// The native path of one cluster for one fetcher.
pub(crate) struct NativeFetch {
    cluster: Arc<str>,
    fetch: ClusterFetch,
    parts: HashMap<PartKey, Reading>,
    topics: HashMap<String, Arc<str>>,
    options: PartitionOptions,
    include_headers: bool,
    /// Values of this many bytes or more are shared from the answers they came in,
    /// smaller ones copied (`fetch.share.min.bytes`).
    share_from: usize,
    /// What polls took and did not hand out: an answer taken in part, records past
    /// a poll's limit or after a failure.
    staging: Staging<Arrival>,
    slots: Vec<Slot>,
    /// Splits whose log was truncated since the last poll, with the offset fetched
    /// up to then (for [`Polled::truncated`](super::fetch_path::Polled::truncated)).
    truncated: Vec<(SplitId, i64)>,
    last_lag_report: Instant,
}

/// How often per-split lag is reported.
const LAG_REPORT_INTERVAL: Duration = Duration::from_secs(1);

impl NativeFetch {
    pub fn open(opening: Opening<'_>) -> Result<Self, SourceError> {
        let (cluster_options, options, share_from) = options(&opening)?;
        if cluster_options.bootstrap.is_empty() {
            return Err(SourceError::Kafka {
                cluster: opening.cluster.to_string(),
                message: "no bootstrap.servers".into(),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
        let runtime = opening
            .runtime
            .clone()
            .ok_or_else(|| SourceError::Cluster {
                cluster: opening.cluster.to_string(),
                message: "the native fetch path needs a tokio runtime".into(),
            })?;
        let wake = opening.wake.clone();
        let properties = opening
            .props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fetch = opening.clients.native_fetches().join(
            &runtime,
            properties,
            cluster_options,
            Box::new(move || wake.wake()),
        );
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => opening.cluster.to_string())
            .increment(1);
        tracing::debug!(cluster = %opening.cluster, "fetching natively");
        Ok(Self {
            cluster: opening.cluster,
            fetch,
            parts: HashMap::new(),
            topics: HashMap::new(),
            options,
            include_headers: opening.include_headers,
            share_from,
            staging: Staging::default(),
            slots: Vec::new(),
            truncated: Vec::new(),
            last_lag_report: Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(Instant::now),
        })
    }

    fn topic(&mut self, name: &str) -> Arc<str> {
        if let Some(t) = self.topics.get(name) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(name);
        self.topics.insert(name.to_string(), t.clone());
        t
    }

    fn split_id(&self, key: &PartKey) -> SplitId {
        SplitId {
            cluster: self.cluster.clone(),
            topic: key.0.clone(),
            partition: key.1,
        }
    }
}
