//! The librdkafka client context of every client the source makes, and the hooks a
//! program can give it per cluster ([`ClientHooks`]).
//!
//! rdkafka makes the context a type parameter of each client. Rather than making the
//! source generic over it, every client of the source (the lookup client of each
//! cluster, each reader's consumers, the [`SingleClusterMetadataService`]'s client)
//! uses one context of this crate, which
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
//! - librdkafka's own OIDC client-credentials flow (`sasl.oauthbearer.method=oidc`,
//!   `sasl.oauthbearer.token.endpoint.url`, `sasl.oauthbearer.client.id`, …);
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
//! [`SingleClusterMetadataService`]: crate::metadata::SingleClusterMetadataService
//! [`SourceBuilder::client_hooks`]: crate::SourceBuilder::client_hooks

use std::collections::BTreeMap;
use std::error::Error;
use std::ffi::{CStr, CString, c_char, c_int};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::bindings as rd;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::RDKafkaErrorCode;

pub use rdkafka::client::OAuthToken;
pub use rdkafka::error::KafkaError;
pub use rdkafka::statistics::Statistics;

use crate::base::properties::{ClientProperties, hide_secrets};

/// What a program can plug into the librdkafka clients of one cluster: an OAUTHBEARER
/// token provider, a statistics receiver, an error observer. Every method has a
/// default that does nothing (or, for tokens, is not used), so an implementation
/// overrides only what it needs.
///
/// The methods are called on the client's event thread, never on a reader's task: a
/// slow token provider delays that client's token and nothing else. They must not
/// panic.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use multicluster_kafka::client_context::{ClientHooks, Statistics};
///
/// /// Counts the statistics reports of one cluster's clients.
/// #[derive(Default)]
/// struct StatsCounter(AtomicU64);
///
/// impl ClientHooks for StatsCounter {
///     fn stats(&self, statistics: Statistics) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         let _ = statistics.brokers.len();
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

    /// librdkafka's statistics, decoded, every `statistics.interval.ms` (a property of
    /// the cluster; statistics are off unless it is set). Called by the default
    /// [`stats_raw`](Self::stats_raw).
    fn stats(&self, statistics: Statistics) {
        let _ = statistics;
    }

    /// librdkafka's statistics as the JSON it emits. The default decodes them and
    /// calls [`stats`](Self::stats); override this one to keep the JSON.
    fn stats_raw(&self, statistics: &[u8]) {
        match serde_json::from_slice(statistics) {
            Ok(decoded) => self.stats(decoded),
            Err(e) => tracing::warn!(error = %e, "cannot decode librdkafka's statistics"),
        }
    }

    /// A client-level error librdkafka reported (brokers down, authentication
    /// failed, …), besides the source's own logging of it. `reason` is librdkafka's
    /// text; it never contains a property value.
    fn error(&self, error: KafkaError, reason: &str) {
        let _ = (error, reason);
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

/// What a client of one cluster is made with besides its properties: the program's
/// hooks, and the `tracing` dispatcher its events go to.
#[derive(Clone, Default)]
pub(crate) struct ClientSetup {
    pub hooks: Option<Arc<dyn ClientHooks>>,
    /// The dispatcher where the client was asked for (clients are often made on the
    /// blocking pool, whose threads have no scoped subscriber); `None`: the one of
    /// the thread that makes it.
    pub dispatch: Option<tracing::Dispatch>,
}

impl ClientSetup {
    /// The hooks of `cluster` from an optional factory, and the calling thread's
    /// dispatcher.
    pub fn new(factory: Option<&ClientHooksFactory>, cluster: &str) -> Self {
        Self {
            hooks: factory.and_then(|f| f.for_cluster(cluster)),
            dispatch: Some(tracing::dispatcher::get_default(|d| d.clone())),
        }
    }
}

/// What a client is for: decides how loudly its errors are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientRole {
    /// Metadata, offsets and commits: the request that fails says why.
    Lookup,
    /// A reader's consumer: nothing else reports its errors, so they are warnings.
    Reader,
    /// The single-cluster metadata service's client.
    Metadata,
}

/// The context of every client of the source.
pub(crate) struct SourceContext {
    cluster: Arc<str>,
    role: ClientRole,
    hooks: Option<Arc<dyn ClientHooks>>,
    /// The error last warned about, until the streak ends.
    streak: Mutex<Option<String>>,
    /// librdkafka's last client error other than "all brokers down": the cause a
    /// lookup that timed out names (authentication failed, certificate rejected, …).
    last_error: Mutex<Option<String>>,
    /// The cluster's latest refusal of the client (not its token provider's
    /// failure) since the client's last metadata answer ([`Self::answered`]), and
    /// when it came. Kept across requests, for [`FAILURE_KEPT`]: librdkafka reports
    /// a broker's identical error again only after 30 s.
    refusal: Mutex<Option<(String, Instant)>>,
    /// The brokers (as librdkafka names them: `host:port/bootstrap`, `host:port/1`)
    /// that failed since the client's last metadata answer, and when they last
    /// did. librdkafka's own "all brokers are down" says when none is left, but only
    /// a CMake build with the atomics flags of `.cargo/config.toml` reports it (see
    /// `docs/design.md`).
    failed_brokers: Mutex<BTreeMap<String, Instant>>,
    /// How many brokers the client knows: those its bootstrap list names, then
    /// those of its last metadata answer.
    brokers: std::sync::atomic::AtomicUsize,
    /// What of the client's secret values librdkafka's texts may show (a secret
    /// bootstrap list's brokers): hidden in everything the context logs or keeps.
    secrets: Vec<String>,
    /// Whether that error was the client's own token provider failing, which
    /// librdkafka asks again (the cluster itself refused nothing yet).
    last_error_is_token: std::sync::atomic::AtomicBool,
    /// A reader fetches with this client (one made for lookups may be taken by a
    /// reader): its errors are then warned about as a reader's.
    reading: std::sync::atomic::AtomicBool,
}

