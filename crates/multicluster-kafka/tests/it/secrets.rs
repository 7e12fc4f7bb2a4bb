//! Secret property values stay secret: the secret-key list covers
//! every property librdkafka itself treats as sensitive, and no secret value reaches
//! log lines (librdkafka's own debug lines included), errors, `Debug` output,
//! checkpoints or metrics. The last check runs in a process of its own: it installs a
//! global metrics recorder.

use crate::support;
use rusty_fork::rusty_fork_test;

use std::collections::BTreeSet;
use std::path::PathBuf;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use metrics_util::debugging::DebuggingRecorder;
use multicluster_kafka::prelude::*;
use multicluster_kafka::properties::{LIBRDKAFKA_SENSITIVE, is_secret_key};
use support::Capture;

/// The host's target triple, as rustc names it.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

/// librdkafka's configuration table, from the rdkafka-sys crate this build uses
/// (found through `cargo metadata`, offline, for this platform only: a fresh
/// machine's cache lacks the crates only other platforms need).
fn librdkafka_conf_source() -> (PathBuf, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(host_triple())
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let sys = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "rdkafka-sys")
        .expect("rdkafka-sys is a dependency");
    let dir = PathBuf::from(sys["manifest_path"].as_str().expect("manifest path"))
        .parent()
        .expect("crate dir")
        .to_path_buf();
    let path = dir.join("librdkafka/src/rdkafka_conf.c");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "librdkafka's configuration source not found at {}: {e}",
            path.display()
        )
    });
    (path, text)
}

/// The names of the properties whose table entry carries `_RK_SENSITIVE`.
fn sensitive_properties(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // An entry starts `{<scope flags>, "<name>", …`; the flags may span lines.
    for entry in source.split('{').skip(1) {
        let Some((flags, rest)) = entry.split_once(',') else {
            continue;
        };
        if !flags.contains("_RK_SENSITIVE")
            || !flags.contains("_RK_GLOBAL") && !flags.contains("_RK_TOPIC")
        {
            continue;
        }
        let rest = rest.trim_start();
        if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split_once('"')) {
            out.insert(name.0.to_string());
        }
    }
    out
}

#[test]
fn every_property_librdkafka_treats_as_sensitive_is_a_secret_key() {
    let (path, source) = librdkafka_conf_source();
    let sensitive = sensitive_properties(&source);
    // A parser that finds nothing would pass vacuously.
    assert!(
        sensitive.contains("sasl.password") && sensitive.len() >= 10,
        "parsed {} from {}: {sensitive:?}",
        sensitive.len(),
        path.display()
    );
    let missing: Vec<&String> = sensitive.iter().filter(|k| !is_secret_key(k)).collect();
    assert!(
        missing.is_empty(),
        "sensitive in librdkafka, not secret here: {missing:?}"
    );
    let ours: BTreeSet<String> = LIBRDKAFKA_SENSITIVE.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        ours,
        sensitive,
        "LIBRDKAFKA_SENSITIVE differs from {}",
        path.display()
    );
}

/// Secret values of the test, each unlike anything else in a log line.
const SECRETS: &[(&str, &str)] = &[
    ("sasl.username", "user-Zq81"),
    ("sasl.password", "pass-Wm27"),
    ("ssl.key.password", "keypass-Hx45"),
    ("sasl.oauthbearer.config", "principal=cfg-Rt63"),
    ("ssl.keystore.password", "storepass-Bn09"),
];

fn assert_clean(what: &str, text: &str) {
    for (key, value) in SECRETS {
        assert!(
            !text.contains(value),
            "{what} shows the value of {key}: {text}"
        );
    }
}

rusty_fork_test! {
#[test]
fn no_secret_reaches_logs_debug_output_checkpoints_or_metrics() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this binary");

    let c = MockKafkaCluster::start("vault", 1).unwrap();
    c.create_topic("t", 2).unwrap();
    let records: Vec<TestRecord> = (0..4)
        .map(|i| TestRecord::value(format!("v{i}")).to_partition(i % 2))
        .collect();
    c.produce("t", &records).unwrap();
    // The mock cluster speaks PLAINTEXT only: the secrets are set and handed to
    // librdkafka, which does not use them on this connection.
    let mut cluster = ClusterMetadata::builder(c.bootstrap_servers()).topic("t");
    for (key, value) in SECRETS {
        cluster = cluster.property(*key, *value);
    }
    let stream = KafkaStream::new("s").with_cluster("vault", cluster.build().unwrap());
    let capture = Capture::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (values, checkpoint, debug) = tracing::subscriber::with_default(capture.clone(), || {
        rt.block_on(async {
            let source = MultiClusterKafkaSource::builder()
                .metadata_service(StaticMetadataService::new([stream]).unwrap())
                .stream_ids(["s"])
                .group_id("secrets")
                .deserializer(Utf8)
                // librdkafka's own debug lines, its configuration dump among them.
                .property("debug", "all")
                .property("statistics.interval.ms", "100")
                .stopping_offsets(StoppingOffsets::Latest)
                .build()
                .unwrap();
            let debug = format!("{source:?}");
            let mut s = source.open().await.unwrap();
            let mut values = Vec::new();
            while let Some(r) = s.next().await {
                values.push(r.unwrap().value);
            }
            let checkpoint = s.checkpoint().unwrap();
            s.commit(&checkpoint).await.unwrap();
            s.close().await;
            (values, checkpoint, debug)
        })
    });
    assert_eq!(values.len(), 4);
    assert_clean("the source's Debug output", &debug);
    assert_clean(
        "the checkpoint",
        &String::from_utf8_lossy(&checkpoint.encode()),
    );
    assert_clean("the checkpoint's Debug output", &format!("{checkpoint:?}"));

    let lines = capture.lines();
    // librdkafka dumped its configuration, naming the secret keys.
    let dump: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("librdkafka ") && l.contains("sasl.password"))
        .collect();
    assert!(
        !dump.is_empty(),
        "no configuration dump among {} lines",
        lines.len()
    );
    for line in &lines {
        assert_clean("a log line", line);
    }

    let metrics = format!("{:?}", snapshotter.snapshot().into_vec());
    assert!(metrics.contains("vault"), "{metrics}");
    assert_clean("the metrics", &metrics);
}
}

#[test]
fn errors_about_secret_properties_do_not_repeat_their_values() {
    // A private key file that does not exist: librdkafka refuses the client and
    // names the file, whose path is sensitive.
    let stream = KafkaStream::new("s").with_cluster(
        "tls",
        ClusterMetadata::builder("127.0.0.1:1")
            .topic("t")
            .property("security.protocol", "SSL")
            .property("ssl.key.location", "/nonexistent/keypath-Jd52.pem")
            .property("ssl.certificate.location", "/nonexistent/cert.pem")
            .property("ssl.key.password", "keypass-Hx45")
            .build()
            .unwrap(),
    );
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
    assert!(err.contains("cluster `tls`"), "{err}");
    assert!(!err.contains("keypath-Jd52"), "{err}");
    assert_clean("the error", &err);
}
