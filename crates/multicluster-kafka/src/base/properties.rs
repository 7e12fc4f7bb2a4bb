//! librdkafka client properties, with secret values kept out of logs and `Debug`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The property every cluster must define.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

/// The property that chooses how a cluster's records are fetched
/// ([`FetchBackend`]).
pub const FETCH_BACKEND: &str = "fetch.backend";

/// The environment variable that gives `fetch.backend` to clusters that do not set
/// it ([`ClientProperties::fetch_backend`]).
pub const FETCH_BACKEND_VAR: &str = "MCK_FETCH_BACKEND";

/// The property that sets how many connections, each with a fetch in flight, the
/// native fetch path keeps to each broker ([`ClientProperties::fetch_connections`]).
pub const FETCH_CONNECTIONS: &str = "fetch.connections.per.broker";

/// The property that sets from what size the native fetch path hands a value out as
/// a part of the fetch answer it came in instead of copying it
/// ([`ClientProperties::fetch_share_min_bytes`]).
pub const FETCH_SHARE: &str = "fetch.share.min.bytes";

/// `fetch.share.min.bytes` when unset. Measured with `mck consume --format value`
/// (BENCHMARKS.md), sharing every value cost 8 % more CPU at 100 B, came out even
/// at 256 B, and saved 10 % at 512 B, 20 % at 1 and 4 KiB, 40 % at 16 KiB; the
/// default leaves a margin above the crossing, as a value kept shared keeps its
/// whole answer alive.
pub const DEFAULT_SHARE_MIN_BYTES: usize = 1024;

/// Properties of the source itself, read by it and never handed to librdkafka.
pub const SOURCE_KEYS: &[&str] = &[FETCH_BACKEND, FETCH_CONNECTIONS, FETCH_SHARE];

/// How a cluster's records are fetched (its `fetch.backend` property).
///
/// ```
/// use multicluster_kafka::properties::{ClientProperties, FetchBackend};
/// let mut p = ClientProperties::new();
/// assert_eq!(p.fetch_backend().unwrap(), FetchBackend::Auto);
/// p.set("fetch.backend", "native");
/// assert_eq!(p.fetch_backend().unwrap(), FetchBackend::Native);
/// p.set("fetch.backend", "fast");
/// assert!(p.fetch_backend().unwrap_err().to_string().contains("native, librdkafka or auto"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchBackend {
    /// The source's own Fetch requests where they support every property the
    /// cluster sets, librdkafka elsewhere (docs/native-fetch.md).
    #[default]
    Auto,
    /// The source's own Fetch requests; a property they do not support is an error.
    Native,
    /// librdkafka's consumer.
    Librdkafka,
}

/// What `Debug` and `Display` print instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// The properties librdkafka itself treats as sensitive (`_RK_SENSITIVE` in its
/// configuration table): it prints them as `[redacted]` in its own configuration
/// dumps, and so do we. A test checks this list against the librdkafka source the
/// build uses.
pub const LIBRDKAFKA_SENSITIVE: &[&str] = &[
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.password",
    "sasl.username",
    "ssl.ca.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl_key",
];

/// True when a property's value must never be shown.
///
/// Every property librdkafka treats as sensitive ([`LIBRDKAFKA_SENSITIVE`]: the SASL
/// user name and password, key passwords and passphrases, private keys and their
/// paths, `sasl.oauthbearer.client.secret`, `sasl.oauthbearer.config`, …), and any
/// other key that mentions a password, passphrase, secret, token, credential, private
/// key or a Java JAAS configuration (keys of other clients, or of librdkafka versions
/// to come). Keys are compared without regard to case.
///
/// ```
/// use multicluster_kafka::properties::is_secret_key;
/// assert!(is_secret_key("sasl.password"));
/// assert!(is_secret_key("ssl.key.pem"));
/// assert!(is_secret_key("sasl.oauthbearer.assertion.private.key.passphrase"));
/// assert!(!is_secret_key("bootstrap.servers"));
/// assert!(!is_secret_key("ssl.ca.location"));
/// ```
pub fn is_secret_key(key: &str) -> bool {
    let k = key.trim().to_ascii_lowercase();
    const WORDS: [&str; 9] = [
        "password",
        "passphrase",
        "secret",
        "token",
        "credential",
        "jaas",
        "apikey",
        "api.key",
        "private.key",
    ];
    // Where a token comes from is no secret.
    const NOT_SECRET: [&str; 1] = ["sasl.oauthbearer.token.endpoint.url"];
    LIBRDKAFKA_SENSITIVE.contains(&k.as_str())
        || !NOT_SECRET.contains(&k.as_str())
            && (WORDS.iter().any(|w| k.contains(w)) || k.ends_with(".pem") && k.contains("key"))
}

