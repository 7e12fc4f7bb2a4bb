//! Which clusters the native path serves, and its settings from a cluster's client
//! properties (librdkafka's names and defaults): for the readers' fetches
//! (`reader/native_fetch/`) and the enumerator's lookups alike.
//!
//! Its parts: the choice of path ([`backend`]), the settings made from the
//! properties ([`fetch`]), the cluster's TLS and SASL ([`security`]) and its
//! OAUTHBEARER tokens ([`tokens`]).

use std::sync::Arc;

use crate::base::hooks::ClientHooks;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;

use multicluster_kafka_client::Listener;
use multicluster_kafka_client::calls::FetchSettings;
use multicluster_kafka_client::conn::ConnectOptions;
use multicluster_kafka_client::partition::PartitionOptions;

mod backend;
mod fetch;
mod security;
mod tokens;

pub(crate) use backend::{check, choose, serves};
pub(crate) use fetch::settings;

/// What the choice of a cluster's path depends on.
pub(crate) struct Given<'a> {
    pub cluster: &'a Arc<str>,
    pub props: &'a ClientProperties,
    /// The client hooks the program set for the cluster.
    pub hooks: Option<&'a Arc<dyn ClientHooks>>,
    /// The caller runs on a tokio runtime, where the native tasks would go.
    pub runtime: bool,
}

/// A cluster's native settings.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// `host:port` of the brokers to ask for the metadata first.
    pub bootstrap: Vec<String>,
    pub connect: ConnectOptions,
    pub fetch: FetchSettings,
    /// The most bytes one partition answers in one fetch (`max.partition.fetch.bytes`).
    pub partition_max_bytes: i32,
    /// Bytes of answers queued for a reader before fetching pauses.
    pub budget: usize,
    /// Connections to each broker, each with a fetch in flight
    /// (`fetch.connections.per.broker`); they share `fetch.max.bytes`.
    pub lanes: usize,
    /// Values of this many bytes or more are shared from the answers, not copied
    /// (`fetch.share.min.bytes`).
    pub share_from: usize,
    pub partition: PartitionOptions,
    /// Told of connection errors: the program's client hooks.
    pub errors: Listener,
}

/// The cluster's `property` refused, and why (never its value).
fn refused(given: &Given<'_>, property: &str, why: impl std::fmt::Display) -> SourceError {
    SourceError::Kafka {
        cluster: given.cluster.to_string(),
        message: format!("property `{property}` refused: {why}"),
        kind: crate::error::KafkaErrorKind::Configuration,
        retriable: false,
    }
}

#[cfg(test)]
mod tests;
