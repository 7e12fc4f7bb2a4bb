//! Helpers shared by the `mck` command's integration tests (`use crate::support;` in
//! each module).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a run may take to do what a test waits for: a guard against hangs, not a
/// timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The `mck` binary under test.
pub fn mck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mck"))
}

/// A path as a command-line argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// The last lines of a run's stderr, enough to see why it failed.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Waits until the file at `path` holds at least `n` lines. Fails if `child` exits
/// first or patience runs out (then `child` is killed); either failure shows the end
/// of `stderr`, when the run's stderr goes to a file.
pub fn wait_for_lines(path: &Path, n: usize, child: &mut Child, stderr: Option<&Path>) {
    let until = Instant::now() + PATIENCE;
    let log = || {
        stderr.map_or_else(String::new, |p| {
            tail(&std::fs::read_to_string(p).unwrap_or_default())
        })
    };
    loop {
        let have = std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if have >= n {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("mck exited ({status}) at {have} of {n} lines:\n{}", log());
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("{have} of {n} lines after {PATIENCE:?}:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to exit and returns its status; kills it and fails if patience
/// runs out, showing the end of `stderr` when the run's stderr goes to a file.
pub fn wait_exit(child: &mut Child, stderr: Option<&Path>) -> ExitStatus {
    let until = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let log = stderr.map_or_else(String::new, |p| {
                tail(&std::fs::read_to_string(p).unwrap_or_default())
            });
            panic!("mck did not exit within {PATIENCE:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The checkpoint files in a checkpoint directory (not its lock file nor a checkpoint
/// being written), oldest first.
pub fn checkpoint_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("checkpoint-") && name.ends_with(".json")
        })
        .collect();
    files.sort();
    files
}

/// Fetches `/metrics` from the Prometheus endpoint at `addr`.
pub fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics endpoint answers");
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body
}

/// A running `mck consume` whose stderr goes to a file (shown when a check fails);
/// killed if still running when dropped.
pub struct Run {
    pub child: Child,
    pub stderr: PathBuf,
}

impl Run {
    /// Starts `mck consume <args>`, stdout discarded, stderr into the file `stderr`.
    pub fn start(args: &[String], stderr: PathBuf) -> Run {
        let err = std::fs::File::create(&stderr).unwrap();
        let child = mck()
            .arg("consume")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(err))
            .spawn()
            .expect("mck starts");
        Run { child, stderr }
    }

    /// What the run wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Polls `done` until it holds; fails if the run exits first or `within` runs out
    /// (then the run is killed). A guard against hangs, not a timing assertion.
    pub fn wait_until(&mut self, what: &str, within: Duration, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + within;
        while !done() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "mck consume exited ({status}) before {what}; stderr:\n{}",
                    self.stderr()
                );
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("no {what} within {within:?}; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `sig` to the run.
    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0, "kill({sig}) failed");
    }

    /// Waits for the exit (see [`wait_exit`]) and returns success.
    pub fn wait(&mut self) -> bool {
        let status = self.wait_status();
        if !status.success() {
            eprintln!("mck consume exited with {status}");
        }
        status.success()
    }

    /// Waits for the exit (see [`wait_exit`]) and returns its status.
    pub fn wait_status(&mut self) -> ExitStatus {
        wait_exit(&mut self.child, Some(&self.stderr))
    }

    /// Waits up to `within` for the exit; `None` if it did not come (the run goes on
    /// until dropped).
    pub fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments of a `mck consume` run of `stream` from the metadata file `md` into
/// the file `out`, checkpointing into `checkpoints` every second.
pub fn checkpointed_args(md: &Path, stream: &str, out: &Path, checkpoints: &Path) -> Vec<String> {
    let p = |p: &Path| p.display().to_string();
    [
        p(md),
        "--stream".into(),
        stream.into(),
        "--output".into(),
        p(out),
        "--checkpoint-dir".into(),
        p(checkpoints),
        "--checkpoint-interval".into(),
        "1s".into(),
    ]
    .into()
}

/// The sequence number of the newest checkpoint in `dir`, and the output length it
/// records.
pub fn newest_checkpoint(dir: &Path) -> Option<(u64, u64)> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let n: u64 = name
                .strip_prefix("checkpoint-")?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((n, dir.join(name)))
        })
        .max()?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(newest.1).ok()?).ok()?;
    let len = v["checkpoint"]["userData"]["output-length"]
        .as_str()?
        .parse()
        .ok()?;
    Some((newest.0, len))
}