impl SourceContext {
    pub fn new(cluster: Arc<str>, role: ClientRole, hooks: Option<Arc<dyn ClientHooks>>) -> Self {
        Self {
            cluster,
            role,
            hooks,
            streak: Mutex::new(None),
            last_error: Mutex::new(None),
            last_error_is_token: std::sync::atomic::AtomicBool::new(false),
            refusal: Mutex::new(None),
            failed_brokers: Mutex::new(BTreeMap::new()),
            brokers: std::sync::atomic::AtomicUsize::new(1),
            secrets: Vec::new(),
            reading: std::sync::atomic::AtomicBool::new(role == ClientRole::Reader),
        }
    }

    /// Whether a reader fetches with this client now.
    pub(crate) fn set_reading(&self, reading: bool) {
        self.reading
            .store(reading, std::sync::atomic::Ordering::Relaxed);
    }

    /// What says most about why the client's requests fail, if anything: the
    /// cluster's refusal of the client since its last answer (in a bootstrap list
    /// where one broker refuses and another is down, the refusal is what to fix),
    /// else librdkafka's last client error other than "all brokers down".
    pub fn last_error(&self) -> Option<String> {
        let refusal = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = refusal
            .as_ref()
            .filter(|(_, at)| at.elapsed() < FAILURE_KEPT);
        fresh.map(|(text, _)| text.clone()).or_else(|| {
            self.last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        })
    }

    /// Made for a client of `props`: knows how many brokers its bootstrap list
    /// names, and hides its secret values (a secret bootstrap list's brokers) in
    /// librdkafka's texts: in the logs, the errors reported and [`Self::last_error`].
    pub fn for_properties(mut self, props: &ClientProperties) -> Self {
        self.secrets = props.secret_texts();
        let listed = props.bootstrap_servers().map_or(0, |list| {
            list.split(',').filter(|e| !e.trim().is_empty()).count()
        });
        self.brokers = std::sync::atomic::AtomicUsize::new(listed.max(1));
        self
    }

    fn hidden<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        hide_secrets(text, &self.secrets)
    }

    /// The cluster answered a metadata request naming `brokers` brokers: failures
    /// and refusals before it no longer say anything about the cluster now.
    pub fn answered(&self, brokers: usize) {
        let mut refusal = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
        *refusal = None;
        self.failed_brokers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.brokers
            .store(brokers.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// True when the cluster refused the client (credentials or certificates, not a
    /// token provider that failed) since its last metadata answer, within
    /// [`FAILURE_KEPT`].
    pub fn refused_since_answer(&self) -> bool {
        let refusal = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
        refusal
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < FAILURE_KEPT)
    }

    /// True when as many brokers failed since the client's last metadata answer
    /// (each within [`FAILURE_KEPT`]) as the client knows: none of them is still
    /// connecting for the first time. Kept across requests: librdkafka reports a
    /// broker's identical error again only after 30 s. A name that resolves to
    /// several addresses is one broker, failed once its first address failed.
    pub fn every_broker_failed(&self) -> bool {
        let failed = self
            .failed_brokers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let recent = failed
            .values()
            .filter(|at| at.elapsed() < FAILURE_KEPT)
            .count();
        recent > 0 && recent >= self.brokers.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when librdkafka's last client error was the client's token provider
    /// failing (librdkafka asks it again).
    pub fn last_error_is_token(&self) -> bool {
        self.last_error_is_token
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn wants_tokens(&self) -> bool {
        self.hooks
            .as_ref()
            .is_some_and(|h| h.enable_token_refresh())
    }

    /// Reports an error of the client: a reader warns once per streak of the same
    /// error; other clients log it at debug level (their requests fail with it).
    pub fn report_error(&self, text: &str) {
        let text = &*self.hidden(text);
        // "N/N brokers are down" sums up the brokers' own errors, each said already.
        let summary = text.contains("brokers are down");
        if !summary {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text.to_string());
        }
        if summary || !self.reading.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::debug!(cluster = %self.cluster, error = %text, role = ?self.role, "client error");
            return;
        }
        let mut streak = self.streak.lock().unwrap_or_else(|p| p.into_inner());
        if streak.as_deref() != Some(text) {
            tracing::warn!(cluster = %self.cluster, error = %text, "fetch error; retrying");
            *streak = Some(text.to_string());
        }
    }

    /// Records flow again: the next error is warned about again.
    pub fn end_error_streak(&self) {
        let mut streak = self.streak.lock().unwrap_or_else(|p| p.into_inner());
        *streak = None;
    }
}

