//! Client configuration: the librdkafka settings every client of the source is made
//! from (the cluster's properties over the source's defaults), what else a client is
//! made with (the program's hooks, the `tracing` dispatcher), the checks an
//! OAUTHBEARER cluster's token source must pass, and the offline check of a cluster's
//! properties against librdkafka.

use std::sync::Arc;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;

use crate::base::hooks::{ClientHooks, ClientHooksFactory};
use crate::base::properties::{
    BOOTSTRAP_SERVERS, ClientProperties, RefusedBy, RefusedProperty, SOURCE_KEYS,
};

/// librdkafka settings every client of the source uses unless the properties set them.
///
/// `reconnect.backoff.ms`: librdkafka starts at most one connection to a broker it
/// has not connected to yet per `reconnect.backoff.ms / 2` (its "sparse connections"
/// interval, at least 11 ms). A new client connects to the bootstrap server at once,
/// but its connection to a partition leader learned from the first metadata answer
/// waits out that interval: with the default 100 ms, a fresh client's first metadata
/// answer came after ~60 ms and a new reader's first record about as late (one local
/// broker; `mck-bench`'s `connect_latency` example). 10 ms cuts that to ~25 ms. Reconnection after a failure
/// still backs off exponentially up to `reconnect.backoff.max.ms` (10 s).
pub const CLIENT_DEFAULTS: &[(&str, &str)] = &[("reconnect.backoff.ms", "10")];

/// Builds an rdkafka config from properties (over [`CLIENT_DEFAULTS`] and the CA
/// search of [`ca_probe`]); secret values never reach error text.
pub(crate) fn client_config(props: &ClientProperties) -> ClientConfig {
    let mut config = ClientConfig::new();
    for (k, v) in CLIENT_DEFAULTS {
        config.set(*k, *v);
    }
    for (k, v) in ca_probe(props) {
        config.set(k, v);
    }
    for (k, v) in props.iter() {
        if !SOURCE_KEYS.contains(&k) {
            config.set(k, v);
        }
    }
    config
}

/// `ssl.ca.location=probe` when a TLS cluster's properties give no CA.
///
/// librdkafka links a vendored OpenSSL, whose built-in CA directory is not the
/// system's: without a CA location, a broker whose certificate is signed by a public
/// CA, as the managed services' are, would be refused. `probe` makes librdkafka look
/// in the usual system places (`/etc/ssl/certs/ca-certificates.crt` and the like).
/// (`https.ca.location`, for an OIDC token endpoint, is left to the properties: it is
/// refused by a librdkafka built without libcurl, which would then name a property
/// the user never set.)
fn ca_probe(props: &ClientProperties) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    let tls = props
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_uppercase().ends_with("SSL"));
    let unset = |keys: &[&str]| keys.iter().all(|k| props.get(k).is_none());
    if tls && unset(&["ssl.ca.location", "ssl.ca.pem", "ssl.ca.certificate.stores"]) {
        out.push(("ssl.ca.location", "probe"));
    }
    out
}

/// librdkafka settings the readers' consumers use (besides [`CLIENT_DEFAULTS`](crate::CLIENT_DEFAULTS))
/// unless the cluster's properties set them.
///
/// `fetch.queue.backoff.ms`: when the application applies back-pressure, librdkafka's
/// prefetch queue fills and it postpones the next fetch by this much (1000 ms by
/// default), which stalls a partition for a second after every burst. 10 ms keeps it
/// flowing.
pub const READER_DEFAULTS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "10")];

/// The group id of a source that has none: librdkafka wants one for manual assignment
/// and committed-offset lookups, and never joins it.
const FALLBACK_GROUP: &str = "multicluster-kafka";

/// The settings of every client of a cluster that reads and looks up: the cluster's
/// properties over the defaults, and the settings of a consumer with manual
/// assignment that never commits by itself. `group` overrides the properties' group
/// id. Two clients made from equal properties get equal settings, which is what lets
/// them be one.
pub(crate) fn consumer_config(props: &ClientProperties, group: Option<&str>) -> ClientConfig {
    let mut config = client_config(props);
    for (key, value) in READER_DEFAULTS {
        if props.get(key).is_none() {
            config.set(*key, *value);
        }
    }
    let group = group
        .or_else(|| props.get("group.id"))
        .unwrap_or(FALLBACK_GROUP);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("enable.partition.eof", "false");
    config
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

/// What librdkafka accepts for `key`: the range or the values of its own table of
/// properties (`rd_kafka_conf_properties_show`, read once), when it gives one.
fn accepted(key: &str) -> Option<&'static str> {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<String, String>> =
        std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| parse_properties_table(&properties_table()))
        .get(key)
        .map(String::as_str)
}

/// librdkafka's table of its properties, as it prints it (CONFIGURATION.md's).
fn properties_table() -> String {
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream gives a FILE that writes to a buffer it allocates;
    // librdkafka writes its table to it; fclose flushes it and sets `buf` and `len`,
    // and the buffer is copied and then freed with free(3), as open_memstream says.
    unsafe {
        let fp = libc::open_memstream(&mut buf, &mut len);
        if fp.is_null() {
            return String::new();
        }
        rdkafka::bindings::rd_kafka_conf_properties_show(fp.cast());
        libc::fclose(fp);
        if buf.is_null() {
            return String::new();
        }
        let text =
            String::from_utf8_lossy(std::slice::from_raw_parts(buf.cast::<u8>(), len)).into_owned();
        libc::free(buf.cast());
        text
    }
}

