//! `mck consume`: read streams, print records one per line, follow metadata edits,
//! checkpoint, commit, and keep a file output exactly once across crashes.
//!
//! Exactly-once file output: before each checkpoint the output is flushed and fsynced
//! and its length goes into the checkpoint (`user_data["output-length"]`); the
//! checkpoint is saved durably only after that. On restart the file is cut back to the
//! recorded length before reading resumes at the checkpointed positions, so records
//! written after the last checkpoint are written again exactly once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use multicluster_kafka::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore};
use multicluster_kafka::deserializer::RawValue;
use multicluster_kafka::error::SourceError;
use multicluster_kafka::file_source::{FileRecord, FileSource, MalformedLines};
use multicluster_kafka::hybrid::{
    HYBRID_KEY, HybridCheckpoint, HybridRecord, HybridSource, HybridStream,
};
use multicluster_kafka::metadata::{FileMetadataService, KafkaMetadataService};
use multicluster_kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use multicluster_kafka::record::Record;
use multicluster_kafka::{Bytes, KafkaSourceStream, MultiClusterKafkaSource};
use tokio::signal::unix::{SignalKind, signal};

use crate::output::{Format, Output, render, render_file};
use crate::progress::{self, Progress};

/// The checkpoint's user-data key holding the output file's length.
pub const OUTPUT_LENGTH: &str = "output-length";

/// Checkpoints kept in `--checkpoint-dir`.
const KEEP_CHECKPOINTS: usize = 3;

/// Arguments of `mck consume`.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    /// The metadata file (YAML or JSON), followed while the command runs.
    #[arg(long, value_name = "FILE")]
    pub metadata: PathBuf,
    /// A stream id to read (repeat for several).
    #[arg(
        long = "stream",
        value_name = "ID",
        required_unless_present = "stream_pattern"
    )]
    pub streams: Vec<String>,
    /// Read every stream whose id matches this regular expression.
    #[arg(long, value_name = "REGEX", conflicts_with = "streams")]
    pub stream_pattern: Option<String>,
    /// Consumer group: offsets are committed to it after each durable checkpoint, and
    /// `--from committed` starts from its offsets.
    #[arg(long = "group", value_name = "ID")]
    pub group: Option<String>,
    /// Where splits without a checkpointed position start: earliest, latest,
    /// committed (the group's offsets, earliest where none), or a timestamp in ms.
    #[arg(long, value_name = "WHERE", default_value = "earliest", value_parser = parse_from)]
    pub from: StartingOffsets,
    /// Make the run bounded: stop each split at the log end found when it is
    /// discovered (`latest`) or at a timestamp in ms; the command exits 0 at the end.
    #[arg(long, value_name = "WHERE", value_parser = parse_until)]
    pub until: Option<StoppingOffsets>,
    /// A librdkafka client property for every cluster (repeat for several).
    #[arg(long = "property", value_name = "KEY=VALUE", value_parser = parse_property)]
    pub properties: Vec<(String, String)>,
    /// Restore from the newest checkpoint here at start; checkpoint here on the
    /// interval, at the end and on SIGINT/SIGTERM.
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// How often to checkpoint (and commit to `--group`), e.g. `10s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_interval)]
    pub checkpoint_interval: Duration,
    /// Write records to this file instead of stdout (exactly once across crashes when
    /// used with `--checkpoint-dir`; otherwise the file is started afresh).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    /// Read the history in this directory's newline-delimited JSON files first (gzip
    /// and zstd too), then switch to Kafka after the largest timestamp found there.
    #[arg(long, value_name = "DIR", requires = "backfill_timestamp_field")]
    pub backfill: Option<PathBuf>,
    /// The field of each history line that holds its event timestamp (ms).
    #[arg(long, value_name = "NAME", requires = "backfill")]
    pub backfill_timestamp_field: Option<String>,
    /// Skip and count malformed history lines instead of failing (the default).
    #[arg(long, requires = "backfill")]
    pub backfill_skip_malformed: bool,
    /// History files read at the same time.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "backfill")]
    pub backfill_threads: usize,
}

/// What the command reads: Kafka alone, or history files then Kafka.
enum Input {
    Kafka(Box<KafkaSourceStream<RawValue>>),
    Hybrid(Box<HybridStream<RawValue>>),
}

/// One record from either.
enum Item {
    Kafka(Record<Bytes>),
    File(FileRecord),
}