impl ClientContext for SourceContext {
    /// Always on: with it off, rdkafka drops the refresh events it polls. The source
    /// never lets them reach rdkafka's poll (they go to the client's event thread, or
    /// to librdkafka's background thread when no hook provides tokens), so this only
    /// matters as a fallback.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let cluster = &*self.cluster;
        let log_message = &*self.hidden(log_message);
        if fac == "ERROR" {
            // What librdkafka logs for a client error when no error callback takes it:
            // "<client name>: <error>" (the cluster id says more than the name).
            let error = match log_message.split_once(": ") {
                Some((name, error)) if name.starts_with("rdkafka#") => error,
                _ => log_message,
            };
            self.report_error(error);
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", %cluster, facility = %fac, "{log_message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", %cluster, facility = %fac, "{log_message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", %cluster, facility = %fac, "{log_message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", %cluster, facility = %fac, "{log_message}")
            }
        }
    }

    fn stats(&self, statistics: Statistics) {
        if let Some(h) = &self.hooks {
            h.stats(statistics);
        }
    }

    fn stats_raw(&self, statistics: &[u8]) {
        if let Some(h) = &self.hooks {
            h.stats_raw(statistics);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        use rdkafka::types::RDKafkaErrorCode as C;
        if let Some(broker) = failed_broker(reason) {
            self.failed_brokers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(broker.to_string(), Instant::now());
        }
        let reason = &*self.hidden(reason);
        if error.rdkafka_error_code() != Some(C::AllBrokersDown)
            && !reason.contains("brokers are down")
        {
            // A token provider that failed ("Failed to acquire SASL OAUTHBEARER
            // token", an authentication error too) is asked again by librdkafka.
            let token = reason.contains("OAUTHBEARER token");
            self.last_error_is_token
                .store(token, std::sync::atomic::Ordering::Relaxed);
            if refuses(&error, reason) && !token {
                let mut refusal = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
                *refusal = Some((reason.to_string(), Instant::now()));
            }
        }
        self.report_error(reason);
        if let Some(h) = &self.hooks {
            h.error(error, reason);
        }
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        match &self.hooks {
            Some(h) if h.enable_token_refresh() => h.generate_oauth_token(oauthbearer_config),
            _ => Err("no OAUTHBEARER token provider is set for this cluster".into()),
        }
    }
}

impl ConsumerContext for SourceContext {}

/// Whether a client error says the cluster answered and refused the client
/// (authentication or TLS failed, or no token for it): trying again unchanged will
/// not help. A broker that refuses the client's certificate ends the handshake with a
/// TLS alert, and a broker certificate this client refuses may fail in the middle of
/// a read; librdkafka may report either as a transport error ("…:SSL
/// routines::certificate verify failed"): its text tells it apart. A connection cut
/// in the middle of a handshake (a broker restarting) is no refusal.
fn refuses(error: &KafkaError, reason: &str) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    let cut = ["Disconnected", "reset by peer", "Connection refused"]
        .iter()
        .any(|w| reason.contains(w));
    let refusal = matches!(
        error.rdkafka_error_code(),
        Some(C::Authentication | C::SSL | C::SaslAuthenticationFailed)
    ) || reason.contains("SSL handshake failed")
        || reason.contains("certificate verify failed")
        || (reason.contains("SSL") && reason.contains(" alert "));
    refusal && !cut
}

/// How long a broker's failure, or the cluster's refusal, counts for a client that
/// got no metadata answer since: librdkafka reports a broker that goes on failing
/// the same way again every 30 s (reconnecting at most 10 s apart), so a failure
/// older than this is one the broker got over, or one nothing retried since.
const FAILURE_KEPT: Duration = Duration::from_secs(45);

/// The broker a librdkafka client error is about, as librdkafka names it
/// (`sasl_ssl://host:9092/bootstrap: SASL authentication error: …` names
/// `host:9092/bootstrap`); `None` for an error of the client as a whole (a token
/// provider that failed, "all brokers are down") or of its group coordinator.
fn failed_broker(reason: &str) -> Option<&str> {
    let (name, _) = reason.split_once(": ")?;
    let name = name.rsplit_once("://").map_or(name, |(_, rest)| rest);
    let (address, id) = name.rsplit_once('/')?;
    (!address.is_empty() && !id.is_empty() && !name.contains(' ')).then_some(name)
}

fn prop<'a>(props: &'a ClientProperties, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| props.get(k)).map(str::trim)
}

