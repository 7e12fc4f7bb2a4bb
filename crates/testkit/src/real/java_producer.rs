//! Kafka's own Java console producer, run against a cluster.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{KafkaCluster, io};
use crate::process::{kill_and_wait, spawn_tied};
use crate::util::tail_lines;
use crate::{TestCluster, TestkitError};

impl KafkaCluster {
    /// Kafka's console producer on `topic` over the `PLAINTEXT` listener, reading
    /// `key<TAB>value` lines from a piped stdin, its output and logs in the directory
    /// `java-producer/<name>` of the cluster's logs. Returns the command (to which
    /// producer options may be added), that directory and its `stdout.log`.
    fn console_producer(
        &self,
        topic: &str,
        name: &str,
    ) -> Result<(Command, PathBuf, PathBuf), TestkitError> {
        let dir = self.log_root.join("java-producer").join(name);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let out_path = dir.join("stdout.log");
        let out = fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = self.java();
        cmd.arg(format!("-Dkafka.logs.dir={}", dir.display()))
            .arg("org.apache.kafka.tools.ConsoleProducer")
            .arg("--bootstrap-server")
            .arg(self.bootstrap_servers())
            .arg("--topic")
            .arg(topic)
            .args(["--property", "parse.key=true"])
            .args(["--property", "key.separator=\t"]);
        cmd.stdin(Stdio::piped()).stdout(out).stderr(err);
        Ok((cmd, dir, out_path))
    }

    /// Produces `values` (one record each, keys `k<i>`, in order) to `topic` with
    /// Kafka's own Java producer (`kafka-console-producer` from the test kit's jars)
    /// over the `PLAINTEXT` listener, with extra producer properties such as
    /// `compression.type=zstd`. Values must not contain a newline or a tab.
    pub fn produce_with_java(
        &self,
        topic: &str,
        values: &[String],
        producer_properties: &[(&str, &str)],
    ) -> Result<(), TestkitError> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let (mut cmd, dir, out_path) = self.console_producer(topic, &format!("{topic}-{n}"))?;
        cmd.args(["--producer-property", "acks=all"])
            .args(["--producer-property", "linger.ms=50"]);
        for (k, v) in producer_properties {
            if *k == "compression.type" {
                // The console producer sets compression.type from this option (default
                // none) over any --producer-property.
                cmd.arg("--compression-codec").arg(v);
            } else {
                cmd.arg("--producer-property").arg(format!("{k}={v}"));
            }
        }
        let lines = values.iter().enumerate().map(|(i, v)| format!("k{i}\t{v}"));
        let (wrote, status) = feed(cmd, lines)?;
        let mut log = fs::read_to_string(&out_path).unwrap_or_default();
        log.push_str(&fs::read_to_string(dir.join("server.log")).unwrap_or_default());
        if wrote.is_err() || !status.success() || log.contains("ERROR") {
            return Err(self.kafka_err(format!(
                "the Java console producer to {topic} failed ({status}); {}:\n{}",
                dir.display(),
                tail_lines(&log, 30)
            )));
        }
        Ok(())
    }

    /// Produces records with given timestamps (`(timestamp_ms, partition, value)`,
    /// keys `k<i>`, in order) to `topic` with Kafka's own Java `KafkaProducer` (a
    /// small program of the test kit, `java/TimedProducer.java`, run from source
    /// with the test kit's jars) over the `PLAINTEXT` listener: the console producer
    /// cannot set a record's timestamp. Values must not contain a newline or a tab.
    pub fn produce_timed_with_java(
        &self,
        topic: &str,
        records: &[(i64, i32, String)],
    ) -> Result<(), TestkitError> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .log_root
            .join("java-producer")
            .join(format!("{topic}-timed-{n}"));
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let source = dir.join("TimedProducer.java");
        fs::write(&source, include_str!("../../java/TimedProducer.java")).map_err(io(&source))?;
        let out_path = dir.join("stdout.log");
        let out = fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = self.java();
        cmd.arg(format!("-Dkafka.logs.dir={}", dir.display()))
            .arg(&source)
            .arg(self.bootstrap_servers())
            .arg(topic)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        let lines = records
            .iter()
            .enumerate()
            .map(|(i, (ts, partition, v))| format!("{ts}\t{partition}\tk{i}\t{v}"));
        let (wrote, status) = feed(cmd, lines)?;
        let log = fs::read_to_string(&out_path).unwrap_or_default();
        let sent = format!("sent {}", records.len());
        if wrote.is_err() || !status.success() || !log.contains(&sent) {
            return Err(self.kafka_err(format!(
                "the Java timed producer to {topic} failed ({status}); {}:\n{}",
                dir.display(),
                tail_lines(&log, 30)
            )));
        }
        Ok(())
    }

    /// Starts Kafka's own Java producer (`kafka-console-producer` from the test kit's
    /// jars) on `topic` over the `PLAINTEXT` listener, for records sent one at a time
    /// with [`JavaProducer::send`] until [`JavaProducer::finish`]. It is set up to ride
    /// out broker failures without losing or repeating a record: `acks=all`,
    /// `enable.idempotence=true`, retries without limit for up to two minutes per
    /// record. `producer_properties` come last (they may override those).
    pub fn java_producer(
        &self,
        topic: &str,
        producer_properties: &[(&str, &str)],
    ) -> Result<JavaProducer, TestkitError> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let (mut cmd, dir, _) = self.console_producer(topic, &format!("{topic}-stream-{n}"))?;
        // The console producer's own defaults (3 retries, 1.5 s request timeout) would
        // give up on a record while a partition changes leader.
        let defaults = [
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("retries", "2147483647"),
            ("request.timeout.ms", "30000"),
            ("delivery.timeout.ms", "120000"),
            ("linger.ms", "5"),
        ];
        for (k, v) in defaults.iter().chain(producer_properties) {
            cmd.arg("--producer-property").arg(format!("{k}={v}"));
        }
        let mut child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        Ok(JavaProducer {
            cluster: self.options.logical_id.clone(),
            topic: topic.to_string(),
            child,
            stdin: Some(std::io::BufWriter::new(stdin)),
            dir,
            sent: 0,
        })
    }
}

