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
use multicluster_kafka::record::Record;
use multicluster_kafka::{Bytes, Committer, KafkaSourceStream, MultiClusterKafkaSource};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::{self, MetadataFile};
use crate::output::{
    FileStart, Format, Layout, Output, WriteError, render, render_file, sync_parent,
};
use crate::progress::{self, Progress};

/// The checkpoint's user-data key holding the output file's length.
pub const OUTPUT_LENGTH: &str = "output-length";

/// Checkpoints kept in `--checkpoint-dir`.
const KEEP_CHECKPOINTS: usize = 3;

/// In `--checkpoint-dir`: the absolute path of the `--output` file a run started there
/// before any checkpoint existed. Until a checkpoint covers that file, its content is
/// this directory's own (records nothing has counted yet), so a run without a
/// checkpoint starts it afresh instead of refusing it.
pub const OUTPUT_MARKER: &str = "output-file";

/// Arguments of `mck consume`.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub metadata: MetadataFile,
    /// Quick mode: read the topics of `-t` from one cluster at these bootstrap servers,
    /// without a metadata file (each topic is a stream of the same name).
    #[arg(
        short = 'b',
        long = "brokers",
        value_name = "HOST:PORT,…",
        env = "MCK_BROKERS",
        requires = "topics",
        conflicts_with_all = ["file", "metadata", "streams", "stream_pattern"]
    )]
    pub brokers: Option<String>,
    /// Quick mode: a topic to read (repeat, or separate with commas).
    #[arg(
        short = 't',
        long = "topic",
        value_name = "TOPIC",
        env = "MCK_TOPIC",
        value_delimiter = ',',
        requires = "brokers"
    )]
    pub topics: Vec<String>,
    /// A stream id to read (repeat for several).
    #[arg(
        short = 's',
        long = "stream",
        value_name = "ID",
        env = "MCK_STREAM",
        value_delimiter = ','
    )]
    pub streams: Vec<String>,
    /// Read every stream whose id matches this regular expression.
    #[arg(
        long,
        value_name = "REGEX",
        env = "MCK_STREAM_PATTERN",
        conflicts_with = "streams"
    )]
    pub stream_pattern: Option<String>,
    /// Consumer group: offsets are committed to it after each durable checkpoint, and
    /// `-o committed` starts from its offsets.
    #[arg(short = 'g', long = "group", value_name = "ID", env = "MCK_GROUP")]
    pub group: Option<String>,
    /// Where splits without a checkpointed position start: beginning|earliest,
    /// end|latest, committed, an offset (42), N before the end (-10), a time in ms
    /// (@1700000000000), an RFC 3339 time (2026-11-30T10:00:00Z), or a time relative
    /// to now (-1h, @-1h). Keywords in any case.
    #[arg(short = 'o', long = "from", value_name = "WHERE", default_value = "earliest", env = "MCK_FROM", value_parser = args::parse_from, allow_hyphen_values = true)]
    pub from: StartingOffsets,
    /// Make the run bounded: stop each split at the log end found when it is
    /// discovered (end|latest), at the group's committed offsets, or at a time (the
    /// forms of `--from`); the command exits 0 at the end.
    #[arg(long, value_name = "WHERE", env = "MCK_UNTIL", value_parser = args::parse_until, allow_hyphen_values = true)]
    pub until: Option<StoppingOffsets>,
    /// Exit at the end of the log: short for `--until latest`.
    #[arg(
        short = 'e',
        long = "exit-at-end",
        conflicts_with = "until",
        env = "MCK_EXIT"
    )]
    pub exit_at_end: bool,
    /// Stop after this many records (a checkpoint at the end counts exactly those).
    #[arg(short = 'c', long = "count", value_name = "N", env = "MCK_COUNT")]
    pub count: Option<u64>,
    /// Print only records of these partitions (repeat, or separate with commas); the
    /// others are still read, and skipped.
    #[arg(
        short = 'p',
        long = "partition",
        value_name = "N",
        env = "MCK_PARTITION",
        value_delimiter = ','
    )]
    pub partitions: Vec<i32>,
    /// A librdkafka client property for every cluster (repeat for several).
    #[arg(short = 'X', long = "property", value_name = "KEY=VALUE", env = "MCK_PROPERTY", value_delimiter = ';', value_parser = args::parse_property)]
    pub properties: Vec<(String, String)>,
    /// Restore from the newest checkpoint here at start (an unreadable newest one falls
    /// back to the one before); checkpoint here on the interval, at the end and on
    /// SIGINT/SIGTERM. Locked for the run: a second run on it fails at once.
    #[arg(long, value_name = "DIR", env = "MCK_CHECKPOINT_DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// What a partition whose position is outside its log does (records deleted by
    /// retention or kafka-delete-records, a topic re-created): fail (end the run with
    /// an error naming it and the log's range), or jump to the earliest or latest
    /// offset still in the log, with a warning and `mck_offset_resets_total`.
    #[arg(long, value_name = "POLICY", default_value = "fail", env = "MCK_ON_MISSING_OFFSET", value_parser = ["fail", "earliest", "latest"])]
    pub on_missing_offset: String,
    /// In a bounded run (`--until`, `-e`), a topic deleted while it is read ends its
    /// partitions with a warning instead of failing the run.
    #[arg(long, env = "MCK_ALLOW_MISSING_TOPICS")]
    pub allow_missing_topics: bool,
    /// How long start-up waits for every cluster to answer (trying again meanwhile); a
    /// cluster that has not answered by then ends the run with an error naming it.
    /// `none`: wait for ever in a bounded run; in a follow run, start with the clusters
    /// that answered and take the others up when they answer. Default: 60s with
    /// `--until` or `-e`, none otherwise.
    #[arg(long, value_name = "DURATION|none", env = "MCK_STARTUP_TIMEOUT", value_parser = args::parse_optional_duration)]
    pub startup_timeout: Option<args::OptionalDuration>,
    /// How often to checkpoint (and commit to `--group`), e.g. `10s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "10s", env = "MCK_CHECKPOINT_INTERVAL", value_parser = args::parse_duration)]
    pub checkpoint_interval: Duration,
    /// Write records to this file instead of stdout (exactly once across crashes when
    /// used with `--checkpoint-dir`). An existing non-empty file that no checkpoint
    /// covers is refused unless `--overwrite` is given.
    #[arg(long, value_name = "FILE", env = "MCK_OUTPUT")]
    pub output: Option<PathBuf>,
    /// Start `--output` afresh even when it holds records no checkpoint covers.
    #[arg(long, requires = "output", env = "MCK_OVERWRITE")]
    pub overwrite: bool,
    /// Output layout: json (null key or value as null), value (a tombstone prints an
    /// empty line), kv (key, tab, value), full (every field on one line).
    #[arg(long, value_enum, default_value_t = Format::Json, env = "MCK_FORMAT")]
    pub format: Format,
    /// A kcat-style format string, instead of `--format`: %s value, %S value length,
    /// %k key, %K key length, %t topic, %p partition, %o offset, %T timestamp (ms),
    /// %h headers (k=v,…), %c cluster, %% a percent sign; \n \t \r \\ escapes. Nothing
    /// is added at the end: end it with \n.
    #[arg(
        short = 'f',
        long = "format-string",
        value_name = "FMT",
        env = "MCK_FORMAT_STRING",
        conflicts_with = "format"
    )]
    pub format_string: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "HOST:PORT", env = "MCK_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Read the history in this directory's newline-delimited JSON files first (gzip
    /// and zstd too), then switch to Kafka after the largest timestamp found there.
    #[arg(
        long,
        value_name = "DIR",
        env = "MCK_BACKFILL",
        requires = "backfill_timestamp_field"
    )]
    pub backfill: Option<PathBuf>,
    /// The field of each history line that holds its event timestamp (ms).
    #[arg(
        long,
        value_name = "NAME",
        env = "MCK_BACKFILL_TIMESTAMP_FIELD",
        requires = "backfill"
    )]
    pub backfill_timestamp_field: Option<String>,
    /// Skip and count malformed history lines instead of failing (the default).
    #[arg(long, env = "MCK_BACKFILL_SKIP_MALFORMED", requires = "backfill")]
    pub backfill_skip_malformed: bool,
    /// History files read at the same time.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        env = "MCK_BACKFILL_THREADS",
        requires = "backfill"
    )]
    pub backfill_threads: usize,
}

