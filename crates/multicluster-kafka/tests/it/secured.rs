//! The source against real TLS and SASL listeners (one broker with every listener of
//! the test kit's secured clusters), topics compressed by Kafka's own Java producer,
//! a migration onto a SASL_SSL cluster under load, and bad credentials and
//! certificates, which must fail with the cause, never hang (nor end a first contact
//! while a slow broker of the bootstrap list may still answer).

use crate::support;
use support::capture;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{
    KafkaCluster, Listener, TestCluster, assert_exactly_once, fill_values, produce_until_stopped,
};
use multicluster_kafka::prelude::*;
use support::{drain, read_until, shared_source};

fn secure() -> &'static KafkaCluster {
    mck_testkit::shared_secured_cluster().expect("the secured cluster starts")
}

/// The plaintext and the secured cluster, started at the same time.
fn plain_and_secure() -> (&'static KafkaCluster, &'static KafkaCluster) {
    mck_testkit::shared_plain_and_secured().expect("the plaintext and the secured cluster start")
}

/// A rich-layout cluster entry reaching `listener`, with `changes` applied (a value of
/// `None` removes the key). Secrets go to files next to the metadata file and are
/// given as `${file:…}` references: passwords, and the client key as `ssl.key.pem`.
fn cluster_yaml(
    dir: &Path,
    id: &str,
    listener: Listener,
    changes: &[(&str, Option<&str>)],
) -> String {
    let mut props = mck_testkit::listener_properties_in(secure(), listener, dir, id, changes);
    if let Some(pw) = props.remove("sasl.password") {
        let name = format!("{id}-password");
        std::fs::write(dir.join(&name), format!("{pw}\n")).unwrap();
        props.insert("sasl.password".into(), format!("${{file:{name}}}"));
    }
    mck_testkit::rich_cluster_entry(id, &props)
}

/// Writes `streams.yaml` with one stream `s` over `clusters` (id, entry, topics) and
/// loads it.
fn load(dir: &Path, clusters: &[(&str, String, Vec<String>)]) -> FileMetadataService {
    let path = dir.join("streams.yaml");
    std::fs::write(&path, mck_testkit::rich_metadata(clusters)).unwrap();
    FileMetadataService::load(&path).expect("the metadata file loads")
}

fn bounded(svc: FileMetadataService) -> MultiClusterKafkaSource<Utf8> {
    MultiClusterKafkaSource::builder()
        .metadata_service(svc)
        .stream_ids(["s"])
        .deserializer(ValueOnly::<String>::utf8())
        .stopping_offsets(StoppingOffsets::Latest)
        .build()
        .unwrap()
}

#[test]
fn every_secured_listener_is_read_exactly_once_with_secrets_from_files() {
    let c = secure();
    let sec = c.security().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut want = BTreeSet::new();
    let mut clusters = Vec::new();
    for (listener, id) in Listener::READ_THROUGH {
        let topic = format!("through-{id}");
        c.create_topic(&topic, 2).unwrap();
        want.extend(fill_values(c, &topic, 2, 50, id));
        clusters.push((id, cluster_yaml(dir.path(), id, listener, &[]), vec![topic]));
    }
    let svc = load(dir.path(), &clusters);
    let cps = dir.path().join("checkpoints");
    mck_testkit::runtime().block_on(async {
        let mut stream = bounded(svc).open().await.unwrap();
        let seen = drain(&mut stream).await;
        assert_exactly_once(&seen, &want);
        for (c, t, _, _, v) in &seen {
            assert_eq!(t, &format!("through-{c}"), "{c} read only its topic");
            assert!(v.starts_with(c.as_str()), "{v} came through {c}");
        }
        // Checkpoints carry positions, never client properties.
        let cp = stream.checkpoint().unwrap();
        let store = FileCheckpointStore::open(&cps, 3).unwrap();
        store.save(&cp).unwrap();
        stream.close().await;
    });
    let key = std::fs::read_to_string(&sec.client_key).unwrap();
    let key_body = key.lines().nth(1).unwrap();
    for entry in std::fs::read_dir(&cps).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for secret in [&sec.scram_password, &sec.plain_password, key_body] {
            assert!(!text.contains(secret), "a secret in a checkpoint:\n{text}");
        }
    }
}

