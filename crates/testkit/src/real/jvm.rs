//! The brokers' JVMs: the `java` command, formatting log dirs, spawning a broker and
//! waiting until it answers.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::{KafkaCluster, Node, archive, io};
use crate::TestkitError;
use crate::process::spawn_tied;
use crate::secured::Security;
use crate::util::tail_lines;

/// The `java` of `$JAVA_HOME`, else the one on the `PATH`.
pub(crate) fn java_binary() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// A `java` command with `jvm_options`, the log4j2 configuration that
/// [`prepare_run_dirs`](super::start::prepare_run_dirs) wrote into `log_root`, and every
/// jar of `libs` on the class path; the caller adds `-Dkafka.logs.dir`, the main class
/// and its arguments.
pub(crate) fn java_command(jvm_options: &[String], log_root: &Path, libs: &Path) -> Command {
    let mut cmd = Command::new(java_binary());
    cmd.args(jvm_options);
    cmd.arg(format!(
        "-Dlog4j2.configurationFile={}",
        log_root.join("log4j2.properties").display()
    ));
    cmd.arg("-cp").arg(format!("{}/*", libs.display()));
    cmd
}

impl KafkaCluster {
    /// The `java` command of this cluster's JVMs: its options, and the brokers'
    /// class-data archive mapped unless they name one.
    pub(super) fn java(&self) -> Command {
        let mut options = self.options.jvm_options.clone();
        if !archive::names_an_archive(&options)
            && let Some(map) = archive::map_option(&self.libs)
        {
            options.push(map.to_string());
        }
        java_command(&options, &self.log_root, &self.libs)
    }

    /// Formats every node's log dir (in parallel; each format is one short JVM).
    pub(super) fn format(&self, nodes: &[Node]) -> Result<(), TestkitError> {
        let mut children = Vec::new();
        for node in nodes {
            let out_path = node.log_dir.join("format.log");
            let out = fs::File::create(&out_path).map_err(io(&out_path))?;
            let err = out.try_clone().map_err(io(&out_path))?;
            let mut cmd = self.java();
            cmd.arg(format!("-Dkafka.logs.dir={}", node.log_dir.display()))
                .arg("kafka.tools.StorageTool")
                .arg("format")
                // `=` form: a generated id may start with `-`, which argparse
                // would read as an option.
                .arg(format!("--cluster-id={}", self.kafka_cluster_id))
                .arg("-c")
                .arg(&node.config)
                .args(self.security.iter().flat_map(Security::format_args))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            let child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
            children.push((node, child, out_path));
        }
        for (node, mut child, out_path) in children {
            let status = child
                .wait()
                .map_err(|e| TestkitError::Java(e.to_string()))?;
            if !status.success() {
                let text = fs::read_to_string(&out_path).unwrap_or_default();
                return Err(TestkitError::BrokerNotReady {
                    cluster: self.options.logical_id.clone(),
                    broker: node.node_id - 1,
                    reason: format!("formatting the log dir failed ({status})"),
                    log: out_path,
                    tail: tail_lines(&text, 30),
                });
            }
        }
        Ok(())
    }

    pub(super) fn spawn_broker(&self, node: &Node) -> Result<Child, TestkitError> {
        let out_path = node.log_dir.join("stdout.log");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = self.java();
        cmd.arg(format!("-Dkafka.logs.dir={}", node.log_dir.display()))
            .arg("kafka.Kafka")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        spawn_tied(cmd).map_err(|e| TestkitError::Java(format!("{e} (is a JDK 17+ installed?)")))
    }

    fn log_tail(node_log_dir: &Path) -> String {
        let mut text = String::new();
        for f in ["server.log", "stdout.log"] {
            if let Ok(t) = fs::read_to_string(node_log_dir.join(f)) {
                text.push_str(&format!("[{f}]\n{}\n", tail_lines(&t, 25)));
            }
        }
        text
    }

    /// Waits until broker `index` answers a metadata request that lists it.
    pub(super) fn await_ready(&self, index: usize) -> Result<(), TestkitError> {
        let deadline = Instant::now() + self.options.ready_timeout;
        let (port, node_id, log_dir) = {
            let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            let n = &nodes[index];
            (n.port, n.node_id, n.log_dir.clone())
        };
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", format!("127.0.0.1:{port}"))
            .set("socket.connection.setup.timeout.ms", "1000")
            .set("reconnect.backoff.max.ms", "200")
            .set("log_level", "0")
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        loop {
            {
                let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(child) = nodes[index].child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    return Err(self.not_ready(
                        index,
                        &log_dir,
                        format!("the JVM exited ({status})"),
                    ));
                }
            }
            let last = match consumer.fetch_metadata(None, Duration::from_millis(1000)) {
                Ok(md) if md.brokers().iter().any(|b| b.id() as usize == node_id) => return Ok(()),
                Ok(md) => format!(
                    "metadata lists brokers {:?}",
                    md.brokers().iter().map(|b| b.id()).collect::<Vec<_>>()
                ),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(self.not_ready(
                    index,
                    &log_dir,
                    format!(
                        "no metadata answer within {:?}; last: {last}",
                        self.options.ready_timeout
                    ),
                ));
            }
        }
    }

    fn not_ready(&self, index: usize, log_dir: &Path, reason: String) -> TestkitError {
        TestkitError::BrokerNotReady {
            cluster: self.options.logical_id.clone(),
            broker: index,
            reason,
            log: log_dir.join("server.log"),
            tail: Self::log_tail(log_dir),
        }
    }
}