/// Each property's non-empty range column, by name.
fn parse_properties_table(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [name, scope, range, ..] = cells.as_slice() else {
                return None;
            };
            let is_property = ["C", "P", "*"].contains(scope)
                && !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
            (is_property && !range.is_empty()).then(|| (name.to_string(), range.to_string()))
        })
        .collect()
}

/// A client that only checks its configuration: it never connects (no bootstrap
/// servers) and says nothing (its log lines and errors are dropped).
struct Quiet;

impl rdkafka::ClientContext for Quiet {
    // As the source's own clients (`SourceContext`), so the same properties pass.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, _: rdkafka::config::RDKafkaLogLevel, _: &str, _: &str) {}

    fn error(&self, _: rdkafka::error::KafkaError, _: &str) {}
}

impl rdkafka::consumer::ConsumerContext for Quiet {}

impl ClientProperties {
    /// Checks these properties as the source's clients would take them, without
    /// connecting: the source's own keys; librdkafka, with each key and value as it
    /// sets it, then a client made from them all (which loads certificates and keys,
    /// and checks the properties against each other) but without
    /// `bootstrap.servers`, the source's own client defaults underneath; and, where
    /// the native fetch path would serve the cluster (`fetch.backend` `auto` or
    /// `native`), its settings, which read the files librdkafka reads only once
    /// connected (an OIDC endpoint's CA, a JWT assertion's key).
    ///
    /// Blocks for as long as loading the named files takes; no network call.
    ///
    /// ```
    /// use multicluster_kafka::properties::ClientProperties;
    /// let mut p = ClientProperties::new();
    /// p.set("bootstrap.servers", "127.0.0.1:9092");
    /// p.set("fetch.max.bytes", "banana");
    /// let refused = p.check().unwrap_err();
    /// assert_eq!(refused.key.as_deref(), Some("fetch.max.bytes"));
    /// assert!(!refused.to_string().contains("banana"));
    /// ```
    ///
    /// # Errors
    ///
    /// The first property librdkafka refuses (keys in order), or what the client
    /// creation said, located with [`ClientProperties::refusal`]; then what the native
    /// path refuses ([`RefusedBy::NativeFetch`]).
    pub fn check(&self) -> Result<(), RefusedProperty> {
        self.check_source_keys()?;
        for (k, v) in self.iter().filter(|(k, _)| !SOURCE_KEYS.contains(k)) {
            let mut one = rdkafka::ClientConfig::new();
            one.set(k, v);
            match one.create_native_config() {
                Ok(_) => {}
                Err(KafkaError::ClientConfig(_, desc, _, _)) => {
                    let mut r = self.refusal(&desc);
                    r.key = Some(k.to_string());
                    // "Invalid value …" alone does not say what would do.
                    if !desc.contains("range")
                        && let Some(range) = accepted(k)
                    {
                        r.reason = format!("{} (accepted: {range})", r.reason);
                    }
                    return Err(r);
                }
                Err(KafkaError::Nul(_)) => {
                    return Err(RefusedProperty {
                        key: Some(k.to_string()),
                        reason: "the key or value contains a NUL character".into(),
                        by: RefusedBy::Librdkafka,
                    });
                }
                Err(e) => return Err(self.refusal(&e.to_string())),
            }
        }
        let mut offline = self.clone();
        offline.remove(BOOTSTRAP_SERVERS);
        let mut config = client_config(&offline);
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        // The source's own words about the token source; they hold no value.
        prepare(&mut config, &offline, None).map_err(|reason| RefusedProperty {
            key: ["sasl.mechanism", "sasl.mechanisms"]
                .into_iter()
                .find(|k| self.get(k).is_some())
                .map(str::to_string),
            reason,
            by: RefusedBy::Librdkafka,
        })?;
        init_tls();
        match config.create_with_context::<_, rdkafka::consumer::BaseConsumer<Quiet>>(Quiet) {
            Ok(_client) => crate::native::settings::check(self),
            Err(KafkaError::ClientCreation(reason)) => Err(self.refusal(&reason)),
            Err(KafkaError::ClientConfig(_, desc, key, _)) => {
                let mut r = self.refusal(&desc);
                r.key = Some(key);
                Err(r)
            }
            Err(e) => Err(self.refusal(&e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_says_what_librdkafka_accepts_and_never_the_value() {
        assert!(accepted("fetch.max.bytes").is_some_and(|r| r.contains("..")));
        assert!(accepted("isolation.level").is_some_and(|r| r.contains("read_committed")));
        assert_eq!(accepted("no.such.property"), None);
        let mut p = ClientProperties::new();
        p.set("isolation.level", "sometimes");
        let refused = p.check().unwrap_err();
        assert_eq!(refused.key.as_deref(), Some("isolation.level"));
        assert!(
            refused.reason.contains("(accepted: ") && refused.reason.contains("read_committed"),
            "{refused}"
        );
        assert!(!refused.to_string().contains("sometimes"), "{refused}");
        let mut p = ClientProperties::new();
        p.set("fetch.max.bytes", "lots");
        let refused = p.check().unwrap_err().to_string();
        assert!(
            refused.contains("(accepted: ") && refused.contains(" .. "),
            "{refused}"
        );
    }
}
