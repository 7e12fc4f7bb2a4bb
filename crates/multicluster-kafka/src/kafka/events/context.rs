//! The librdkafka client context of every client of the source: where its log lines
//! and errors go, what it remembers of the cluster's refusals and failed brokers, and
//! the program's hooks it hands events to.

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;

use crate::base::hooks::ClientHooks;
use crate::base::properties::{ClientProperties, hide_secrets};
use crate::kafka::errors::kind_of_error;
use rdkafka::client::OAuthToken;

/// What a client is for: decides how loudly its errors are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientRole {
    /// Metadata, offsets and commits: the request that fails says why.
    Lookup,
    /// A reader's consumer: nothing else reports its errors, so they are warnings.
    Reader,
}

/// The context of every client of the source.
pub(crate) struct SourceContext {
    pub(super) cluster: Arc<str>,
    role: ClientRole,
    pub(super) hooks: Option<Arc<dyn ClientHooks>>,
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

    pub(super) fn wants_tokens(&self) -> bool {
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
            h.error(kind_of_error(&error), reason);
        }
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        token_of(self.hooks.as_ref(), oauthbearer_config)
    }
}

/// A token from the program's hooks of a cluster, as librdkafka takes it.
pub(crate) fn token_of(
    hooks: Option<&Arc<dyn ClientHooks>>,
    oauthbearer_config: Option<&str>,
) -> Result<OAuthToken, Box<dyn Error>> {
    match hooks {
        Some(h) if h.enable_token_refresh() => {
            let t = h.generate_oauth_token(oauthbearer_config)?;
            Ok(OAuthToken {
                token: t.token,
                principal_name: t.principal_name,
                lifetime_ms: t.lifetime_ms,
            })
        }
        _ => Err("no OAUTHBEARER token provider is set for this cluster".into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::config::prepare;
    use rdkafka::ClientConfig;
    use rdkafka::error::RDKafkaErrorCode;

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