/// Checks that an OAUTHBEARER cluster has exactly one token source, and routes
/// librdkafka's token requests to a queue of their own (served by the client's event
/// thread or by librdkafka's background thread, see [`ClientEvents::start`]).
pub(crate) fn prepare(
    config: &mut ClientConfig,
    props: &ClientProperties,
    hooks: Option<&Arc<dyn ClientHooks>>,
) -> Result<(), String> {
    let oauthbearer = prop(props, &["sasl.mechanism", "sasl.mechanisms"])
        .is_some_and(|m| m.eq_ignore_ascii_case("OAUTHBEARER"));
    let provider = hooks.is_some_and(|h| h.enable_token_refresh());
    let oidc =
        prop(props, &["sasl.oauthbearer.method"]).is_some_and(|m| m.eq_ignore_ascii_case("oidc"));
    let unsecured = prop(props, &["enable.sasl.oauthbearer.unsecure.jwt"])
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if oauthbearer {
        match (provider, oidc, unsecured) {
            (true, true, _) => {
                return Err("OAUTHBEARER tokens come either from a token provider (client hooks) or from sasl.oauthbearer.method=oidc, not both".into());
            }
            (true, _, true) => {
                return Err("OAUTHBEARER tokens come either from a token provider (client hooks) or from enable.sasl.oauthbearer.unsecure.jwt, not both".into());
            }
            (false, false, false) => {
                return Err("SASL OAUTHBEARER needs a token source: sasl.oauthbearer.method=oidc with its token endpoint and client credentials, a token provider (SourceBuilder::client_hooks), or enable.sasl.oauthbearer.unsecure.jwt=true (tests only)".into());
            }
            _ => {}
        }
    }
    // librdkafka's hidden switch behind rd_kafka_conf_enable_sasl_queue(): token
    // requests go to a queue of their own instead of the main queue, which the reader
    // never polls with rdkafka (and where rdkafka's poll would drop them).
    config.set("enable_sasl_queue", "true");
    // rdkafka derives librdkafka's log level from the `log` crate, which a program
    // that uses `tracing` may not have set up: librdkafka would then drop everything
    // but errors, `debug` lines included. Every line goes to `tracing`, whose filter
    // decides (debug lines exist only when the `debug` property asks for them).
    config.set_log_level(RDKafkaLogLevel::Debug);
    Ok(())
}

/// Routes a client's OAUTHBEARER token requests (its SASL queue, which [`prepare`]
/// turned on): to `queue` when a hook provides the tokens, else to librdkafka's
/// background thread, which serves OIDC and unsecured JWTs itself.
///
/// # Safety
/// `client` and `queue` are live.
pub(crate) unsafe fn route_token_requests(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    provider: bool,
    cluster: &str,
) {
    // SAFETY: live handles (the caller's guarantee); the SASL queue handle is
    // released once; the error is read before it is destroyed.
    unsafe {
        let sasl = rd::rd_kafka_queue_get_sasl(client);
        if sasl.is_null() {
            return;
        }
        if provider {
            rd::rd_kafka_queue_forward(sasl, queue);
        } else {
            let err = rd::rd_kafka_sasl_background_callbacks_enable(client);
            if !err.is_null() {
                let text = CStr::from_ptr(rd::rd_kafka_error_string(err))
                    .to_string_lossy()
                    .into_owned();
                tracing::warn!(cluster = %cluster, error = %text, "cannot serve OAUTHBEARER token refreshes in the background");
                rd::rd_kafka_error_destroy(err);
            }
        }
        rd::rd_kafka_queue_destroy(sasl);
    }
}

/// A librdkafka client with the [`ClientEvents`] that serve it: the one way clients of
/// ours are made. The events stop before the client is destroyed.
pub(crate) struct Served<C> {
    /// Declared first: dropped (and so stopped) before `client`.
    _events: ClientEvents,
    client: C,
}

/// The kinds of client [`Served`] makes.
pub(crate) trait ServedClient:
    rdkafka::config::FromClientConfigAndContext<SourceContext>
{
    /// A consumer with a group id, whose main queue rdkafka forwards to its consumer
    /// queue (see [`ClientEvents::start`]).
    const CONSUMER: bool;
    fn native(&self) -> &rdkafka::client::Client<SourceContext>;
}

impl ServedClient for rdkafka::consumer::BaseConsumer<SourceContext> {
    const CONSUMER: bool = true;
    fn native(&self) -> &rdkafka::client::Client<SourceContext> {
        rdkafka::consumer::Consumer::client(self)
    }
}

impl ServedClient for rdkafka::admin::AdminClient<SourceContext> {
    const CONSUMER: bool = false;
    fn native(&self) -> &rdkafka::client::Client<SourceContext> {
        self.inner()
    }
}

/// Initialises OpenSSL, the one librdkafka links, without its exit-time cleanup:
/// called before every librdkafka client the crate makes. The cleanup frees what
/// librdkafka's threads may still use when a program exits with a client open or
/// closing (`mck describe` and `mck plan`, which close their clients on threads of
/// their own, died of SIGSEGV at exit about once in 50 runs against TLS listeners;
/// openssl/openssl#6214). Only the first initialisation chooses, and OpenSSL
/// initialises itself with the cleanup when a TLS client is made first, so no path
/// that makes a client may skip this. rust-openssl initialises it this way too.
pub(crate) fn init_tls() {
    openssl_sys::init();
}

