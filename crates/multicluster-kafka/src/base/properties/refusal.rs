//! A client property refused ([`RefusedProperty`]), and who refused it.

use super::map::ClientProperties;
use super::secrets::{REDACTED, hide_secrets};

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
///
/// [`SOURCE_KEYS`]: super::SOURCE_KEYS
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
    /// The source, for its own properties ([`SOURCE_KEYS`](super::SOURCE_KEYS)).
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

#[cfg(test)]
mod tests {
    use super::*;

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
