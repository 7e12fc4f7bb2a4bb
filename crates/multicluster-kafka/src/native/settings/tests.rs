use super::backend::unsupported;
use super::*;
use crate::base::hooks::OAuthToken;
use multicluster_kafka_client::assertion as jwt;
use multicluster_kafka_client::oidc::JWT_BEARER;

/// Hooks that make tokens (never asked here).
struct TokenHooks;

impl ClientHooks for TokenHooks {
    fn enable_token_refresh(&self) -> bool {
        true
    }
    fn generate_oauth_token(
        &self,
        _: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        Err("not asked".into())
    }
}

fn oauth_props(extra: &[(&str, &str)]) -> ClientProperties {
    let mut p = ClientProperties::new();
    p.set("bootstrap.servers", "127.0.0.1:9092");
    p.set("security.protocol", "sasl_ssl");
    p.set("sasl.mechanism", "OAUTHBEARER");
    for (k, v) in extra {
        p.set(*k, *v);
    }
    p
}

/// Whether the path serves `props` (with `hooks`), and its settings' error.
fn outcome(
    props: &ClientProperties,
    hooks: Option<&Arc<dyn ClientHooks>>,
) -> (bool, Option<String>) {
    let cluster: Arc<str> = Arc::from("c");
    let given = Given {
        cluster: &cluster,
        props,
        hooks,
        runtime: true,
    };
    let error = settings(&given).err().map(|e| e.to_string());
    (serves(&given), error)
}

/// A broker's fetches in flight share `fetch.max.bytes`; an answer may still be
/// as large as the whole of it (one batch larger than a request's share).
#[test]
fn the_fetches_in_flight_to_a_broker_share_fetch_max_bytes() {
    let of = |extra: &[(&str, &str)]| {
        let s = settings_with(extra).expect("settings");
        (s.lanes, s.fetch.max_bytes, s.connect.max_frame_size)
    };
    assert_eq!(of(&[]), (2, 26_214_400, 100_000_000));
    let one = [("fetch.connections.per.broker", "1")];
    assert_eq!(of(&one), (1, 52_428_800, 100_000_000));
    let large = [
        ("fetch.connections.per.broker", "4"),
        ("fetch.max.bytes", "200000000"),
    ];
    assert_eq!(of(&large), (4, 50_000_000, 200_000_000 + (1 << 20)));
}

/// The settings of a plaintext cluster with `extra` properties.
fn settings_with(extra: &[(&str, &str)]) -> Result<Settings, SourceError> {
    let mut props = ClientProperties::new();
    props.set("bootstrap.servers", "127.0.0.1:9092");
    for (k, v) in extra {
        props.set(*k, *v);
    }
    let cluster: Arc<str> = Arc::from("c");
    settings(&Given {
        cluster: &cluster,
        props: &props,
        hooks: None,
        runtime: true,
    })
}

#[test]
fn the_share_threshold_is_read_and_a_bad_one_refused_by_name() {
    let of = |value: &str| settings_with(&[("fetch.share.min.bytes", value)]);
    assert_eq!(
        settings_with(&[]).unwrap().share_from,
        crate::base::properties::DEFAULT_SHARE_MIN_BYTES
    );
    assert_eq!(of("0").unwrap().share_from, 0);
    let e = of("lots").unwrap_err().to_string();
    assert!(e.contains("`fetch.share.min.bytes` refused"), "{e}");
    assert!(!e.contains("lots"), "{e}");
}