/// Client properties for one Kafka cluster (librdkafka configuration keys).
///
/// Values are compared by equality, so a rotated credential makes two property sets
/// differ, but `Debug` never prints a secret: values whose key looks like a credential
/// ([`is_secret_key`]) and values that came from a `${env:…}` or `${file:…}` reference
/// are shown as `<redacted>`.
///
/// Serialization writes the values as they are: it is meant for the user's own
/// configuration, never for checkpoints, logs or metrics.
///
/// ```
/// use multicluster_kafka::properties::ClientProperties;
/// let mut p = ClientProperties::new();
/// p.set("bootstrap.servers", "127.0.0.1:9092");
/// p.set("sasl.password", "hunter2");
/// let shown = format!("{p:?}");
/// assert!(shown.contains("127.0.0.1:9092"));
/// assert!(!shown.contains("hunter2"));
/// ```
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClientProperties {
    values: BTreeMap<String, String>,
    #[serde(skip)]
    secret_keys: BTreeSet<String>,
}

impl ClientProperties {
    /// An empty set of properties.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a property; returns the previous value.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.values.insert(key.into(), value.into())
    }

    /// Sets a property whose value is a secret whatever its key (for example a value
    /// resolved from a `${file:…}` reference).
    pub fn set_secret(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        self.secret_keys.insert(key.clone());
        self.values.insert(key, value.into());
    }

    /// The value of a property.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Removes a property.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.secret_keys.remove(key);
        self.values.remove(key)
    }

    /// The `fetch.backend` property. When it is unset, the `MCK_FETCH_BACKEND`
    /// environment variable gives the default (one switch for every cluster of every
    /// source in the process, e.g. to go back to librdkafka without touching
    /// configuration); without it, [`FetchBackend::Auto`].
    ///
    /// # Errors
    ///
    /// A value other than `native`, `librdkafka` or `auto` (case ignored), naming the
    /// property or the variable.
    pub fn fetch_backend(&self) -> Result<FetchBackend, RefusedProperty> {
        let (value, from) = match self.get(FETCH_BACKEND) {
            Some(v) => (v.to_string(), FETCH_BACKEND),
            None => match std::env::var(FETCH_BACKEND_VAR) {
                Ok(v) => (v, FETCH_BACKEND_VAR),
                Err(_) => return Ok(FetchBackend::Auto),
            },
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(FetchBackend::Auto),
            "native" => Ok(FetchBackend::Native),
            "librdkafka" => Ok(FetchBackend::Librdkafka),
            _ => Err(RefusedProperty {
                key: Some(FETCH_BACKEND.into()),
                by: RefusedBy::Source,
                reason: format!("{from} must be native, librdkafka or auto"),
            }),
        }
    }

    /// The `fetch.connections.per.broker` property: how many connections the native
    /// fetch path keeps to each broker it fetches from, each with one fetch in flight
    /// for its share of the broker's partitions. 2 when unset.
    ///
    /// ```
    /// use multicluster_kafka::properties::ClientProperties;
    /// let mut p = ClientProperties::new();
    /// assert_eq!(p.fetch_connections().unwrap(), 2);
    /// p.set("fetch.connections.per.broker", "1");
    /// assert_eq!(p.fetch_connections().unwrap(), 1);
    /// p.set("fetch.connections.per.broker", "0");
    /// let refused = p.fetch_connections().unwrap_err();
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "property `fetch.connections.per.broker` refused: a whole number from 1 to 8"
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// A value that is not a whole number from 1 to 8, naming the property.
    pub fn fetch_connections(&self) -> Result<usize, RefusedProperty> {
        let Some(value) = self.get(FETCH_CONNECTIONS) else {
            return Ok(2);
        };
        match value.trim().parse::<usize>() {
            Ok(n @ 1..=8) => Ok(n),
            _ => Err(RefusedProperty {
                key: Some(FETCH_CONNECTIONS.into()),
                by: RefusedBy::Source,
                reason: "a whole number from 1 to 8".into(),
            }),
        }
    }

    /// The `fetch.share.min.bytes` property: on the native fetch path, a value of at
    /// least this many bytes is handed out as a part of the fetch answer it came in
    /// (no copy; the batch then keeps that answer alive), a smaller one is copied
    /// into the batch's own buffer. [`DEFAULT_SHARE_MIN_BYTES`] when unset.
    ///
    /// ```
    /// use multicluster_kafka::properties::{ClientProperties, DEFAULT_SHARE_MIN_BYTES};
    /// let mut p = ClientProperties::new();
    /// assert_eq!(p.fetch_share_min_bytes().unwrap(), DEFAULT_SHARE_MIN_BYTES);
    /// p.set("fetch.share.min.bytes", "1024");
    /// assert_eq!(p.fetch_share_min_bytes().unwrap(), 1024);
    /// p.set("fetch.share.min.bytes", "-1");
    /// assert_eq!(
    ///     p.fetch_share_min_bytes().unwrap_err().to_string(),
    ///     "property `fetch.share.min.bytes` refused: a whole number of bytes"
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// A value that is not a whole number, naming the property.
    pub fn fetch_share_min_bytes(&self) -> Result<usize, RefusedProperty> {
        let Some(value) = self.get(FETCH_SHARE) else {
            return Ok(DEFAULT_SHARE_MIN_BYTES);
        };
        value.trim().parse::<usize>().map_err(|_| RefusedProperty {
            key: Some(FETCH_SHARE.into()),
            by: RefusedBy::Source,
            reason: "a whole number of bytes".into(),
        })
    }

    /// Checks the source's own properties ([`SOURCE_KEYS`]), which librdkafka never
    /// sees.
    ///
    /// # Errors
    ///
    /// The first of them whose value is refused, naming it.
    pub fn check_source_keys(&self) -> Result<(), RefusedProperty> {
        self.fetch_backend()?;
        self.fetch_connections()?;
        self.fetch_share_min_bytes()?;
        Ok(())
    }

    /// The `bootstrap.servers` list, if set.
    pub fn bootstrap_servers(&self) -> Option<&str> {
        self.get(BOOTSTRAP_SERVERS)
    }

    /// The value of a property as a person may see it: `<redacted>` for a secret.
    pub fn shown(&self, key: &str) -> Option<&str> {
        self.get(key)
            .map(|v| if self.is_secret(key) { REDACTED } else { v })
    }

    /// True when this key's value must never be shown.
    pub fn is_secret(&self, key: &str) -> bool {
        self.secret_keys.contains(key) || is_secret_key(key)
    }

    /// What of the secret values a client's own words may show: each secret value
    /// (of three characters or more), and for a secret bootstrap list each of its
    /// brokers as `host:port` and as `host` (librdkafka names a broker
    /// `sasl_ssl://host:9092/bootstrap` in its errors and logs, in lower case). In
    /// lower case, longest first, so that a text containing another is hidden whole
    /// ([`hide_secrets`]).
    pub(crate) fn secret_texts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (key, value) in self.iter().filter(|(k, _)| self.is_secret(k)) {
            out.push(value.trim().to_string());
            if key == BOOTSTRAP_SERVERS {
                for entry in value.split(',').map(str::trim) {
                    let addr = entry.rsplit_once("://").map_or(entry, |(_, a)| a);
                    let host = match addr.rsplit_once(':') {
                        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
                        _ => addr,
                    };
                    out.push(addr.to_string());
                    out.push(
                        host.trim_start_matches('[')
                            .trim_end_matches(']')
                            .to_string(),
                    );
                }
            }
        }
        out.retain(|t| t.len() >= 3);
        for t in &mut out {
            t.make_ascii_lowercase();
        }
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        out
    }

    /// Iterates over `(key, value)` pairs in key order, secrets included (to hand them
    /// to a client). Use [`ClientProperties::redacted`] for anything a person sees.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Iterates over `(key, value)` pairs with secret values replaced by `<redacted>`.
    pub fn redacted(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| {
            if self.is_secret(k) {
                (k.as_str(), REDACTED)
            } else {
                (k.as_str(), v.as_str())
            }
        })
    }

    /// Number of properties.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no property is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Returns a copy with `overrides` applied on top of `self`.
    pub fn merged_with(&self, overrides: &ClientProperties) -> ClientProperties {
        let mut out = self.clone();
        for (k, v) in &overrides.values {
            out.values.insert(k.clone(), v.clone());
        }
        out.secret_keys
            .extend(overrides.secret_keys.iter().cloned());
        out
    }
}

