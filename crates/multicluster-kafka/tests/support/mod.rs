//! Helpers shared by the library's integration tests (`mod support;` in each).
//!
//! Each test file is its own binary and uses only some of these, so the rest would be
//! reported as dead code there.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mck_testkit::{KafkaCluster, Listener, Seen, shared_cluster};
use multicluster_kafka::client_context::OAuthToken;
use multicluster_kafka::prelude::*;

/// How long a read may wait for records: a guard against hangs, not a timing
/// assertion.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The shared cluster `east`.
pub fn east() -> &'static KafkaCluster {
    shared_cluster("east").expect("cluster east starts")
}

/// The shared cluster `west`.
pub fn west() -> &'static KafkaCluster {
    shared_cluster("west").expect("cluster west starts")
}

/// A stream `id` over these clusters.
pub fn stream(id: &str, clusters: Vec<(&str, ClusterMetadata)>) -> KafkaStream {
    clusters
        .into_iter()
        .fold(KafkaStream::new(id), |s, (c, m)| s.with_cluster(c, m))
}

/// Where a record came from, and its value.
pub fn seen_of(r: Record<String>) -> Seen {
    (
        r.cluster.to_string(),
        r.topic.to_string(),
        r.partition,
        r.offset,
        r.value,
    )
}

/// Reads a bounded stream to its end.
pub async fn drain<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
) -> Vec<Seen> {
    let mut out = Vec::new();
    let done = tokio::time::timeout(PATIENCE, async {
        while let Some(r) = stream.next().await {
            out.push(seen_of(r.expect("record")));
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "the bounded read did not end; got {} records",
        out.len()
    );
    out
}

/// Reads exactly `n` records.
pub async fn take<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
    n: usize,
) -> Vec<Seen> {
    let mut out = Vec::new();
    read_until(stream, &mut out, |s| s.len() >= n).await;
    out
}

/// Reads into `seen` until `done` holds.
pub async fn read_until<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
    seen: &mut Vec<Seen>,
    mut done: impl FnMut(&Vec<Seen>) -> bool,
) {
    let ok = tokio::time::timeout(PATIENCE, async {
        while !done(seen) {
            let r = stream.next().await.expect("stream continues");
            seen.push(seen_of(r.expect("record")));
        }
    })
    .await;
    assert!(ok.is_ok(), "gave up after {} records", seen.len());
}

/// The properties of `c`'s OAUTHBEARER listener without librdkafka's own unsecured
/// token maker, so that a program's token provider has to give the tokens.
pub fn oauth_without_token_maker(c: &KafkaCluster) -> Vec<(String, String)> {
    c.listener_properties(Listener::OauthSsl)
        .into_iter()
        .filter(|(k, _)| {
            k != "enable.sasl.oauthbearer.unsecure.jwt" && k != "sasl.oauthbearer.config"
        })
        .collect()
}

/// An unsecured JWS token (`"alg":"none"`, what the broker's unsecured validator
/// accepts) for `principal`, valid from now for `valid_for`.
pub fn unsecured_token(
    principal: &str,
    valid_for: Duration,
) -> Result<OAuthToken, Box<dyn std::error::Error>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let expires = now + valid_for.as_secs();
    let claims = format!(r#"{{"sub":"{principal}","iat":{now},"exp":{expires}}}"#);
    Ok(OAuthToken {
        token: format!(
            "{}.{}.",
            base64url(br#"{"alg":"none"}"#),
            base64url(claims.as_bytes())
        ),
        principal_name: principal.to_string(),
        lifetime_ms: (expires * 1000) as i64,
    })
}

/// Base64url without padding (RFC 4648 §5).
pub fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
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