#[test]
fn oauthbearer_is_served_with_one_source_of_tokens_and_refused_with_none_or_two() {
    let hooks: Arc<dyn ClientHooks> = Arc::new(TokenHooks);
    let unsecured = [
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", "principal=carol lifeSeconds=60"),
    ];
    assert_eq!(outcome(&oauth_props(&unsecured), None), (true, None));
    assert_eq!(outcome(&oauth_props(&[]), Some(&hooks)), (true, None));

    let refused = |props: ClientProperties, hooks, key: &str| {
        let (served, error) = outcome(&props, hooks);
        assert!(served, "the choice does not read the tokens' settings");
        let error = error.expect("refused");
        assert!(error.contains(&format!("`{key}`")), "{error}");
    };
    refused(oauth_props(&[]), None, "sasl.mechanism");
    refused(
        oauth_props(&unsecured),
        Some(&hooks),
        "enable.sasl.oauthbearer.unsecure.jwt",
    );
    refused(
        oauth_props(&[("enable.sasl.oauthbearer.unsecure.jwt", "true")]),
        None,
        "sasl.oauthbearer.config",
    );
    refused(
        oauth_props(&[("enable.sasl.oauthbearer.unsecure.jwt", "yes")]),
        None,
        "enable.sasl.oauthbearer.unsecure.jwt",
    );

    // OIDC: its three settings are required, and it is the only source of tokens.
    let oidc = [
        ("sasl.oauthbearer.method", "OIDC"),
        (
            "sasl.oauthbearer.token.endpoint.url",
            "https://idp.example/token",
        ),
        ("sasl.oauthbearer.client.id", "reader"),
        ("sasl.oauthbearer.client.secret", "s3cret"),
        ("sasl.oauthbearer.extensions", "logicalCluster=lkc-1"),
    ];
    assert_eq!(outcome(&oauth_props(&oidc), None), (true, None));
    refused(
        oauth_props(&oidc[..3]),
        None,
        "sasl.oauthbearer.client.secret",
    );
    refused(oauth_props(&oidc), Some(&hooks), "sasl.oauthbearer.method");
    let mut bad_url = oidc;
    bad_url[1].1 = "idp.example/token";
    refused(
        oauth_props(&bad_url),
        None,
        "sasl.oauthbearer.token.endpoint.url",
    );
    let mut with_ca = oidc.to_vec();
    with_ca.push(("https.ca.location", "/nonexistent/ca.pem"));
    refused(oauth_props(&with_ca), None, "https.ca.location");
    let (_, error) = outcome(&oauth_props(&bad_url), None);
    assert!(!error.unwrap().contains("s3cret"));

    // What only librdkafka does leaves the cluster there.
    let cluster: Arc<str> = Arc::from("c");
    for (key, value, says) in [
        (
            "sasl.oauthbearer.method",
            "magic",
            "sasl.oauthbearer.method=magic",
        ),
        (
            "sasl.oauthbearer.grant.type",
            "password",
            "grant.type=password",
        ),
    ] {
        let props = oauth_props(&[(key, value)]);
        let why = unsupported(&Given {
            cluster: &cluster,
            props: &props,
            hooks: None,
            runtime: true,
        });
        assert!(why.is_some_and(|w| w.contains(says)), "{key}");
    }
    let stats = oauth_props(&[("statistics.interval.ms", "1000")]);
    assert!(!outcome(&stats, Some(&hooks)).0);
}

/// A key pair's private half as PKCS#8 PEM (encrypted with `passphrase` if
/// given), and its public half.
fn key_pair(passphrase: Option<&str>) -> (String, openssl::pkey::PKey<openssl::pkey::Public>) {
    let key = openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
    let pem = match passphrase {
        Some(p) => key
            .private_key_to_pem_pkcs8_passphrase(openssl::symm::Cipher::aes_256_cbc(), p.as_bytes())
            .unwrap(),
        None => key.private_key_to_pem_pkcs8().unwrap(),
    };
    let public =
        openssl::pkey::PKey::public_key_from_pem(&key.public_key_to_pem().unwrap()).unwrap();
    (String::from_utf8(pem).unwrap(), public)
}

