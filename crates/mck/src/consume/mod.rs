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
use multicluster_kafka::deserializer::NullableValue;
use multicluster_kafka::error::SourceError;
use multicluster_kafka::file_source::{FileRecord, FileSource, MalformedLines};
use multicluster_kafka::hybrid::{
    HYBRID_KEY, HybridCheckpoint, HybridRecord, HybridSource, HybridStream,
};
use multicluster_kafka::metadata::{
    FileMetadataService, KafkaMetadataService, SingleClusterMetadataService,
};
use multicluster_kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use multicluster_kafka::properties::{BOOTSTRAP_SERVERS, ClientProperties};
use multicluster_kafka::record::{Record, RecordBatch};
use multicluster_kafka::{Bytes, Committer, KafkaSourceStream, MultiClusterKafkaSource, ScaleOut};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::{self, MetadataFile};
use crate::output::{
    FileStart, Format, Layout, Output, WriteError, append, render, render_file, sync_parent,
};
use crate::progress::{self, Progress};

mod args_def;
mod commits;
mod files;

pub use args_def::ConsumeArgs;
use commits::Commits;
use files::{checkpoint, lock_error, open_output};

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

/// What the command reads: Kafka alone, or history files then Kafka.
enum Input {
    Kafka(Box<KafkaSourceStream<NullableValue>>),
    Hybrid(Box<HybridStream<NullableValue>>),
}

/// One record from either.
enum Item {
    Kafka(Record<Option<Bytes>>),
    File(FileRecord),
}

/// What one read gives: a batch of Kafka records, or one record.
enum Read {
    Batch(RecordBatch<Option<Bytes>>),
    One(Item),
}

impl Input {
    /// The next records: a whole batch when `batch` is true and the input reads Kafka
    /// alone, else one record (a --backfill run has no batches).
    async fn next(&mut self, batch: bool) -> Option<Result<Read, SourceError>> {
        match self {
            Input::Kafka(s) if batch => s.next_batch().await.map(|r| r.map(Read::Batch)),
            Input::Kafka(s) => s.next().await.map(|r| r.map(|r| Read::One(Item::Kafka(r)))),
            Input::Hybrid(s) => s.next().await.map(|r| {
                r.map(|r| {
                    Read::One(match r {
                        HybridRecord::Kafka(r) => Item::Kafka(r),
                        HybridRecord::File(r) => Item::File(r),
                    })
                })
            }),
        }
    }

    fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        match self {
            Input::Kafka(s) => s.checkpoint(),
            Input::Hybrid(s) => s.checkpoint().map(HybridCheckpoint::into_checkpoint),
        }
    }

    /// What commits `cp`'s offsets, and the checkpoint to give it: none while a
    /// --backfill run still reads files (nothing to commit there).
    fn commit_job(&self, cp: &Checkpoint) -> Result<Option<(Committer, Checkpoint)>, SourceError> {
        match self {
            Input::Kafka(s) => Ok(Some((s.committer(), cp.clone()))),
            Input::Hybrid(s) => match (
                s.committer(),
                HybridCheckpoint::from_checkpoint(cp.clone())?,
            ) {
                (Some(c), Some(HybridCheckpoint::Kafka { kafka, .. })) => Ok(Some((c, kafka))),
                _ => Ok(None),
            },
        }
    }

    /// Group mode: partitions taken back wait for what was written of them to be
    /// acknowledged (checkpointed and committed).
    fn acknowledgement_wanted(&self) -> bool {
        match self {
            Input::Kafka(s) => s.acknowledgement_wanted(),
            Input::Hybrid(_) => false,
        }
    }

    async fn close(self) {
        match self {
            Input::Kafka(s) => s.close().await,
            Input::Hybrid(s) => s.close().await,
        }
    }
}

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
    /// SIGINT or SIGTERM.
    Signal(&'static str),
    /// Standard output's reader went away (`| head`).
    OutputClosed,
}

