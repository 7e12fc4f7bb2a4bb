//! `mck consume` protects what it writes, against a real Kafka cluster: an existing
//! output file no checkpoint covers is refused (and replaced with `--overwrite`), a
//! second run on one checkpoint directory fails at once naming the first (and a
//! `kill -9` leaves nothing that blocks the next), and a truncated newest checkpoint
//! falls back to the previous one with the output still exactly once.

use crate::support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, assert_each_once, fill_values, shared_cluster};
use support::{PATIENCE, arg, checkpoint_files, wait_exit};

fn cluster() -> &'static KafkaCluster {
    shared_cluster("protect").expect("cluster protect starts")
}

/// Quick-mode arguments printing values, one per line.
fn args(topic: &str, extra: &[&str]) -> Vec<String> {
    let bootstrap = cluster().bootstrap_servers();
    [
        "consume", "-b", &bootstrap, "-t", topic, "--format", "value",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect()
}

/// Starts `mck` with stdout discarded and stderr into `stderr`.
fn start(args: &[String], stderr: &Path) -> Child {
    support::mck()
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .expect("mck starts")
}

/// Waits for the exit (with a guard against hangs); returns the exit code and stderr.
fn finish(child: &mut Child, stderr: &Path) -> (i32, String) {
    let status = wait_exit(child, Some(stderr));
    let err = std::fs::read_to_string(stderr).unwrap_or_default();
    (status.code().unwrap_or(-1), err)
}

/// Runs `mck` to its end: exit code and stderr.
fn run(args: &[String], stderr: &Path) -> (i32, String) {
    finish(&mut start(args, stderr), stderr)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn an_existing_output_without_a_checkpoint_is_refused_untouched_unless_overwrite() {
    let topic = "protect-refuse";
    cluster().create_topic(topic, 2).unwrap();
    let want = fill_values(cluster(), topic, 2, 10, "r");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let ck = dir.path().join("ck");
    let stderr = dir.path().join("stderr");
    std::fs::write(&out, "precious\n").unwrap();

    for extra in [
        vec!["-e", "--output", arg(&out)],
        // A checkpoint directory without a checkpoint covers nothing either.
        vec!["-e", "--output", arg(&out), "--checkpoint-dir", arg(&ck)],
    ] {
        let (code, err) = run(&args(topic, &extra), &stderr);
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains(&format!("output file {}", out.display()))
                && err.contains("already holds 9 bytes")
                && err.contains("give --overwrite"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious\n");
    }

    let overwrite = ["-e", "--output", arg(&out), "--overwrite"];
    let (code, err) = run(&args(topic, &overwrite), &stderr);
    assert_eq!(code, 0, "{err}");
    assert_each_once(lines(&out), want.clone());

    // The file is now someone's output: a run without a checkpoint refuses it again.
    let (code, err) = run(&args(topic, &["-e", "--output", arg(&out)]), &stderr);
    assert_eq!(code, 1, "{err}");
    assert_each_once(lines(&out), want);

    // `--overwrite` means nothing without `--output`.
    let (code, err) = run(&args(topic, &["-e", "--overwrite"]), &stderr);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_second_run_on_one_checkpoint_dir_fails_at_once_and_a_kill_9_does_not_block_the_next() {
    let topic = "protect-lock";
    cluster().create_topic(topic, 2).unwrap();
    let mut want = fill_values(cluster(), topic, 2, 25, "l1");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let ck = dir.path().join("ck");
    // Checkpoints an hour apart: the first run is killed before its first one.
    let follow = args(
        topic,
        &[
            "--output",
            arg(&out),
            "--checkpoint-dir",
            arg(&ck),
            "--checkpoint-interval",
            "1h",
        ],
    );
    let first_err = dir.path().join("stderr-first");
    let mut first = start(&follow, &first_err);
    let until = Instant::now() + PATIENCE;
    while lines(&out).len() < want.len() {
        assert!(
            first.try_wait().unwrap().is_none() && Instant::now() < until,
            "the first run did not write {} lines; stderr:\n{}",
            want.len(),
            std::fs::read_to_string(&first_err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let written = std::fs::read(&out).unwrap();

    // The second run fails before it reads anything, naming the first run's pid.
    let started = Instant::now();
    let second_err = dir.path().join("stderr-second");
    let (code, err) = run(&follow, &second_err);
    let took = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(
        took < Duration::from_secs(10),
        "the second run took {took:?} to fail"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("pid {}", first.id()))
            && err.contains("in use by another run")
            && err.contains(&ck.display().to_string()),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        written,
        "the output is left alone"
    );
    assert!(first.try_wait().unwrap().is_none(), "the first run goes on");

    // kill -9: the lock file stays behind, the lock does not.
    first.kill().unwrap();
    first.wait().unwrap();
    let lock = std::fs::read_to_string(ck.join("lock")).unwrap();
    assert_eq!(lock.trim(), first.id().to_string());

    // The next run starts, and with no checkpoint yet it starts the file it owns
    // afresh (no --overwrite needed) and reads everything once.
    want.extend(fill_values(cluster(), topic, 2, 10, "l2"));
    let mut bounded = follow.clone();
    bounded.push("-e".into());
    let (code, err) = run(&bounded, &dir.path().join("stderr-third"));
    assert_eq!(code, 0, "{err}");
    assert_each_once(lines(&out), want);
}

#[test]
fn a_truncated_newest_checkpoint_falls_back_to_the_previous_one_exactly_once() {
    let topic = "protect-truncated";
    cluster().create_topic(topic, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let ck = dir.path().join("ck");
    // One checkpoint per run, at its end.
    let export = args(
        topic,
        &[
            "-e",
            "--output",
            arg(&out),
            "--checkpoint-dir",
            arg(&ck),
            "--checkpoint-interval",
            "1h",
        ],
    );
    let mut want = Vec::new();
    for round in 0..2 {
        want.extend(fill_values(cluster(), topic, 2, 20, &format!("t{round}")));
        let (code, err) = run(&export, &dir.path().join(format!("stderr-{round}")));
        assert_eq!(code, 0, "{err}");
        assert_each_once(lines(&out), want.clone());
    }
    let newest = checkpoint_files(&ck).pop().expect("a checkpoint");
    assert!(
        checkpoint_files(&ck).len() >= 2,
        "{:?}",
        checkpoint_files(&ck)
    );
    let bytes = std::fs::read(&newest).unwrap();
    std::fs::write(&newest, &bytes[..bytes.len() / 2]).unwrap();

    want.extend(fill_values(cluster(), topic, 2, 20, "t2"));
    let (code, err) = run(&export, &dir.path().join("stderr-2"));
    assert_eq!(code, 0, "{err}");
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        err.contains("warning") && err.contains(&name) && err.contains("previous checkpoint"),
        "a warning names the unreadable file: {err}"
    );
    assert_each_once(lines(&out), want);

    // Nothing readable at all is an error naming the newest file.
    for path in checkpoint_files(&ck) {
        std::fs::write(&path, b"{\"format\"").unwrap();
    }
    let newest = checkpoint_files(&ck).pop().unwrap();
    let (code, err) = run(&export, &dir.path().join("stderr-3"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot restore") && err.contains(&newest.display().to_string()),
        "{err}"
    );
}