#[test]
fn every_codec_written_by_the_java_producer_is_read_exactly_once() {
    let c = secure();
    let dir = tempfile::tempdir().unwrap();
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    // One Java producer and one kafka-dump-log per codec, all at once.
    let produced: Vec<Vec<String>> = std::thread::scope(|s| {
        let runs: Vec<_> = codecs
            .iter()
            .map(|codec| {
                s.spawn(move || {
                    let topic = format!("codec-{codec}");
                    c.create_topic(&topic, 2).unwrap();
                    let values: Vec<String> = (0..400).map(|i| format!("{codec}-{i:04}")).collect();
                    c.produce_with_java(&topic, &values, &[("compression.type", codec)])
                        .unwrap();
                    let written = c.batch_codecs(&topic).unwrap();
                    assert_eq!(
                        written.into_iter().collect::<Vec<_>>(),
                        [*codec],
                        "{topic} holds {codec} batches only"
                    );
                    values
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let want: BTreeSet<String> = produced.into_iter().flatten().collect();
    let topics: Vec<String> = codecs.iter().map(|c| format!("codec-{c}")).collect();
    // Read over SASL_SSL, so decompression and TLS meet in one read.
    let entry = cluster_yaml(dir.path(), "scram", Listener::ScramSsl, &[]);
    let svc = load(dir.path(), &[("scram", entry, topics)]);
    mck_testkit::runtime().block_on(async {
        let mut stream = bounded(svc).open().await.unwrap();
        let seen = drain(&mut stream).await;
        assert_exactly_once(&seen, &want);
        for (_, t, _, _, v) in &seen {
            assert!(t.ends_with(v.split('-').next().unwrap()), "{v} in {t}");
        }
        stream.close().await;
    });
}

fn meta(bootstrap: String, props: &[(String, String)], topic: &str) -> ClusterMetadata {
    let mut b = ClusterMetadata::builder(bootstrap).topic(topic);
    for (k, v) in props {
        if k != "bootstrap.servers" {
            b = b.property(k.clone(), v.clone());
        }
    }
    b.build().unwrap()
}

fn stream(clusters: Vec<(&str, ClusterMetadata)>) -> KafkaStream {
    support::stream("s", clusters)
}

#[test]
fn a_migration_from_a_plaintext_cluster_to_a_sasl_ssl_cluster_under_load_is_exactly_once() {
    let (old, new) = plain_and_secure();
    old.create_topic("migrating", 2).unwrap();
    new.create_topic("migrating", 2).unwrap();
    let on_old = || ("old", meta(old.bootstrap_servers(), &[], "migrating"));
    let scram = new.listener_properties(Listener::ScramSsl);
    let on_new = || {
        (
            "new",
            meta(
                new.listener_bootstrap(Listener::ScramSsl),
                &scram,
                "migrating",
            ),
        )
    };
    let svc = Arc::new(StaticMetadataService::new([stream(vec![on_old()])]).unwrap());
    mck_testkit::runtime().block_on(async {
        let mut source = shared_source(svc.clone())
            .metadata_discovery_interval(Duration::from_secs(60))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let stop_old = Arc::new(AtomicBool::new(false));
        let p_old = produce_until_stopped(old, "migrating", "on-old", false, stop_old.clone());
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= 100).await;

        // Both clusters; producers move to the new one.
        svc.replace([stream(vec![on_old(), on_new()])]).unwrap();
        let stop_new = Arc::new(AtomicBool::new(false));
        let p_new = produce_until_stopped(new, "migrating", "on-new", false, stop_new.clone());
        stop_old.store(true, Ordering::Relaxed);
        let from_old: BTreeSet<String> = tokio::task::spawn_blocking(move || p_old.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_old = from_old.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.0 == "old").count() >= n_old && s.iter().any(|r| r.0 == "new")
        })
        .await;

        // The new cluster only.
        svc.replace([stream(vec![on_new()])]).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop_new.store(true, Ordering::Relaxed);
        let from_new: BTreeSet<String> = tokio::task::spawn_blocking(move || p_new.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_new = from_new.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.0 == "new").count() >= n_new
        })
        .await;
        let mut produced = from_old;
        produced.extend(from_new);
        assert_exactly_once(&seen, &produced);
        source.close().await;
    });
}

/// One bad setting and what the error must say about it.
struct Bad {
    what: &'static str,
    listener: Listener,
    changes: Vec<(&'static str, Option<String>)>,
    /// The error must contain one of these (case-insensitive).
    cause: &'static [&'static str],
}

fn bad_cases() -> Vec<Bad> {
    let sec = secure().security().unwrap();
    let other_ca = sec.other_ca.display().to_string();
    let expired_cert = sec.expired_client_cert.display().to_string();
    let expired_key = sec.expired_client_key.display().to_string();
    let auth: &[&str] = &["authentication failed", "invalid credentials"];
    // librdkafka says "certificate verify failed" for every rejected broker
    // certificate, without the check that failed (issuer, expiry, host name).
    let verify: &[&str] = &["certificate verify failed"];
    vec![
        Bad {
            what: "wrong SCRAM password",
            listener: Listener::ScramSsl,
            changes: vec![("sasl.password", Some(format!("{}x", sec.scram_password)))],
            cause: auth,
        },
        Bad {
            // The refusal ends the start though a broker of the list does not
            // answer at all, and it is the cause named.
            what: "wrong SCRAM password, a dead broker first in the bootstrap list",
            listener: Listener::ScramSsl,
            changes: vec![
                ("sasl.password", Some(format!("{}x", sec.scram_password))),
                (
                    "bootstrap.servers",
                    Some(format!(
                        "127.0.0.1:1,{}",
                        secure().listener_bootstrap(Listener::ScramSsl)
                    )),
                ),
            ],
            cause: auth,
        },
        Bad {
            what: "unknown SCRAM user",
            listener: Listener::ScramSsl,
            changes: vec![("sasl.username", Some("mallory".into()))],
            cause: auth,
        },
        Bad {
            what: "wrong PLAIN password",
            listener: Listener::PlainSasl,
            changes: vec![("sasl.password", Some(format!("{}x", sec.plain_password)))],
            cause: auth,
        },
        Bad {
            what: "untrusted CA",
            listener: Listener::ScramSsl,
            changes: vec![("ssl.ca.location", Some(other_ca))],
            cause: verify,
        },
        Bad {
            what: "expired broker certificate",
            listener: Listener::ExpiredCert,
            changes: vec![],
            cause: verify,
        },
        Bad {
            what: "broker certificate for another host",
            listener: Listener::WrongHost,
            changes: vec![],
            cause: verify,
        },
        Bad {
            what: "expired client certificate",
            listener: Listener::Mtls,
            changes: vec![
                ("ssl.certificate.location", Some(expired_cert)),
                ("ssl.key.location", Some(expired_key)),
            ],
            // The broker refuses it with a TLS alert.
            cause: &["alert certificate unknown"],
        },
    ]
}

/// Opens a bounded source of `svc` and reads it to the end: the error it fails with,
/// or why it did not fail.
fn outcome(svc: FileMetadataService, timeout: Duration) -> Result<String, String> {
    mck_testkit::runtime().block_on(async {
        let source = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["s"])
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest)
            .client_timeout(timeout)
            .build()
            .unwrap();
        let run = tokio::time::timeout(timeout * 3, async {
            let mut stream = source.open().await?;
            let mut n = 0;
            while let Some(r) = stream.next().await {
                r?;
                n += 1;
            }
            Ok::<usize, SourceError>(n)
        })
        .await;
        match run {
            Err(_) => Err(format!("no error within {:?} (a hang)", timeout * 3)),
            Ok(Ok(n)) => Err(format!("read {n} records instead of failing")),
            Ok(Err(e)) => Ok(e.to_string()),
        }
    })
}

