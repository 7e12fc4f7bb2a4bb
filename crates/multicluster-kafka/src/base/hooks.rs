//! The hooks a program can give the clients of each cluster ([`ClientHooks`]):
//! OAUTHBEARER tokens, librdkafka's statistics, and the errors the clients meet, each
//! of a [`KafkaErrorKind`] whichever fetch path met it. Nothing here names a type of
//! librdkafka or of the Kafka protocol crate.
//!
//! On librdkafka's path every client of the source (the lookup client of each
//! cluster, each reader's consumers, the [`SingleClusterMetadataService`]'s client)
//! has one client context of this crate (`kafka/events/`), which
//!
//! - forwards librdkafka's log lines to `tracing` (target `librdkafka`, with the
//!   logical cluster id as the field `cluster`);
//! - reports librdkafka's client errors (all brokers down, authentication failed, …):
//!   a reader warns once per streak of the same error, lookups leave that to the
//!   error their request returns;
//! - hands statistics, errors and OAUTHBEARER token requests to the [`ClientHooks`]
//!   a program set for the cluster ([`SourceBuilder::client_hooks`]).
//!
//! Those events are served as they come, whether or not the program is reading
//! records at that moment: by one thread of the process (`mck-events`) for every
//! client without hooks, and by a thread of its own (`mck-events-<cluster>`) for a
//! client with hooks, whose code (a token provider asking an identity provider) may
//! take its time without holding other clusters' events.
//!
//! ## OAUTHBEARER tokens
//!
//! A cluster with `sasl.mechanism=OAUTHBEARER` gets its tokens from one of:
//!
//! - librdkafka's own OIDC token requests (`sasl.oauthbearer.method=oidc`,
//!   `sasl.oauthbearer.token.endpoint.url`), with the client credentials grant
//!   (`sasl.oauthbearer.client.id`, …) or the JWT-bearer grant
//!   (`sasl.oauthbearer.grant.type`, `sasl.oauthbearer.assertion.*`);
//! - librdkafka's unsecured JWT builder (`enable.sasl.oauthbearer.unsecure.jwt=true`,
//!   for tests only);
//! - a [`ClientHooks`] whose [`enable_token_refresh`](ClientHooks::enable_token_refresh)
//!   is true: its [`generate_oauth_token`](ClientHooks::generate_oauth_token) is
//!   called for the first token and again when librdkafka wants a new one (at 80% of
//!   the previous token's lifetime). AWS MSK IAM works this way, with a signer crate
//!   making the token.
//!
//! A cluster with OAUTHBEARER and none of these is refused when its client is made,
//! and so is a token provider together with one of the first two.
//!
//! On the native fetch path (`native/oauth.rs`, `native/oidc.rs`,
//! `native/assertion.rs`) the same three sources serve the source's own connections,
//! and `error` hears of their failures; statistics are librdkafka's, so a cluster with
//! hooks and `statistics.interval.ms` is fetched with librdkafka.
//!
//! [`SingleClusterMetadataService`]: crate::metadata::SingleClusterMetadataService
//! [`SourceBuilder::client_hooks`]: crate::SourceBuilder::client_hooks

use std::error::Error;
use std::fmt;
use std::sync::Arc;

pub use super::kafka_error::KafkaErrorKind;

/// An OAUTHBEARER token made by [`ClientHooks::generate_oauth_token`]. `Debug` shows
/// the principal and lifetime, never the token.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthToken {
    /// The token (a JWT, for most identity providers).
    pub token: String,
    /// The principal the token is for.
    pub principal_name: String,
    /// When the token expires, in milliseconds since the Unix epoch.
    pub lifetime_ms: i64,
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("token", &"[redacted]")
            .field("principal_name", &self.principal_name)
            .field("lifetime_ms", &self.lifetime_ms)
            .finish()
    }
}

/// What a program can plug into the librdkafka clients of one cluster: an OAUTHBEARER
/// token provider, a statistics receiver, an error observer. Every method has a
/// default that does nothing (or, for tokens, is not used), so an implementation
/// overrides only what it needs.
///
/// The methods are called on the client's event thread, never on a reader's task: a
/// slow token provider delays that client's token and nothing else. On the native
/// fetch path tokens are made on a blocking thread of the source's runtime, and
/// `error` is called on the runtime's task that met the error, so it should return
/// at once (hand work to a thread or channel of its own). They must not panic.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use multicluster_kafka::hooks::ClientHooks;
///
/// /// Counts the statistics reports of one cluster's clients.
/// #[derive(Default)]
/// struct StatsCounter(AtomicU64);
///
/// impl ClientHooks for StatsCounter {
///     fn stats_raw(&self, statistics: &[u8]) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         let _ = statistics.len();
///     }
/// }
///
/// let hooks: Arc<dyn ClientHooks> = Arc::new(StatsCounter::default());
/// # let _ = hooks;
/// ```
pub trait ClientHooks: Send + Sync {
    /// True when [`generate_oauth_token`](Self::generate_oauth_token) provides the
    /// OAUTHBEARER tokens of the cluster (default false: librdkafka's own OIDC or
    /// unsecured-JWT handling, as the properties say).
    fn enable_token_refresh(&self) -> bool {
        false
    }

    /// Makes a new OAUTHBEARER token. `oauthbearer_config` is the cluster's
    /// `sasl.oauthbearer.config` property, if set. An error is handed to librdkafka as
    /// the reason the token is missing (it retries later); its text must not contain
    /// a secret or a NUL character.
    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        let _ = oauthbearer_config;
        Err("this ClientHooks does not provide OAUTHBEARER tokens".into())
    }

    /// librdkafka's statistics as the JSON it emits (its `STATISTICS.md` describes
    /// the fields), every `statistics.interval.ms` (a property of the cluster;
    /// statistics are off unless it is set). A program decodes what it needs, for
    /// example with `serde_json`.
    fn stats_raw(&self, statistics: &[u8]) {
        let _ = statistics;
    }

    /// A client-level error a cluster's client met (brokers down, authentication
    /// failed, …), besides the source's own logging of it: its kind, the same on either
    /// fetch path, and the client's text, which never contains a property value.
    fn error(&self, kind: KafkaErrorKind, reason: &str) {
        let _ = (kind, reason);
    }
}

type HooksFn = dyn Fn(&str) -> Option<Arc<dyn ClientHooks>> + Send + Sync;

/// Gives each cluster its [`ClientHooks`] (or none); see
/// [`SourceBuilder::client_hooks`](crate::SourceBuilder::client_hooks).
#[derive(Clone)]
pub struct ClientHooksFactory(Arc<HooksFn>);

impl ClientHooksFactory {
    /// A factory from a function of the logical cluster id.
    pub fn new(f: impl Fn(&str) -> Option<Arc<dyn ClientHooks>> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The hooks for the clients of this cluster.
    pub fn for_cluster(&self, cluster: &str) -> Option<Arc<dyn ClientHooks>> {
        (self.0)(cluster)
    }
}

impl fmt::Debug for ClientHooksFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientHooksFactory")
    }
}