impl<C: ServedClient> Served<C> {
    /// Makes a client from `config` with `context`, and starts serving its events
    /// (on `dispatch`'s subscriber, else the current one).
    pub(crate) fn create(
        config: &ClientConfig,
        context: SourceContext,
        dispatch: Option<tracing::Dispatch>,
    ) -> rdkafka::error::KafkaResult<Self> {
        init_tls();
        let client: C = config.create_with_context(context)?;
        let native = client.native();
        // SAFETY: the client is live and its opaque is this context; `_events` is
        // dropped before `client` (field order).
        let events = unsafe {
            ClientEvents::start(
                native.native_ptr(),
                native.context().clone(),
                C::CONSUMER,
                dispatch,
            )
        };
        Ok(Self {
            _events: events,
            client,
        })
    }
}

impl<C> std::ops::Deref for Served<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.client
    }
}

/// A raw librdkafka handle moved into the event thread.
struct Raw<T>(*mut T);
// SAFETY: librdkafka handles are thread safe; the owner keeps them alive (see
// `ClientEvents::start`).
unsafe impl<T> Send for Raw<T> {}

/// The thread that serves one client's events: its log lines, errors, statistics and
/// (when a hook provides them) OAUTHBEARER token requests. Stopped and joined on drop,
/// which must happen before the client is destroyed.
pub(crate) struct ClientEvents {
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    consumer: bool,
    /// Served by the process's event thread ([`super::event_hub`]) …
    registration: Option<super::event_hub::Registration>,
    /// … or by a thread of its own.
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

// SAFETY: the handles are thread safe; they are only released in `Drop`.
unsafe impl Send for ClientEvents {}
unsafe impl Sync for ClientEvents {}

impl ClientEvents {
    /// Sends the client's log lines, its main queue (errors, statistics) and, when
    /// `context`'s hooks provide tokens, its token requests to a queue of ours, and
    /// starts the thread serving it. Without a token provider, token requests are
    /// served by librdkafka itself on its background thread (OIDC and unsecured JWT).
    /// `consumer` says the client is a consumer with a group id, whose main queue
    /// rdkafka forwarded to the consumer queue (restored on drop).
    ///
    /// # Safety
    /// `client` must be a live client whose opaque is `context`, and stay alive until
    /// the returned value is dropped.
    pub unsafe fn start(
        client: *mut rd::rd_kafka_t,
        context: Arc<SourceContext>,
        consumer: bool,
        dispatch: Option<tracing::Dispatch>,
    ) -> Self {
        // SAFETY (whole block): `client` is live by the caller's guarantee; every
        // queue handle we get is released once, here or in Drop.
        let queue = unsafe { rd::rd_kafka_queue_new(client) };
        unsafe {
            rd::rd_kafka_set_log_queue(client, queue);
            let main = rd::rd_kafka_queue_get_main(client);
            if !main.is_null() {
                rd::rd_kafka_queue_forward(main, queue);
                rd::rd_kafka_queue_destroy(main);
            }
            route_token_requests(client, queue, context.wants_tokens(), &context.cluster);
        }
        let dispatch = dispatch.unwrap_or_else(|| tracing::dispatcher::get_default(|d| d.clone()));
        if consumer {
            tracing::dispatcher::with_default(&dispatch, || {
                // SAFETY: a live client; its consumer queue handle is released once.
                unsafe {
                    let early = rd::rd_kafka_queue_get_consumer(client);
                    if !early.is_null() {
                        drain(client, early, &context);
                        rd::rd_kafka_queue_destroy(early);
                    }
                }
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        // A client with hooks runs the program's code on this thread: one of its own.
        let context = if context.hooks.is_none() {
            // SAFETY: `client` and `queue` live until Drop, which unregisters first.
            match unsafe { super::event_hub::register(client, queue, context, dispatch.clone()) } {
                Ok(registration) => {
                    return Self {
                        client,
                        queue,
                        consumer,
                        registration: Some(registration),
                        stop,
                        join: None,
                    };
                }
                Err(context) => context,
            }
        } else {
            context
        };
        let name = format!("mck-events-{}", context.cluster).replace('\0', "?");
        let (raw_client, raw_queue) = (Raw(client), Raw(queue));
        let join = std::thread::Builder::new()
            .name(name)
            .spawn({
                let stop = stop.clone();
                move || {
                    let _guard = tracing::dispatcher::set_default(&dispatch);
                    let (client, queue) = (raw_client, raw_queue);
                    serve(client.0, queue.0, &context, &stop);
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "cannot start a client event thread"))
            .ok();
        Self {
            client,
            queue,
            consumer,
            registration: None,
            stop,
            join,
        }
    }
}

impl Drop for ClientEvents {
    fn drop(&mut self) {
        self.registration = None;
        self.stop.store(true, Ordering::SeqCst);
        // SAFETY: our queue handle is live until destroyed below.
        unsafe { rd::rd_kafka_queue_yield(self.queue) };
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
        // SAFETY: the client is alive (the guarantee of `start`); routing goes back
        // to what rdkafka set up, then our handle is released once.
        unsafe {
            rd::rd_kafka_set_log_queue(self.client, std::ptr::null_mut());
            if self.consumer {
                rd::rd_kafka_poll_set_consumer(self.client);
            } else {
                let main = rd::rd_kafka_queue_get_main(self.client);
                if !main.is_null() {
                    rd::rd_kafka_queue_forward(main, std::ptr::null_mut());
                    rd::rd_kafka_queue_destroy(main);
                }
            }
            rd::rd_kafka_queue_destroy(self.queue);
        }
    }
}

fn log_level(level: c_int) -> RDKafkaLogLevel {
    match level {
        0 => RDKafkaLogLevel::Emerg,
        1 => RDKafkaLogLevel::Alert,
        2 => RDKafkaLogLevel::Critical,
        3 => RDKafkaLogLevel::Error,
        4 => RDKafkaLogLevel::Warning,
        5 => RDKafkaLogLevel::Notice,
        6 => RDKafkaLogLevel::Info,
        _ => RDKafkaLogLevel::Debug,
    }
}

/// # Safety of the raw calls
/// `client` and `queue` stay alive until `stop` is set and this returns (Drop of
/// [`ClientEvents`] joins the thread before releasing them).
fn serve(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: &SourceContext,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        // SAFETY: a live queue; null means nothing came (or a yield).
        let event = unsafe { rd::rd_kafka_queue_poll(queue, 1000) };
        if !event.is_null() {
            // SAFETY: a live event of this live client.
            unsafe { handle(client, event, context) };
        }
    }
}

/// Serves what reached `queue` before it was drained by the event thread: librdkafka's
/// lines of the moments between making a consumer and [`ClientEvents::start`], which
/// rdkafka routes to the consumer queue (a reader's batch call would print them on
/// stderr).
///
/// # Safety
/// `client` and `queue` are live; the queue has no messages (nothing is assigned).
unsafe fn drain(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: &SourceContext,
) {
    loop {
        // SAFETY: the caller's guarantee.
        let event = unsafe { rd::rd_kafka_queue_poll(queue, 0) };
        if event.is_null() {
            break;
        }
        // SAFETY: a live event of this live client.
        unsafe { handle(client, event, context) };
    }
}

/// Hands one event to the context, and destroys it.
///
/// # Safety
/// `event` is a live event of the live `client`; it is destroyed here.
pub(super) unsafe fn handle(
    client: *mut rd::rd_kafka_t,
    event: *mut rd::rd_kafka_event_t,
    context: &SourceContext,
) {
    // SAFETY (whole body): the strings an event returns live as long as it; the event
    // is destroyed once, at the end.
    unsafe {
        match rd::rd_kafka_event_type(event) {
            rd::RD_KAFKA_EVENT_LOG => {
                let mut fac: *const c_char = std::ptr::null();
                let mut text: *const c_char = std::ptr::null();
                let mut level: c_int = 0;
                if rd::rd_kafka_event_log(event, &mut fac, &mut text, &mut level) == 0
                    && !text.is_null()
                {
                    let fac = if fac.is_null() {
                        Default::default()
                    } else {
                        CStr::from_ptr(fac).to_string_lossy()
                    };
                    let text = CStr::from_ptr(text).to_string_lossy();
                    context.log(log_level(level), fac.trim(), text.trim());
                }
            }
            rd::RD_KAFKA_EVENT_ERROR => {
                let code = rd::rd_kafka_event_error(event);
                let reason = rd::rd_kafka_event_error_string(event);
                let reason = if reason.is_null() {
                    Default::default()
                } else {
                    CStr::from_ptr(reason).to_string_lossy()
                };
                context.error(
                    KafkaError::Global(RDKafkaErrorCode::from(code)),
                    reason.trim(),
                );
            }
            rd::RD_KAFKA_EVENT_STATS => {
                let json = rd::rd_kafka_event_stats(event);
                if !json.is_null() {
                    context.stats_raw(CStr::from_ptr(json).to_bytes());
                }
            }
            rd::RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH => {
                let config = rd::rd_kafka_event_config_string(event);
                let config = (!config.is_null())
                    .then(|| CStr::from_ptr(config).to_string_lossy().into_owned());
                refresh_token(client, context, config.as_deref());
            }
            _ => {}
        }
        rd::rd_kafka_event_destroy(event);
    }
}

/// Asks the hooks for a token and hands it (or the reason there is none) to
/// librdkafka.
fn refresh_token(client: *mut rd::rd_kafka_t, context: &SourceContext, config: Option<&str>) {
    let made: Result<(CString, CString, i64), Box<dyn Error>> =
        context.generate_oauth_token(config).and_then(|t| {
            Ok((
                CString::new(t.token)?,
                CString::new(t.principal_name)?,
                t.lifetime_ms,
            ))
        });
    let mut errstr = [0 as c_char; 512];
    let failure = match made {
        Ok((token, principal, lifetime_ms)) => {
            // SAFETY: a live client; NUL-terminated strings and a buffer of the size
            // given; no extensions.
            let code = unsafe {
                rd::rd_kafka_oauthbearer_set_token(
                    client,
                    token.as_ptr(),
                    lifetime_ms,
                    principal.as_ptr(),
                    std::ptr::null_mut(),
                    0,
                    errstr.as_mut_ptr(),
                    errstr.len(),
                )
            };
            if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                tracing::debug!(cluster = %context.cluster, "OAUTHBEARER token set");
                return;
            }
            // SAFETY: librdkafka wrote a NUL-terminated message into the buffer.
            unsafe { CStr::from_ptr(errstr.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        }
        Err(e) => format!("the token provider failed: {e}"),
    };
    tracing::warn!(cluster = %context.cluster, error = %failure, "no OAUTHBEARER token");
    let reason = CString::new(failure.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a live client and a NUL-terminated string.
    unsafe { rd::rd_kafka_oauthbearer_set_token_failure(client, reason.as_ptr()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tokens;
    impl ClientHooks for Tokens {
        fn enable_token_refresh(&self) -> bool {
            true
        }
    }

    fn check(pairs: &[(&str, &str)], hooks: Option<Arc<dyn ClientHooks>>) -> Result<(), String> {
        let props: ClientProperties = pairs.iter().copied().collect();
        let mut config = ClientConfig::new();
        prepare(&mut config, &props, hooks.as_ref())
    }

    #[test]
    fn an_oauthbearer_cluster_needs_exactly_one_token_source() {
        let tokens = || Some(Arc::new(Tokens) as Arc<dyn ClientHooks>);
        let ob = ("sasl.mechanism", "OAUTHBEARER");
        assert!(check(&[ob], None).unwrap_err().contains("token source"));
        assert!(check(&[ob], tokens()).is_ok());
        assert!(check(&[ob, ("sasl.oauthbearer.method", "oidc")], None).is_ok());
        assert!(
            check(
                &[
                    ("sasl.mechanisms", "oauthbearer"),
                    ("enable.sasl.oauthbearer.unsecure.jwt", "true")
                ],
                None
            )
            .is_ok()
        );
        assert!(
            check(&[ob, ("sasl.oauthbearer.method", "OIDC")], tokens())
                .unwrap_err()
                .contains("not both")
        );
        assert!(
            check(
                &[ob, ("enable.sasl.oauthbearer.unsecure.jwt", "true")],
                tokens()
            )
            .unwrap_err()
            .contains("not both")
        );
        // Other mechanisms do not care.
        assert!(check(&[("sasl.mechanism", "SCRAM-SHA-512")], None).is_ok());
        assert!(check(&[], tokens()).is_ok());
    }

    #[test]
    fn reader_errors_warn_once_per_streak() {
        let ctx = SourceContext::new("c".into(), ClientRole::Reader, None);
        ctx.report_error("down");
        assert_eq!(ctx.streak.lock().unwrap().as_deref(), Some("down"));
        ctx.end_error_streak();
        assert!(ctx.streak.lock().unwrap().is_none());
    }

    #[test]
    fn tls_failures_reported_as_transport_errors_count_as_rejections() {
        let ctx = SourceContext::new("c".into(), ClientRole::Lookup, None);
        let transport = || KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure);
        let verify = "ssl://127.0.0.1:1/bootstrap: ssl/statem/statem_clnt.c:2125:tls_post_process_server_certificate error:0A000086:SSL routines::certificate verify failed (after 1ms in state SSL_HANDSHAKE)";
        let refused =
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused";
        let expired = "ssl://127.0.0.1:1/bootstrap: SSL handshake failed: certificate expired";
        assert!(refuses(&transport(), verify));
        assert!(!refuses(&transport(), refused));
        assert!(refuses(&transport(), expired));
        ctx.error(transport(), expired);
        // A refusal stays known until the cluster answers, whatever came after it:
        // librdkafka does not repeat a broker's identical error for 30 s.
        ctx.error(
            transport(),
            "127.0.0.1:2/bootstrap: Connect to ipv4#127.0.0.1:2 failed: Connection refused",
        );
        assert!(ctx.refused_since_answer());
        assert!(ctx.last_error().unwrap().contains("certificate expired"));
        ctx.answered(1);
        assert!(!ctx.refused_since_answer());
        assert!(ctx.last_error().unwrap().contains("Connection refused"));
    }

    #[test]
    fn every_broker_failed_once_each_broker_of_the_bootstrap_list_failed_since_an_answer() {
        let props = ClientProperties::from_iter([("bootstrap.servers", "a:1, b:2")]);
        let ctx = SourceContext::new("c".into(), ClientRole::Lookup, None).for_properties(&props);
        let transport = || KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure);
        ctx.error(
            transport(),
            "a:1/bootstrap: Connect to ipv4#10.0.0.1:1 failed: Connection refused",
        );
        // The same broker again, a token provider and "all brokers are down" name no
        // other broker: b may still be connecting (a slow handshake).
        ctx.error(
            transport(),
            "a:1/bootstrap: Connect to ipv4#10.0.0.1:1 failed: Connection refused",
        );
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::Authentication),
            "Failed to acquire SASL OAUTHBEARER token: no answer",
        );
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "2/2 brokers are down",
        );
        assert!(!ctx.every_broker_failed());
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::Authentication),
            "sasl_ssl://b:2/bootstrap: SASL authentication error: Authentication failed (after 9ms in state AUTH_REQ)",
        );
        assert!(ctx.every_broker_failed());
        assert!(ctx.refused_since_answer());
        // "All brokers are down" is never the error kept.
        assert!(
            ctx.last_error()
                .unwrap()
                .contains("SASL authentication error")
        );
        ctx.answered(1);
        assert!(!ctx.every_broker_failed());
        assert!(!ctx.refused_since_answer());
    }

