//! SASL on the native path's connections against the test kit's secured broker (Kafka
//! 4.1): PLAIN on a SASL_PLAINTEXT listener, SCRAM-SHA-512 and SCRAM-SHA-256 on a
//! SASL_SSL one, refusals as one-line errors in the broker's words that never show
//! the password, and re-authentication on a live connection before the session
//! lifetime the broker sets runs out (KIP-368).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use mck_testkit::{ClusterOptions, KafkaCluster, Listener, TestCluster};
use multicluster_kafka_client::{
    ConnectOptions, Connection, Mechanism, NativeError, Pem, ProvidedToken, Sasl, Tls, TlsSettings,
    TokenProvider, Tokens,
};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

fn secure() -> &'static KafkaCluster {
    mck_testkit::shared_secured_cluster().expect("the secured cluster starts")
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(PATIENCE, f)
            .await
            .expect("done within the patience")
    })
}

/// How to reach `listener` of `c` as its user, with `mechanism` and `password`.
fn options(
    c: &KafkaCluster,
    listener: Listener,
    mechanism: Mechanism,
    password: &str,
) -> ConnectOptions {
    let sec = c.security().unwrap();
    let username = match listener {
        Listener::PlainSasl => sec.plain_user.clone(),
        _ => sec.scram_user.clone(),
    };
    let tls = (listener.protocol() == "SASL_SSL").then(|| {
        Tls::new(&TlsSettings {
            ca: Some(Pem::File(sec.ca.clone())),
            verify_hostname: true,
            verify_certificate: true,
            ..TlsSettings::default()
        })
        .unwrap()
    });
    ConnectOptions {
        tls,
        sasl: Some(Sasl::password(mechanism, username, password.to_string())),
        timeout: Duration::from_secs(10),
        ..ConnectOptions::default()
    }
}

