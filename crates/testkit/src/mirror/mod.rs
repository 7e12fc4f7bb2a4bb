//! Apache Kafka's MirrorMaker 2, run for real: `connect-mirror` of [`KAFKA_VERSION`]
//! from Maven Central ([`mirror_libs`]) in dedicated mode
//! (`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`) as a child JVM, like
//! the brokers.
//!
//! One [`MirrorMaker`] runs one flow, source to target ([`MirrorOptions`]). What it
//! writes, with the default replication policy and aliases `src` and `dst`:
//!
//! | topic | cluster | what |
//! |---|---|---|
//! | `src.<topic>` | target | the copy of each mirrored topic (`<topic>` with the identity policy) |
//! | `mm2-offset-syncs.dst.internal` | source (default) | [`OffsetSync`]s; `mm2-offset-syncs.src.internal` on the target with [`OffsetSyncsLocation::Target`] |
//! | `src.checkpoints.internal` | target | [`Checkpoint`]s of the source's consumer groups |
//! | `mm2-configs.src.internal`, `mm2-offsets.src.internal`, `mm2-status.src.internal` | target | the Connect worker's own state (its group is `src-mm2`) |
//!
//! The JVM logs to `server.log` in [`MirrorMaker::log_dir`], under
//! `target/kafka-tests/logs/` beside the brokers' logs.
//!
//! [`KAFKA_VERSION`]: crate::KAFKA_VERSION

mod options;
mod wire;

pub use options::{MirrorCluster, MirrorOptions, OffsetSyncsLocation, ReplicationPolicy};
pub use wire::{CHECKPOINT_VERSION, Checkpoint, DecodeError, OffsetSync};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::TestkitError;
use crate::jars::mirror_libs;
use crate::process::{kill_and_wait, spawn_tied};
use crate::real::{java_command, prepare_run_dirs};
use crate::util::tail_lines;
use crate::verify::{ReadRecord, read_topic_at};

/// What MirrorMaker 2 logs once its herders are started.
const STARTED: &str = "Kafka MirrorMaker started";

/// How often the waits look again.
const POLL: Duration = Duration::from_millis(250);

/// A running MirrorMaker 2 (dedicated mode, one flow) in a child JVM.
///
/// Dropping it kills the JVM, as [`MirrorMaker::stop`] does; the JVM also dies with
/// the test process, whatever ends it. Its logs stay.
pub struct MirrorMaker {
    options: MirrorOptions,
    child: Mutex<Option<Child>>,
    data_root: PathBuf,
    log_root: PathBuf,
    started_in: Duration,
}

