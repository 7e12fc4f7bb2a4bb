//! `mck validate` as a user runs it.

use crate::support;

use std::path::PathBuf;

use support::mck;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples")
}

#[test]
fn a_valid_file_prints_its_streams_without_secrets() {
    let out = mck()
        .arg("validate")
        .arg(examples().join("rich-layout.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid:"), "{stdout}");
    assert!(stdout.contains("stream "), "{stdout}");
    let secret = std::fs::read_to_string(examples().join("secrets/east-password")).unwrap();
    assert!(!stdout.contains(secret.trim()), "secret printed: {stdout}");
    assert!(stdout.contains("<redacted>"), "{stdout}");
}

#[test]
fn json_output_parses_and_names_every_stream() {
    let out = mck()
        .args(["validate", "--json"])
        .arg(examples().join("flink-layout.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.as_object().is_some_and(|m| !m.is_empty()), "{v}");
}

#[test]
fn an_invalid_file_gives_a_located_one_line_error_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "clusters:\n  east:\n    bootstrapServers: a:9092\nstreams:\n  s:\n    clusters:\n      west: { topics: [t] }\n",
    )
    .unwrap();
    let out = mck().arg("validate").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("bad.yaml:7:"), "{stderr}");
    assert!(stderr.contains("west"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_missing_file_and_bad_arguments_fail_without_a_panic() {
    let out = mck()
        .args(["validate", "/nonexistent/streams.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/streams.yaml"), "{stderr}");

    let out = mck().args(["validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn a_mirror_entry_is_shown_and_a_bad_one_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("mirror.yaml");
    let file = |mirror_of: &str| {
        format!(
            "clusters:\n  east: {{bootstrapServers: \"e:9092\"}}\n  west: {{bootstrapServers: \"w:9092\"}}\nstreams:\n  orders:\n    clusters:\n      east: {{topics: [orders]}}\n      west:\n        topics: [east.orders]\n        mirrorOf: {mirror_of}\n"
        )
    };
    std::fs::write(
        &good,
        file("{cluster: east, translate: mm2, failoverAfter: 60s}"),
    )
    .unwrap();
    let out = mck().arg("validate").arg(&good).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(r#"mirror of: {"cluster":"east","failoverAfter":"1m","translate":"mm2"}"#),
        "{stdout}"
    );
    let out = mck()
        .args(["validate", "--json"])
        .arg(&good)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["orders"]["clusters"]["west"]["mirrorOf"]["cluster"], "east",
        "{v}"
    );
    assert_eq!(
        v["orders"]["clusters"]["east"]["mirrorOf"],
        serde_json::Value::Null,
        "{v}"
    );

    for (mirror_of, says) in [
        ("{cluster: east, translate: mirror}", "mirror"),
        ("{cluster: north, translate: mm2}", "north"),
        (
            "{cluster: east, translate: identical, failoverAfter: soon}",
            "soon",
        ),
    ] {
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, file(mirror_of)).unwrap();
        let out = mck().arg("validate").arg(&bad).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{mirror_of}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("bad.yaml:"), "{stderr}");
        assert!(stderr.contains(says), "{mirror_of}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `validate` refuses every client property `consume` would refuse before reading, on
/// both fetch paths, with the same one line located at the property's key; a property
/// only the native path refuses passes where `auto` may take librdkafka instead.
#[test]
fn validate_refuses_what_consume_refuses_each_located_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("streams.yaml");
    let write = |properties: &str| {
        std::fs::write(
            &file,
            format!(
                "clusters:\n  east:\n    bootstrapServers: 127.0.0.1:1\n    properties:\n{properties}streams:\n  s:\n    clusters:\n      east: {{topics: [t]}}\n"
            ),
        )
        .unwrap();
    };
    let cases = [
        (
            "      sasl.jaas.config: x\n",
            ":5:7: cluster `east`: property `sasl.jaas.config` refused by librdkafka: ",
        ),
        (
            "      bogus.key: \"1\"\n",
            ":5:7: cluster `east`: property `bogus.key` refused by librdkafka: ",
        ),
        (
            "      fetch.max.bytes: abc\n",
            ":5:7: cluster `east`: property `fetch.max.bytes` refused by librdkafka: ",
        ),
        (
            "      fetch.share.min.bytes: \"-5\"\n",
            ":5:7: cluster `east`: property `fetch.share.min.bytes` refused: a whole number",
        ),
        (
            "      fetch.backend: bogus\n",
            ":5:7: cluster `east`: property `fetch.backend` refused: fetch.backend must be native, librdkafka or auto",
        ),
        (
            "      fetch.backend: native\n      socket.keepalive.enable: \"true\"\n",
            ":6:7: cluster `east`: property `socket.keepalive.enable` refused by the native fetch path: not supported",
        ),
    ];
    for (properties, says) in cases {
        write(properties);
        let validate = mck().arg("validate").arg(&file).output().unwrap();
        let stderr = String::from_utf8(validate.stderr).unwrap();
        assert_eq!(validate.status.code(), Some(1), "{properties}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("mck: error: {}{says}", file.display())),
            "{properties}: {stderr}"
        );
        let consume = mck()
            .arg("consume")
            .arg(&file)
            .args(["--stream", "s", "-e"])
            .output()
            .unwrap();
        assert_eq!(consume.status.code(), Some(1), "{properties}");
        assert_eq!(
            String::from_utf8(consume.stderr).unwrap(),
            stderr,
            "consume and validate say the same"
        );
    }
    // With `auto`, a property the native path lacks keeps the cluster on librdkafka.
    write("      socket.keepalive.enable: \"true\"\n");
    let out = mck().arg("validate").arg(&file).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
