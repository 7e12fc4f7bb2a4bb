//! Every command whose reader goes away early (`mck … | head`, `2>&1 | true`) ends
//! quietly: exit 0 when stdout's reader is gone, its usual status when stderr's is,
//! and never a panic. The pipes here are closed before `mck` writes a byte, so no
//! run depends on who is quicker.

use crate::support;

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;

use support::mck;

/// The write end of a pipe whose read end is already closed.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors on success; each is owned once below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/examples")
        .join(name);
    path.to_str().expect("a UTF-8 path").to_string()
}

/// The commands that write to stdout without a Kafka cluster.
fn offline_commands() -> Vec<Vec<String>> {
    let yaml = example("rich-layout.yaml");
    let json = example("rich-layout.json");
    let flink = example("flink-layout.yaml");
    let commands: Vec<Vec<&str>> = vec![
        vec!["validate", &yaml],
        vec!["validate", "--json", &json],
        vec!["plan", "--offline", &flink, &yaml],
        vec!["plan", "--offline", "--json", &flink, &yaml],
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["man"],
        vec!["--help"],
        vec!["consume", "--help"],
        vec!["--version"],
    ];
    commands
        .into_iter()
        .map(|c| c.into_iter().map(str::to_string).collect())
        .collect()
}

#[test]
fn every_command_ends_quietly_when_stdouts_reader_is_gone() {
    for args in offline_commands() {
        let out = mck()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(closed_pipe()))
            .output()
            .expect("mck starts");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "mck {args:?}: {stderr}");
        assert!(stderr.is_empty(), "mck {args:?} said: {stderr}");
    }
}

#[test]
fn every_command_keeps_its_status_when_stderrs_reader_is_gone() {
    // Each writes to stderr: a located error, or its warnings.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "streams: [\n").unwrap();
    let bad = bad.path().to_str().unwrap().to_string();
    let yaml = example("rich-layout.yaml");
    for (args, status) in [
        (vec!["validate", bad.as_str()], 1),
        (vec!["plan", "--offline", bad.as_str(), yaml.as_str()], 1),
        (vec!["describe", bad.as_str()], 1),
        (vec!["consume", bad.as_str(), "--stream", "orders"], 1),
        (vec!["validate", yaml.as_str()], 0),
    ] {
        let out = mck()
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::from(closed_pipe()))
            .output()
            .expect("mck starts");
        assert_eq!(
            out.status.code(),
            Some(status),
            "mck {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn a_pipe_closed_on_both_sides_ends_the_demo_quietly() {
    let out = mck()
        .args(["demo"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::from(closed_pipe()))
        .output()
        .expect("mck starts");
    assert_eq!(out.status.code(), Some(0));
}