/// A client property refused before any connection: the key, when the refusal names
/// one, who refused it, and why. Never holds a property value: values named in the
/// reason are replaced by `<redacted>` (see [`ClientProperties::check`]).
///
/// ```
/// use multicluster_kafka::properties::{RefusedBy, RefusedProperty};
/// let r = RefusedProperty {
///     key: Some("fetch.max.bytes".into()),
///     reason: "Invalid value".into(),
///     by: RefusedBy::Librdkafka,
/// };
/// assert_eq!(r.to_string(), "property `fetch.max.bytes` refused by librdkafka: Invalid value");
/// ```
///
/// The source's own properties ([`SOURCE_KEYS`]) are refused by the source, and say so:
///
/// ```
/// use multicluster_kafka::properties::{RefusedBy, RefusedProperty};
/// let r = RefusedProperty { key: Some("fetch.backend".into()), reason: "bad".into(), by: RefusedBy::Source };
/// assert_eq!(r.to_string(), "property `fetch.backend` refused: bad");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", match (key, by) {
    (Some(k), RefusedBy::Source) => format!("property `{k}` refused: "),
    (Some(k), RefusedBy::Librdkafka) => format!("property `{k}` refused by librdkafka: "),
    (Some(k), RefusedBy::NativeFetch) => format!("property `{k}` refused by the native fetch path: "),
    (None, RefusedBy::Librdkafka) => "the client properties are refused by librdkafka: ".to_string(),
    (None, _) => "the client properties are refused: ".to_string(),
})]
pub struct RefusedProperty {
    /// The key refused, or the first key the reason names; `None` when the reason
    /// names none of the properties.
    pub key: Option<String>,
    /// The reason, without any property value.
    pub reason: String,
    /// Who refused it.
    pub by: RefusedBy,
}