impl ConsumeArgs {
    /// `--until`, or `latest` for `-e`.
    fn stop(&self) -> Option<StoppingOffsets> {
        match (&self.until, self.exit_at_end) {
            (Some(u), _) => Some(u.clone()),
            (None, true) => Some(StoppingOffsets::Latest),
            (None, false) => None,
        }
    }
}

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

/// Offset commits to `--group`, off the path of the records: each checkpoint, once
/// saved, hands its commit to a task of its own and the run goes on writing. The task
/// commits in the order asked; while one commit waits for a slow coordinator, newer
/// checkpoints replace the older ones still waiting (offsets only go forward, so the
/// newest says everything). A failure is said when it starts or its reason changes,
/// and the recovery once.
struct Commits {
    jobs: tokio::sync::mpsc::UnboundedSender<(Committer, Checkpoint)>,
    task: tokio::task::JoinHandle<()>,
}

impl Commits {
    fn start() -> Self {
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Committer, Checkpoint)>();
        let task = tokio::spawn(async move {
            let mut failing: Option<String> = None;
            while let Some(mut job) = rx.recv().await {
                while let Ok(newer) = rx.try_recv() {
                    job = newer;
                }
                let (committer, cp) = job;
                match committer.commit(&cp).await {
                    Ok(()) => {
                        if failing.take().is_some() {
                            eprintln!("{}mck: offset commits succeed again", clear_line());
                        }
                    }
                    Err(e) => {
                        let reason = e.to_string();
                        if failing.as_deref() != Some(reason.as_str()) {
                            eprintln!(
                                "{}mck: warning: {reason} (the checkpoint is saved; each \
                                 checkpoint commits again; said again when this changes)",
                                clear_line()
                            );
                            failing = Some(reason);
                        }
                    }
                }
            }
        });
        Commits { jobs, task }
    }

    /// Queues the commit of a saved checkpoint; returns at once.
    fn submit(&self, job: (Committer, Checkpoint)) {
        let _ = self.jobs.send(job);
    }

    /// Waits, at most [`SHUTDOWN_GRACE`], for the commits queued so far (the last
    /// checkpoint's included); a commit still running then is abandoned, and said.
    async fn finish(self) {
        let Commits { jobs, mut task } = self;
        drop(jobs);
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            eprintln!(
                "mck: warning: offset commit abandoned after {SHUTDOWN_GRACE:?} at the end of \
                 the run (the checkpoint is saved; the group's offsets stay behind it)"
            );
        }
    }
}

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

