//! The client hooks of `SourceBuilder::client_hooks`: statistics and OAUTHBEARER token
//! requests of each cluster's clients reach that cluster's hooks (in-process librdkafka
//! mock clusters; token requests are made before any broker is asked, so the mock's
//! lack of SASL does not matter to them).

use crate::support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::hooks::{ClientHooks, KafkaErrorKind, OAuthToken};
use multicluster_kafka::metadata::SingleClusterMetadataService;
use multicluster_kafka::prelude::*;
use multicluster_kafka::properties::ClientProperties;
use support::meta;

#[derive(Default)]
struct Recorder {
    provide_tokens: bool,
    /// (client name, broker names) of each statistics report.
    stats: Mutex<Vec<(String, Vec<String>)>>,
    /// The `sasl.oauthbearer.config` of each token request.
    token_requests: Mutex<Vec<Option<String>>>,
    errors: AtomicUsize,
}

impl ClientHooks for Recorder {
    fn enable_token_refresh(&self) -> bool {
        self.provide_tokens
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        self.token_requests
            .lock()
            .unwrap()
            .push(oauthbearer_config.map(str::to_string));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        Ok(OAuthToken {
            token: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.".into(),
            principal_name: "alice".into(),
            lifetime_ms: (now + Duration::from_secs(600)).as_millis() as i64,
        })
    }

    fn stats_raw(&self, statistics: &[u8]) {
        let json: serde_json::Value =
            serde_json::from_slice(statistics).expect("librdkafka's statistics are JSON");
        let name = json["name"].as_str().expect("a client name").to_string();
        let brokers = json["brokers"]
            .as_object()
            .expect("a brokers object")
            .values()
            .map(|b| b["name"].as_str().expect("a broker name").to_string())
            .collect();
        self.stats.lock().unwrap().push((name, brokers));
    }

    fn error(&self, _kind: KafkaErrorKind, _reason: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// The recorder of each cluster.
type Recorders = Vec<(String, Arc<Recorder>)>;

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    // A guard against hangs, not a timing assertion.
    let patience = Instant::now();
    while !done() {
        assert!(
            patience.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn statistics_of_each_clusters_clients_reach_that_clusters_hooks() {
    let east = MockKafkaCluster::start("east", 1).unwrap();
    let west = MockKafkaCluster::start("west", 1).unwrap();
    for c in [&east, &west] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value("v")]).unwrap();
    }
    let stream = KafkaStream::new("s")
        .with_cluster("east", meta(&east, &["t"]))
        .with_cluster("west", meta(&west, &["t"]));
    let recorders: Arc<Mutex<Recorders>> = Arc::default();
    let made = recorders.clone();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .property("statistics.interval.ms", "100")
            .client_hooks(move |cluster: &str| {
                // One recorder per cluster, shared by all its clients.
                let mut made = made.lock().unwrap();
                let r = match made.iter().find(|(c, _)| c == cluster) {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = Arc::new(Recorder::default());
                        made.push((cluster.to_string(), r.clone()));
                        r
                    }
                };
                Some(r as Arc<dyn ClientHooks>)
            })
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for _ in 0..2 {
            assert_eq!(s.next().await.unwrap().unwrap().value, "v");
        }
        let of = |cluster: &str| {
            recorders
                .lock()
                .unwrap()
                .iter()
                .find(|(c, _)| c == cluster)
                .map(|(_, r)| r.clone())
        };
        // Each cluster's one client reports: the reader fetches with the client the
        // enumerator made for its lookups.
        let clients = |r: &Recorder| -> BTreeSet<String> {
            r.stats
                .lock()
                .unwrap()
                .iter()
                .map(|(n, _)| n.clone())
                .collect()
        };
        wait_for("statistics of each cluster's client", || {
            ["east", "west"]
                .iter()
                .all(|c| of(c).is_some_and(|r| !clients(&r).is_empty()))
        });
        // Several more reports (one every 100 ms per client) from whatever clients
        // there are.
        std::thread::sleep(Duration::from_millis(500));
        for cluster in ["east", "west"] {
            let names = clients(&of(cluster).unwrap());
            assert_eq!(names.len(), 1, "{cluster}: clients {names:?}");
        }
        for (cluster, own, other) in [("east", &east, &west), ("west", &west, &east)] {
            let r = of(cluster).unwrap();
            let own_port = own
                .bootstrap_servers()
                .rsplit(':')
                .next()
                .unwrap()
                .to_string();
            let other_port = other
                .bootstrap_servers()
                .rsplit(':')
                .next()
                .unwrap()
                .to_string();
            let stats = r.stats.lock().unwrap();
            assert!(
                stats
                    .iter()
                    .flat_map(|(_, brokers)| brokers)
                    .any(|b| b.contains(&own_port)),
                "{cluster}: {stats:?}"
            );
            assert!(
                !stats
                    .iter()
                    .flat_map(|(_, brokers)| brokers)
                    .any(|b| b.contains(&other_port)),
                "{cluster} saw the other cluster's brokers: {stats:?}"
            );
            assert!(r.token_requests.lock().unwrap().is_empty());
        }
        s.close().await;
    });
}

