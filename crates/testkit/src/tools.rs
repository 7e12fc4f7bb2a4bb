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
