//! TLS on the native path's connections against the test kit's secured broker (Kafka
//! 4.1 with TLS listeners): client certificates (mTLS), and every refusal as a typed
//! one-line error naming the broker and the check that failed, never a hang: an
//! untrusted CA, an expired broker certificate, a certificate for another host, a
//! missing client certificate; and bad files as errors naming the property and the
//! path, never the key.

use std::time::Duration;

use mck_testkit::{KafkaCluster, Listener, TestCluster};
use multicluster_kafka_client::{
    ConnectOptions, Connection, NativeError, Pem, Tls, TlsSettings, Uuid,
};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

fn secure() -> &'static KafkaCluster {
    mck_testkit::shared_secured_cluster().expect("the secured cluster starts")
}

fn addr(listener: Listener) -> String {
    let all = secure().listener_bootstrap(listener);
    all.split(',').next().unwrap().to_string()
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(PATIENCE, f)
            .await
            .expect("done within the patience")
    })
}

/// Trusting the cluster's CA, with its client certificate.
fn with_client_certificate() -> TlsSettings {
    let sec = secure().security().unwrap();
    TlsSettings {
        ca: Some(Pem::File(sec.ca.clone())),
        certificate: Some(Pem::File(sec.client_cert.clone())),
        key: Some(Pem::File(sec.client_key.clone())),
        key_password: None,
        verify_hostname: true,
        verify_certificate: true,
    }
}

/// Trusting the cluster's CA, no client certificate.
fn trusting() -> TlsSettings {
    TlsSettings {
        certificate: None,
        key: None,
        ..with_client_certificate()
    }
}

async fn connect(listener: Listener, settings: &TlsSettings) -> Result<Connection, NativeError> {
    let options = ConnectOptions {
        tls: Some(Tls::new(settings).expect("the settings are usable")),
        timeout: Duration::from_secs(10),
        ..ConnectOptions::default()
    };
    Connection::connect(&addr(listener), &options).await
}

#[test]
fn a_client_certificate_reads_records_over_mutual_tls() {
    let c = secure();
    let topic = "native-tls-read";
    c.create_topic(topic, 1).unwrap();
    let produced = mck_testkit::fill_values(c, topic, 1, 20, "tls");
    run(async {
        let mut conn = connect(Listener::Mtls, &with_client_certificate())
            .await
            .unwrap_or_else(|e| panic!("connects over mTLS: {e}"));
        let md = conn.metadata(Some(&[topic])).await.unwrap();
        assert_eq!(md.topics[0].error_code, 0, "{md:?}");
        let id: Uuid = md.topics[0].topic_id;
        let answer = conn
            .fetch_once(topic, id, 0, 0, 1 << 20, false)
            .await
            .unwrap();
        assert_eq!(answer.error_code, 0);
        assert_eq!(answer.high_watermark, produced.len() as i64);
        // The records came through the TLS stream whole: every value is in them.
        let raw = String::from_utf8_lossy(&answer.records);
        for v in &produced {
            assert!(raw.contains(v.as_str()), "{v} is in the fetched batches");
        }
    });
}

/// Connects with `settings` to `listener` and returns the error, which must be a
/// TLS error naming the broker, on one line.
fn refusal(listener: Listener, settings: &TlsSettings) -> String {
    let err = run(async {
        match connect(listener, settings).await {
            Ok(_) => panic!("{listener:?}: connected, but must be refused"),
            Err(e) => e,
        }
    });
    let text = err.to_string();
    assert!(
        matches!(err, NativeError::Tls { .. } | NativeError::Io { .. }),
        "{listener:?}: not a TLS or connection error: {err:?}"
    );
    assert!(text.contains(&addr(listener)), "names the broker: {text}");
    assert!(!text.contains('\n'), "one line: {text}");
    text.to_lowercase()
}

#[test]
fn refused_certificates_are_one_line_errors_naming_the_check() {
    let sec = secure().security().unwrap();
    let other_ca = TlsSettings {
        ca: Some(Pem::File(sec.other_ca.clone())),
        ..trusting()
    };
    let text = refusal(Listener::Mtls, &other_ca);
    assert!(text.contains("certificate verify failed"), "{text}");
    // The broker sends its chain up to its own CA, which this client does not trust.
    assert!(
        text.contains("self-signed certificate in certificate chain"),
        "{text}"
    );

    let text = refusal(Listener::ExpiredCert, &trusting());
    assert!(text.contains("certificate verify failed"), "{text}");
    assert!(text.contains("expired"), "{text}");

    let text = refusal(Listener::WrongHost, &trusting());
    assert!(text.contains("certificate verify failed"), "{text}");
    // The test kit's brokers are reached at 127.0.0.1: OpenSSL checks the address.
    assert!(
        text.contains("ip address mismatch") || text.contains("hostname mismatch"),
        "{text}"
    );

    // The mTLS listener refuses a client without a certificate. TLS 1.3 sends the
    // broker's alert after the handshake, so the refusal may come with the first
    // request: either way an error, not a hang.
    let err = run(async {
        match connect(Listener::Mtls, &trusting()).await {
            Ok(_) => panic!("connected to the mTLS listener without a certificate"),
            Err(e) => e,
        }
    });
    assert!(!err.to_string().contains('\n'), "{err}");
}

