//! `mck demo`, the README's main job, runs to its end and reports exactly-once.
#![cfg(feature = "demo")]

use crate::support;

#[test]
fn the_demo_migrates_between_two_mock_clusters_and_reads_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::mck()
        .args(["demo", "--phase-seconds", "2", "--rate", "1000", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("PASS:"), "{stdout}");
    // The summary's figures agree with each other, and both clusters were read.
    let field = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` line in:\n{stdout}"));
        line.split_whitespace()
            .nth(name.split_whitespace().count())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("bad `{name}` line: {line}"))
    };
    let produced = field("produced");
    assert!(produced > 0);
    assert_eq!(field("distinct read"), produced, "{stdout}");
    assert_eq!(field("missing"), 0);
    assert_eq!(field("duplicates"), 0);
    assert!(stdout.contains("first record from west"), "{stdout}");
    // The metadata file it rewrote ends with the stream on west only.
    let metadata = std::fs::read_to_string(dir.path().join("streams.yaml")).unwrap();
    assert!(
        metadata.contains("clusterId: west") && !metadata.contains("clusterId: east"),
        "{metadata}"
    );
}

#[test]
fn the_demo_read_through_head_ends_quietly_when_the_pipe_closes() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = support::mck()
        .args(["demo", "--phase-seconds", "2", "--rate", "1000", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -n 2`: two lines, then the reader goes away.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the demo printed less than two lines"
        );
    }
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
