//! An OAUTHBEARER token provider: the program, not librdkafka, makes the tokens of a
//! cluster (as AWS MSK IAM needs: there, `generate_oauth_token` would return the
//! token of a signer crate and its expiry).
//!
//! The tokens made here are unsecured JWTs (`"alg":"none"`), which only a broker with
//! Kafka's unsecured validator accepts, for example a listener with
//!
//! ```text
//! listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
//! listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler
//! ```
//!
//! (the test kit's secured clusters have one). Run it against such a listener:
//!
//! ```sh
//! MCK_BOOTSTRAP=127.0.0.1:9096 MCK_CA=/path/to/ca.pem MCK_TOPIC=orders \
//!   cargo run -p multicluster-kafka --example oauth_token
//! ```
//!
//! It reads the topic from the earliest to the latest offset and prints how many
//! records it read and how many tokens it made. Without `MCK_CA` it connects with
//! `SASL_PLAINTEXT`.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use multicluster_kafka::hooks::{ClientHooks, OAuthToken};
use multicluster_kafka::prelude::*;

/// Makes a token for `principal`, valid for `lifetime`, whenever librdkafka asks
/// (first when a client is made, then at about 80% of the last token's lifetime).
struct UnsecuredTokens {
    principal: String,
    lifetime: Duration,
    made: AtomicU64,
}

impl ClientHooks for UnsecuredTokens {
    fn enable_token_refresh(&self) -> bool {
        true
    }

    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
        let expires = now + self.lifetime;
        let header = r#"{"alg":"none"}"#;
        let claims = format!(
            r#"{{"sub":"{}","iat":{},"exp":{}}}"#,
            self.principal,
            now.as_secs(),
            expires.as_secs()
        );
        // An unsecured JWS has an empty signature.
        let token = format!(
            "{}.{}.",
            base64url(header.as_bytes()),
            base64url(claims.as_bytes())
        );
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(OAuthToken {
            token,
            principal_name: self.principal.clone(),
            lifetime_ms: expires.as_millis() as i64,
        })
    }
}

/// Base64url without padding (RFC 4648 §5), as JWTs use it.
fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let bootstrap = std::env::var("MCK_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9096".into());
    let topic = std::env::var("MCK_TOPIC").unwrap_or_else(|_| "orders".into());
    let mut cluster = ClusterMetadata::builder(bootstrap)
        .topic(topic)
        .property("sasl.mechanism", "OAUTHBEARER");
    cluster = match std::env::var("MCK_CA") {
        Ok(ca) => cluster
            .property("security.protocol", "SASL_SSL")
            .property("ssl.ca.location", ca),
        Err(_) => cluster.property("security.protocol", "SASL_PLAINTEXT"),
    };
    let stream = KafkaStream::new("orders").with_cluster("secure", cluster.build()?);

    let tokens = Arc::new(UnsecuredTokens {
        principal: "orders-reader".into(),
        lifetime: Duration::from_secs(300),
        made: AtomicU64::new(0),
    });
    let hooks: Arc<dyn ClientHooks> = tokens.clone();
    let mut stream = MultiClusterKafkaSource::builder()
        .metadata_service(StaticMetadataService::new([stream])?)
        .stream_ids(["orders"])
        .deserializer(RawValue)
        .stopping_offsets(StoppingOffsets::Latest)
        // Every client of cluster `secure` gets its tokens from `tokens`.
        .client_hooks(move |cluster: &str| (cluster == "secure").then(|| hooks.clone()))
        .build()?
        .open()
        .await?;
    let mut records = 0u64;
    while let Some(record) = stream.next().await {
        record?;
        records += 1;
    }
    stream.close().await;
    println!(
        "read {records} records with {} tokens",
        tokens.made.load(Ordering::Relaxed)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64url_matches_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64url(plain.as_bytes()), coded);
        }
        assert_eq!(super::base64url(&[0xfb, 0xff]), "-_8");
    }
}