    #[test]
    fn failures_count_against_the_brokers_of_the_last_answer_and_fade() {
        let ctx = SourceContext::new("c".into(), ClientRole::Lookup, None);
        let transport = || KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure);
        // The cluster has three brokers, whatever its bootstrap list names.
        ctx.answered(3);
        ctx.error(
            transport(),
            "b-1:9092/1: Connect to ipv4#10.0.0.1:9092 failed: Connection refused",
        );
        ctx.error(
            transport(),
            "b-2:9092/2: Connect to ipv4#10.0.0.2:9092 failed: Connection refused",
        );
        assert!(!ctx.every_broker_failed());
        ctx.error(
            transport(),
            "b-3:9092/3: Connect to ipv4#10.0.0.3:9092 failed: Connection refused",
        );
        assert!(ctx.every_broker_failed());
        // A cut in the middle of a handshake (a broker restarting) is no refusal.
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::SSL),
            "ssl://b-1:9092/1: SSL handshake failed: Disconnected: connection reset by peer",
        );
        assert!(!ctx.refused_since_answer());
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::Authentication),
            "sasl_ssl://b-1:9092/1: SASL authentication error: Authentication failed",
        );
        assert!(ctx.refused_since_answer());
        ctx.error(
            transport(),
            "b-2:9092/2: Connect to ipv4#10.0.0.2:9092 failed: Connection refused",
        );
        assert!(
            ctx.last_error().unwrap().contains("SASL"),
            "a recent refusal is named"
        );
        // Failures and refusals nothing repeated for FAILURE_KEPT no longer count
        // (a client that no request asked to reconnect since).
        let long_ago = Instant::now() - FAILURE_KEPT - Duration::from_secs(1);
        for at in ctx.failed_brokers.lock().unwrap().values_mut() {
            *at = long_ago;
        }
        ctx.refusal.lock().unwrap().as_mut().unwrap().1 = long_ago;
        assert!(!ctx.every_broker_failed());
        assert!(!ctx.refused_since_answer());
        assert!(ctx.last_error().unwrap().contains("Connection refused"));
    }

    #[test]
    fn the_broker_of_an_error_is_read_from_librdkafkas_prefix() {
        for (reason, broker) in [
            (
                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused",
                Some("127.0.0.1:1/bootstrap"),
            ),
            (
                "sasl_ssl://k.example:9093/2: SASL authentication error: x",
                Some("k.example:9093/2"),
            ),
            (
                "ssl://[::1]:9093/bootstrap: SSL handshake failed: y",
                Some("[::1]:9093/bootstrap"),
            ),
            ("Failed to acquire SASL OAUTHBEARER token: z", None),
            ("1/1 brokers are down", None),
            ("GroupCoordinator: Disconnected", None),
        ] {
            assert_eq!(failed_broker(reason), broker, "{reason}");
        }
    }

    #[test]
    fn a_secret_bootstrap_list_never_reaches_the_errors_a_client_keeps() {
        let mut props = ClientProperties::new();
        props.set_secret("bootstrap.servers", "SASL_SSL://broker-7.private:9094");
        let ctx = SourceContext::new("c".into(), ClientRole::Lookup, None).for_properties(&props);
        ctx.error(
            KafkaError::Global(RDKafkaErrorCode::Authentication),
            "sasl_ssl://broker-7.private:9094/bootstrap: SASL authentication error: Authentication failed (after 12ms in state AUTH_REQ)",
        );
        let kept = ctx.last_error().unwrap();
        assert!(!kept.contains("broker-7"), "{kept}");
        assert!(
            kept.contains("<redacted>/bootstrap: SASL authentication error"),
            "{kept}"
        );
        assert!(ctx.refused_since_answer());
    }

    #[test]
    fn a_token_that_could_not_be_had_is_not_refused_by_the_cluster_but_a_password_is() {
        let ctx = SourceContext::new("c".into(), ClientRole::Lookup, None);
        let auth = || KafkaError::Global(RDKafkaErrorCode::Authentication);
        let token = "Failed to acquire SASL OAUTHBEARER token: the token endpoint did not answer";
        // An authentication error, but the cluster refused nothing.
        assert!(refuses(&auth(), token));
        ctx.error(auth(), token);
        assert!(!ctx.refused_since_answer());
        ctx.error(
            auth(),
            "sasl_ssl://127.0.0.1:1/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 120ms in state AUTH_REQ)",
        );
        assert!(ctx.refused_since_answer());
    }
}