#[test]
fn a_token_provider_is_asked_for_the_first_token_of_each_client() {
    let c = MockKafkaCluster::start("sasl", 1).unwrap();
    let recorder = Arc::new(Recorder {
        provide_tokens: true,
        ..Default::default()
    });
    let hooks = recorder.clone();
    let stream = KafkaStream::new("s").with_cluster(
        "sasl",
        ClusterMetadata::builder(c.bootstrap_servers())
            .topic("t")
            .property("security.protocol", "SASL_PLAINTEXT")
            .property("sasl.mechanism", "OAUTHBEARER")
            .property("sasl.oauthbearer.config", "scope=read")
            // librdkafka's clients ask for a token when they are made; the native
            // path asks when a connection authenticates, which a mock cluster
            // (no SASL) never lets it do: `native_path` and `token_hook_real` show
            // its tokens on a real listener.
            .property("fetch.backend", "librdkafka")
            .build()
            .unwrap(),
    );
    let rt = mck_testkit::runtime();
    let opened = rt.block_on(async {
        MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .client_timeout(Duration::from_secs(2))
            // Bounded: a follow run would start without the cluster and retry it.
            .stopping_offsets(StoppingOffsets::Latest)
            .client_hooks(move |_: &str| Some(hooks.clone() as Arc<dyn ClientHooks>))
            .build()
            .unwrap()
            .open()
            .await
    });
    // The mock cluster speaks no SASL, so the source cannot open; the lookup client
    // asked for its token first.
    let err = opened.unwrap_err().to_string();
    assert!(err.contains("sasl"), "{err}");
    let requests = recorder.token_requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|r| r.as_deref() == Some("scope=read")),
        "{requests:?}"
    );
}

#[test]
fn oauthbearer_without_a_token_source_is_refused_at_once() {
    let stream = KafkaStream::new("s").with_cluster(
        "c",
        ClusterMetadata::builder("127.0.0.1:1")
            .topic("t")
            .property("security.protocol", "SASL_SSL")
            .property("sasl.mechanism", "OAUTHBEARER")
            .build()
            .unwrap(),
    );
    let started = Instant::now();
    let err = mck_testkit::runtime()
        .block_on(async {
            MultiClusterKafkaSource::builder()
                .metadata_service(StaticMetadataService::new([stream]).unwrap())
                .stream_ids(["s"])
                .build()
                .unwrap()
                .open()
                .await
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cluster `c`") && err.contains("token source"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_single_cluster_service_takes_hooks_too() {
    let c = MockKafkaCluster::start("single", 1).unwrap();
    c.create_topic("orders", 1).unwrap();
    let recorder = Arc::new(Recorder::default());
    let props: ClientProperties = [
        ("bootstrap.servers", c.bootstrap_servers()),
        ("statistics.interval.ms", "100".to_string()),
    ]
    .into_iter()
    .collect();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let svc = SingleClusterMetadataService::with_client_hooks(
            "single",
            props,
            Some(recorder.clone() as Arc<dyn ClientHooks>),
        )
        .unwrap();
        let streams = svc.all_streams().await.unwrap();
        assert!(streams.contains_key("orders"));
        svc.close().await.unwrap();
    });
    // The admin client is a producer to librdkafka, which emits statistics only to
    // consumers' event queues; its errors and log lines still go through the context.
    assert_eq!(recorder.errors.load(Ordering::Relaxed), 0);
}
