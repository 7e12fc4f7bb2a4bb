//! The builder: every setting of a source, checked into a [`SourceConfig`] by
//! [`SourceBuilder::build`].

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::base::config::{Interval, Settings};
use crate::base::watermark::{EventTimestamps, ReadOrder};

mod build;

impl MultiClusterKafkaSource<RawValue> {
    /// Starts a builder (values as bytes until a deserializer is set).
    pub fn builder() -> SourceBuilder<RawValue> {
        SourceBuilder {
            deserializer: RawValue,
            s: Settings::default(),
        }
    }
}

/// Configures a [`MultiClusterKafkaSource`]; see [`MultiClusterKafkaSource::builder`].
pub struct SourceBuilder<D> {
    deserializer: D,
    s: Settings,
}

impl<D> std::fmt::Debug for SourceBuilder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceBuilder")
            .field("stream_ids", &self.s.stream_ids)
            .field("pattern", &self.s.pattern)
            .field("group_id", &self.s.group_id)
            .field("properties", &self.s.properties)
            .finish()
    }
}

impl<D: Deserializer> SourceBuilder<D> {
    /// The metadata service (required).
    pub fn metadata_service(mut self, service: impl KafkaMetadataService) -> Self {
        self.s.service = Some(Arc::new(service));
        self
    }

    /// A shared metadata service (required, or [`SourceBuilder::metadata_service`]).
    pub fn shared_metadata_service(mut self, service: Arc<dyn KafkaMetadataService>) -> Self {
        self.s.service = Some(service);
        self
    }

    /// The stream ids to read. Unknown ids fail [`MultiClusterKafkaSource::open`].
    pub fn stream_ids<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.s.stream_ids = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Read every stream whose id matches this regular expression (unanchored, like
    /// `Regex::is_match`), instead of a list of ids.
    pub fn stream_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.s.pattern = Some(pattern.into());
        self
    }

    /// The consumer group id used for committed offsets and commits (the same on every
    /// cluster).
    pub fn group_id(mut self, group_id: impl Into<String>) -> Self {
        self.s.group_id = Some(group_id.into());
        self
    }

    /// Sets the deserializer.
    pub fn deserializer<D2: Deserializer>(self, deserializer: D2) -> SourceBuilder<D2> {
        SourceBuilder {
            deserializer,
            s: self.s,
        }
    }

    /// Where splits start (default: earliest). Clusters may override it in metadata.
    pub fn starting_offsets(mut self, offsets: StartingOffsets) -> Self {
        self.s.starting = offsets;
        self
    }

    /// Makes the source bounded: every split stops here, and the input ends when all
    /// have. Clusters may override it in metadata.
    pub fn stopping_offsets(mut self, offsets: StoppingOffsets) -> Self {
        self.s.stopping = Some(offsets);
        self
    }

    /// Client properties for every cluster (librdkafka keys). Cluster properties from
    /// the metadata take precedence.
    pub fn properties(mut self, properties: ClientProperties) -> Self {
        self.s.properties = self.s.properties.merged_with(&properties);
        self
    }