/// Kafka's Java console producer, running; see [`KafkaCluster::java_producer`].
///
/// Records are sent as they are given; [`finish`](Self::finish) waits for every one
/// to be acknowledged. Dropping it without finishing kills the JVM.
pub struct JavaProducer {
    cluster: String,
    topic: String,
    child: Child,
    stdin: Option<std::io::BufWriter<std::process::ChildStdin>>,
    dir: PathBuf,
    sent: usize,
}

impl JavaProducer {
    /// Sends a record with this value and the key `k<n>` (`n` counting the records
    /// sent). The value must not contain a newline or a tab.
    pub fn send(&mut self, value: &str) -> Result<(), TestkitError> {
        assert!(
            !value.contains(['\n', '\t']),
            "a value for the console producer holds a newline or tab: {value:?}"
        );
        let line = format!("k{}\t{value}\n", self.sent);
        let stdin = self.stdin.as_mut().expect("stdin is open until finish");
        // Flushed at once: the producer sees each record when it is given.
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| self.failed(format!("writing to the producer failed: {e}")))?;
        self.sent += 1;
        Ok(())
    }

    /// Records sent so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Ends the input and waits for the producer to exit: every record sent is then
    /// acknowledged, or this fails with the end of the producer's log (a send that
    /// failed is logged as an ERROR).
    pub fn finish(mut self) -> Result<(), TestkitError> {
        let flushed = self.stdin.take().map(|mut s| s.flush());
        let status = self
            .child
            .wait()
            .map_err(|e| TestkitError::Java(e.to_string()))?;
        let log = self.log();
        if matches!(flushed, Some(Err(_))) || !status.success() || log.contains("ERROR") {
            return Err(self.failed(format!("the producer ended with {status}")));
        }
        Ok(())
    }

    fn log(&self) -> String {
        let mut log = fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default();
        log.push_str(&fs::read_to_string(self.dir.join("server.log")).unwrap_or_default());
        log
    }

    fn failed(&self, what: String) -> TestkitError {
        TestkitError::Kafka {
            cluster: self.cluster.clone(),
            message: format!(
                "the Java console producer to {}: {what}; {}:\n{}",
                self.topic,
                self.dir.display(),
                tail_lines(&self.log(), 30)
            ),
        }
    }
}

impl Drop for JavaProducer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            kill_and_wait(&mut self.child);
        }
    }
}

/// Starts `cmd`, writes `lines` (tab-separated fields, the last a record's value) to
/// its stdin and closes it, which ends a producer once everything is sent; waits for
/// it. Returns whether the lines were written, and how it exited.
fn feed(
    cmd: Command,
    lines: impl Iterator<Item = String>,
) -> Result<(std::io::Result<()>, std::process::ExitStatus), TestkitError> {
    let mut child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
    let mut text = String::new();
    for line in lines {
        assert!(
            !line.contains('\n'),
            "a line for a Java producer holds a newline: {line:?}"
        );
        text.push_str(&line);
        text.push('\n');
    }
    let wrote = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(text.as_bytes());
    let status = child
        .wait()
        .map_err(|e| TestkitError::Java(e.to_string()))?;
    Ok((wrote, status))
}
