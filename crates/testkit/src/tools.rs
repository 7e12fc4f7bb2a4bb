//! Kafka's own command-line tools, run from the test kit's jars against any cluster:
//! what a user would run by hand, so tests meet the same broker behaviour.

use std::process::Command;

use crate::error::TestkitError;
use crate::jars::kafka_libs;
use crate::real::java_binary;

/// A JVM with the Kafka jars on its class path.
fn kafka_tool(class: &str) -> Result<Command, TestkitError> {
    let mut cmd = Command::new(java_binary());
    cmd.args(["-Xms64m", "-Xmx256m"])
        .arg("-cp")
        .arg(format!("{}/*", kafka_libs()?.display()))
        .arg(class);
    Ok(cmd)
}

/// `kafka-delete-records`: deletes the records of `topic`/`partition` below
/// `before_offset` (the log start moves there), as an operator or retention would.
pub fn delete_records(
    bootstrap_servers: &str,
    topic: &str,
    partition: i32,
    before_offset: i64,
) -> Result<(), TestkitError> {
    let err = |message: String| TestkitError::Kafka {
        cluster: bootstrap_servers.to_string(),
        message,
    };
    let spec = std::env::temp_dir().join(format!(
        "mck-delete-records-{}-{topic}-{partition}.json",
        std::process::id()
    ));
    let json = format!(
        r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":{partition},"offset":{before_offset}}}]}}"#
    );
    std::fs::write(&spec, json)
        .map_err(|e| err(format!("delete-records: {}: {e}", spec.display())))?;
    let out = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand")?
        .arg("--bootstrap-server")
        .arg(bootstrap_servers)
        .arg("--offset-json-file")
        .arg(&spec)
        .output()
        .map_err(|e| err(format!("delete-records: cannot run java: {e}")))?;
    let _ = std::fs::remove_file(&spec);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || text.contains("error") {
        return Err(err(format!(
            "kafka-delete-records failed ({}): {}",
            out.status,
            text.trim()
        )));
    }
    Ok(())
}

/// `kafka-acls --add`: adds the ACL that `spec` describes, in the tool's own words
/// (e.g. `["--deny-principal", "User:bob", "--operation", "All", "--topic", "t"]`).
/// The cluster needs an authorizer (see [`crate::ClusterOptions::authorizer`]).
pub fn add_acl(bootstrap_servers: &str, spec: &[&str]) -> Result<(), TestkitError> {
    let err = |message: String| TestkitError::Kafka {
        cluster: bootstrap_servers.to_string(),
        message,
    };
    let out = kafka_tool("org.apache.kafka.tools.AclCommand")?
        .arg("--bootstrap-server")
        .arg(bootstrap_servers)
        .arg("--add")
        .args(spec)
        .output()
        .map_err(|e| err(format!("kafka-acls: cannot run java: {e}")))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        return Err(err(format!(
            "kafka-acls failed ({}): {}",
            out.status,
            text.trim()
        )));
    }
    Ok(())
}

/// Runs Kafka tool `class` with `args` after `--bootstrap-server`; an error with
/// the tool's output when it fails (or says `Error`).
fn run_tool(
    bootstrap_servers: &str,
    class: &str,
    what: &str,
    args: &[&str],
) -> Result<String, TestkitError> {
    let err = |message: String| TestkitError::Kafka {
        cluster: bootstrap_servers.to_string(),
        message,
    };
    let out = kafka_tool(class)?
        .arg("--bootstrap-server")
        .arg(bootstrap_servers)
        .args(args)
        .output()
        .map_err(|e| err(format!("{what}: cannot run java: {e}")))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || text.contains("Error") {
        return Err(err(format!(
            "{what} failed ({}): {}",
            out.status,
            text.trim()
        )));
    }
    Ok(text)
}

/// `kafka-topics --create --replica-assignment`: a topic whose partition `i` has
/// the replicas (node ids) `assignment[i]`, the first its preferred leader.
pub fn create_topic_on(
    bootstrap_servers: &str,
    topic: &str,
    assignment: &[&[i32]],
) -> Result<(), TestkitError> {
    let spec: Vec<String> = assignment
        .iter()
        .map(|nodes| {
            nodes
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(":")
        })
        .collect();
    run_tool(
        bootstrap_servers,
        "org.apache.kafka.tools.TopicCommand",
        "kafka-topics --create",
        &[
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            &spec.join(","),
        ],
    )
    .map(drop)
}

/// `kafka-leader-election --election-type unclean`: makes a live replica of
/// `topic`/`partition` its leader even if it is not in sync (records only the old
/// leader had are lost, and its log is truncated when it comes back).
pub fn elect_unclean_leader(
    bootstrap_servers: &str,
    topic: &str,
    partition: i32,
) -> Result<(), TestkitError> {
    let partition = partition.to_string();
    run_tool(
        bootstrap_servers,
        "org.apache.kafka.tools.LeaderElectionCommand",
        "kafka-leader-election --election-type unclean",
        &[
            "--election-type",
            "unclean",
            "--topic",
            topic,
            "--partition",
            &partition,
        ],
    )
    .map(drop)
}