#[test]
fn bad_credentials_and_certificates_fail_the_start_with_the_cause_not_a_hang() {
    let sec = secure().security().unwrap();
    secure().create_topic("bad-creds", 1).unwrap();
    let timeout = Duration::from_secs(10);
    let cases = bad_cases();
    // All at once: each must end by itself, as soon as librdkafka says the cluster
    // refused the client, well before the client timeout.
    let results: Vec<(Duration, Result<String, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|bad| {
                s.spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    let changes: Vec<(&str, Option<&str>)> = bad
                        .changes
                        .iter()
                        .map(|(k, v)| (*k, v.as_deref()))
                        .collect();
                    let entry = cluster_yaml(dir.path(), "guarded", bad.listener, &changes);
                    let svc = load(dir.path(), &[("guarded", entry, vec!["bad-creds".into()])]);
                    let began = Instant::now();
                    let got = outcome(svc, timeout);
                    (began.elapsed(), got)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failures = Vec::new();
    for (bad, (took, got)) in cases.iter().zip(results) {
        let text = match got {
            Ok(text) => text,
            Err(why) => {
                failures.push(format!("{} ({took:?}): {why}", bad.what));
                continue;
            }
        };
        eprintln!("{} ({took:?}): {text}", bad.what);
        let lower = text.to_lowercase();
        let mut problems = Vec::new();
        if !text.contains("`guarded`") {
            problems.push("does not name the cluster");
        }
        if !bad.cause.iter().any(|c| lower.contains(c)) {
            problems.push("does not name the cause");
        }
        if text.contains('\n') {
            problems.push("is not one line");
        }
        if took >= timeout / 2 {
            problems.push("failed only when the client timeout ran out");
        }
        if text.contains(&sec.scram_password) || text.contains(&sec.plain_password) {
            problems.push("shows a secret");
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{} ({took:?}): {}: {text}",
                bad.what,
                problems.join(", ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_running_source_goes_on_with_other_clusters_while_one_refuses_its_credentials() {
    let (good, guarded) = plain_and_secure();
    good.create_topic("refused-good", 2).unwrap();
    guarded.create_topic("refused-guarded", 2).unwrap();
    let sec = guarded.security().unwrap();
    let scram = guarded.listener_properties(Listener::ScramSsl);
    let wrong: Vec<(String, String)> = scram
        .iter()
        .map(|(k, v)| match k.as_str() {
            "sasl.password" => (k.clone(), format!("{v}x")),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let untrusted: Vec<(String, String)> = scram
        .iter()
        .map(|(k, v)| match k.as_str() {
            "ssl.ca.location" => (k.clone(), sec.other_ca.display().to_string()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let bootstrap = guarded.listener_bootstrap(Listener::ScramSsl);
    let on_good = || ("good", meta(good.bootstrap_servers(), &[], "refused-good"));
    let on_guarded =
        |props: &[(String, String)]| ("guarded", meta(bootstrap.clone(), props, "refused-guarded"));
    let svc = Arc::new(
        StaticMetadataService::new([stream(vec![on_good(), on_guarded(&scram)])]).unwrap(),
    );
    mck_testkit::runtime().block_on(async {
        let mut source = shared_source(svc.clone())
            .client_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut want: BTreeSet<String> = fill_values(good, "refused-good", 2, 20, "good-1")
            .into_iter()
            .chain(fill_values(guarded, "refused-guarded", 2, 20, "guarded-1"))
            .collect();
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= want.len()).await;

        // The guarded cluster's password goes wrong, and a cluster behind an
        // untrusted CA is added: the good cluster is read all the same.
        svc.replace([stream(vec![
            on_good(),
            on_guarded(&wrong),
            (
                "untrusted",
                meta(bootstrap.clone(), &untrusted, "refused-guarded"),
            ),
        ])])
        .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let during_guarded = fill_values(guarded, "refused-guarded", 2, 10, "guarded-2");
        let during_good = fill_values(good, "refused-good", 2, 20, "good-2");
        let n = seen.len() + during_good.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.4.starts_with("good-2")).count() >= during_good.len()
        })
        .await;
        assert!(
            !seen.iter().any(|r| r.0 == "untrusted"),
            "nothing is read from the untrusted cluster"
        );

        // Credentials fixed, the untrusted cluster removed: what was produced to the
        // guarded cluster meanwhile is read once.
        svc.replace([stream(vec![on_good(), on_guarded(&scram)])])
            .unwrap();
        want.extend(during_guarded);
        want.extend(during_good);
        read_until(&mut source, &mut seen, |s| s.len() >= n.max(want.len())).await;
        assert_exactly_once(&seen, &want);
        source.close().await;
    });
}

/// A program's OAUTHBEARER token provider: unsecured JWS tokens (what the broker's
/// unsecured validator accepts) for principal `dave`, counting its calls.
#[derive(Default)]
struct UnsecuredTokens {
    made: std::sync::atomic::AtomicUsize,
}

impl multicluster_kafka::hooks::ClientHooks for UnsecuredTokens {
    fn enable_token_refresh(&self) -> bool {
        true
    }

    fn generate_oauth_token(
        &self,
        _config: Option<&str>,
    ) -> Result<multicluster_kafka::hooks::OAuthToken, Box<dyn std::error::Error>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        support::unsecured_token("dave", Duration::from_secs(600))
    }
}

#[test]
fn a_programs_oauthbearer_token_provider_reads_a_real_sasl_ssl_listener_exactly_once() {
    assert_eq!(
        support::base64url(br#"{"alg":"none"}"#),
        "eyJhbGciOiJub25lIn0"
    );
    let c = secure();
    c.create_topic("token-hook", 2).unwrap();
    let want: BTreeSet<String> = fill_values(c, "token-hook", 2, 30, "token")
        .into_iter()
        .collect();
    // The OAUTHBEARER listener's properties, less librdkafka's own unsecured tokens.
    let props = support::oauth_without_token_maker(c);
    let svc = StaticMetadataService::new([stream(vec![(
        "oauth",
        meta(
            c.listener_bootstrap(Listener::OauthSsl),
            &props,
            "token-hook",
        ),
    )])])
    .unwrap();
    let tokens = Arc::new(UnsecuredTokens::default());
    let hooks = tokens.clone();
    mck_testkit::runtime().block_on(async {
        let mut stream = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["s"])
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest)
            .client_hooks(move |_: &str| {
                Some(hooks.clone() as Arc<dyn multicluster_kafka::hooks::ClientHooks>)
            })
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let seen = drain(&mut stream).await;
        assert_exactly_once(&seen, &want);
        stream.close().await;
    });
    assert!(
        tokens.made.load(Ordering::Relaxed) >= 1,
        "the cluster's client (the enumerator's lookups and the reader's fetches) asked for a token"
    );
}

#[test]
fn a_first_contact_waits_for_a_slow_broker_though_another_of_the_list_refuses_connections() {
    use multicluster_kafka::inspect::{ClusterQuery, InspectOptions, inspect_clusters};
    let (plain, _) = plain_and_secure();
    // The plain cluster's broker behind a proxy that delivers everything 1 s late (a
    // far region, a slow handshake): the client can use it after about 2 s (one
    // round trip for its API versions) and has its metadata after about 4 s, while
    // 127.0.0.1:1 refuses at once. A first contact that ended a second after the
    // first error would call the cluster unreachable.
    let direct: std::net::SocketAddr = plain.bootstrap_servers().parse().unwrap();
    let proxy = mck_testkit::proxy::FaultProxy::start(direct).unwrap();
    proxy.delay(Duration::from_secs(1));
    let query = ClusterQuery {
        cluster: "far".into(),
        properties: [(
            "bootstrap.servers".to_string(),
            format!("127.0.0.1:1,{}", proxy.addr()),
        )]
        .into_iter()
        .collect(),
        topics: BTreeSet::new(),
        options: InspectOptions::new(Duration::from_secs(20)),
    };
    let began = Instant::now();
    let report = inspect_clusters(vec![query]).remove("far").unwrap();
    let took = began.elapsed();
    let report = report.unwrap_or_else(|e| panic!("after {took:?}: {e}"));
    assert_eq!(report.kafka_cluster_id, plain.kafka_cluster_id());
    // Else the proxy did not slow the answer down and this proved nothing.
    assert!(
        took > Duration::from_millis(1500),
        "answered after {took:?}"
    );
}

/// The OAUTHBEARER listener through OIDC client credentials from `endpoint`, with
/// `secret` as the client's secret.
fn through_oidc(
    c: &KafkaCluster,
    endpoint: &support::TokenEndpoint,
    secret: &str,
) -> ClusterMetadata {
    through_oidc_with(c, endpoint, secret, &[])
}

/// [`through_oidc`] with `more` properties.
fn through_oidc_with(
    c: &KafkaCluster,
    endpoint: &support::TokenEndpoint,
    secret: &str,
    more: &[(&str, &str)],
) -> ClusterMetadata {
    let mut props = support::oauth_without_token_maker(c);
    props.extend(endpoint.properties("orders-reader", secret));
    let more = more
        .iter()
        .chain(&[("sasl.oauthbearer.scope", "kafka read")]);
    props.extend(more.map(|(k, v)| (k.to_string(), v.to_string())));
    meta(c.listener_bootstrap(Listener::OauthSsl), &props, "oidc")
}

#[test]
fn oidc_client_credentials_read_a_sasl_ssl_listener_exactly_once_and_a_wrong_secret_is_said() {
    let c = secure();
    c.create_topic("oidc", 2).unwrap();
    let want: BTreeSet<String> = fill_values(c, "oidc", 2, 40, "oidc").into_iter().collect();
    let principal = c.security().unwrap().oauth_principal.clone();
    let endpoint = support::TokenEndpoint::start(&principal, "orders-reader", "s3cret-oidc");
    let svc = StaticMetadataService::new([stream(vec![(
        "oidc",
        through_oidc(c, &endpoint, "s3cret-oidc"),
    )])])
    .unwrap();
    let seen = read_bounded(svc);
    assert_exactly_once(&seen, &want);
    let granted = endpoint.granted.lock().unwrap().clone();
    assert!(!granted.is_empty(), "the endpoint was asked for a token");
    for body in &granted {
        assert!(
            body.contains("grant_type=client_credentials") && body.contains("scope=kafka"),
            "{body}"
        );
    }

    // A wrong secret: the endpoint refuses the client, the start fails within its
    // timeout, naming the cluster, never the secret.
    let svc = StaticMetadataService::new([stream(vec![(
        "oidc-wrong",
        through_oidc(c, &endpoint, "wrong-secret-1"),
    )])])
    .unwrap();
    let started = Instant::now();
    let err = open_within_8s(svc).unwrap_err().to_string();
    // Both paths pass on the endpoint's words and wait, as for a cluster that does
    // not answer (the endpoint is asked again).
    assert!(err.contains("cluster `oidc-wrong`"), "{err}");
    assert!(err.contains("invalid_client"), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(8), "{err}");
    assert!(
        !err.contains("wrong-secret-1") && !err.contains('\n'),
        "{err}"
    );
    assert!(endpoint.refused.load(Ordering::Relaxed) >= 1);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// Whether a fetcher of logical cluster `cluster` said it fetches natively, and
/// whether a reader of it made a librdkafka consumer.
fn paths_taken(cluster: &str) -> (bool, bool) {
    let events = capture().events();
    let said = |message: &str| {
        events.iter().any(|(_, _, fields)| {
            fields.contains(&format!("cluster={cluster} "))
                && fields.contains(&format!("message={message} "))
        })
    };
    (said("fetching natively"), said("consumer created"))
}

/// An RSA key pair: the private half as PEM encrypted with `passphrase`, and the
/// public half as PEM.
fn rsa_pair(passphrase: &str) -> (Vec<u8>, Vec<u8>) {
    let key = openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
    let private = key
        .private_key_to_pem_pkcs8_passphrase(
            openssl::symm::Cipher::aes_256_cbc(),
            passphrase.as_bytes(),
        )
        .unwrap();
    (private, key.public_key_to_pem().unwrap())
}

/// The OAUTHBEARER listener through the JWT-bearer grant of `endpoint`, the
/// assertion signed with the key in `key_file` (opened with `passphrase`), on
/// `backend`, with `more` properties.
fn through_jwt_bearer(
    c: &KafkaCluster,
    endpoint: &support::TokenEndpoint,
    key_file: &Path,
    backend: &str,
    more: &[(&str, &str)],
) -> ClusterMetadata {
    let mut props = support::oauth_without_token_maker(c);
    let key_file = key_file.display().to_string();
    let jwt = [
        ("fetch.backend", backend),
        ("sasl.oauthbearer.method", "oidc"),
        (
            "sasl.oauthbearer.grant.type",
            "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ),
        ("sasl.oauthbearer.token.endpoint.url", &endpoint.url),
        ("sasl.oauthbearer.assertion.private.key.file", &key_file),
        (
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "open-sesame-jwt",
        ),
        ("sasl.oauthbearer.assertion.claim.iss", "orders-app"),
        ("sasl.oauthbearer.assertion.claim.sub", "orders-reader"),
        ("sasl.oauthbearer.assertion.claim.aud", "https://idp.test"),
        ("sasl.oauthbearer.assertion.claim.jti.include", "true"),
        ("sasl.oauthbearer.scope", "kafka"),
    ];
    props.extend(
        jwt.iter()
            .chain(more)
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    meta(c.listener_bootstrap(Listener::OauthSsl), &props, "oidc-jwt")
}

#[test]
fn oidc_jwt_bearer_reads_a_sasl_ssl_listener_on_both_paths_and_a_wrong_key_is_said() {
    capture();
    let c = secure();
    c.create_topic("oidc-jwt", 2).unwrap();
    let want: BTreeSet<String> = fill_values(c, "oidc-jwt", 2, 40, "jwt")
        .into_iter()
        .collect();
    let principal = c.security().unwrap().oauth_principal.clone();
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = rsa_pair("open-sesame-jwt");
    let key_file = dir.path().join("reader-jwt-key.pem");
    std::fs::write(&key_file, &private).unwrap();
    let wanted = support::WantedClaims {
        iss: "orders-app".into(),
        sub: "orders-reader".into(),
        aud: "https://idp.test".into(),
    };
    let endpoint = support::TokenEndpoint::start_jwt_bearer(&principal, &public, wanted.clone());

    // RS256 on each path, exactly once; auto takes the native one. Each path's own
    // HTTP client asked the endpoint (ureq says its name, librdkafka's curl none).
    for backend in ["native", "librdkafka", "auto"] {
        let cluster = format!("oidc-jwt-{backend}");
        let asked = endpoint.agents.lock().unwrap().len();
        let svc = StaticMetadataService::new([stream(vec![(
            &cluster,
            through_jwt_bearer(c, &endpoint, &key_file, backend, &[]),
        )])])
        .unwrap();
        let seen = read_bounded(svc);
        assert_exactly_once(&seen, &want);
        let agents = endpoint.agents.lock().unwrap()[asked..].to_vec();
        assert!(
            agents
                .iter()
                .any(|a| a.starts_with("ureq") == (backend != "librdkafka")),
            "{backend}: {agents:?}"
        );
        let (natively, consumer) = paths_taken(&cluster);
        assert_eq!(
            (natively, consumer),
            (backend != "librdkafka", backend == "librdkafka"),
            "{backend}"
        );
    }
    for body in endpoint.granted.lock().unwrap().iter() {
        let fields = support::form_fields(body);
        let field = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
        assert_eq!(
            field("grant_type"),
            Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
        );
        assert_eq!(field("scope"), Some("kafka"), "{body}");
    }

    // ES256 on the native path (librdkafka 2.12.1 signs ES256 with a DER signature,
    // which a JWS verifier refuses).
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap();
    let ec =
        openssl::pkey::PKey::from_ec_key(openssl::ec::EcKey::generate(&group).unwrap()).unwrap();
    let ec_file = dir.path().join("reader-jwt-ec.pem");
    std::fs::write(
        &ec_file,
        ec.private_key_to_pem_pkcs8_passphrase(
            openssl::symm::Cipher::aes_256_cbc(),
            b"open-sesame-jwt",
        )
        .unwrap(),
    )
    .unwrap();
    let ec_endpoint = support::TokenEndpoint::start_jwt_bearer(
        &principal,
        &ec.public_key_to_pem().unwrap(),
        wanted.clone(),
    );
    let svc = StaticMetadataService::new([stream(vec![(
        "oidc-jwt-es256",
        through_jwt_bearer(
            c,
            &ec_endpoint,
            &ec_file,
            "native",
            &[("sasl.oauthbearer.assertion.algorithm", "ES256")],
        ),
    )])])
    .unwrap();
    assert_exactly_once(&read_bounded(svc), &want);
    assert!(!ec_endpoint.granted.lock().unwrap().is_empty());

    // Another key: the endpoint refuses its assertions, the start fails within its
    // timeout naming the cluster and the endpoint's words, never the key.
    let (other, _) = rsa_pair("open-sesame-jwt");
    let other_file = dir.path().join("reader-jwt-other.pem");
    std::fs::write(&other_file, &other).unwrap();
    for backend in ["native", "librdkafka"] {
        let cluster = format!("oidc-jwt-wrong-{backend}");
        let refused = endpoint.refused.load(Ordering::Relaxed);
        let svc = StaticMetadataService::new([stream(vec![(
            &cluster,
            through_jwt_bearer(c, &endpoint, &other_file, backend, &[]),
        )])])
        .unwrap();
        let err = open_within_8s(svc).unwrap_err().to_string();
        assert!(err.contains(&format!("cluster `{cluster}`")), "{err}");
        assert!(err.contains("invalid_grant"), "{backend}: {err}");
        assert!(!err.contains('\n'), "{err}");
        let pem = String::from_utf8(other.clone()).unwrap();
        for secret in ["open-sesame-jwt", "reader-jwt-other", &pem[40..90]] {
            assert!(!err.contains(secret), "{backend}: {err}");
        }
        assert!(
            endpoint.refused.load(Ordering::Relaxed) > refused,
            "{backend}"
        );
    }

    // Nothing the library said shows the passphrase, the key's path or an assertion.
    let assertions: Vec<String> = endpoint
        .granted
        .lock()
        .unwrap()
        .iter()
        .filter_map(|b| {
            support::form_fields(b)
                .into_iter()
                .find(|(k, _)| k == "assertion")
                .map(|(_, v)| v)
        })
        .collect();
    for (_, _, fields) in capture().events() {
        assert!(
            !fields.contains("open-sesame-jwt") && !fields.contains("reader-jwt-"),
            "{fields}"
        );
        for a in &assertions {
            assert!(!fields.contains(&a[a.len() - 40..]), "{fields}");
        }
    }
}

/// Reads stream `s` of `svc` to the logs' ends at start.
fn read_bounded(svc: StaticMetadataService) -> Vec<mck_testkit::Seen> {
    mck_testkit::runtime().block_on(async {
        let mut stream = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["s"])
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let seen = drain(&mut stream).await;
        stream.close().await;
        seen
    })
}

/// Opens a bounded source of stream `s` of `svc`, its start-up within 8 s.
fn open_within_8s(svc: StaticMetadataService) -> Result<(), SourceError> {
    mck_testkit::runtime().block_on(async {
        let stream = MultiClusterKafkaSource::builder()
            .metadata_service(svc)
            .stream_ids(["s"])
            .deserializer(ValueOnly::<String>::utf8())
            .stopping_offsets(StoppingOffsets::Latest)
            .client_timeout(Duration::from_secs(5))
            .startup_timeout(Some(Duration::from_secs(8)))
            .build()
            .unwrap()
            .open()
            .await?;
        stream.close().await;
        Ok(())
    })
}

#[test]
fn an_https_token_endpoint_is_checked_against_https_ca_location() {
    let c = secure();
    let sec = c.security().unwrap();
    c.create_topic("oidc-tls", 1).unwrap();
    let principal = sec.oauth_principal.clone();
    // The broker's certificate (127.0.0.1 and localhost, signed by the test CA).
    let endpoint = support::TokenEndpoint::start_tls(
        &principal,
        "orders-reader",
        "s3cret-tls",
        (&sec.dir.join("broker.pem"), &sec.dir.join("broker.key")),
    );
    let through = |ca: &std::path::Path| {
        let ca = ca.display().to_string();
        let mut m = through_oidc_with(c, &endpoint, "s3cret-tls", &[("https.ca.location", &ca)]);
        m.topics = ["oidc-tls".to_string()].into_iter().collect();
        m
    };
    let svc = StaticMetadataService::new([stream(vec![("oidc-tls", through(&sec.ca))])]).unwrap();
    open_within_8s(svc).expect("the endpoint's certificate is trusted");
    assert!(!endpoint.granted.lock().unwrap().is_empty());

    // Checked against a CA that did not sign it: no token, and the cause said.
    let svc =
        StaticMetadataService::new([stream(vec![("oidc-untrusted", through(&sec.other_ca))])])
            .unwrap();
    let asked = endpoint.granted.lock().unwrap().len();
    let err = open_within_8s(svc).unwrap_err().to_string();
    assert!(err.contains("cluster `oidc-untrusted`"), "{err}");
    // OpenSSL's words, on both paths.
    assert!(
        err.contains("unable to get local issuer certificate"),
        "{err}"
    );
    assert_eq!(
        endpoint.granted.lock().unwrap().len(),
        asked,
        "no token was asked for"
    );
}