#[test]
fn without_endpoint_identification_a_certificate_for_another_host_is_accepted() {
    let settings = TlsSettings {
        verify_hostname: false,
        ..trusting()
    };
    run(async {
        let mut conn = connect(Listener::WrongHost, &settings)
            .await
            .unwrap_or_else(|e| panic!("connects without the host check: {e}"));
        conn.metadata(None).await.unwrap();
    });
    // Turning verification off altogether accepts an expired one too.
    let settings = TlsSettings {
        verify_certificate: false,
        ..trusting()
    };
    run(async {
        connect(Listener::ExpiredCert, &settings)
            .await
            .unwrap_or_else(|e| panic!("connects without verification: {e}"));
    });
}

/// `Tls::new`'s error for `settings`.
fn bad(settings: TlsSettings) -> String {
    let e = Tls::new(&settings).expect_err("must be refused");
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    text
}

#[test]
fn bad_files_are_refused_naming_the_property_and_the_path_never_the_key() {
    let sec = secure().security().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let text = bad(TlsSettings {
        ca: Some(Pem::File(missing.clone())),
        ..trusting()
    });
    assert!(text.contains("`ssl.ca.location`"), "{text}");
    assert!(text.contains(&missing.display().to_string()), "{text}");

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let text = bad(TlsSettings {
        ca: Some(Pem::File(garbage.clone())),
        ..trusting()
    });
    assert!(
        text.contains("`ssl.ca.location`") && text.contains("garbage.pem"),
        "{text}"
    );

    // A key that is not one, given inline: the error names `ssl.key.pem`, not its
    // content.
    let secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LW1hcmtlcg==\n-----END PRIVATE KEY-----\n";
    let text = bad(TlsSettings {
        key: Some(Pem::Text(secret.into())),
        ..with_client_certificate()
    });
    assert!(text.contains("`ssl.key.pem`"), "{text}");
    assert!(!text.contains("c2VjcmV0"), "the key's content in: {text}");

    // The key of another certificate.
    let text = bad(TlsSettings {
        key: Some(Pem::File(sec.expired_client_key.clone())),
        ..with_client_certificate()
    });
    assert!(text.contains("`ssl.key.location`"), "{text}");
    assert!(text.contains("does not belong"), "{text}");

    // A certificate without its key.
    let text = bad(TlsSettings {
        key: None,
        ..with_client_certificate()
    });
    assert!(text.contains("`ssl.key.location`"), "{text}");

    // A directory of CAs (librdkafka's other form of ssl.ca.location) works; an
    // empty one is refused.
    let cas = dir.path().join("cas");
    std::fs::create_dir(&cas).unwrap();
    let text = bad(TlsSettings {
        ca: Some(Pem::File(cas.clone())),
        ..trusting()
    });
    assert!(text.contains("no PEM certificate"), "{text}");
    std::fs::copy(&sec.ca, cas.join("ca.pem")).unwrap();
    assert!(
        Tls::new(&TlsSettings {
            ca: Some(Pem::File(cas)),
            ..trusting()
        })
        .is_ok()
    );
}

#[test]
fn a_password_protected_key_is_opened_with_its_password() {
    let sec = secure().security().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = openssl::pkey::PKey::private_key_from_pem(&std::fs::read(&sec.client_key).unwrap())
        .unwrap();
    let locked = dir.path().join("locked.pem");
    let pem = key
        .private_key_to_pem_pkcs8_passphrase(openssl::symm::Cipher::aes_256_cbc(), b"open-sesame")
        .unwrap();
    assert!(String::from_utf8_lossy(&pem).contains("ENCRYPTED"));
    std::fs::write(&locked, pem).unwrap();
    let with = |password: Option<&str>| TlsSettings {
        key: Some(Pem::File(locked.clone())),
        key_password: password.map(str::to_string),
        ..with_client_certificate()
    };
    run(async {
        let mut conn = connect(Listener::Mtls, &with(Some("open-sesame")))
            .await
            .unwrap_or_else(|e| panic!("connects with the opened key: {e}"));
        conn.metadata(None).await.unwrap();
    });
    let text = bad(with(Some("wrong-guess")));
    assert!(
        text.contains("`ssl.key.location`") && text.contains("password"),
        "{text}"
    );
    assert!(!text.contains("wrong-guess"), "the password in: {text}");
    let text = bad(with(None));
    assert!(text.contains("ssl.key.password is not set"), "{text}");
}

#[test]
fn settings_show_no_key_material_in_debug_output() {
    let settings = TlsSettings {
        key: Some(Pem::Text("KEY-MATERIAL".into())),
        key_password: Some("PASSWORD-VALUE".into()),
        ..with_client_certificate()
    };
    let shown = format!("{settings:?}");
    assert!(
        !shown.contains("KEY-MATERIAL") && !shown.contains("PASSWORD-VALUE"),
        "{shown}"
    );
    let tls = Tls::new(&with_client_certificate()).unwrap();
    let shown = format!(
        "{:?}",
        ConnectOptions {
            tls: Some(tls),
            ..ConnectOptions::default()
        }
    );
    assert!(!shown.contains("PRIVATE"), "{shown}");
}
