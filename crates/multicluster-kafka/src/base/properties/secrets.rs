//! Which property keys are secret, and secret values hidden in a client's own words.

use std::borrow::Cow;

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

/// `text` with each of `secrets` ([`ClientProperties::secret_texts`], in lower case)
/// replaced by `<redacted>` wherever it occurs as a whole name: ASCII case ignored,
/// and not as part of a longer name (a secret host `kafka` leaves `rdkafka#consumer-1`
/// and `kafka-2.example` alone). Longer secrets are matched first.
///
/// [`ClientProperties::secret_texts`]: super::ClientProperties::secret_texts
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
    use super::super::{BOOTSTRAP_SERVERS, ClientProperties};
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
}