/// Who refused a client property.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusedBy {
    /// librdkafka, as it sets a property or makes a client.
    #[default]
    Librdkafka,
    /// The source, for its own properties ([`SOURCE_KEYS`]).
    Source,
    /// The native fetch path, which serves the cluster and cannot take the value
    /// (it checks what librdkafka leaves to the connection, such as certificate
    /// files for OIDC, and names the values it accepts).
    NativeFetch,
}

/// Whether `text[at..at + len]` is a whole property key (not part of a longer one).
fn whole_key(text: &str, at: usize, len: usize) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_';
    let before = text[..at].chars().next_back();
    let after = text[at + len..].chars().next();
    // A key at the end of a sentence ("… ssl.ca.location.") is still whole.
    let after_ok = match after {
        None => true,
        Some('.') => text[at + len + 1..].chars().next().is_none_or(|c| !part(c)),
        Some(c) => !part(c),
    };
    before.is_none_or(|c| !part(c)) && after_ok
}

impl ClientProperties {
    /// A refusal of these properties, from librdkafka's `reason`: located at the key
    /// the reason names first (keys of these properties only), and with every value of
    /// these properties taken out of the reason (secret values wherever they appear;
    /// others where quoted, or where they are at least four characters long).
    ///
    /// ```
    /// use multicluster_kafka::properties::ClientProperties;
    /// let p: ClientProperties = [("ssl.keystore.location", "/srv/ks.p12")].into_iter().collect();
    /// let r = p.refusal("Failed to open ssl.keystore.location: /srv/ks.p12: no such file");
    /// assert_eq!(r.key.as_deref(), Some("ssl.keystore.location"));
    /// assert_eq!(r.reason, "Failed to open ssl.keystore.location: <redacted>: no such file");
    /// ```
    pub fn refusal(&self, reason: &str) -> RefusedProperty {
        let mut key: Option<(usize, &str)> = None;
        for (k, _) in self.iter() {
            let found = reason
                .match_indices(k)
                .map(|(at, _)| at)
                .find(|&at| whole_key(reason, at, k.len()));
            if let Some(at) = found
                && key
                    .is_none_or(|(first, other)| at < first || at == first && k.len() > other.len())
            {
                key = Some((at, k));
            }
        }
        let mut text = reason.trim().to_string();
        // Longer values first, so a value that contains another goes whole.
        let mut values: Vec<(&str, &str)> = self.iter().filter(|(_, v)| !v.is_empty()).collect();
        values.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        for (k, v) in values {
            if self.is_secret(k) || v.chars().count() >= 4 {
                text = text.replace(v, REDACTED);
            } else {
                text = text.replace(&format!("\"{v}\""), &format!("\"{REDACTED}\""));
            }
        }
        // A secret bootstrap list's brokers, named one by one.
        let text = hide_secrets(&text, &self.secret_texts()).into_owned();
        RefusedProperty {
            key: key.map(|(_, k)| k.to_string()),
            reason: text,
            by: RefusedBy::Librdkafka,
        }
    }
}