/// Records between two looks at the clock while records keep coming.
const CLOCK_EVERY: u32 = 256;

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
    if let Some(until) = args.stop() {
        builder = builder.stopping_offsets(until);
    }
    for (k, v) in &args.properties {
        builder = builder.property(k, v);
    }
    if let Some(t) = args.startup_timeout {
        builder = builder.startup_timeout(t.0);
    }
    builder = builder.allow_missing_topics(args.allow_missing_topics);
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

    let end: Result<End, String> = loop {
        if args.count.is_some_and(|n| records >= n) {
            break Ok(End::Completed);
        }
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
            next = stream.next() => match next {
                None => break Ok(End::Completed),
                Some(Ok(item)) => {
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

/// The error line for a checkpoint directory that could not be opened: another run's
/// lock says what to do about it.
fn lock_error(dir: &Path, e: CheckpointError) -> String {
    match &e {
        CheckpointError::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock => {
            format!(
                "--checkpoint-dir {} is in use by another run: {e}; wait for that run to end, \
                 stop it, or give another --checkpoint-dir",
                dir.display()
            )
        }
        _ => format!("--checkpoint-dir {}: {e}", dir.display()),
    }
}

/// Opens `--output`: cut back to what the restored checkpoint covers; without one,
/// started afresh, refusing a non-empty file unless `overwrite` or the checkpoint
/// directory names it as its own (a run there started it before its first checkpoint).
fn open_output(
    path: &Path,
    restored: Option<&Checkpoint>,
    store: Option<&FileCheckpointStore>,
    overwrite: bool,
) -> Result<Output, String> {
    if restored.is_some() {
        return Output::file(path, FileStart::Resume(output_length(restored, path)?));
    }
    let Some(store) = store else {
        return Output::file(path, FileStart::Fresh { overwrite });
    };
    let me =
        std::path::absolute(path).map_err(|e| format!("output file {}: {e}", path.display()))?;
    let marker = store.dir().join(OUTPUT_MARKER);
    let ours = std::fs::read(&marker).is_ok_and(|b| b == me.as_os_str().as_bytes());
    let output = Output::file(
        path,
        FileStart::Fresh {
            overwrite: overwrite || ours,
        },
    )?;
    if !ours {
        // Durable before the first record goes to the file.
        write_durably(&marker, me.as_os_str().as_bytes())
            .map_err(|e| format!("{}: {e}", marker.display()))?;
    }
    Ok(output)
}

/// Writes a small file atomically: a temporary file, fsynced, renamed into place, and
/// the directory fsynced.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    sync_parent(path)
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
/// written, stores it durably, then hands the commit of its offsets to `commits`
/// (which does not wait for it). A failed commit is reported there and left to the
/// next checkpoint.
async fn checkpoint(
    stream: &mut Input,
    output: &mut Output,
    store: Option<&Arc<FileCheckpointStore>>,
    commits: Option<&Commits>,
) -> Result<(), WriteError> {
    // The checkpoint is taken even when stdout's reader has gone, so a `| head` run
    // still records where it stopped; a file output that cannot be made durable is not
    // checkpointed.
    let len = match tokio::task::block_in_place(|| output.sync()) {
        Ok(len) => len,
        Err(WriteError::Closed) => None,
        Err(e) => return Err(e),
    };
    let mut cp = stream
        .checkpoint()
        .map_err(|e| WriteError::Failed(e.to_string()))?;
    if let Some(len) = len {
        cp.user_data.insert(OUTPUT_LENGTH.into(), len.to_string());
    }
    if let Some(store) = store {
        tokio::task::block_in_place(|| store.save(&cp))
            .map_err(|e| WriteError::Failed(format!("cannot save a checkpoint: {e}")))?;
    }
    if let Some(commits) = commits {
        match stream.commit_job(&cp) {
            Ok(Some(job)) => commits.submit(job),
            Ok(None) => {}
            Err(e) => eprintln!("mck: warning: offset commit skipped: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
