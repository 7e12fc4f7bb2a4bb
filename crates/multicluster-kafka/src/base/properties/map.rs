//! [`ClientProperties`]: the map of keys to values, and what a person may see of it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::secrets::{REDACTED, is_secret_key};

/// The property every cluster must define.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

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
    /// ([`hide_secrets`](super::hide_secrets)).
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
    fn a_rotated_secret_makes_properties_differ() {
        let a: ClientProperties = [("sasl.password", "one")].into_iter().collect();
        let b: ClientProperties = [("sasl.password", "two")].into_iter().collect();
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