impl Input {
    async fn next(&mut self) -> Option<Result<Item, SourceError>> {
        match self {
            Input::Kafka(s) => s.next().await.map(|r| r.map(Item::Kafka)),
            Input::Hybrid(s) => s.next().await.map(|r| {
                r.map(|r| match r {
                    HybridRecord::Kafka(r) => Item::Kafka(r),
                    HybridRecord::File(r) => Item::File(r),
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

    async fn commit(&self, cp: &Checkpoint) -> Result<(), SourceError> {
        match self {
            Input::Kafka(s) => s.commit(cp).await,
            Input::Hybrid(s) => match HybridCheckpoint::from_checkpoint(cp.clone())? {
                Some(h) => s.commit(&h).await,
                None => Ok(()),
            },
        }
    }

    async fn close(self) {
        match self {
            Input::Kafka(s) => s.close().await,
            Input::Hybrid(s) => s.close().await,
        }
    }
}

fn parse_from(s: &str) -> Result<StartingOffsets, String> {
    match s {
        "earliest" => Ok(StartingOffsets::Earliest),
        "latest" => Ok(StartingOffsets::Latest),
        "committed" => Ok(StartingOffsets::Committed {
            reset: OffsetReset::Earliest,
        }),
        _ => parse_timestamp(s).map(StartingOffsets::Timestamp),
    }
}

fn parse_until(s: &str) -> Result<StoppingOffsets, String> {
    match s {
        "latest" => Ok(StoppingOffsets::Latest),
        _ => parse_timestamp(s).map(StoppingOffsets::Timestamp),
    }
}

fn parse_timestamp(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(ts) if ts >= 0 => Ok(ts),
        _ => Err(format!(
            "`{s}` is neither a keyword nor a timestamp in milliseconds since the epoch"
        )),
    }
}

fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".to_string()),
    }
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("`{s}`: {e}"))?;
    if d.is_zero() {
        return Err("the interval must be positive".into());
    }
    Ok(d)
}

/// Runs the command on its own runtime.
pub fn run(args: ConsumeArgs) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(consume(args))
}

/// Why the read loop ended.
enum End {
    Completed,
    Signal(&'static str),
}

/// Errors the run reports and reads on through: the source retries clusters and keeps
/// the last good metadata.
fn is_transient(e: &SourceError) -> bool {
    matches!(e, SourceError::Metadata(_) | SourceError::Cluster { .. })
}

async fn consume(args: ConsumeArgs) -> Result<ExitCode, String> {
    // First, so that a signal during start-up also ends the run cleanly.
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    progress::install(args.metrics_addr)?;
    let service =
        Arc::new(FileMetadataService::watch(&args.metadata).map_err(|e| format!("metadata: {e}"))?);
    let store = match &args.checkpoint_dir {
        Some(dir) => Some(Arc::new(
            FileCheckpointStore::open(dir, KEEP_CHECKPOINTS).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let restored = match &store {
        Some(s) => s.latest().map_err(|e| format!("cannot restore: {e}"))?,
        None => None,
    };
    let mut output = match &args.output {
        None => Output::stdout(),
        Some(path) => Output::file(path, output_length(restored.as_ref(), path)?)?,
    };

    let mut builder = MultiClusterKafkaSource::builder()
        .shared_metadata_service(service.clone() as Arc<dyn KafkaMetadataService>)
        .deserializer(RawValue)
        .starting_offsets(args.from.clone());
    builder = match &args.stream_pattern {
        Some(p) => builder.stream_pattern(p),
        None => builder.stream_ids(args.streams.iter().cloned()),
    };
    if let Some(g) = &args.group {
        builder = builder.group_id(g);
    }
    if let Some(until) = &args.until {
        builder = builder.stopping_offsets(until.clone());
    }
    for (k, v) in &args.properties {
        builder = builder.property(k, v);
    }
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
            Input::Kafka(Box::new(source.open().await.map_err(|e| e.to_string())?))
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
            Input::Hybrid(Box::new(hybrid.open().await.map_err(|e| e.to_string())?))
        }
    };

    let checkpointing = store.is_some() || args.group.is_some();
    let mut ticker = tokio::time::interval(args.checkpoint_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // Wakes the loop to redraw progress and notice metadata-file errors while idle.
    let mut status = tokio::time::interval(Duration::from_millis(250));
    let mut progress = Progress::new();
    let mut line = Vec::with_capacity(512);
    let mut records: u64 = 0;
    let mut metadata_error: Option<String> = None;

    let end = loop {
        tokio::select! {
            biased;
            _ = sigint.recv() => break Ok(End::Signal("SIGINT")),
            _ = sigterm.recv() => break Ok(End::Signal("SIGTERM")),
            _ = status.tick() => {}
            _ = ticker.tick(), if checkpointing => {
                if let Err(e) = checkpoint(&mut stream, &mut output, store.as_ref(), args.group.is_some()).await {
                    break Err(e);
                }
            }
            next = stream.next() => match next {
                None => break Ok(End::Completed),
                Some(Ok(item)) => {
                    match &item {
                        Item::Kafka(r) => render(r, args.format, &mut line),
                        Item::File(r) => render_file(r, args.format, &mut line),
                    }
                    if let Err(e) = output.write(&line) {
                        break Err(e);
                    }
                    records += 1;
                }
                Some(Err(e)) if is_transient(&e) => {
                    progress.finish();
                    eprintln!("mck: warning: {e} (reading on)");
                    progress = Progress::new();
                }
                Some(Err(e)) => break Err(e.to_string()),
            },
        }
        let now_error = service.last_error().map(|e| e.to_string());
        if now_error != metadata_error {
            progress.finish();
            match &now_error {
                Some(e) => eprintln!(
                    "mck: warning: metadata file: {e} (reading on with the last good metadata)"
                ),
                None => eprintln!("mck: metadata file is valid again"),
            }
            progress = Progress::new();
            metadata_error = now_error;
        }
        progress.tick(
            records,
            metadata_error.as_deref().map(|_| "metadata file invalid"),
        );
    };
    progress.finish();

    let result = match end {
        Ok(End::Completed) | Ok(End::Signal(_)) => {
            if let Ok(End::Signal(name)) = &end {
                tracing::info!("{name}: checkpointing and stopping");
            }
            if checkpointing {
                checkpoint(
                    &mut stream,
                    &mut output,
                    store.as_ref(),
                    args.group.is_some(),
                )
                .await
                .map(|()| ExitCode::SUCCESS)
            } else {
                output.sync().map(|_| ExitCode::SUCCESS)
            }
        }
        Err(e) => {
            // Records written so far stay; the last durable checkpoint covers a prefix
            // of them and a restart cuts the file back to it.
            let _ = output.sync();
            Err(e)
        }
    };
    stream.close().await;
    result
}

/// The output length a restored checkpoint covers (0 without a checkpoint: a fresh file).
fn output_length(restored: Option<&Checkpoint>, path: &std::path::Path) -> Result<u64, String> {
    let Some(cp) = restored else { return Ok(0) };
    match cp.user_data.get(OUTPUT_LENGTH) {
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| format!("checkpoint: `{OUTPUT_LENGTH}` is `{v}`, not a byte count")),
        None => Err(format!(
            "the checkpoint was taken without --output, so it does not say how much of {} it covers; \
             use a new --checkpoint-dir for a file output",
            path.display()
        )),
    }
}

/// Flushes and fsyncs the output, takes a checkpoint covering exactly the records
/// written, stores it durably, then commits its offsets to the group. A failed commit
/// is reported and left to the next checkpoint.
async fn checkpoint(
    stream: &mut Input,
    output: &mut Output,
    store: Option<&Arc<FileCheckpointStore>>,
    commit: bool,
) -> Result<(), String> {
    let len = tokio::task::block_in_place(|| output.sync())?;
    let mut cp = stream.checkpoint().map_err(|e| e.to_string())?;
    if let Some(len) = len {
        cp.user_data.insert(OUTPUT_LENGTH.into(), len.to_string());
    }
    if let Some(store) = store {
        tokio::task::block_in_place(|| store.save(&cp))
            .map_err(|e| format!("cannot save a checkpoint: {e}"))?;
    }
    if commit && let Err(e) = stream.commit(&cp).await {
        eprintln!("mck: warning: offset commit failed (retried at the next checkpoint): {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_and_until_accept_keywords_and_timestamps_only() {
        assert_eq!(parse_from("earliest").unwrap(), StartingOffsets::Earliest);
        assert_eq!(
            parse_from("committed").unwrap(),
            StartingOffsets::Committed {
                reset: OffsetReset::Earliest
            }
        );
        assert_eq!(
            parse_from("1700000000000").unwrap(),
            StartingOffsets::Timestamp(1_700_000_000_000)
        );
        assert!(parse_from("yesterday").unwrap_err().contains("yesterday"));
        assert!(parse_from("-5").is_err());
        assert_eq!(parse_until("latest").unwrap(), StoppingOffsets::Latest);
        assert!(parse_until("earliest").is_err());
    }

    #[test]
    fn properties_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_property("sasl.jaas.config=a=b").unwrap(),
            ("sasl.jaas.config".to_string(), "a=b".to_string())
        );
        assert!(parse_property("=x").is_err());
        assert!(parse_property("novalue").is_err());
        assert!(parse_interval("0s").is_err());
        assert_eq!(parse_interval("250ms").unwrap(), Duration::from_millis(250));
    }

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
}
