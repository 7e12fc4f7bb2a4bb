//! Client configuration: what the source's librdkafka clients are made from, and the
//! offline check of a cluster's properties against librdkafka.

use rdkafka::error::KafkaError;

use crate::base::properties::{BOOTSTRAP_SERVERS, ClientProperties, RefusedProperty};

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
    /// Asks librdkafka whether it takes these properties, without connecting: each
    /// key and value as librdkafka sets it, then a client made from them all (which
    /// loads certificates and keys, and checks the properties against each other) but
    /// without `bootstrap.servers`. The source's own client defaults apply underneath,
    /// as in its clients.
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
    /// creation said, located with [`ClientProperties::refusal`].
    pub fn check(&self) -> Result<(), RefusedProperty> {
        for (k, v) in self.iter() {
            let mut one = rdkafka::ClientConfig::new();
            one.set(k, v);
            match one.create_native_config() {
                Ok(_) => {}
                Err(KafkaError::ClientConfig(_, desc, _, _)) => {
                    let mut r = self.refusal(&desc);
                    r.key = Some(k.to_string());
                    return Err(r);
                }
                Err(KafkaError::Nul(_)) => {
                    return Err(RefusedProperty {
                        key: Some(k.to_string()),
                        reason: "the key or value contains a NUL character".into(),
                    });
                }
                Err(e) => return Err(self.refusal(&e.to_string())),
            }
        }
        let mut offline = self.clone();
        offline.remove(BOOTSTRAP_SERVERS);
        let mut config = crate::kafka::client::client_config(&offline);
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        // The source's own words about the token source; they hold no value.
        crate::kafka::hooks::prepare(&mut config, &offline, None).map_err(|reason| {
            RefusedProperty {
                key: ["sasl.mechanism", "sasl.mechanisms"]
                    .into_iter()
                    .find(|k| self.get(k).is_some())
                    .map(str::to_string),
                reason,
            }
        })?;
        crate::kafka::hooks::init_tls();
        match config.create_with_context::<_, rdkafka::consumer::BaseConsumer<Quiet>>(Quiet) {
            Ok(_client) => Ok(()),
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