fn addr(c: &KafkaCluster, listener: Listener) -> String {
    c.listener_bootstrap(listener)
        .split(',')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn plain_and_both_scram_mechanisms_read_records() {
    let c = secure();
    let sec = c.security().unwrap();
    let topic = "native-sasl-read";
    c.create_topic(topic, 1).unwrap();
    let produced = mck_testkit::fill_values(c, topic, 1, 10, "sasl");
    for (listener, mechanism, password) in [
        (Listener::PlainSasl, Mechanism::Plain, &sec.plain_password),
        (
            Listener::ScramSsl,
            Mechanism::ScramSha512,
            &sec.scram_password,
        ),
        (
            Listener::ScramSsl,
            Mechanism::ScramSha256,
            &sec.scram_password,
        ),
    ] {
        run(async {
            let options = options(c, listener, mechanism, password);
            let mut conn = Connection::connect(&addr(c, listener), &options)
                .await
                .unwrap_or_else(|e| panic!("{mechanism:?} authenticates: {e}"));
            let md = conn.metadata(Some(&[topic])).await.unwrap();
            assert_eq!(md.topics[0].error_code, 0, "{mechanism:?}: {md:?}");
            let answer = conn
                .fetch_once(topic, md.topics[0].topic_id, 0, 0, 1 << 20, false)
                .await
                .unwrap();
            assert_eq!(
                answer.high_watermark,
                produced.len() as i64,
                "{mechanism:?}"
            );
            let raw = String::from_utf8_lossy(&answer.records);
            assert!(
                produced.iter().all(|v| raw.contains(v.as_str())),
                "{mechanism:?}"
            );
        });
    }
}

/// Connecting with `options` must fail with an authentication error on one line
/// that names the broker and never `password`.
fn refused(listener: Listener, options: &ConnectOptions, password: &str) -> String {
    let c = secure();
    let err = run(async {
        match Connection::connect(&addr(c, listener), options).await {
            Ok(_) => panic!("{listener:?}: authenticated, but must be refused"),
            Err(e) => e,
        }
    });
    let text = err.to_string();
    assert!(matches!(err, NativeError::Auth { .. }), "{err:?}");
    assert!(text.contains(&addr(c, listener)), "{text}");
    assert!(!text.contains('\n'), "{text}");
    assert!(!text.contains(password), "the password in: {text}");
    text
}

#[test]
fn refused_credentials_and_mechanisms_are_one_line_errors_without_the_password() {
    let c = secure();
    let sec = c.security().unwrap();
    let wrong = format!("{}x", sec.scram_password);
    let text = refused(
        Listener::ScramSsl,
        &options(c, Listener::ScramSsl, Mechanism::ScramSha512, &wrong),
        &wrong,
    );
    assert!(
        text.contains("SCRAM-SHA-512 authentication failed"),
        "{text}"
    );
    assert!(
        text.to_lowercase().contains("invalid credentials"),
        "{text}"
    );

    let wrong = format!("{}x", sec.plain_password);
    let text = refused(
        Listener::PlainSasl,
        &options(c, Listener::PlainSasl, Mechanism::Plain, &wrong),
        &wrong,
    );
    assert!(text.to_lowercase().contains("invalid"), "{text}");

    let mut stranger = options(
        c,
        Listener::ScramSsl,
        Mechanism::ScramSha256,
        &sec.scram_password,
    );
    stranger.sasl.as_mut().unwrap().username = "mallory".into();
    let text = refused(Listener::ScramSsl, &stranger, &sec.scram_password);
    assert!(
        text.contains("SCRAM-SHA-256 authentication failed"),
        "{text}"
    );

    // PLAIN on the SCRAM listener: the mechanisms it does enable are named.
    let text = refused(
        Listener::ScramSsl,
        &options(c, Listener::ScramSsl, Mechanism::Plain, &sec.scram_password),
        &sec.scram_password,
    );
    assert!(text.contains("does not enable it"), "{text}");
    assert!(text.contains("SCRAM-SHA-512"), "{text}");
}

#[test]
fn a_connection_re_authenticates_before_its_session_lifetime_runs_out() {
    // A broker that ends SASL sessions after 3 s: a client that does not
    // re-authenticate has its connection closed at its first request after that.
    let c = KafkaCluster::start(
        ClusterOptions::new("reauth")
            .secured()
            .broker_config("connections.max.reauth.ms", "3000"),
    )
    .expect("the cluster starts");
    let sec = c.security().unwrap();
    let topic = "native-reauth";
    c.create_topic(topic, 1).unwrap();
    mck_testkit::fill_values(&c, topic, 1, 5, "r");
    run(async {
        let options = options(
            &c,
            Listener::ScramSsl,
            Mechanism::ScramSha512,
            &sec.scram_password,
        );
        let mut conn = Connection::connect(&addr(&c, Listener::ScramSsl), &options)
            .await
            .unwrap_or_else(|e| panic!("authenticates: {e}"));
        let id = conn.metadata(Some(&[topic])).await.unwrap().topics[0].topic_id;
        // Requests on the one connection for 7 s, past two lifetimes.
        let began = Instant::now();
        let mut fetches = 0;
        while began.elapsed() < Duration::from_secs(7) {
            let answer = conn
                .fetch_once(topic, id, 0, 0, 1 << 20, false)
                .await
                .unwrap_or_else(|e| panic!("fetch {fetches} after {:?}: {e}", began.elapsed()));
            assert_eq!(answer.high_watermark, 5);
            fetches += 1;
            tokio::time::sleep(pause(fetches)).await;
        }
        assert!(
            conn.reauthentications() >= 2,
            "{} re-authentications in 7 s of a 3 s lifetime",
            conn.reauthentications()
        );
    });

    // OAUTHBEARER on the same broker, with tokens of the program's hooks living 4 s:
    // a session lasts 3 s (or less), and a token past 80 % of its life is made anew
    // when the connection re-authenticates.
    let hooks = Arc::new(ShortTokens {
        principal: sec.oauth_principal.clone(),
        made: AtomicU64::new(0),
    });
    run(async {
        let tls = Tls::new(&TlsSettings {
            ca: Some(Pem::File(sec.ca.clone())),
            ..TlsSettings::default()
        })
        .unwrap();
        let options = ConnectOptions {
            tls: Some(tls),
            sasl: Some(Sasl::oauth(Tokens::from_provider(hooks.clone(), None))),
            timeout: Duration::from_secs(10),
            ..ConnectOptions::default()
        };
        let mut conn = Connection::connect(&addr(&c, Listener::OauthSsl), &options)
            .await
            .unwrap_or_else(|e| panic!("authenticates: {e}"));
        let id = conn.metadata(Some(&[topic])).await.unwrap().topics[0].topic_id;
        let began = Instant::now();
        let mut fetches = 0;
        while began.elapsed() < Duration::from_secs(7) {
            let answer = conn
                .fetch_once(topic, id, 0, 0, 1 << 20, false)
                .await
                .unwrap_or_else(|e| panic!("fetch {fetches} after {:?}: {e}", began.elapsed()));
            assert_eq!(answer.high_watermark, 5);
            fetches += 1;
            tokio::time::sleep(pause(fetches)).await;
        }
        assert!(
            conn.reauthentications() >= 2,
            "{} OAUTHBEARER re-authentications in 7 s",
            conn.reauthentications()
        );
    });
    assert!(
        hooks.made.load(Ordering::Relaxed) >= 2,
        "{} tokens made in 7 s of 4 s tokens",
        hooks.made.load(Ordering::Relaxed)
    );
}

/// The pause after request `n`: requests close together (a re-authentication must
/// not follow the last too soon) and apart (the one that finds it due must come
/// before the session ends), as a fetch's long polls make them.
fn pause(n: u32) -> Duration {
    Duration::from_millis([50, 50, 300, 500][n as usize % 4])
}

/// A token provider making unsecured tokens that live 4 s.
struct ShortTokens {
    principal: String,
    made: AtomicU64,
}

impl TokenProvider for ShortTokens {
    fn token(&self, _: Option<&str>) -> Result<ProvidedToken, Box<dyn std::error::Error>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let expires = Duration::from_secs(now + 4);
        let claims = format!(
            r#"{{"sub":"{}","iat":{now},"exp":{}}}"#,
            self.principal,
            expires.as_secs()
        );
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        Ok(ProvidedToken {
            value: format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.as_bytes())),
            expires_ms: expires.as_millis() as i64,
        })
    }
}
