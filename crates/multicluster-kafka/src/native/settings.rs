//! Which clusters the native path serves, and its settings from a cluster's client
//! properties (librdkafka's names and defaults): for the readers' fetches
//! (`reader/native_fetch.rs`) and the enumerator's lookups alike.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::base::hooks::ClientHooks;
use crate::base::properties::{
    BOOTSTRAP_SERVERS, ClientProperties, FetchBackend, RefusedBy, RefusedProperty, hide_secrets,
};
use crate::error::SourceError;

use multicluster_kafka_client::Listener;
use multicluster_kafka_client::assertion::{
    self as jwt, Algorithm, Assertion, Claims, Key, Signed,
};
use multicluster_kafka_client::calls::FetchSettings;
use multicluster_kafka_client::conn::ConnectOptions;
use multicluster_kafka_client::credentials::{Mechanism, Sasl, Tokens};
use multicluster_kafka_client::oauth::Unsecured;
use multicluster_kafka_client::oidc::{Grant, JWT_BEARER, Oidc, Roots};
use multicluster_kafka_client::partition::PartitionOptions;
use multicluster_kafka_client::tls::{Pem, Tls, TlsSettings};

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
    // TLS (`security.protocol=ssl`), with OpenSSL as librdkafka: native/tls.rs.
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    // SASL PLAIN and SCRAM (`sasl_plaintext`, `sasl_ssl`): native/sasl.rs.
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    // OAUTHBEARER with the client hooks' tokens, an OIDC endpoint or an unsecured JWT:
    // native/oauth.rs, native/oidc.rs.
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
    // The JWT-bearer grant's assertion: native/assertion.rs.
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
fn unsupported(given: &Given<'_>) -> Option<String> {
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

/// A property as a number, or librdkafka's default; a value that is not one is an
/// error naming the key (never the value).
fn number<T: std::str::FromStr>(
    given: &Given<'_>,
    keys: &[&str],
    default: T,
) -> Result<T, SourceError> {
    for key in keys {
        if let Some(v) = given.props.get(key) {
            return v.trim().parse().map_err(|_| SourceError::Kafka {
                cluster: given.cluster.to_string(),
                message: format!("property `{key}` refused: not a number in range"),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
    }
    Ok(default)
}

/// The cluster's native settings from its properties (librdkafka's names and
/// defaults).
pub(crate) fn settings(given: &Given<'_>) -> Result<Settings, SourceError> {
    let props: &ClientProperties = given.props;
    let bootstrap: Vec<String> = props
        .bootstrap_servers()
        .unwrap_or_default()
        .split(',')
        .map(|s| {
            let s = s.trim();
            s.split_once("://").map_or(s, |(_, a)| a).to_string()
        })
        .filter(|s| !s.is_empty())
        .collect();
    let read_committed = match props.get("isolation.level").map(str::trim) {
        None | Some("read_committed") => true,
        Some("read_uncommitted") => false,
        Some(_) => {
            return Err(SourceError::Kafka {
                cluster: given.cluster.to_string(),
                message: "property `isolation.level` refused: read_committed or read_uncommitted"
                    .into(),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
    };
    let check_crcs = matches!(props.get("check.crcs").map(str::trim), Some("true"));
    let max_frame: usize = number(given, &["receive.message.max.bytes"], 100_000_000)?;
    let lanes = props
        .fetch_connections()
        .map_err(|e| refused(given, crate::base::properties::FETCH_CONNECTIONS, e.reason))?;
    let share_from = props
        .fetch_share_min_bytes()
        .map_err(|e| refused(given, crate::base::properties::FETCH_SHARE, e.reason))?;
    let max_bytes: i32 = number(given, &["fetch.max.bytes"], 52_428_800)?;
    let fetch = FetchSettings {
        max_wait_ms: number(given, &["fetch.wait.max.ms"], 500)?,
        min_bytes: number(given, &["fetch.min.bytes"], 1)?,
        // The fetches in flight to a broker share `fetch.max.bytes`, so a broker's
        // answers take no more memory than one fetch at a time would.
        max_bytes: (max_bytes / i32::try_from(lanes).unwrap_or(1).max(1)).max(1),
        read_committed,
        // A leader may point a client of a known rack to a replica in it
        // (KIP-392), which the cluster's broker tasks then follow.
        rack: props.get("client.rack").unwrap_or("").trim().to_string(),
    };
    let timeout_ms: u64 = number(given, &["socket.timeout.ms"], 60_000)?;
    let tls = tls(given)?;
    let connect = ConnectOptions {
        tls,
        sasl: sasl(given)?,
        client_id: props.get("client.id").unwrap_or("rdkafka").to_string(),
        // A fetch waits up to fetch.wait.max.ms before the broker answers.
        timeout: Duration::from_millis(timeout_ms)
            + Duration::from_millis(u64::try_from(fetch.max_wait_ms).unwrap_or(0)),
        max_frame_size: max_frame.max(max_bytes.max(0) as usize + (1 << 20)),
    };
    let budget_kb: usize = number(given, &["queued.max.messages.kbytes"], 65_536)?;
    let partition_max_bytes = number(
        given,
        &["max.partition.fetch.bytes", "fetch.message.max.bytes"],
        1_048_576,
    )?;
    let partition = PartitionOptions {
        read_committed,
        check_crcs,
        max_decompressed: max_frame.max(64 << 20),
    };
    Ok(Settings {
        bootstrap,
        connect,
        fetch,
        partition_max_bytes,
        budget: budget_kb.saturating_mul(1024).max(1 << 20),
        lanes,
        share_from,
        partition,
        errors: super::reported::listener(given.hooks),
    })
}

/// Tokens from the OIDC token endpoint of `sasl.oauthbearer.*` and `https.ca.*`.
fn oidc_tokens(given: &Given<'_>) -> Result<Tokens, SourceError> {
    let props = given.props;
    let required = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| props.get(k))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                refused(
                    given,
                    keys[0],
                    "not set (sasl.oauthbearer.method=oidc needs it)",
                )
            })
    };
    let endpoint = required(&["sasl.oauthbearer.token.endpoint.url"])?;
    let jwt_bearer = props
        .get("sasl.oauthbearer.grant.type")
        .is_some_and(|g| g.trim().eq_ignore_ascii_case(JWT_BEARER));
    let grant = if jwt_bearer {
        // librdkafka sends no client id nor secret with this grant.
        Grant::JwtBearer(assertion(given)?)
    } else {
        let id = required(&[
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.credentials.client.id",
        ])?;
        let secret = required(&[
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
        ])?;
        Grant::ClientCredentials {
            id: id.to_string(),
            secret: secret.to_string(),
        }
    };
    let extensions = multicluster_kafka_client::oauth::parse_extensions(
        props.get("sasl.oauthbearer.extensions").unwrap_or(""),
    )
    .map_err(|why| refused(given, "sasl.oauthbearer.extensions", why))?;
    let roots = match (props.get("https.ca.pem"), props.get("https.ca.location")) {
        (Some(pem), _) => Roots::Pem(pem.as_bytes().to_vec()),
        (None, None) => Roots::System,
        (None, Some(l)) if l.trim() == "probe" => Roots::System,
        (None, Some(location)) => Roots::Pem(
            read_cas(Path::new(location.trim()))
                .map_err(|why| refused(given, "https.ca.location", why))?,
        ),
    };
    let ca_key = if props.get("https.ca.pem").is_some() {
        "https.ca.pem"
    } else {
        "https.ca.location"
    };
    let oidc =
        Oidc::new(endpoint, grant, props.get("sasl.oauthbearer.scope"), roots).map_err(|why| {
            let key = if why.starts_with("the CA") {
                ca_key
            } else {
                "sasl.oauthbearer.token.endpoint.url"
            };
            refused(given, key, why)
        })?;
    Ok(Tokens::oidc(oidc, extensions))
}

/// The JWT-bearer grant's assertions from `sasl.oauthbearer.assertion.*`, as librdkafka
/// takes them: a prepared one from `sasl.oauthbearer.assertion.file` (which no other
/// assertion property may join), else one signed with the private key of `.file` or
/// `.pem` (one of them). Checked now: the files read, the key opened, the claims
/// complete; an error names the property, never a secret.
fn assertion(given: &Given<'_>) -> Result<Assertion, SourceError> {
    let props = given.props;
    let set = |key: &str| {
        props
            .get(key)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let assertion = if let Some(file) = set(jwt::FILE) {
        let others = [
            jwt::KEY_FILE,
            jwt::KEY_PEM,
            jwt::PASSPHRASE,
            jwt::TEMPLATE,
            jwt::SUB,
            jwt::AUD,
            jwt::ISS,
            jwt::JTI,
            jwt::EXP,
            jwt::NBF,
        ];
        if let Some(other) = others.into_iter().find(|k| props.get(k).is_some()) {
            return Err(refused(
                given,
                other,
                format!("cannot be set with {} (a prepared assertion)", jwt::FILE),
            ));
        }
        Assertion::File(file.into())
    } else {
        let key = match (props.get(jwt::KEY_FILE), props.get(jwt::KEY_PEM)) {
            (Some(_), Some(_)) => {
                return Err(refused(
                    given,
                    jwt::KEY_PEM,
                    format!("cannot be set with {}: one key", jwt::KEY_FILE),
                ));
            }
            (Some(file), None) => Key::File(file.trim().into()),
            (None, Some(pem)) => Key::Pem(pem.to_string()),
            (None, None) => {
                return Err(refused(
                    given,
                    jwt::KEY_FILE,
                    format!(
                        "not set, nor {}, nor {} (sasl.oauthbearer.grant.type={JWT_BEARER} needs one)",
                        jwt::KEY_PEM,
                        jwt::FILE
                    ),
                ));
            }
        };
        let algorithm = match props.get(jwt::ALGORITHM) {
            None => Algorithm::Rs256,
            Some(a) => Algorithm::parse(a)
                .ok_or_else(|| refused(given, jwt::ALGORITHM, "RS256 or ES256"))?,
        };
        let seconds = |key: &str, least: u64, default: u64| match props.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (least..=2_147_483_647).contains(n))
                .ok_or_else(|| {
                    refused(
                        given,
                        key,
                        format!("a number of seconds, {least} to 2147483647"),
                    )
                }),
        };
        let jti = match props.get(jwt::JTI).map(|v| v.trim().to_ascii_lowercase()) {
            None => false,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(_) => return Err(refused(given, jwt::JTI, "true or false")),
        };
        let claims = Claims {
            sub: set(jwt::SUB),
            iss: set(jwt::ISS),
            aud: set(jwt::AUD),
            exp_seconds: seconds(jwt::EXP, 1, 300)?,
            nbf_seconds: seconds(jwt::NBF, 0, 60)?,
            jti,
        };
        Assertion::Signed(Box::new(Signed {
            algorithm,
            key,
            passphrase: props.get(jwt::PASSPHRASE).map(str::to_string),
            template: set(jwt::TEMPLATE).map(Into::into),
            claims,
        }))
    };
    assertion.check().map_err(|r| {
        // Paths given by reference (`${file:…}`) are as secret as their values.
        let why = hide_secrets(&r.why, &props.secret_texts()).into_owned();
        refused(given, r.property, why)
    })?;
    Ok(assertion)
}

/// The PEM certificates of a file, or of every file in a directory.
fn read_cas(location: &Path) -> Result<Vec<u8>, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", location.display());
    if !location.is_dir() {
        return std::fs::read(location).map_err(cannot);
    }
    let mut pem = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(location)
        .map_err(cannot)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    for path in entries {
        if let Ok(bytes) = std::fs::read(&path) {
            pem.extend_from_slice(&bytes);
            pem.push(b'\n');
        }
    }
    Ok(pem)
}

/// The cluster's TLS from its `ssl.*` properties (librdkafka's names and defaults),
/// with its files read; none unless `security.protocol=ssl`.
fn tls(given: &Given<'_>) -> Result<Option<Tls>, SourceError> {
    let props = given.props;
    let ssl = props.get("security.protocol").is_some_and(|p| {
        let p = p.trim();
        p.eq_ignore_ascii_case("ssl") || p.eq_ignore_ascii_case("sasl_ssl")
    });
    if !ssl {
        return Ok(None);
    }
    let pem = |file: &str, text: &str| {
        props
            .get(text)
            .map(|t| Pem::Text(t.to_string()))
            .or_else(|| props.get(file).map(|f| Pem::File(f.trim().into())))
    };
    // A property with two values (case-insensitive; unset: the first, librdkafka's
    // default) as a bool.
    let either = |property: &str, yes: &str, no: &str| match props
        .get(property)
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => Ok(true),
        Some(v) if v == yes => Ok(true),
        Some(v) if v == no => Ok(false),
        Some(_) => Err(refused(given, property, format!("{yes} or {no}"))),
    };
    let verify_hostname = either("ssl.endpoint.identification.algorithm", "https", "none")?;
    let verify_certificate = either("enable.ssl.certificate.verification", "true", "false")?;
    let settings = TlsSettings {
        // librdkafka's `probe` looks for the system's CAs: OpenSSL's defaults.
        ca: pem("ssl.ca.location", "ssl.ca.pem")
            .filter(|p| !matches!(p, Pem::File(f) if f.as_os_str() == "probe")),
        certificate: pem("ssl.certificate.location", "ssl.certificate.pem"),
        key: pem("ssl.key.location", "ssl.key.pem"),
        key_password: props.get("ssl.key.password").map(str::to_string),
        verify_hostname,
        verify_certificate,
    };
    // A path given by reference (`${env:…}`, `${file:…}`) is as secret as its
    // value: hidden like librdkafka's words about it.
    Tls::new(&settings)
        .map(Some)
        .map_err(|e| SourceError::Kafka {
            cluster: given.cluster.to_string(),
            message: hide_secrets(&e.to_string(), &props.secret_texts()).into_owned(),
            kind: crate::error::KafkaErrorKind::Configuration,
            retriable: false,
        })
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

/// `sasl.mechanism` (or its other spelling `sasl.mechanisms`), if set.
fn mechanism(props: &ClientProperties) -> Option<&str> {
    props
        .get("sasl.mechanism")
        .or_else(|| props.get("sasl.mechanisms"))
}

/// The cluster's SASL credentials; none unless `security.protocol` is `sasl_*`.
fn sasl(given: &Given<'_>) -> Result<Option<Sasl>, SourceError> {
    let props = given.props;
    let sasl = props
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl"));
    if !sasl {
        return Ok(None);
    }
    let mechanism = mechanism(props).and_then(Mechanism::parse).ok_or_else(|| {
        refused(
            given,
            "sasl.mechanism",
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
        )
    })?;
    if mechanism == Mechanism::OAuthBearer {
        return oauth(given).map(|tokens| Some(Sasl::oauth(tokens)));
    }
    let username = props
        .get("sasl.username")
        .ok_or_else(|| refused(given, "sasl.username", "not set"))?;
    let password = props
        .get("sasl.password")
        .ok_or_else(|| refused(given, "sasl.password", "not set"))?;
    Ok(Some(Sasl::password(
        mechanism,
        username.to_string(),
        password.to_string(),
    )))
}

/// Where an OAUTHBEARER cluster's tokens come from, as librdkafka takes them: the
/// client hooks when they make tokens, else an unsecured JWT when
/// `enable.sasl.oauthbearer.unsecure.jwt` is true; both, or neither, is refused.
fn oauth(given: &Given<'_>) -> Result<Tokens, SourceError> {
    let props = given.props;
    let unsecure = props
        .get("enable.sasl.oauthbearer.unsecure.jwt")
        .map(str::trim);
    let unsecure = match unsecure {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(refused(
                given,
                "enable.sasl.oauthbearer.unsecure.jwt",
                "true or false",
            ));
        }
    };
    let config = props.get("sasl.oauthbearer.config");
    let hooks = given.hooks.filter(|h| h.enable_token_refresh());
    let oidc = props
        .get("sasl.oauthbearer.method")
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("oidc"));
    if oidc {
        if hooks.is_some() || unsecure {
            return Err(refused(
                given,
                "sasl.oauthbearer.method",
                "oidc makes the tokens; the client hooks or an unsecured JWT cannot too",
            ));
        }
        return oidc_tokens(given);
    }
    match (hooks, unsecure) {
        (Some(_), true) => Err(refused(
            given,
            "enable.sasl.oauthbearer.unsecure.jwt",
            "the client hooks make the tokens; set one or the other",
        )),
        (Some(h), false) => Ok(super::reported::hooks_tokens(
            h.clone(),
            config.map(str::to_string),
        )),
        (None, true) => {
            let u = Unsecured::parse(config.unwrap_or(""))
                .map_err(|why| refused(given, "sasl.oauthbearer.config", why))?;
            Ok(Tokens::unsecured(u))
        }
        (None, false) => Err(refused(
            given,
            "sasl.mechanism",
            "OAUTHBEARER needs tokens: client hooks that make them, or enable.sasl.oauthbearer.unsecure.jwt=true",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::hooks::OAuthToken;

    /// Hooks that make tokens (never asked here).
    struct TokenHooks;

    impl ClientHooks for TokenHooks {
        fn enable_token_refresh(&self) -> bool {
            true
        }
        fn generate_oauth_token(
            &self,
            _: Option<&str>,
        ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
            Err("not asked".into())
        }
    }

    fn oauth_props(extra: &[(&str, &str)]) -> ClientProperties {
        let mut p = ClientProperties::new();
        p.set("bootstrap.servers", "127.0.0.1:9092");
        p.set("security.protocol", "sasl_ssl");
        p.set("sasl.mechanism", "OAUTHBEARER");
        for (k, v) in extra {
            p.set(*k, *v);
        }
        p
    }

    /// Whether the path serves `props` (with `hooks`), and its settings' error.
    fn outcome(
        props: &ClientProperties,
        hooks: Option<&Arc<dyn ClientHooks>>,
    ) -> (bool, Option<String>) {
        let cluster: Arc<str> = Arc::from("c");
        let given = Given {
            cluster: &cluster,
            props,
            hooks,
            runtime: true,
        };
        let error = settings(&given).err().map(|e| e.to_string());
        (serves(&given), error)
    }

    /// A broker's fetches in flight share `fetch.max.bytes`; an answer may still be
    /// as large as the whole of it (one batch larger than a request's share).
    #[test]
    fn the_fetches_in_flight_to_a_broker_share_fetch_max_bytes() {
        let of = |extra: &[(&str, &str)]| {
            let s = settings_with(extra).expect("settings");
            (s.lanes, s.fetch.max_bytes, s.connect.max_frame_size)
        };
        assert_eq!(of(&[]), (2, 26_214_400, 100_000_000));
        let one = [("fetch.connections.per.broker", "1")];
        assert_eq!(of(&one), (1, 52_428_800, 100_000_000));
        let large = [
            ("fetch.connections.per.broker", "4"),
            ("fetch.max.bytes", "200000000"),
        ];
        assert_eq!(of(&large), (4, 50_000_000, 200_000_000 + (1 << 20)));
    }

    /// The settings of a plaintext cluster with `extra` properties.
    fn settings_with(extra: &[(&str, &str)]) -> Result<Settings, SourceError> {
        let mut props = ClientProperties::new();
        props.set("bootstrap.servers", "127.0.0.1:9092");
        for (k, v) in extra {
            props.set(*k, *v);
        }
        let cluster: Arc<str> = Arc::from("c");
        settings(&Given {
            cluster: &cluster,
            props: &props,
            hooks: None,
            runtime: true,
        })
    }

    #[test]
    fn the_share_threshold_is_read_and_a_bad_one_refused_by_name() {
        let of = |value: &str| settings_with(&[("fetch.share.min.bytes", value)]);
        assert_eq!(
            settings_with(&[]).unwrap().share_from,
            crate::base::properties::DEFAULT_SHARE_MIN_BYTES
        );
        assert_eq!(of("0").unwrap().share_from, 0);
        let e = of("lots").unwrap_err().to_string();
        assert!(e.contains("`fetch.share.min.bytes` refused"), "{e}");
        assert!(!e.contains("lots"), "{e}");
    }

    #[test]
    fn oauthbearer_is_served_with_one_source_of_tokens_and_refused_with_none_or_two() {
        let hooks: Arc<dyn ClientHooks> = Arc::new(TokenHooks);
        let unsecured = [
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            ("sasl.oauthbearer.config", "principal=carol lifeSeconds=60"),
        ];
        assert_eq!(outcome(&oauth_props(&unsecured), None), (true, None));
        assert_eq!(outcome(&oauth_props(&[]), Some(&hooks)), (true, None));

        let refused = |props: ClientProperties, hooks, key: &str| {
            let (served, error) = outcome(&props, hooks);
            assert!(served, "the choice does not read the tokens' settings");
            let error = error.expect("refused");
            assert!(error.contains(&format!("`{key}`")), "{error}");
        };
        refused(oauth_props(&[]), None, "sasl.mechanism");
        refused(
            oauth_props(&unsecured),
            Some(&hooks),
            "enable.sasl.oauthbearer.unsecure.jwt",
        );
        refused(
            oauth_props(&[("enable.sasl.oauthbearer.unsecure.jwt", "true")]),
            None,
            "sasl.oauthbearer.config",
        );
        refused(
            oauth_props(&[("enable.sasl.oauthbearer.unsecure.jwt", "yes")]),
            None,
            "enable.sasl.oauthbearer.unsecure.jwt",
        );

        // OIDC: its three settings are required, and it is the only source of tokens.
        let oidc = [
            ("sasl.oauthbearer.method", "OIDC"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/token",
            ),
            ("sasl.oauthbearer.client.id", "reader"),
            ("sasl.oauthbearer.client.secret", "s3cret"),
            ("sasl.oauthbearer.extensions", "logicalCluster=lkc-1"),
        ];
        assert_eq!(outcome(&oauth_props(&oidc), None), (true, None));
        refused(
            oauth_props(&oidc[..3]),
            None,
            "sasl.oauthbearer.client.secret",
        );
        refused(oauth_props(&oidc), Some(&hooks), "sasl.oauthbearer.method");
        let mut bad_url = oidc;
        bad_url[1].1 = "idp.example/token";
        refused(
            oauth_props(&bad_url),
            None,
            "sasl.oauthbearer.token.endpoint.url",
        );
        let mut with_ca = oidc.to_vec();
        with_ca.push(("https.ca.location", "/nonexistent/ca.pem"));
        refused(oauth_props(&with_ca), None, "https.ca.location");
        let (_, error) = outcome(&oauth_props(&bad_url), None);
        assert!(!error.unwrap().contains("s3cret"));

        // What only librdkafka does leaves the cluster there.
        let cluster: Arc<str> = Arc::from("c");
        for (key, value, says) in [
            (
                "sasl.oauthbearer.method",
                "magic",
                "sasl.oauthbearer.method=magic",
            ),
            (
                "sasl.oauthbearer.grant.type",
                "password",
                "grant.type=password",
            ),
        ] {
            let props = oauth_props(&[(key, value)]);
            let why = unsupported(&Given {
                cluster: &cluster,
                props: &props,
                hooks: None,
                runtime: true,
            });
            assert!(why.is_some_and(|w| w.contains(says)), "{key}");
        }
        let stats = oauth_props(&[("statistics.interval.ms", "1000")]);
        assert!(!outcome(&stats, Some(&hooks)).0);
    }

    /// A key pair's private half as PKCS#8 PEM (encrypted with `passphrase` if
    /// given), and its public half.
    fn key_pair(passphrase: Option<&str>) -> (String, openssl::pkey::PKey<openssl::pkey::Public>) {
        let key =
            openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        let pem = match passphrase {
            Some(p) => key
                .private_key_to_pem_pkcs8_passphrase(
                    openssl::symm::Cipher::aes_256_cbc(),
                    p.as_bytes(),
                )
                .unwrap(),
            None => key.private_key_to_pem_pkcs8().unwrap(),
        };
        let public =
            openssl::pkey::PKey::public_key_from_pem(&key.public_key_to_pem().unwrap()).unwrap();
        (String::from_utf8(pem).unwrap(), public)
    }

    #[test]
    fn the_jwt_bearer_grant_is_served_and_its_bad_settings_are_one_line_without_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let (pem, _) = key_pair(Some("open-sesame"));
        let key_file = dir.path().join("reader-key.pem");
        std::fs::write(&key_file, &pem).unwrap();
        let key_path = key_file.display().to_string();
        let template = dir.path().join("template.json");
        std::fs::write(
            &template,
            r#"{"header":{"kid":"k1"},"payload":{"scope":"kafka"}}"#,
        )
        .unwrap();
        let template_path = template.display().to_string();
        let assertion_file = dir.path().join("assertion.jwt");
        std::fs::write(&assertion_file, "aGVhZA.Ym9keQ.c2ln\n").unwrap();
        let assertion_path = assertion_file.display().to_string();
        let base: Vec<(&str, &str)> = vec![
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.grant.type", JWT_BEARER),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/token",
            ),
            (jwt::KEY_FILE, &key_path),
            (jwt::PASSPHRASE, "open-sesame"),
            (jwt::TEMPLATE, &template_path),
            (jwt::SUB, "orders-reader"),
            (jwt::ISS, "orders-app"),
            (jwt::AUD, "https://idp.example"),
            (jwt::EXP, "120"),
            (jwt::NBF, "0"),
            (jwt::JTI, "true"),
        ];
        // Served by auto, no client id nor secret needed.
        assert_eq!(outcome(&oauth_props(&base), None), (true, None));
        let prepared = [
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.grant.type", JWT_BEARER),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/token",
            ),
            (jwt::FILE, assertion_path.as_str()),
        ];
        assert_eq!(outcome(&oauth_props(&prepared), None), (true, None));
        let (key_text, _) = key_pair(None);
        let mut es_refused = base.clone();
        es_refused.retain(|(k, _)| *k != jwt::KEY_FILE && *k != jwt::PASSPHRASE);
        es_refused.push((jwt::KEY_PEM, &key_text));
        assert_eq!(outcome(&oauth_props(&es_refused), None), (true, None));
        es_refused.push((jwt::ALGORITHM, "ES256"));

        let with = |changes: &[(&str, Option<&str>)]| {
            let mut props = base.clone();
            for (k, v) in changes {
                props.retain(|(key, _)| key != k);
                if let Some(v) = v {
                    props.push((k, v));
                }
            }
            oauth_props(&props)
        };
        let bad_template = dir.path().join("bad.json");
        std::fs::write(&bad_template, "{\"header\": {}, ").unwrap();
        let bad_template = bad_template.display().to_string();
        let cases: Vec<(ClientProperties, &str, &str)> = vec![
            (
                with(&[(jwt::KEY_FILE, Some("/nonexistent/reader-key.pem"))]),
                jwt::KEY_FILE,
                "cannot read",
            ),
            (
                with(&[(jwt::PASSPHRASE, Some("wrong-passphrase"))]),
                jwt::PASSPHRASE,
                "does not open",
            ),
            (
                with(&[(jwt::PASSPHRASE, None)]),
                jwt::PASSPHRASE,
                "encrypted",
            ),
            (
                with(&[(jwt::ALGORITHM, Some("HS256"))]),
                jwt::ALGORITHM,
                "RS256 or ES256",
            ),
            (
                with(&[(jwt::ALGORITHM, Some("ES256"))]),
                jwt::ALGORITHM,
                "EC key",
            ),
            (
                with(&[(jwt::TEMPLATE, Some(&bad_template))]),
                jwt::TEMPLATE,
                "not JSON",
            ),
            (with(&[(jwt::EXP, Some("0"))]), jwt::EXP, "seconds"),
            (with(&[(jwt::NBF, Some("-1"))]), jwt::NBF, "seconds"),
            (with(&[(jwt::JTI, Some("yes"))]), jwt::JTI, "true or false"),
            (with(&[(jwt::KEY_FILE, None)]), jwt::KEY_FILE, "not set"),
            (
                with(&[(jwt::KEY_PEM, Some(&key_text))]),
                jwt::KEY_PEM,
                "one key",
            ),
            (
                with(&[(jwt::FILE, Some(&assertion_path))]),
                jwt::KEY_FILE,
                "prepared assertion",
            ),
            (oauth_props(&es_refused), jwt::ALGORITHM, "EC key"),
        ];
        for (props, key, says) in cases {
            let (served, error) = outcome(&props, None);
            assert!(
                served,
                "{key}: the choice does not read the assertion's settings"
            );
            let error = error.unwrap_or_else(|| panic!("{key}: not refused"));
            assert!(
                error.contains(&format!("property `{key}` refused")),
                "{error}"
            );
            assert!(error.contains(says), "{error}");
            assert!(!error.contains('\n'), "{error}");
            for secret in [
                "open-sesame",
                "wrong-passphrase",
                "reader-key.pem",
                &pem[40..80],
                &key_text[40..80],
            ] {
                assert!(!error.contains(secret), "{error}");
            }
        }
        // Settings' Debug shows no secret either.
        let cluster: Arc<str> = Arc::from("c");
        let props = oauth_props(&base);
        let s = settings(&Given {
            cluster: &cluster,
            props: &props,
            hooks: None,
            runtime: true,
        })
        .unwrap();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("open-sesame") && !shown.contains("reader-key.pem"),
            "{shown}"
        );
    }
}
