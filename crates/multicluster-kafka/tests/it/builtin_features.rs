//! librdkafka as this crate builds it reads every cluster a user has: TLS, each SASL
//! mechanism (OAUTHBEARER with its OIDC client), and every compression codec. The
//! list is librdkafka's own `builtin.features`, so a build that silently lost one (a
//! library not found at build time) fails here rather than at a user's cluster.

use rdkafka::ClientConfig;

#[test]
fn librdkafka_has_tls_every_sasl_mechanism_oidc_and_every_codec() {
    let native = ClientConfig::new()
        .create_native_config()
        .expect("a default librdkafka config");
    let features = native
        .get("builtin.features")
        .expect("librdkafka reports builtin.features");
    let have: Vec<&str> = features.split(',').collect();
    for wanted in [
        "ssl",
        "sasl_plain",
        "sasl_scram",
        "sasl_oauthbearer",
        "http",
        "oidc",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ] {
        assert!(
            have.contains(&wanted),
            "librdkafka lacks `{wanted}`; it has: {features}"
        );
    }
}