    /// One client property for every cluster.
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.s.properties.set(key, value);
        self
    }

    /// Number of parallel readers for [`MultiClusterKafkaSource::open_parallel`]
    /// (default 1).
    pub fn parallelism(mut self, readers: usize) -> Self {
        self.s.parallelism = readers;
        self
    }

    /// How often to look for new partitions in unbounded mode (default 30 s).
    pub fn partition_discovery_interval(mut self, every: Duration) -> Self {
        self.s.partition_discovery = Interval::Every(every);
        self
    }

    /// Turns periodic partition discovery off.
    pub fn without_partition_discovery(mut self) -> Self {
        self.s.partition_discovery = Interval::Off;
        self
    }

    /// How splits are spread over readers (default: global balance).
    pub fn assignment_strategy(mut self, strategy: AssignmentStrategy) -> Self {
        self.s.strategy = strategy;
        self
    }

    /// Resume from a checkpoint.
    pub fn restore_from(mut self, checkpoint: Checkpoint) -> Self {
        self.s.restore = Some(checkpoint);
        self
    }

    /// When a checkpointed cluster now reports a different Kafka `cluster.id`, start
    /// that cluster fresh instead of failing. Off by default.
    pub fn discard_positions_of_replaced_clusters(mut self, discard: bool) -> Self {
        self.s.discard_mismatched_positions = discard;
        self
    }

    /// How long start-up waits for every cluster to answer, trying each again with
    /// backoff meanwhile; a cluster that has not answered by then fails
    /// [`open`](MultiClusterKafkaSource::open), named with its bootstrap list and last
    /// error. `None` waits for ever in a bounded run; in a follow run it starts with
    /// the clusters that answered (5 s after the first did) and takes the others up in
    /// the background when they answer. Default: [`DEFAULT_BOUNDED_STARTUP_TIMEOUT`]
    /// in a bounded run, `None` in a follow run.
    pub fn startup_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.s.startup_timeout = Some(timeout);
        self
    }

    /// Timeout of metadata and offset lookups (default 30 s).
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.s.client_timeout = timeout;
        self
    }

    /// Most records a reader takes from one cluster's consumer at a time (default
    /// 1024); fewer when they are large, for a batch of about 4 MiB of keys and
    /// values at most (sized by the previous batch's records). A reader buffers at
    /// most one such batch being handed out plus two ready or being built per
    /// cluster it reads (its fetchers build them ahead);
    /// librdkafka's `queued.max.messages.kbytes` and `queued.min.messages` bound what
    /// it prefetches.
    pub fn max_batch_size(mut self, records: usize) -> Self {
        self.s.max_batch = records;
        self
    }

    /// Whether records carry their headers (default true). Parsing headers costs
    /// librdkafka an allocation per record even when a record has none; turn it off
    /// when the application does not read them.
    pub fn include_headers(mut self, include: bool) -> Self {
        self.s.include_headers = include;
        self
    }

    /// What a split does when its position is outside the log (records deleted by
    /// retention or `kafka-delete-records`, a topic re-created): fail (the default,
    /// [`OffsetReset::None`]: the reader returns [`SourceError::OffsetOutOfRange`]
    /// naming the split, its position and the log's range, and reads that split no
    /// further), or jump to the earliest or latest offset of the log, with a warning
    /// and `mck_offset_resets_total`.
    pub fn on_offset_out_of_range(mut self, policy: OffsetReset) -> Self {
        self.s.policy.out_of_range = policy;
        self
    }

    /// In a bounded run, a topic deleted while it is read cannot reach its stop. By
    /// default its splits end with [`SourceError::TopicGone`]; allowed, they end with a
    /// warning and the run goes on to its end (default false).
    pub fn allow_missing_topics(mut self, allow: bool) -> Self {
        self.s.policy.allow_missing_topics = allow;
        self
    }

    /// How often to re-read the metadata service in unbounded mode (default 30 s).
    /// Changes are applied while reading: clusters and topics added and removed,
    /// properties changed. Services that notify changes (the file service) are
    /// followed at once as well.
    pub fn metadata_discovery_interval(mut self, every: Duration) -> Self {
        self.s.metadata_discovery = Interval::Every(every);
        self
    }

    /// Reads the metadata once at start and never again.
    pub fn without_metadata_discovery(mut self) -> Self {
        self.s.metadata_discovery = Interval::Off;
        self
    }

    /// Consecutive metadata-service failures tolerated on the last good metadata
    /// (default [`DEFAULT_METADATA_FAILURE_THRESHOLD`]).
    pub fn metadata_failure_threshold(mut self, failures: u32) -> Self {
        self.s.metadata_failure_threshold = failures;
        self
    }

    /// The shortest time between two rebuilds of one cluster's clients (default
    /// [`DEFAULT_REBUILD_INTERVAL`]). A property change (credentials, bootstrap list)
    /// is applied at once when the cluster was not rebuilt within this time; changes
    /// that follow sooner are merged and applied together when it has passed, so a
    /// burst of edits costs one rebuild, not one per edit. Other clusters, and
    /// topic or offset changes of this one, are never held back. Zero applies every
    /// change at once.
    pub fn rebuild_interval(mut self, interval: Duration) -> Self {
        self.s.rebuild_interval = interval;
        self
    }

    /// Where partitions found after a cluster's first discovery start: new partitions,
    /// and every partition of a topic added to a cluster already being read (default
    /// earliest, so nothing produced to them is missed).
    pub fn new_partition_starting_offsets(mut self, offsets: StartingOffsets) -> Self {
        self.s.new_partition_start = offsets;
        self
    }

    /// How long positions of removed topics and clusters are kept (default
    /// [`DEFAULT_RETENTION`], one hour). A topic or cluster that comes back within the
    /// window resumes at its positions; after it, it starts as new. Zero turns it off.
    pub fn removed_position_retention(mut self, window: Duration) -> Self {
        self.s.retention = window;
        self
    }

    /// Hooks into the librdkafka clients of each cluster: `hooks` is called with the
    /// logical cluster id whenever the source makes a client for that cluster (its
    /// lookup client at start and after a property change, and each reader's
    /// consumer), and the [`ClientHooks`] it returns, if any, get that client's
    /// OAUTHBEARER token requests, statistics and errors. Return the same `Arc` for a
    /// cluster to see all its clients in one place.
    ///
    /// This is how a program supplies OAUTHBEARER tokens librdkafka cannot make
    /// itself (AWS MSK IAM, a company token service): see
    /// [`hooks`](crate::hooks) and the `oauth_token` example.
    /// Statistics come every `statistics.interval.ms` when that property is set.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), multicluster_kafka::error::SourceError> {
    /// use std::sync::Arc;
    /// use multicluster_kafka::prelude::*;
    ///
    /// struct LogStats;
    /// impl ClientHooks for LogStats {
    ///     fn stats_raw(&self, json: &[u8]) {
    ///         println!("{}", String::from_utf8_lossy(json));
    ///     }
    /// }
    /// let hooks: Arc<dyn ClientHooks> = Arc::new(LogStats);
    /// let source = MultiClusterKafkaSource::builder()
    ///     .metadata_service(StaticMetadataService::new([]).expect("no streams"))
    ///     .stream_ids(["orders"])
    ///     .property("statistics.interval.ms", "60000")
    ///     .client_hooks(move |cluster: &str| (cluster == "east").then(|| hooks.clone()))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn client_hooks(
        mut self,
        hooks: impl Fn(&str) -> Option<Arc<dyn ClientHooks>> + Send + Sync + 'static,
    ) -> Self {
        self.s.client_hooks = Some(ClientHooksFactory::new(hooks));
        self
    }

    /// How this source shares its stream with other processes (default
    /// [`ScaleOut::Whole`]: it reads every split).
    ///
    /// With [`ScaleOut::Shard`] the source reads only the splits of its shard (see
    /// [`Shard`] for which), so that `N` processes started with shards `0/N` to
    /// `N-1/N` read the stream together, each exactly once with its own checkpoints.
    /// It needs a group id: each shard commits its positions under it, and a shard
    /// takes a split it did not read before from the group's committed offset (else
    /// from the starting offsets), which makes a change of `N` exact once every shard
    /// stopped gracefully. At start the source takes the shard's static membership
    /// (`group.instance.id` `<group>-shard-<I>`, group `<group>-shards`) on the first
    /// cluster of the stream (by id), with Kafka's consumer group protocol (KIP-848,
    /// Kafka 4.0 or later): the broker refuses a second live instance of a shard.
    pub fn scale_out(mut self, scale_out: ScaleOut) -> Self {
        self.s.scale_out = scale_out;
        self
    }

    /// How long start-up waits for the shard's membership while another instance
    /// holds it (default [`DEFAULT_SHARD_LOCK_WAIT`](crate::DEFAULT_SHARD_LOCK_WAIT),
    /// 60 s). A killed instance holds it until the broker's consumer session timeout
    /// (`group.consumer.session.timeout.ms`, 45 s by default) ends; a live one holds
    /// it for good, and the start fails after this wait.
    pub fn shard_lock_wait(mut self, wait: Duration) -> Self {
        self.s.shard_lock_wait = wait;
        self
    }

    /// Event time: each split tracks a watermark by the strategy, and the source's
    /// watermark (the minimum over splits that are neither idle nor finished, never
    /// going back) comes with every batch ([`RecordBatch::watermark`]), from the
    /// reader ([`SourceReader::watermark`]) and the stream
    /// ([`KafkaSourceStream::watermark`]), and in every checkpoint: a source restored
    /// from one starts there. Off by default.
    pub fn watermarks(mut self, strategy: WatermarkStrategy) -> Self {
        self.s.watermarks = Some(strategy);
        self
    }

    /// The order records are handed out in: as fetched (the default), or by event
    /// time across all of a reader's splits ([`ReadOrder::Time`], which needs
    /// [`watermarks`](Self::watermarks)). In time order a checkpoint still counts
    /// exactly the records handed out, and a bounded run hands every record out by
    /// its end. Each reader orders its own splits: read with one reader (the default
    /// parallelism) for one order over the whole source.
    pub fn order(mut self, order: ReadOrder) -> Self {
        self.s.order = order;
        self
    }

    /// Event time from the records' contents: `f` gives each deserialized value's
    /// timestamp (milliseconds since the epoch), which the watermarks then follow
    /// instead of the Kafka record's timestamp; `None` leaves the watermark where the
    /// split's newest timestamp had it. A record that fails to deserialize has none.
    /// Set it after [`deserializer`](Self::deserializer): it takes that
    /// deserializer's values (`build` refuses one set for another's).
    pub fn event_timestamps(
        mut self,
        f: impl Fn(&D::Value) -> Option<i64> + Send + Sync + 'static,
    ) -> Self {
        let f: EventTimestamps<D::Value> = Arc::new(f);
        self.s.event_timestamps = Some(Arc::new(f));
        self
    }
}
