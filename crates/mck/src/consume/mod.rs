//! `mck consume`: read streams, print records one per line, follow metadata edits,
//! checkpoint, commit, and keep a file output exactly once across crashes.
//!
//! Exactly-once file output: before each checkpoint the output is flushed and fsynced
//! and its length goes into the checkpoint (`user_data["output-length"]`); the
//! checkpoint is saved durably only after that. On restart the file is cut back to the
//! recorded length before reading resumes at the checkpointed positions, so records
//! written after the last checkpoint are written again exactly once.
//!
//! Output and state are protected: the checkpoint directory is locked for the run (a
//! second run on it fails at once with the first one's pid), and an existing non-empty
//! output file that no checkpoint covers is refused unless `--overwrite` is given. A
//! file a run started in a checkpoint directory that has no checkpoint yet is named in
//! that directory (`output-file`), so after a `kill -9` before the first checkpoint the
//! next run starts it afresh instead of refusing it.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use multicluster_kafka::checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, FileCheckpointStore,
};
use multicluster_kafka::deserializer::{InBatch, NullableValue};
use multicluster_kafka::error::SourceError;
use multicluster_kafka::file_source::{FileSource, MalformedLines};
use multicluster_kafka::hybrid::{
    HYBRID_KEY, HybridCheckpoint, HybridRecord, HybridSource, HybridStream,
};
use multicluster_kafka::metadata::file::check_metadata;
use multicluster_kafka::metadata::{
    FileMetadataService, KafkaMetadataService, SingleClusterMetadataService,
};
use multicluster_kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use multicluster_kafka::properties::{BOOTSTRAP_SERVERS, ClientProperties};
use multicluster_kafka::record::RecordBatch;
use multicluster_kafka::{
    Bytes, Committer, KafkaSourceStream, MultiClusterKafkaSource, ReadOrder, ScaleOut,
    SourceBuilder, WatermarkStrategy,
};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::{self, MetadataFile};
use crate::output::{
    FileStart, Format, JsonParts, Layout, Output, WriteError, append_with, render, render_file,
    sync_parent,
};
use crate::progress::{self, Progress};

mod args_def;
mod commits;
mod files;
mod input;
mod open;
mod read_loop;
mod service;

pub use args_def::ConsumeArgs;
use commits::Commits;
use files::{checkpoint, lock_error, open_output};
use input::{Input, Item, Read};
use open::{open_input, source_builder};
use read_loop::{Run, read_loop};
use service::{Service, in_words, located, wait_for_quick_cluster};

/// The checkpoint's user-data key holding the output file's length.
pub const OUTPUT_LENGTH: &str = "output-length";

/// Checkpoints kept in `--checkpoint-dir`.
const KEEP_CHECKPOINTS: usize = 3;

/// In `--checkpoint-dir`: the absolute path of the `--output` file a run started there
/// before any checkpoint existed. Until a checkpoint covers that file, its content is
/// this directory's own (records nothing has counted yet), so a run without a
/// checkpoint starts it afresh instead of refusing it.
pub const OUTPUT_MARKER: &str = "output-file";

/// The logical cluster id of quick mode (`-b … -t …`).
pub const QUICK_CLUSTER: &str = "kafka";

/// Runs the command on its own runtime.
pub fn run(args: ConsumeArgs) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let result = runtime.block_on(consume(args));
    // Blocking work still running (a lookup on a cluster that does not answer) must not
    // hold the exit: it is abandoned after a moment.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// How long the end of a run waits for the clusters: the last offset commit (the
/// checkpoint is saved before it) and closing the clients are each abandoned after
/// this, with a line saying so, so one unreachable coordinator cannot stall the exit.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What ends the progress line on a terminal before a line from elsewhere.
fn clear_line() -> &'static str {
    if std::io::stderr().is_terminal() {
        "\r\x1b[K"
    } else {
        ""
    }
}

/// A run stopped by a signal before it read anything.
async fn or_signal<T>(
    work: impl std::future::Future<Output = Result<T, String>>,
    sigint: &mut tokio::signal::unix::Signal,
    sigterm: &mut tokio::signal::unix::Signal,
) -> Result<Option<T>, String> {
    tokio::select! {
        r = work => r.map(Some),
        _ = sigint.recv() => Ok(None),
        _ = sigterm.recv() => Ok(None),
    }
}

