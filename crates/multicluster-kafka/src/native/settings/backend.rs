//! Which path a cluster's fetcher and lookups take: the properties the native path
//! reads, those that change nothing it fetches, and the choice made from them.

use std::sync::Arc;

use crate::base::properties::{
    BOOTSTRAP_SERVERS, ClientProperties, FetchBackend, RefusedBy, RefusedProperty,
};
use crate::error::SourceError;

use multicluster_kafka_client::assertion as jwt;
use multicluster_kafka_client::credentials::Mechanism;
use multicluster_kafka_client::oidc::JWT_BEARER;

use super::Given;
use super::fetch::settings;
use super::security::mechanism;

/// Properties the native path reads.
const HONOURED: &[&str] = &[
    BOOTSTRAP_SERVERS,
    crate::base::properties::FETCH_BACKEND,
    crate::base::properties::FETCH_CONNECTIONS,
    crate::base::properties::FETCH_SHARE,
    "security.protocol",
    "client.id",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.message.max.bytes",
    "isolation.level",
    "check.crcs",
    "client.rack",
    "queued.max.messages.kbytes",
    "socket.timeout.ms",
    "receive.message.max.bytes",
    // TLS (`security.protocol=ssl`), with OpenSSL as librdkafka: the client crate's tls.rs.
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    // SASL PLAIN and SCRAM (`sasl_plaintext`, `sasl_ssl`): the client crate's sasl.rs.
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    // OAUTHBEARER with the client hooks' tokens, an OIDC endpoint or an unsecured JWT:
    // the client crate's oauth.rs, oidc.rs.
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    // The JWT-bearer grant's assertion: the client crate's assertion.rs.
    jwt::FILE,
    jwt::ALGORITHM,
    jwt::KEY_FILE,
    jwt::KEY_PEM,
    jwt::PASSPHRASE,
    jwt::TEMPLATE,
    jwt::SUB,
    jwt::ISS,
    jwt::AUD,
    jwt::EXP,
    jwt::NBF,
    jwt::JTI,
    "https.ca.location",
    "https.ca.pem",
];

/// The `security.protocol` values the native path speaks.
const PROTOCOLS: [&str; 4] = ["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"];

/// Properties that do not change what a reader fetches: groups and commits (which
/// stay on librdkafka), producers' settings, logging, and librdkafka's own tuning.
const INDIFFERENT: &[&str] = &[
    "group.id",
    "group.instance.id",
    "group.protocol",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "enable.partition.eof",
    "allow.auto.create.topics",
    "log_level",
    "debug",
    "statistics.interval.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "topic.metadata.refresh.interval.ms",
    "metadata.max.age.ms",
    "fetch.queue.backoff.ms",
    "queued.min.messages",
    "fetch.error.backoff.ms",
    "linger.ms",
    "acks",
    "enable.idempotence",
    "message.timeout.ms",
    "compression.codec",
    "compression.type",
];

/// Which path a cluster's fetcher takes: `Ok(true)` for the native one. With
/// `fetch.backend=native` a property the native path does not support is an error
/// naming it; with `auto` such a cluster stays on librdkafka, said once at debug
/// level.
pub(crate) fn choose(given: &Given<'_>) -> Result<bool, SourceError> {
    let props = given.props;
    let backend = props.fetch_backend().map_err(|r| SourceError::Kafka {
        cluster: given.cluster.to_string(),
        message: r.to_string(),
        kind: crate::error::KafkaErrorKind::Configuration,
        retriable: false,
    })?;
    if backend == FetchBackend::Librdkafka {
        return Ok(false);
    }
    let why_not = unsupported(given);
    match (backend, why_not) {
        (FetchBackend::Native, Some(why)) => Err(SourceError::Kafka {
            cluster: given.cluster.to_string(),
            message: format!("fetch.backend=native: {why}"),
            kind: crate::error::KafkaErrorKind::Configuration,
            retriable: false,
        }),
        (FetchBackend::Native, None) => Ok(true),
        (_, Some(why)) => {
            tracing::debug!(cluster = %given.cluster, reason = %why, "fetching with librdkafka");
            Ok(false)
        }
        (_, None) => Ok(AUTO_IS_NATIVE),
    }
}

