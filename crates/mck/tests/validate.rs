//! `mck validate` as a user runs it.

mod support;

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
