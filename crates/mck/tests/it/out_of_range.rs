//! `mck consume` when records below its checkpoint were deleted (Kafka's own
//! `kafka-delete-records`): the run fails with one located line, or resets where
//! `--on-missing-offset` says.

use crate::support;

use mck_testkit::{TestCluster, TestRecord, shared_cluster, tools};
use support::mck;

#[test]
fn deleted_records_below_the_checkpoint_fail_the_run_unless_a_reset_is_chosen() {
    let c = shared_cluster("oor-cli").unwrap();
    let topic = "cli-deleted-below";
    c.create_topic(topic, 1).unwrap();
    let values: Vec<TestRecord> = (0..10)
        .map(|i| TestRecord::value(format!("v{i}")))
        .collect();
    c.produce(topic, &values).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("ck"), dir.path().join("out.txt"));
    let run = |extra: &[&str]| {
        mck()
            .args([
                "consume",
                "-b",
                &c.bootstrap_servers(),
                "-t",
                topic,
                "--format",
                "value",
            ])
            .arg("--checkpoint-dir")
            .arg(&ck)
            .arg("--output")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let first = run(&["-c", "3"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "v0\nv1\nv2\n");

    tools::delete_records(&c.bootstrap_servers(), topic, 0, 6).unwrap();

    let failed = run(&["-e"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(
        lines[0].starts_with("mck: error: ")
            && lines[0].contains(&format!(
                "/{topic}/0: position 3 is outside the log (offsets 6 to 10)"
            ))
            && lines[0].contains("--on-missing-offset"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "v0\nv1\nv2\n",
        "nothing written by the failed run"
    );

    let reset = run(&["-e", "--on-missing-offset", "earliest"]);
    let stderr = String::from_utf8_lossy(&reset.stderr);
    assert!(reset.status.success(), "{stderr}");
    assert!(
        stderr.contains("position outside the log"),
        "the reset is said: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "v0\nv1\nv2\nv6\nv7\nv8\nv9\n"
    );
}