/// What the native path refuses of `props`, offline, where it would serve the
/// cluster ([`ClientProperties::check`]): as [`choose`] and [`settings`] would, for a
/// reader on a runtime without client hooks.
pub(crate) fn check(props: &ClientProperties) -> Result<(), RefusedProperty> {
    let cluster: Arc<str> = Arc::from("");
    let given = Given {
        cluster: &cluster,
        props,
        hooks: None,
        runtime: true,
    };
    let refusal = |e: SourceError| {
        let message = match e {
            SourceError::Kafka { message, .. } | SourceError::Cluster { message, .. } => message,
            other => other.to_string(),
        };
        // `property `K` refused: why` from [`refused`] and [`number`].
        let own = message.strip_prefix("property `").and_then(|rest| {
            let (key, why) = rest.split_once("` refused: ")?;
            Some((key.to_string(), why.to_string()))
        });
        let (key, reason) = match own {
            Some((key, why)) => (Some(key), why),
            None => {
                let located = props.refusal(&message);
                (located.key, located.reason)
            }
        };
        RefusedProperty {
            key,
            reason,
            by: RefusedBy::NativeFetch,
        }
    };
    let backend = props.fetch_backend()?;
    match (backend, unsupported(&given)) {
        (FetchBackend::Librdkafka, _) | (FetchBackend::Auto, Some(_)) => Ok(()),
        (FetchBackend::Native, Some(why)) => {
            // `property `K` is not supported`, or `K=value …` with a value that is no
            // secret.
            let key = props.refusal(&why).key;
            let own = key.as_ref().map(|k| format!("property `{k}` "));
            let why = match own.as_deref().and_then(|own| why.strip_prefix(own)) {
                Some(rest) => rest.to_string(),
                None => why,
            };
            Err(RefusedProperty {
                key,
                reason: format!(
                    "{}, and fetch.backend=native takes no other path",
                    why.trim_start_matches("is ")
                ),
                by: RefusedBy::NativeFetch,
            })
        }
        (_, None) => settings(&given).map(drop).map_err(refusal),
    }
}

/// Whether the native path serves this cluster, quietly: `fetch.backend` is not
/// `librdkafka` (nor invalid) and the path supports every property set. For the
/// enumerator's lookups, which otherwise stay on librdkafka; the reader's
/// [`choose`] says why, or fails, for the same cluster.
pub(crate) fn serves(given: &Given<'_>) -> bool {
    let backend = given.props.fetch_backend();
    matches!(backend, Ok(FetchBackend::Native | FetchBackend::Auto))
        && AUTO_IS_NATIVE
        && unsupported(given).is_none()
}

/// What `fetch.backend=auto` takes for a cluster the native path supports: the
/// native path (every reading test of the library and of `mck` passed on it, and
/// again on librdkafka with `MCK_FETCH_BACKEND=librdkafka`).
const AUTO_IS_NATIVE: bool = true;

/// Why the native path cannot fetch for this cluster, if it cannot.
pub(super) fn unsupported(given: &Given<'_>) -> Option<String> {
    let props = given.props;
    if given.hooks.is_some() && props.get("statistics.interval.ms").is_some() {
        return Some("the client hooks' statistics are librdkafka's".into());
    }
    if !given.runtime {
        return Some("the reader runs outside a tokio runtime".into());
    }
    let protocol = props
        .get("security.protocol")
        .unwrap_or("plaintext")
        .trim()
        .to_ascii_lowercase();
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Some(format!("security.protocol={protocol} is not supported"));
    }
    if protocol.starts_with("sasl") {
        // librdkafka's default mechanism is GSSAPI.
        let mechanism = mechanism(props).unwrap_or("GSSAPI");
        if Mechanism::parse(mechanism).is_none() {
            return Some(format!(
                "sasl.mechanism={} is not supported yet (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)",
                mechanism.trim()
            ));
        }
        let method = props.get("sasl.oauthbearer.method").map(str::trim);
        if method
            .is_some_and(|m| !m.eq_ignore_ascii_case("default") && !m.eq_ignore_ascii_case("oidc"))
        {
            return Some(format!(
                "sasl.oauthbearer.method={} is not supported",
                method.unwrap_or_default()
            ));
        }
        let grant = props.get("sasl.oauthbearer.grant.type").map(str::trim);
        if grant.is_some_and(|g| {
            !g.eq_ignore_ascii_case("client_credentials") && !g.eq_ignore_ascii_case(JWT_BEARER)
        }) {
            return Some(format!(
                "sasl.oauthbearer.grant.type={} is not supported (client_credentials, {JWT_BEARER})",
                grant.unwrap_or_default()
            ));
        }
    }
    let other = props
        .iter()
        .map(|(k, _)| k)
        .find(|k| !HONOURED.contains(k) && !INDIFFERENT.contains(k));
    other.map(|k| format!("property `{k}` is not supported"))
}