/// Errors the run reports and reads on through: the source retries clusters and keeps
/// the last good metadata.
fn is_transient(e: &SourceError) -> bool {
    matches!(
        e,
        SourceError::Metadata(_) | SourceError::Cluster { .. } | SourceError::Kafka { .. }
    )
}

/// How long written lines may wait in the buffer while records keep coming.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Records between two looks at the clock while records keep coming one at a time.
const CLOCK_EVERY: u32 = 256;

/// Most records in a batch the source hands out (its default, set explicitly because
/// `--count` relies on it): the read loop takes whole batches while at least this many
/// records are still to be written, then one record at a time, so the run never
/// takes a record it will not write and the final checkpoint resumes right after the
/// last one written.
const MAX_BATCH: usize = 1024;

/// Rendered lines collected from a batch before they are handed to the output.
const WRITE_CHUNK: usize = 1 << 16;

/// The metadata service of the run: the file (followed), or quick mode's one cluster.
enum Service {
    File(Arc<FileMetadataService>),
    Quick(Arc<SingleClusterMetadataService>),
}

impl Service {
    fn open(args: &ConsumeArgs) -> Result<Self, String> {
        if let Some(brokers) = &args.brokers {
            // The metadata client needs the same properties as the readers (TLS, SASL).
            let props: ClientProperties = std::iter::once((BOOTSTRAP_SERVERS, brokers.as_str()))
                .chain(
                    args.properties
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str())),
                )
                .collect();
            // A property librdkafka refuses is named by its key, never its value.
            props.check().map_err(|r| format!("-b {brokers} -X: {r}"))?;
            return SingleClusterMetadataService::new(QUICK_CLUSTER, props)
                .map(|s| Service::Quick(Arc::new(s)))
                .map_err(|e| format!("-b {brokers}: {e}"));
        }
        let path = args.metadata.path().unwrap_or_else(|| {
            args::usage_error(
                "nothing to read: give a metadata file (FILE or --metadata FILE) with --stream, \
                 or brokers and topics (-b HOST:PORT -t TOPIC)",
            )
        });
        if args.streams.is_empty() && args.stream_pattern.is_none() {
            args::usage_error(format!(
                "which streams of {}? give --stream ID (repeatable) or --stream-pattern REGEX",
                path.display()
            ));
        }
        FileMetadataService::watch(path)
            .map(|s| Service::File(Arc::new(s)))
            .map_err(|e| format!("metadata: {e}"))
    }

    fn shared(&self) -> Arc<dyn KafkaMetadataService> {
        match self {
            Service::File(s) => s.clone(),
            Service::Quick(s) => s.clone(),
        }
    }

    fn last_error(&self) -> Option<String> {
        match self {
            Service::File(s) => s.last_error().map(|e| e.to_string()),
            Service::Quick(_) => None,
        }
    }
}

/// What a write, flush or checkpoint means for the loop: go on, end quietly (the
/// reader of stdout has gone), or fail.
fn keep_going(r: Result<(), WriteError>) -> Result<(), Result<End, String>> {
    match r {
        Ok(()) => Ok(()),
        Err(WriteError::Closed) => Err(Ok(End::OutputClosed)),
        Err(WriteError::Failed(e)) => Err(Err(e)),
    }
}

