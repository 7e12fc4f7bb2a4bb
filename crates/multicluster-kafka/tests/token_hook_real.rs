//! OAUTHBEARER tokens from a program's `ClientHooks`, against a real broker's
//! SASL_SSL OAUTHBEARER listener (Kafka's unsecured JWS validator): the records are
//! read exactly once with tokens the hook made, and a provider that fails is an error
//! naming the cluster, not a hang.

mod support;

use std::collections::BTreeSet;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::client_context::{ClientHooks, OAuthToken};
use multicluster_kafka::prelude::*;

fn cluster() -> &'static KafkaCluster {
    mck_testkit::shared_cluster_with(ClusterOptions::new("tokens").secured())
        .expect("the secured cluster starts")
}

/// Unsecured JWTs (`"alg":"none"`) for one principal; or, when `fail`, none.
struct Tokens {
    principal: String,
    fail: bool,
    made: AtomicU64,
}

impl ClientHooks for Tokens {
    fn enable_token_refresh(&self) -> bool {
        true
    }

    fn generate_oauth_token(&self, _: Option<&str>) -> Result<OAuthToken, Box<dyn Error>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        if self.fail {
            return Err("the token service is down".into());
        }
        support::unsecured_token(&self.principal, Duration::from_secs(300))
    }
}

/// The OAUTHBEARER listener's properties without librdkafka's own token maker.
fn stream_through_oauth(c: &KafkaCluster, topic: &str) -> StaticMetadataService {
    let mut props = support::oauth_without_token_maker(c);
    let bootstrap = props.remove(0).1;
    let mut cluster = ClusterMetadata::builder(bootstrap).topic(topic);
    for (k, v) in props {
        cluster = cluster.property(k, v);
    }
    StaticMetadataService::new(
        [KafkaStream::new("s").with_cluster("tok", cluster.build().unwrap())],
    )
    .unwrap()
}

#[test]
fn records_are_read_with_the_hooks_tokens_exactly_once() {
    let c = cluster();
    c.create_topic("hooked", 2).unwrap();
    let records: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord::value(format!("v{i}")).to_partition(i % 2))
        .collect();
    c.produce("hooked", &records).unwrap();
    let tokens = Arc::new(Tokens {
        principal: c.security().unwrap().oauth_principal.clone(),
        fail: false,
        made: AtomicU64::new(0),
    });
    let hooks = tokens.clone();
    let values = mck_testkit::runtime().block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(stream_through_oauth(c, "hooked"))
            .stream_ids(["s"])
            .deserializer(Utf8)
            .stopping_offsets(StoppingOffsets::Latest)
            .client_hooks(move |_: &str| Some(hooks.clone() as Arc<dyn ClientHooks>))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut values = Vec::new();
        while let Some(r) = s.next().await {
            values.push(r.unwrap().value);
        }
        s.close().await;
        values
    });
    let distinct: BTreeSet<&String> = values.iter().collect();
    assert_eq!(values.len(), 40, "{values:?}");
    assert_eq!(distinct.len(), 40);
    // The lookup client and the reader's consumer each asked for a token.
    assert!(tokens.made.load(Ordering::Relaxed) >= 2);
}

#[test]
fn a_failing_token_provider_is_an_error_naming_the_cluster() {
    let c = cluster();
    c.create_topic("refused", 1).unwrap();
    let tokens = Arc::new(Tokens {
        principal: "nobody".into(),
        fail: true,
        made: AtomicU64::new(0),
    });
    let hooks = tokens.clone();
    let started = Instant::now();
    let err = mck_testkit::runtime()
        .block_on(async {
            MultiClusterKafkaSource::builder()
                .metadata_service(stream_through_oauth(c, "refused"))
                .stream_ids(["s"])
                .stopping_offsets(StoppingOffsets::Latest)
                .client_timeout(Duration::from_secs(5))
                .client_hooks(move |_: &str| Some(hooks.clone() as Arc<dyn ClientHooks>))
                .build()
                .unwrap()
                .open()
                .await
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("cluster `tok`"), "{err}");
    assert!(err.contains("the token service is down"), "{err}");
    assert!(tokens.made.load(Ordering::Relaxed) >= 1);
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");
}