#[test]
fn the_jwt_bearer_grant_is_served_and_its_bad_settings_are_one_line_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let (pem, _) = key_pair(Some("open-sesame"));
    let key_file = dir.path().join("reader-key.pem");
    std::fs::write(&key_file, &pem).unwrap();
    let key_path = key_file.display().to_string();
    let template = dir.path().join("template.json");
    std::fs::write(
        &template,
        r#"{"header":{"kid":"k1"},"payload":{"scope":"kafka"}}"#,
    )
    .unwrap();
    let template_path = template.display().to_string();
    let assertion_file = dir.path().join("assertion.jwt");
    std::fs::write(&assertion_file, "aGVhZA.Ym9keQ.c2ln\n").unwrap();
    let assertion_path = assertion_file.display().to_string();
    let base: Vec<(&str, &str)> = vec![
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.grant.type", JWT_BEARER),
        (
            "sasl.oauthbearer.token.endpoint.url",
            "https://idp.example/token",
        ),
        (jwt::KEY_FILE, &key_path),
        (jwt::PASSPHRASE, "open-sesame"),
        (jwt::TEMPLATE, &template_path),
        (jwt::SUB, "orders-reader"),
        (jwt::ISS, "orders-app"),
        (jwt::AUD, "https://idp.example"),
        (jwt::EXP, "120"),
        (jwt::NBF, "0"),
        (jwt::JTI, "true"),
    ];
    // Served by auto, no client id nor secret needed.
    assert_eq!(outcome(&oauth_props(&base), None), (true, None));
    let prepared = [
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.grant.type", JWT_BEARER),
        (
            "sasl.oauthbearer.token.endpoint.url",
            "https://idp.example/token",
        ),
        (jwt::FILE, assertion_path.as_str()),
    ];
    assert_eq!(outcome(&oauth_props(&prepared), None), (true, None));
    let (key_text, _) = key_pair(None);
    let mut es_refused = base.clone();
    es_refused.retain(|(k, _)| *k != jwt::KEY_FILE && *k != jwt::PASSPHRASE);
    es_refused.push((jwt::KEY_PEM, &key_text));
    assert_eq!(outcome(&oauth_props(&es_refused), None), (true, None));
    es_refused.push((jwt::ALGORITHM, "ES256"));

    let with = |changes: &[(&str, Option<&str>)]| {
        let mut props = base.clone();
        for (k, v) in changes {
            props.retain(|(key, _)| key != k);
            if let Some(v) = v {
                props.push((k, v));
            }
        }
        oauth_props(&props)
    };
    let bad_template = dir.path().join("bad.json");
    std::fs::write(&bad_template, "{\"header\": {}, ").unwrap();
    let bad_template = bad_template.display().to_string();
    let cases: Vec<(ClientProperties, &str, &str)> = vec![
        (
            with(&[(jwt::KEY_FILE, Some("/nonexistent/reader-key.pem"))]),
            jwt::KEY_FILE,
            "cannot read",
        ),
        (
            with(&[(jwt::PASSPHRASE, Some("wrong-passphrase"))]),
            jwt::PASSPHRASE,
            "does not open",
        ),
        (
            with(&[(jwt::PASSPHRASE, None)]),
            jwt::PASSPHRASE,
            "encrypted",
        ),
        (
            with(&[(jwt::ALGORITHM, Some("HS256"))]),
            jwt::ALGORITHM,
            "RS256 or ES256",
        ),
        (
            with(&[(jwt::ALGORITHM, Some("ES256"))]),
            jwt::ALGORITHM,
            "EC key",
        ),
        (
            with(&[(jwt::TEMPLATE, Some(&bad_template))]),
            jwt::TEMPLATE,
            "not JSON",
        ),
        (with(&[(jwt::EXP, Some("0"))]), jwt::EXP, "seconds"),
        (with(&[(jwt::NBF, Some("-1"))]), jwt::NBF, "seconds"),
        (with(&[(jwt::JTI, Some("yes"))]), jwt::JTI, "true or false"),
        (with(&[(jwt::KEY_FILE, None)]), jwt::KEY_FILE, "not set"),
        (
            with(&[(jwt::KEY_PEM, Some(&key_text))]),
            jwt::KEY_PEM,
            "one key",
        ),
        (
            with(&[(jwt::FILE, Some(&assertion_path))]),
            jwt::KEY_FILE,
            "prepared assertion",
        ),
        (oauth_props(&es_refused), jwt::ALGORITHM, "EC key"),
    ];
    for (props, key, says) in cases {
        let (served, error) = outcome(&props, None);
        assert!(
            served,
            "{key}: the choice does not read the assertion's settings"
        );
        let error = error.unwrap_or_else(|| panic!("{key}: not refused"));
        assert!(
            error.contains(&format!("property `{key}` refused")),
            "{error}"
        );
        assert!(error.contains(says), "{error}");
        assert!(!error.contains('\n'), "{error}");
        for secret in [
            "open-sesame",
            "wrong-passphrase",
            "reader-key.pem",
            &pem[40..80],
            &key_text[40..80],
        ] {
            assert!(!error.contains(secret), "{error}");
        }
    }
    // Settings' Debug shows no secret either.
    let cluster: Arc<str> = Arc::from("c");
    let props = oauth_props(&base);
    let s = settings(&Given {
        cluster: &cluster,
        props: &props,
        hooks: None,
        runtime: true,
    })
    .unwrap();
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("open-sesame") && !shown.contains("reader-key.pem"),
        "{shown}"
    );
}