impl std::fmt::Debug for MirrorMaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorMaker")
            .field("flow", &self.options.flow())
            .field("log_dir", &self.log_root)
            .finish()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestkitError + '_ {
    move |source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl MirrorMaker {
    /// Writes `mm2.properties`, starts MirrorMaker 2 and waits until it says it started
    /// (its JVM is up and its Connect worker is joining its group on the target). The
    /// connectors start some seconds later; [`MirrorMaker::wait_for_records`] waits for
    /// their work. Fetches the jars first if they are not cached.
    pub fn start(options: MirrorOptions) -> Result<MirrorMaker, TestkitError> {
        let began = Instant::now();
        let flow = options.flow();
        let (data_root, log_root) = prepare_run_dirs(&format!(
            "mirror-{}-{}",
            options.source.alias, options.target.alias
        ))?;
        let log = log_root.join("server.log");
        let fail = |reason: String| TestkitError::Mirror {
            flow: flow.clone(),
            reason,
            log: log.clone(),
            tail: String::new(),
        };
        options.check().map_err(fail)?;
        let libs = mirror_libs()?;
        let config = log_root.join("mm2.properties");
        fs::write(&config, options.properties_text()).map_err(io(&config))?;
        let out_path = log_root.join("stdout.log");
        let out = fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = java_command(&options.jvm_options, &log_root, &libs);
        cmd.arg(format!("-Dkafka.logs.dir={}", log_root.display()))
            .arg("org.apache.kafka.connect.mirror.MirrorMaker")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = spawn_tied(cmd)
            .map_err(|e| TestkitError::Java(format!("{e} (is a JDK 17+ installed?)")))?;
        let mut mm = MirrorMaker {
            options,
            child: Mutex::new(Some(child)),
            data_root,
            log_root,
            started_in: Duration::ZERO,
        };
        let deadline = began + mm.options.ready_timeout;
        loop {
            mm.check_alive()?;
            if fs::read_to_string(&log).is_ok_and(|t| t.contains(STARTED)) {
                break;
            }
            if Instant::now() > deadline {
                return Err(mm.failed(format!(
                    "did not log {STARTED:?} within {:?}",
                    mm.options.ready_timeout
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        mm.started_in = began.elapsed();
        tracing::info!(flow = %mm.options.flow(), secs = mm.started_in.as_secs_f64(), "mirror maker started");
        Ok(mm)
    }

    /// The options it runs with (topic names: [`MirrorOptions::remote_topic`],
    /// [`MirrorOptions::offset_syncs_topic`], [`MirrorOptions::checkpoints_topic`]).
    pub fn options(&self) -> &MirrorOptions {
        &self.options
    }

    /// Where its logs are: `server.log` (log4j), `stdout.log`, `mm2.properties`.
    pub fn log_dir(&self) -> &Path {
        &self.log_root
    }

    /// How long [`MirrorMaker::start`] took (jar fetch included on a first run).
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Kills the JVM (SIGKILL, as a crash would) and waits for it. What it committed
    /// stays in its internal topics, so a new start with the same options resumes.
    pub fn stop(self) {
        self.kill();
    }

    fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            kill_and_wait(&mut child);
        }
        let _ = fs::remove_dir_all(&self.data_root);
    }

    /// An error for this mirror, with the end of its log.
    fn failed(&self, reason: String) -> TestkitError {
        let log = self.log_root.join("server.log");
        let mut tail = String::new();
        for f in ["server.log", "stdout.log"] {
            if let Ok(t) = fs::read_to_string(self.log_root.join(f)) {
                tail.push_str(&format!("[{f}]\n{}\n", tail_lines(&t, 25)));
            }
        }
        TestkitError::Mirror {
            flow: self.options.flow(),
            reason,
            log,
            tail,
        }
    }

    /// Fails if the JVM has exited (or was stopped).
    fn check_alive(&self) -> Result<(), TestkitError> {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        match child.as_mut().map(Child::try_wait) {
            None => Err(self.failed("it was stopped".into())),
            Some(Ok(Some(status))) => Err(self.failed(format!("the JVM exited ({status})"))),
            Some(Ok(None)) => Ok(()),
            Some(Err(e)) => Err(self.failed(format!("cannot check the JVM: {e}"))),
        }
    }

    /// Polls `look` until it gives a value, the JVM dies, or `timeout` passes (then the
    /// error says `waiting_for` and the last thing `look` saw).
    fn wait<T>(
        &self,
        waiting_for: &str,
        timeout: Duration,
        mut look: impl FnMut() -> Result<Result<T, String>, TestkitError>,
    ) -> Result<T, TestkitError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            let last = match look()? {
                Ok(found) => return Ok(found),
                Err(seen) => seen,
            };
            if Instant::now() > deadline {
                return Err(self.failed(format!(
                    "no {waiting_for} within {timeout:?}; last seen: {last}"
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Reads `topic` of the target (a copy: see [`MirrorOptions::remote_topic`]) as
    /// [`read_topic`](crate::read_topic) does.
    pub fn read_target(&self, topic: &str) -> Result<Vec<ReadRecord>, TestkitError> {
        let t = &self.options.target;
        read_topic_at(&t.alias, &t.bootstrap, topic, false)
    }

    /// Waits until `topic` of the target holds at least `count` records and returns
    /// them all, in partition and offset order.
    pub fn wait_for_records(
        &self,
        topic: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<ReadRecord>, TestkitError> {
        self.wait(&format!("{count} records in {topic}"), timeout, || {
            // A copy MirrorMaker has just made may have no leader yet
            // (NotLeaderForPartition): not there yet, looked at again.
            let records = match self.read_target(topic) {
                Ok(records) => records,
                Err(e) => return Ok(Err(e.to_string())),
            };
            Ok(if records.len() >= count {
                Ok(records)
            } else {
                Err(format!("{} records", records.len()))
            })
        })
    }

    /// Every offset sync written so far, in the order written. Fails on a record that
    /// does not decode as one.
    pub fn offset_syncs(&self) -> Result<Vec<OffsetSync>, TestkitError> {
        let c = self.options.offset_syncs_cluster();
        let topic = self.options.offset_syncs_topic();
        read_topic_at(&c.alias, &c.bootstrap, &topic, false)?
            .iter()
            .map(|r| {
                OffsetSync::decode(r.key.as_deref().unwrap_or_default(), &r.value)
                    .map_err(|e| self.failed(format!("{topic} offset {}: {e}", r.offset)))
            })
            .collect()
    }

    /// Waits until the offset syncs written so far satisfy `until`, and returns them.
    pub fn wait_for_offset_syncs(
        &self,
        timeout: Duration,
        mut until: impl FnMut(&[OffsetSync]) -> bool,
    ) -> Result<Vec<OffsetSync>, TestkitError> {
        let what = format!(
            "wanted offset syncs in {}",
            self.options.offset_syncs_topic()
        );
        self.wait(&what, timeout, || {
            let syncs = self.offset_syncs()?;
            Ok(if until(&syncs) {
                Ok(syncs)
            } else {
                Err(format!("{syncs:?}"))
            })
        })
    }

    /// Every checkpoint written so far, in partition and offset order. Fails on a
    /// record that does not decode as one.
    pub fn checkpoints(&self) -> Result<Vec<Checkpoint>, TestkitError> {
        let topic = self.options.checkpoints_topic();
        self.read_target(&topic)?
            .iter()
            .map(|r| {
                Checkpoint::decode(r.key.as_deref().unwrap_or_default(), &r.value)
                    .map_err(|e| self.failed(format!("{topic} {}/{}: {e}", r.partition, r.offset)))
            })
            .collect()
    }

    /// Waits until the checkpoints written so far satisfy `until`, and returns them.
    pub fn wait_for_checkpoints(
        &self,
        timeout: Duration,
        mut until: impl FnMut(&[Checkpoint]) -> bool,
    ) -> Result<Vec<Checkpoint>, TestkitError> {
        let what = format!("wanted checkpoints in {}", self.options.checkpoints_topic());
        self.wait(&what, timeout, || {
            let checkpoints = self.checkpoints()?;
            Ok(if until(&checkpoints) {
                Ok(checkpoints)
            } else {
                Err(format!("{checkpoints:?}"))
            })
        })
    }
}

impl Drop for MirrorMaker {
    fn drop(&mut self) {
        self.kill();
    }
}