/// Why the read loop ended.
enum End {
    /// A bounded run reached every stop, or `--count` records were written.
    Completed,
    /// A bounded run reached every stop but these many partitions, which ended on a
    /// mirror that diverged (said when it happened).
    PartitionsEnded(usize),
    /// SIGINT or SIGTERM.
    Signal(&'static str),
    /// Standard output's reader went away (`| head`).
    OutputClosed,
}

/// How long written lines may wait in the buffer while records keep coming.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Records between two looks at the clock while records keep coming one at a time.
const CLOCK_EVERY: u32 = 256;

/// Most records in a batch the source hands out: four times the source's default,
/// as small records cost less CPU in larger batches (one hand-over between threads
/// per batch; a batch of large records stays near 4 MiB anyway).
const MAX_BATCH: usize = 4096;

/// The batch size with `--align`: alignment pauses a cluster that runs ahead
/// between batches, and with batches of 4096 a live cluster's records came while
/// another's backlog was still far behind (the source's default, 1024, holds).
const ALIGNED_BATCH: usize = 1024;

/// Rendered lines collected from a batch before they are handed to the output.
const WRITE_CHUNK: usize = 1 << 16;

/// What a write, flush or checkpoint means for the loop: go on, end quietly (the
/// reader of stdout has gone), or fail.
fn keep_going(r: Result<(), WriteError>) -> Result<(), Result<End, String>> {
    match r {
        Ok(()) => Ok(()),
        Err(WriteError::Closed) => Err(Ok(End::OutputClosed)),
        Err(WriteError::Failed(e)) => Err(Err(e)),
    }
}

async fn consume(args: ConsumeArgs) -> Result<ExitCode, String> {
    // First, so that a signal during start-up also ends the run cleanly.
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let layout = Layout::new(args.format, args.format_string.as_deref())
        .map_err(|e| format!("--format-string: {e}"))?;
    progress::install(args.metrics_addr)?;
    let service = Service::open(&args)?;
    // Locked before anything in it is read, and until the process ends.
    let store = match &args.checkpoint_dir {
        Some(dir) => Some(Arc::new(
            FileCheckpointStore::open_exclusive(dir, KEEP_CHECKPOINTS)
                .map_err(|e| lock_error(dir, e))?,
        )),
        None => None,
    };
    let restored = match &store {
        Some(s) => s.latest().map_err(|e| format!("cannot restore: {e}"))?,
        None => None,
    };
    let mut output = match &args.output {
        None => Output::stdout(),
        Some(path) => open_output(path, restored.as_ref(), store.as_deref(), args.overwrite)?,
    };
    let builder = source_builder(&args, &service, &layout)?;
    let opened = open_input(
        builder,
        restored,
        &service,
        &args,
        &mut sigint,
        &mut sigterm,
    );
    let Some(mut stream) = opened.await? else {
        return Ok(ExitCode::SUCCESS);
    };

    let commits = args.group.is_some().then(Commits::start);
    let run = Run {
        args: &args,
        service: &service,
        layout: &layout,
        store: store.as_ref(),
        commits: commits.as_ref(),
        checkpointing: store.is_some() || args.group.is_some(),
    };
    let end = read_loop(&run, &mut stream, &mut output, &mut sigint, &mut sigterm).await;
    exit_on_second_signal(sigint, sigterm);
    let result = wind_down(end, &run, &mut stream, &mut output).await;
    // The last checkpoint's commit, before the source that commits it closes.
    if let Some(commits) = commits {
        commits.finish().await;
    }
    if tokio::time::timeout(SHUTDOWN_GRACE, stream.close())
        .await
        .is_err()
    {
        crate::stdio::say!(
            "mck: warning: closing the clients took over {SHUTDOWN_GRACE:?}; left behind"
        );
    }
    result
}

/// A second signal while the run winds down exits at once.
fn exit_on_second_signal(
    mut sigint: tokio::signal::unix::Signal,
    mut sigterm: tokio::signal::unix::Signal,
) {
    tokio::spawn(async move {
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        crate::stdio::say!("mck: second signal: exiting now, without a final checkpoint");
        std::process::exit(130);
    });
}

/// The end of the run's output: a last checkpoint (or a sync of the output) when the
/// loop ended well, else a sync of what was written; the run's exit code or error.
async fn wind_down(
    end: Result<End, String>,
    run: &Run<'_>,
    stream: &mut Input,
    output: &mut Output,
) -> Result<ExitCode, String> {
    match end {
        Ok(end) => {
            match end {
                End::Signal(name) => tracing::info!("{name}: checkpointing and stopping"),
                End::OutputClosed => tracing::info!("stdout closed: checkpointing and stopping"),
                End::Completed | End::PartitionsEnded(_) => {}
            }
            let done = if run.checkpointing {
                checkpoint(stream, output, run.store, run.commits).await
            } else {
                output.sync().map(|_| ())
            };
            match done {
                Ok(()) | Err(WriteError::Closed) if matches!(end, End::PartitionsEnded(_)) => {
                    let End::PartitionsEnded(n) = end else {
                        unreachable!()
                    };
                    Err(format!(
                        "{n} partition(s) ended on a mirror that diverged (said above); everything else was read and checkpointed"
                    ))
                }
                // The reader went away after the last record: nothing more to tell.
                Ok(()) | Err(WriteError::Closed) => Ok(ExitCode::SUCCESS),
                Err(WriteError::Failed(e)) => Err(e),
            }
        }
        Err(e) => {
            // Records written so far stay; the last durable checkpoint covers a prefix
            // of them and a restart cuts the file back to it.
            let _ = output.sync();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::files::*;
    use super::*;

    #[test]
    fn output_length_comes_from_the_checkpoint() {
        let p = std::path::Path::new("out.jsonl");
        assert_eq!(output_length(None, p).unwrap(), 0);
        let mut cp = Checkpoint::default();
        assert!(
            output_length(Some(&cp), p)
                .unwrap_err()
                .contains("without --output")
        );
        cp.user_data.insert(OUTPUT_LENGTH.into(), "12".into());
        assert_eq!(output_length(Some(&cp), p).unwrap(), 12);
        cp.user_data.insert(OUTPUT_LENGTH.into(), "x".into());
        assert!(output_length(Some(&cp), p).is_err());
    }

    #[test]
    fn an_output_a_checkpoint_directory_started_is_its_own_until_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCheckpointStore::open(dir.path().join("ck"), 3).unwrap();
        let out = dir.path().join("out.jsonl");
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, b"someone else's\n").unwrap();

        // A new file is started and named in the directory.
        let mut o = open_output(&out, None, Some(&store), false).unwrap();
        o.write(b"uncovered\n").unwrap();
        o.sync().unwrap();
        drop(o);
        // No checkpoint yet (a kill -9 before the first one): started afresh.
        let o = open_output(&out, None, Some(&store), false).unwrap();
        drop(o);
        assert_eq!(std::fs::read(&out).unwrap(), b"");
        // Another file is not the directory's: refused and left alone.
        let e = open_output(&other, None, Some(&store), false)
            .err()
            .unwrap();
        assert!(e.contains("--overwrite"), "{e}");
        assert_eq!(std::fs::read(&other).unwrap(), b"someone else's\n");
        // Nor is a file without a checkpoint directory.
        std::fs::write(&out, b"x\n").unwrap();
        assert!(open_output(&out, None, None, false).is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"x\n");
        open_output(&out, None, None, true).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"");
        // A checkpoint decides when there is one.
        std::fs::write(&out, b"covered\nnot\n").unwrap();
        let mut cp = Checkpoint::default();
        cp.user_data.insert(OUTPUT_LENGTH.into(), "8".into());
        open_output(&out, Some(&cp), Some(&store), false).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"covered\n");
    }

    #[test]
    fn a_locked_checkpoint_directory_is_one_line_saying_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let _held = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap();
        let e = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap_err();
        let line = lock_error(dir.path(), e);
        assert!(line.contains("is in use by another run"), "{line}");
        assert!(
            line.contains(&format!("pid {}", std::process::id())),
            "{line}"
        );
        assert!(line.contains("another --checkpoint-dir"), "{line}");
        assert_eq!(line.lines().count(), 1);
    }
}
