//! OAUTHBEARER tokens from a program's `ClientHooks`, against a real broker's
//! SASL_SSL OAUTHBEARER listener (Kafka's unsecured JWS validator): the records are
//! read exactly once with tokens the hook made, and a provider that fails is an error
//! naming the cluster, not a hang.

use crate::support;

use std::collections::BTreeSet;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};
use multicluster_kafka::hooks::{ClientHooks, OAuthToken};
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
    service_through(topic, support::oauth_without_token_maker(c))
}

/// Stream `s` of `topic` on cluster `tok`, reached with `props` (the bootstrap list
/// first).
fn service_through(topic: &str, mut props: Vec<(String, String)>) -> StaticMetadataService {
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

/// Creates `topic` with 2 partitions of 20 records each.
fn forty_records(c: &KafkaCluster, topic: &str) {
    c.create_topic(topic, 2).unwrap();
    mck_testkit::fill_values(c, topic, 2, 20, topic);
}

/// A provider of good tokens for the listener's principal.
fn good_tokens(c: &KafkaCluster) -> Arc<Tokens> {
    Arc::new(Tokens {
        principal: c.security().unwrap().oauth_principal.clone(),
        fail: false,
        made: AtomicU64::new(0),
    })
}

#[test]
fn records_are_read_with_the_hooks_tokens_exactly_once() {
    let c = cluster();
    forty_records(c, "hooked");
    let tokens = good_tokens(c);
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
    // The cluster's client (the enumerator's lookups and the reader's fetches)
    // asked for a token.
    assert!(tokens.made.load(Ordering::Relaxed) >= 1);
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
                // librdkafka asks a failing provider again: the cluster is tried
                // again until the start-up timeout, as one that does not answer.
                .startup_timeout(Some(Duration::from_secs(8)))
                .client_hooks(move |_: &str| Some(hooks.clone() as Arc<dyn ClientHooks>))
                .build()
                .unwrap()
                .open()
                .await
        })
        .unwrap_err()
        .to_string();
    let took = started.elapsed();
    assert!(err.contains("cluster `tok`"), "{err}");
    assert!(err.contains("the token service is down"), "{err}");
    // Not said to refuse the client: the cluster refused nothing.
    assert!(err.contains("start-up timeout"), "{err}");
    assert!(tokens.made.load(Ordering::Relaxed) >= 1);
    assert!(
        took >= Duration::from_secs(8) && took < Duration::from_secs(30),
        "{took:?}: {err}"
    );
}

/// Reads a bounded group-mode source to its end, acknowledging (committing) after
/// every batch and whenever the source asks.
async fn read_acknowledging(s: &mut multicluster_kafka::KafkaSourceStream<Utf8>) -> Vec<String> {
    let mut values = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(200), s.next_batch()).await {
            Ok(Some(Ok(batch))) => {
                values.extend(batch.iter().map(|r| r.value.clone()));
                let cp = s.checkpoint().unwrap();
                s.commit(&cp).await.unwrap();
            }
            Ok(Some(Err(e))) => panic!("{e}"),
            Ok(None) => return values,
            Err(_) if s.acknowledgement_wanted() => {
                let cp = s.checkpoint().unwrap();
                let _ = s.commit(&cp).await;
            }
            Err(_) => {}
        }
    }
}

/// A bounded group-mode source of `topic` through the OAUTHBEARER listener.
fn group_source(
    topic: &str,
    props: Vec<(String, String)>,
) -> multicluster_kafka::SourceBuilder<Utf8> {
    MultiClusterKafkaSource::builder()
        .metadata_service(service_through(topic, props))
        .stream_ids(["s"])
        .deserializer(Utf8)
        .group_id(topic)
        .scale_out(multicluster_kafka::ScaleOut::KafkaGroup)
        .stopping_offsets(StoppingOffsets::Latest)
}

/// Opens a bounded group-mode source, reads it to its end (within 90 s) and checks
/// that it gave 40 distinct records.
fn read_forty_once(builder: multicluster_kafka::SourceBuilder<Utf8>) {
    let values = mck_testkit::runtime().block_on(async {
        let mut s = builder.build().unwrap().open().await.unwrap();
        let values = tokio::time::timeout(Duration::from_secs(90), read_acknowledging(&mut s))
            .await
            .expect("the bounded group run ends");
        s.close().await;
        values
    });
    let distinct: BTreeSet<&String> = values.iter().collect();
    assert_eq!((values.len(), distinct.len()), (40, 40), "{values:?}");
}

#[test]
fn group_mode_members_use_librdkafkas_own_unsecured_tokens() {
    let c = cluster();
    forty_records(c, "jwt-group");
    // The listener's own properties: librdkafka makes unsecured JWTs itself.
    let props = c.listener_properties(mck_testkit::Listener::OauthSsl);
    assert!(
        props
            .iter()
            .any(|(k, v)| k == "enable.sasl.oauthbearer.unsecure.jwt" && v == "true"),
        "{props:?}"
    );
    read_forty_once(group_source("jwt-group", props));
}

#[test]
fn group_mode_members_authenticate_with_the_hooks_tokens() {
    let c = cluster();
    forty_records(c, "hooked-group");
    let tokens = good_tokens(c);
    let hooks = tokens.clone();
    // The group member joins only with a token from the hooks; without one the group
    // never assigns anything and the bounded run never ends.
    let props = support::oauth_without_token_maker(c);
    read_forty_once(
        group_source("hooked-group", props)
            .client_hooks(move |_: &str| Some(hooks.clone() as Arc<dyn ClientHooks>)),
    );
    // The cluster's client (lookups and fetches) and the group member each asked.
    assert!(tokens.made.load(Ordering::Relaxed) >= 2);
}