/// A source error as the run's error line. A cluster whose client could not be made
/// is checked again here ([`ClientProperties::check`]) so the line names the metadata
/// file, the cluster and the property librdkafka refuses (or `-X` when the property
/// came from the command line), with librdkafka's reason and never the value.
async fn located(e: SourceError, service: &Service, args: &ConsumeArgs) -> String {
    let (SourceError::Cluster { cluster, message }
    | SourceError::Kafka {
        cluster, message, ..
    }) = &e
    else {
        return e.to_string();
    };
    let (Service::File(file), Some(path)) = (service, args.metadata.path()) else {
        return e.to_string();
    };
    let Ok(streams) = file.all_streams().await else {
        return e.to_string();
    };
    let Some(own) = streams
        .values()
        .find_map(|s| s.clusters.get(cluster.as_str()))
        .map(|m| m.properties.clone())
    else {
        return e.to_string();
    };
    let cli: ClientProperties = args
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut props = cli.merged_with(&own);
    if let Some(g) = &args.group {
        props.set("group.id", g.clone());
    }
    // Loading certificate files blocks.
    let checked = props.clone();
    let refused = match tokio::task::spawn_blocking(move || checked.check()).await {
        Ok(Err(r)) => r,
        // librdkafka takes the properties alone: a client refused for another reason
        // (reader settings, hooks) keeps the source's words, without any value.
        Ok(Ok(())) if message.starts_with("create client") => props.refusal(message),
        _ => return e.to_string(),
    };
    let from_cli = refused
        .key
        .as_deref()
        .is_some_and(|k| own.get(k).is_none() && cli.get(k).is_some());
    if from_cli {
        format!(
            "-X (for cluster `{cluster}` of {}): {refused}",
            path.display()
        )
    } else {
        crate::describe::refused_line(path, cluster, &refused)
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

    let mut builder = MultiClusterKafkaSource::builder()
        .shared_metadata_service(service.shared())
        .deserializer(NullableValue)
        .starting_offsets(args.from.clone());
    builder = match (&args.stream_pattern, args.brokers.is_some()) {
        (_, true) => builder.stream_ids(args.topics.iter().cloned()),
        (Some(p), false) => builder.stream_pattern(p),
        (None, false) => builder.stream_ids(args.streams.iter().cloned()),
    };
    if let Some(g) = &args.group {
        builder = builder.group_id(g);
    }
    if matches!(args.scale_out, ScaleOut::KafkaGroup) {
        if args.group.is_none() {
            return Err(
                "--scale-out group needs --group: the instances share the stream through it".into(),
            );
        }
        builder = builder.scale_out(args.scale_out);
    }
    if let ScaleOut::Shard(shard) = args.scale_out {
        if args.group.is_none() {
            return Err(format!(
                "--scale-out shard:{shard} needs --group: each shard commits its positions to the group, and a run with another number of shards starts from them"
            ));
        }
        builder = builder
            .scale_out(args.scale_out)
            .shard_lock_wait(args.shard_lock_wait);
    }
    if let Some(until) = args.stop() {
        builder = builder.stopping_offsets(until);
    }
    for (k, v) in &args.properties {
        builder = builder.property(k, v);
    }
    if let Some(t) = args.startup_timeout {
        builder = builder.startup_timeout(t.0);
    }
    builder = builder
        .allow_missing_topics(args.allow_missing_topics)
        .max_batch_size(MAX_BATCH)
        .include_headers(layout.shows_headers());
    builder = builder.on_offset_out_of_range(match args.on_missing_offset.as_str() {
        "earliest" => OffsetReset::Earliest,
        "latest" => OffsetReset::Latest,
        _ => OffsetReset::None,
    });
    let mut stream = match (&args.backfill, restored) {
        (None, restored) => {
            if let Some(cp) = restored {
                if cp.user_data.contains_key(HYBRID_KEY) {
                    return Err(
                        "the checkpoint was written by a --backfill run; run with the same --backfill"
                            .into(),
                    );
                }
                builder = builder.restore_from(cp);
            }
            let source = builder.build().map_err(|e| e.to_string())?;
            let open = async {
                match source.open().await {
                    Ok(stream) => Ok(stream),
                    Err(e) => Err(located(e, &service, &args).await),
                }
            };
            match or_signal(open, &mut sigint, &mut sigterm).await? {
                Some(stream) => Input::Kafka(Box::new(stream)),
                None => return Ok(ExitCode::SUCCESS),
            }
        }
        (Some(dir), restored) => {
            let files = FileSource::builder(dir)
                .timestamp_field(args.backfill_timestamp_field.clone().unwrap_or_default())
                .parallelism(args.backfill_threads)
                .malformed_lines(if args.backfill_skip_malformed {
                    MalformedLines::Skip
                } else {
                    MalformedLines::Fail
                });
            let mut hybrid = HybridSource::new(files, builder);
            if let Some(cp) = restored {
                match HybridCheckpoint::from_checkpoint(cp).map_err(|e| e.to_string())? {
                    Some(h) => hybrid = hybrid.restore_from(h),
                    None => {
                        return Err("the checkpoint was written without --backfill; use a new --checkpoint-dir".into());
                    }
                }
            }
            let open = async {
                match hybrid.open().await {
                    Ok(stream) => Ok(stream),
                    Err(e) => Err(located(e, &service, &args).await),
                }
            };
            match or_signal(open, &mut sigint, &mut sigterm).await? {
                Some(stream) => Input::Hybrid(Box::new(stream)),
                None => return Ok(ExitCode::SUCCESS),
            }
        }
    };

    let checkpointing = store.is_some() || args.group.is_some();
    let commits = args.group.is_some().then(Commits::start);
    let mut ticker = tokio::time::interval(args.checkpoint_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // Wakes the loop to redraw progress, notice metadata-file errors and a pipe whose
    // reader has gone while no record comes.
    let mut status = tokio::time::interval(Duration::from_millis(250));
    // The live line is drawn on stderr when records do not go to the same terminal.
    let records_elsewhere = args.output.is_some() || !std::io::stdout().is_terminal();
    let mut progress = Progress::new(records_elsewhere);
    let mut line = Vec::with_capacity(512);
    let mut records: u64 = 0;
    let mut metadata_error: Option<String> = None;
    // Lines written since the last flush, and when that flush was.
    let mut unflushed: u32 = 0;
    let mut flushed_at = Instant::now();
    let partitions: BTreeSet<i32> = args.partitions.iter().copied().collect();
    let group_mode = matches!(args.scale_out, ScaleOut::KafkaGroup);
    let mut ack_check = tokio::time::interval(Duration::from_millis(100));
    ack_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let end: Result<End, String> = loop {
        if args.count.is_some_and(|n| records >= n) {
            break Ok(End::Completed);
        }
        // A batch is taken only when all of it may be written.
        let whole = args.count.is_none_or(|n| n - records >= MAX_BATCH as u64);
        tokio::select! {
            biased;
            _ = sigint.recv() => break Ok(End::Signal("SIGINT")),
            _ = sigterm.recv() => break Ok(End::Signal("SIGTERM")),
            _ = ticker.tick(), if checkpointing => {
                (unflushed, flushed_at) = (0, Instant::now());
                let done = checkpoint(&mut stream, &mut output, store.as_ref(), commits.as_ref()).await;
                if let Err(end) = keep_going(done) {
                    break end;
                }
            }
            // Group mode: a cluster's group takes partitions back once what was
            // written of them is acknowledged; checkpoint (and commit) now.
            _ = ack_check.tick(), if group_mode && checkpointing => {
                if stream.acknowledgement_wanted() {
                    (unflushed, flushed_at) = (0, Instant::now());
                    let done = checkpoint(&mut stream, &mut output, store.as_ref(), commits.as_ref()).await;
                    if let Err(end) = keep_going(done) {
                        break end;
                    }
                }
            }
            next = stream.next(whole) => match next {
                None => break Ok(End::Completed),
                Some(Ok(Read::Batch(batch))) => {
                    let mut written = 0;
                    let done = write_batch(&batch, &partitions, &layout, &mut line, &mut output, &mut written);
                    if let Err(end) = keep_going(done) {
                        break end;
                    }
                    records += u64::from(written);
                    unflushed += written;
                    // While batches keep coming, the buffer still goes out every
                    // FLUSH_EVERY.
                    if unflushed > 0 && flushed_at.elapsed() >= FLUSH_EVERY {
                        if let Err(end) = keep_going(output.flush()) {
                            break end;
                        }
                        (unflushed, flushed_at) = (0, Instant::now());
                    }
                    continue;
                }
                Some(Ok(Read::One(item))) => {
                    match &item {
                        Item::Kafka(r) if !partitions.is_empty() && !partitions.contains(&r.partition) => continue,
                        Item::Kafka(r) => render(r, &layout, &mut line),
                        Item::File(r) => render_file(r, &layout, &mut line),
                    }
                    if let Err(end) = keep_going(output.write(&line)) {
                        break end;
                    }
                    records += 1;
                    unflushed += 1;
                    // While records keep coming, the buffer still goes out every
                    // FLUSH_EVERY; the clock is read only every CLOCK_EVERY lines.
                    if unflushed.is_multiple_of(CLOCK_EVERY) && flushed_at.elapsed() >= FLUSH_EVERY {
                        if let Err(end) = keep_going(output.flush()) {
                            break end;
                        }
                        (unflushed, flushed_at) = (0, Instant::now());
                    }
                    continue;
                }
                Some(Err(e)) if is_transient(&e) => {
                    progress.finish();
                    eprintln!("mck: warning: {e} (reading on)");
                    progress = Progress::new(records_elsewhere);
                }
                // The Kafka stage of a --backfill run starts here.
                Some(Err(e)) => break Err(located(e, &service, &args).await),
            },
            // Taken only when no record is ready: the reader is idle, so what was
            // written goes out now.
            () = std::future::ready(()), if unflushed > 0 => {
                if let Err(end) = keep_going(output.flush()) {
                    break end;
                }
                (unflushed, flushed_at) = (0, Instant::now());
            }
            _ = status.tick() => {
                if output.reader_gone() {
                    break Ok(End::OutputClosed);
                }
            }
        }
        // The file service warns about a rejected edit itself; the run says when the
        // file is in force again, and the progress line shows the state meanwhile.
        let now_error = service.last_error();
        if now_error != metadata_error {
            if now_error.is_none() {
                progress.finish();
                eprintln!("mck: metadata: the file is valid again and in force");
                progress = Progress::new(records_elsewhere);
            }
            metadata_error = now_error;
        }
        progress.tick(
            records,
            metadata_error.as_deref().map(|_| "metadata file invalid"),
        );
    };
    progress.finish();
    // A second signal while the run winds down exits at once.
    tokio::spawn(async move {
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        eprintln!("mck: second signal: exiting now, without a final checkpoint");
        std::process::exit(130);
    });

    let result = match end {
        Ok(end) => {
            match end {
                End::Signal(name) => tracing::info!("{name}: checkpointing and stopping"),
                End::OutputClosed => tracing::info!("stdout closed: checkpointing and stopping"),
                End::Completed => {}
            }
            let done = if checkpointing {
                checkpoint(&mut stream, &mut output, store.as_ref(), commits.as_ref()).await
            } else {
                output.sync().map(|_| ())
            };
            match done {
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
    };
    // The last checkpoint's commit, before the source that commits it closes.
    if let Some(commits) = commits {
        commits.finish().await;
    }
    if tokio::time::timeout(SHUTDOWN_GRACE, stream.close())
        .await
        .is_err()
    {
        eprintln!("mck: warning: closing the clients took over {SHUTDOWN_GRACE:?}; left behind");
    }
    result
}

/// Writes the records of `batch` that pass the partition filter (all when it is
/// empty) in `layout`: rendered in place into `lines`, handed to `output` in chunks
/// of about [`WRITE_CHUNK`] bytes. `written` counts the records rendered.
fn write_batch(
    batch: &RecordBatch<Option<Bytes>>,
    partitions: &BTreeSet<i32>,
    layout: &Layout,
    lines: &mut Vec<u8>,
    output: &mut Output,
    written: &mut u32,
) -> Result<(), WriteError> {
    lines.clear();
    for r in batch {
        if !partitions.is_empty() && !partitions.contains(&r.partition) {
            continue;
        }
        append(&r, layout, lines);
        *written += 1;
        if lines.len() >= WRITE_CHUNK {
            output.write(lines)?;
            lines.clear();
        }
    }
    if lines.is_empty() {
        Ok(())
    } else {
        output.write(lines)
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