/// The whole lines of `text`: a last line without its newline is one `mck` is still
/// writing (its output is flushed in blocks, not lines) or was killed in, and is left
/// out. A run that ended leaves none, so a record cut there still counts as missing.
pub fn complete_lines(text: &str) -> std::str::Lines<'_> {
    text[..text.rfind('\n').map_or(0, |i| i + 1)].lines()
}

/// (cluster, value) of every whole line of the JSON-lines output at `path` (none
/// while it does not exist), checking that offsets increase per cluster and partition.
pub fn output_values(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut last: BTreeMap<(String, i64), i64> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, line) in complete_lines(&text).enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", i + 1));
        let cluster = v["cluster"].as_str().unwrap().to_string();
        let partition = v["partition"].as_i64().unwrap();
        let offset = v["offset"].as_i64().unwrap();
        if let Some(prev) = last.insert((cluster.clone(), partition), offset) {
            assert!(
                offset > prev,
                "{cluster}/{partition}: offset {offset} after {prev} at line {}",
                i + 1
            );
        }
        out.push((cluster, v["value"].as_str().unwrap().to_string()));
    }
    out
}

/// How many whole lines the file at `path` holds (0 while it does not exist).
pub fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| complete_lines(&t).count())
        .unwrap_or(0)
}

/// A single-broker cluster whose consumer groups (KIP-848) notice a member that is
/// gone within seconds (session timeout 6 s, heartbeats every second; Kafka's
/// defaults are 45 s and 5 s), with `topic` of `partitions` partitions.
pub fn group_cluster(id: &str, topic: &str, partitions: i32) -> mck_testkit::KafkaCluster {
    use mck_testkit::TestCluster;
    let options = mck_testkit::ClusterOptions::new(id)
        .broker_config("group.consumer.min.heartbeat.interval.ms", "500")
        .broker_config("group.consumer.heartbeat.interval.ms", "1000")
        .broker_config("group.consumer.min.session.timeout.ms", "2000")
        .broker_config("group.consumer.session.timeout.ms", "6000");
    let cluster = mck_testkit::KafkaCluster::start(options)
        .unwrap_or_else(|e| panic!("cluster {id} does not start: {e}"));
    cluster.create_topic(topic, partitions).unwrap();
    cluster
}

/// Starts, side by side, a cluster `<prefix>-east` and a cluster `<prefix>-west`
/// behind a proxy (so that a test can cut or slow west's network), both kept for the
/// rest of the test binary.
pub fn east_and_proxied_west(
    prefix: &str,
) -> (
    &'static mck_testkit::KafkaCluster,
    &'static mck_testkit::proxy::ProxiedCluster,
) {
    use mck_testkit::ClusterOptions;
    let (east, west) = (format!("{prefix}-east"), format!("{prefix}-west"));
    let (east, west) = std::thread::scope(|s| {
        let started = s.spawn(|| mck_testkit::KafkaCluster::start(ClusterOptions::new(&east)));
        let west = mck_testkit::proxy::ProxiedCluster::start(ClusterOptions::new(&west))
            .unwrap_or_else(|e| panic!("cluster {west} starts behind a proxy: {e:?}"));
        let east = started
            .join()
            .unwrap_or_else(|_| panic!("starting {east} panicked"))
            .unwrap_or_else(|e| panic!("cluster {east} starts: {e:?}"));
        (east, west)
    });
    (Box::leak(Box::new(east)), Box::leak(Box::new(west)))
}
