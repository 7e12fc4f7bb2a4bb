//! The arguments of `mck consume`.

use super::*;

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
    /// Share the stream with other `mck consume` processes: `group` lets each
    /// cluster's group coordinator divide its partitions among the instances of
    /// --group (at least once; a bounded run ends when the group is at every stop);
    /// `shard:I/N` reads only shard I (from 0)
    /// of N, exactly once with its own --checkpoint-dir (every instance needs the
    /// same N and --group; a second live instance of a shard is refused). `whole`
    /// (the default) reads every split.
    #[arg(long, value_name = "whole|group|shard:I/N", default_value = "whole", env = "MCK_SCALE_OUT", value_parser = args::parse_scale_out)]
    pub scale_out: ScaleOut,
    /// How long start-up waits for the shard while another instance holds it (a
    /// killed one holds it until the brokers' consumer session timeout, 45 s by
    /// default), e.g. `90s`.
    #[arg(long, value_name = "DURATION", default_value = "60s", env = "MCK_SHARD_LOCK_WAIT", value_parser = args::parse_duration)]
    pub shard_lock_wait: Duration,
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
    /// Event time: how much older than the newest record of its partition a record may
    /// be and still be ahead of the watermark (the live line shows how far the
    /// watermark is behind the clock; checkpoints keep it).
    #[arg(long, value_name = "DURATION", default_value = "0", env = "MCK_MAX_OUT_OF_ORDERNESS", value_parser = args::parse_duration_or_zero)]
    pub max_out_of_orderness: Duration,
    /// Event time: a partition (or a whole cluster) with no record for this long stops
    /// holding the watermark back, until its next record.
    #[arg(long, value_name = "DURATION", default_value = "5s", env = "MCK_IDLE_TIMEOUT", value_parser = args::parse_duration)]
    pub idle_timeout: Duration,
    /// Event time: with `time`, records of every cluster and partition come out
    /// oldest first (by timestamp), each held until no partition that is neither idle
    /// nor finished can still bring an older one; `fetch` (the default) prints them
    /// as they arrive. Each partition stays in offset order either way.
    #[arg(long, value_name = "fetch|time", default_value = "fetch", env = "MCK_ORDER", value_parser = ["fetch", "time"])]
    pub order: String,
    /// Event time: pause fetching a partition whose watermark runs more than this
    /// ahead of the stream's (its cluster's other partitions go on), until the rest
    /// catch up or go idle; a cluster with a backlog then comes at the pace of the
    /// others. E.g. `1m`.
    #[arg(long, value_name = "DURATION", env = "MCK_ALIGN", value_parser = args::parse_duration_or_zero)]
    pub align: Option<Duration>,
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
    /// The watermarks of `--max-out-of-orderness`, `--idle-timeout` and `--align`.
    pub(super) fn watermark_strategy(&self) -> WatermarkStrategy {
        let s = WatermarkStrategy::bounded_out_of_orderness(self.max_out_of_orderness)
            .with_idle_timeout(self.idle_timeout);
        match self.align {
            Some(drift) => s.with_alignment(drift),
            None => s,
        }
    }

    /// `--until`, or `latest` for `-e`.
    pub(super) fn stop(&self) -> Option<StoppingOffsets> {
        match (&self.until, self.exit_at_end) {
            (Some(u), _) => Some(u.clone()),
            (None, true) => Some(StoppingOffsets::Latest),
            (None, false) => None,
        }
    }
}
