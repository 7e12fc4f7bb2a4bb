//! librdkafka client properties, with secret values kept out of logs and `Debug`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The property every cluster must define.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

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

    /// The `bootstrap.servers` list, if set.
    pub fn bootstrap_servers(&self) -> Option<&str> {
        self.get(BOOTSTRAP_SERVERS)
    }

    /// True when this key's value must never be shown.
    pub fn is_secret(&self, key: &str) -> bool {
        self.secret_keys.contains(key) || is_secret_key(key)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