impl fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.redacted()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ClientProperties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut p = ClientProperties::new();
        for (k, v) in iter {
            p.set(k, v);
        }
        p
    }
}

/// `text` with each of `secrets` ([`ClientProperties::secret_texts`], in lower case)
/// replaced by `<redacted>` wherever it occurs as a whole name: ASCII case ignored,
/// and not as part of a longer name (a secret host `kafka` leaves `rdkafka#consumer-1`
/// and `kafka-2.example` alone). Longer secrets are matched first.
pub(crate) fn hide_secrets<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    if secrets.is_empty() {
        return Cow::Borrowed(text);
    }
    // ASCII lower-casing keeps every byte offset (and every char boundary).
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let name = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let whole = |at: usize, len: usize| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + len).copied();
        let next = bytes.get(at + len + 1).copied();
        let longer_before = before.is_some_and(|b| name(b) || b == b'.');
        // A dot ends a sentence, or continues a longer host name.
        let longer_after =
            after.is_some_and(name) || (after == Some(b'.') && next.is_some_and(name));
        !longer_before && !longer_after
    };
    let mut found: Vec<(usize, usize)> = Vec::new();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        for (at, _) in lower.match_indices(secret.as_str()) {
            let end = at + secret.len();
            if whole(at, secret.len()) && found.iter().all(|&(a, e)| end <= a || at >= e) {
                found.push((at, end));
            }
        }
    }
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    found.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, end) in found {
        out.push_str(&text[last..at]);
        out.push_str(REDACTED);
        last = end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_bootstrap_list_is_hidden_broker_by_broker_whatever_the_case() {
        let mut p = ClientProperties::new();
        p.set_secret(
            BOOTSTRAP_SERVERS,
            "SASL_SSL://Kafka-1.internal:9093, kafka-2.internal:9093,[::1]:9092",
        );
        p.set("sasl.password", "pw");
        let secrets = p.secret_texts();
        let text = "sasl_ssl://kafka-1.internal:9093/bootstrap: Connect to ipv4#10.0.0.1:9093 failed; \
                    KAFKA-2.INTERNAL:9093/2: down; [::1]:9092/bootstrap: refused; host kafka-2.internal";
        let hidden = hide_secrets(text, &secrets);
        for leak in ["kafka-1", "kafka-2", "KAFKA-2", "::1"] {
            assert!(!hidden.contains(leak), "{leak} in {hidden}");
        }
        assert_eq!(
            hidden,
            "sasl_ssl://<redacted>/bootstrap: Connect to ipv4#10.0.0.1:9093 failed; \
             <redacted>/2: down; <redacted>/bootstrap: refused; host <redacted>"
        );
        // Only whole names: a longer host, a client name or a sentence's end.
        let mut short = ClientProperties::new();
        short.set_secret(BOOTSTRAP_SERVERS, "kafka:9092");
        assert_eq!(
            hide_secrets(
                "rdkafka#consumer-1: kafka:9092/bootstrap: down; kafka-2.kafka.svc and kafka.",
                &short.secret_texts()
            ),
            "rdkafka#consumer-1: <redacted>/bootstrap: down; kafka-2.kafka.svc and <redacted>."
        );
        // A short secret (here the password) is not hunted in every text.
        assert!(!secrets.contains(&"pw".to_string()));
        // Nothing to hide: the text is not copied.
        assert!(matches!(
            hide_secrets("no broker named", &secrets),
            Cow::Borrowed(_)
        ));
        // A bootstrap list that is not secret is shown.
        let mut open = ClientProperties::new();
        open.set(BOOTSTRAP_SERVERS, "kafka-1.internal:9093");
        assert!(open.secret_texts().is_empty());
    }

    #[test]
    fn debug_output_redacts_secret_keys_and_marked_values() {
        let mut p = ClientProperties::new();
        p.set("bootstrap.servers", "b1:9092");
        p.set(
            "sasl.jaas.config",
            "org.apache...PlainLoginModule password=\"p4ss\"",
        );
        p.set_secret("sasl.username", "alice-from-file");
        let shown = format!("{p:?}");
        assert!(shown.contains("b1:9092"), "{shown}");
        assert!(!shown.contains("p4ss"), "{shown}");
        assert!(!shown.contains("alice-from-file"), "{shown}");
        assert_eq!(shown.matches(REDACTED).count(), 2, "{shown}");
    }

    #[test]
    fn every_librdkafka_sensitive_key_and_common_credential_names_are_secret() {
        for key in LIBRDKAFKA_SENSITIVE {
            assert!(is_secret_key(key), "{key}");
            assert!(is_secret_key(&key.to_ascii_uppercase()), "{key}");
        }
        for key in [
            "sasl.jaas.config",
            "basic.auth.user.info.password",
            "schema.registry.api.key",
            "my.token",
            "ssl.keystore.password",
            "ssl.truststore.password",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "bootstrap.servers",
            "security.protocol",
            "sasl.mechanism",
            "ssl.ca.location",
            "ssl.certificate.location",
            "ssl.certificate.pem",
            "ssl.endpoint.identification.algorithm",
            "sasl.oauthbearer.method",
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.token.endpoint.url",
            "client.id",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn a_rotated_secret_makes_properties_differ() {
        let a: ClientProperties = [("sasl.password", "one")].into_iter().collect();
        let b: ClientProperties = [("sasl.password", "two")].into_iter().collect();
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn librdkafka_refusals_name_the_key_and_never_a_value() {
        let check = |pairs: &[(&str, &str)]| {
            let mut p: ClientProperties = pairs.iter().copied().collect();
            p.set("bootstrap.servers", "127.0.0.1:9");
            p.check()
        };
        assert_eq!(check(&[("fetch.max.bytes", "1048576")]), Ok(()));
        // The source's own properties are checked by the source.
        let share = check(&[("fetch.share.min.bytes", "lots")]).unwrap_err();
        assert_eq!(
            share.key.as_deref(),
            Some("fetch.share.min.bytes"),
            "{share}"
        );
        assert_eq!(check(&[("fetch.share.min.bytes", "2048")]), Ok(()));
        let bad = check(&[("fetch.max.bytes", "banana")]).unwrap_err();
        assert_eq!(bad.key.as_deref(), Some("fetch.max.bytes"), "{bad}");
        assert!(!bad.to_string().contains("banana"), "{bad}");
        let unknown = check(&[("no.such.key", "x1")]).unwrap_err();
        assert_eq!(unknown.key.as_deref(), Some("no.such.key"), "{unknown}");
        assert!(
            unknown.reason.contains("No such configuration property"),
            "{unknown}"
        );
        // librdkafka quotes this value in its reason.
        let protocol = check(&[("security.protocol", "bogus-protocol")]).unwrap_err();
        assert!(
            !protocol.to_string().contains("bogus-protocol"),
            "{protocol}"
        );
        // Refused only when a client is made: the files are loaded then.
        let ca = check(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/missing/ca-file.pem"),
        ])
        .unwrap_err();
        assert_eq!(ca.key.as_deref(), Some("ssl.ca.location"), "{ca}");
        assert!(!ca.to_string().contains("ca-file"), "{ca}");
        // Properties checked against each other.
        let pair =
            check(&[("fetch.max.bytes", "1000"), ("message.max.bytes", "100000")]).unwrap_err();
        assert_eq!(pair.key.as_deref(), Some("fetch.max.bytes"), "{pair}");
    }

    #[test]
    fn a_refusal_loses_every_value_and_finds_the_first_whole_key() {
        let mut p = ClientProperties::new();
        p.set("ssl.key.location", "/k");
        p.set("ssl.key", "x");
        p.set("ssl.keystore.location", "/srv/store.p12");
        p.set_secret("client.id", "id-from-a-file");
        p.set("fetch.wait.max.ms", "12");
        let r = p.refusal(
            "ssl.keystore.location /srv/store.p12 then ssl.key.location.x and ssl.key.location, \
             id-from-a-file, \"12\" and 12",
        );
        assert_eq!(r.key.as_deref(), Some("ssl.keystore.location"));
        assert!(!r.reason.contains("store.p12"), "{r}");
        assert!(!r.reason.contains("id-from-a-file"), "{r}");
        assert!(r.reason.ends_with("\"<redacted>\" and 12"), "{r}");
        let later = p.refusal("see ssl.key.location.");
        assert_eq!(later.key.as_deref(), Some("ssl.key.location"));
        assert_eq!(p.refusal("nothing named").key, None);
        assert_eq!(
            p.refusal("nothing named").to_string(),
            "the client properties are refused by librdkafka: nothing named"
        );
    }
}
