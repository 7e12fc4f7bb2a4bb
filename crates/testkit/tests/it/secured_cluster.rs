//! A secured test-kit cluster: every listener answers a plain librdkafka client with
//! the properties the kit hands out, and refuses it with bad ones.

use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, Listener, TestCluster};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

fn metadata_with(props: &[(String, String)], timeout: Duration) -> Result<usize, String> {
    let mut config = ClientConfig::new();
    config.set("log_level", "0");
    for (k, v) in props {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().map_err(|e| e.to_string())?;
    consumer
        .fetch_metadata(None, timeout)
        .map(|md| md.brokers().len())
        .map_err(|e| e.to_string())
}

#[test]
fn every_secured_listener_answers_with_the_kits_properties_and_refuses_bad_ones() {
    let c = KafkaCluster::start(ClusterOptions::new("kit-secured").secured())
        .expect("the secured cluster starts");
    eprintln!("secured startup: {:.1}s", c.startup_time().as_secs_f64());
    let sec = c.security().expect("a secured cluster has its security");
    for f in [&sec.ca, &sec.other_ca, &sec.client_cert, &sec.client_key] {
        assert!(f.exists(), "{} exists", f.display());
    }
    assert_ne!(c.listener_bootstrap(Listener::Mtls), c.bootstrap_servers());
    for listener in [
        Listener::Mtls,
        Listener::ScramSsl,
        Listener::PlainSasl,
        Listener::OauthSsl,
    ] {
        let props = c.listener_properties(listener);
        assert_eq!(props[0].0, "bootstrap.servers");
        let got = metadata_with(&props, Duration::from_secs(20));
        assert_eq!(got, Ok(1), "{listener:?}");
    }

    // Refusals: each must fail (none may answer metadata).
    let with = |l: Listener, changes: &[(&str, &str)]| {
        let mut p = c.listener_properties(l);
        for (k, v) in changes {
            p.retain(|(pk, _)| pk != k);
            p.push((k.to_string(), v.to_string()));
        }
        p
    };
    let other_ca = sec.other_ca.display().to_string();
    let wrong = format!("{}x", sec.scram_password);
    let cases = [
        (
            "wrong password",
            with(Listener::ScramSsl, &[("sasl.password", &wrong)]),
        ),
        (
            "untrusted CA",
            with(Listener::ScramSsl, &[("ssl.ca.location", &other_ca)]),
        ),
        (
            "expired broker certificate",
            with(Listener::ExpiredCert, &[]),
        ),
        (
            "broker certificate for another host",
            with(Listener::WrongHost, &[]),
        ),
        (
            "no client certificate",
            c.listener_properties(Listener::Mtls)
                .into_iter()
                .filter(|(k, _)| !k.starts_with("ssl.certificate") && !k.starts_with("ssl.key"))
                .collect(),
        ),
    ];
    for (what, props) in cases {
        let began = Instant::now();
        let got = metadata_with(&props, Duration::from_secs(1));
        assert!(got.is_err(), "{what}: answered {got:?}");
        eprintln!("{what}: {:?} after {:?}", got, began.elapsed());
    }
}
