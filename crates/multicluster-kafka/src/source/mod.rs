//! The source: builder, running handles.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::base::assignment::AssignmentStrategy;
use crate::base::checkpoint::Checkpoint;
use crate::base::hooks::{ClientHooks, ClientHooksFactory};
use crate::deserializer::{Deserializer, RawValue};
use crate::enumerator::{Command, Enumerator};

mod builder;
use crate::base::config::SourceConfig;
pub use crate::base::config::{
    DEFAULT_BOUNDED_STARTUP_TIMEOUT, DEFAULT_METADATA_DISCOVERY,
    DEFAULT_METADATA_FAILURE_THRESHOLD, DEFAULT_PARTITION_DISCOVERY, DEFAULT_REBUILD_INTERVAL,
    DEFAULT_RETENTION, DEFAULT_SHARD_LOCK_WAIT,
};
use crate::base::metadata::KafkaMetadataService;
use crate::base::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use crate::base::properties::ClientProperties;
pub use crate::base::shard::{ScaleOut, Shard};
use crate::base::watermark::WatermarkStrategy;
use crate::error::{ConfigError, SourceError};
use crate::reader::{ReaderParts, ReaderSettings, SharedHandles, SourceReader};
use crate::record::{Record, RecordBatch};
pub use builder::SourceBuilder;

/// Reads one logical stream from many Kafka clusters. Built with
/// [`MultiClusterKafkaSource::builder`], then opened as a single stream
/// ([`open`](MultiClusterKafkaSource::open)) or as parallel readers
/// ([`open_parallel`](MultiClusterKafkaSource::open_parallel)).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use multicluster_kafka::prelude::*;
///
/// let source = MultiClusterKafkaSource::builder()
///     .metadata_service(FileMetadataService::watch("streams.yaml")?)
///     .stream_ids(["orders"])
///     .group_id("my-consumer-group")
///     .deserializer(ValueOnly::<String>::utf8())
///     .starting_offsets(StartingOffsets::Earliest)
///     .build()?;
/// let mut stream = source.open().await?;
/// while let Some(record) = stream.next().await {
///     let record = record?;
///     println!("{} {}/{}@{}: {}", record.cluster, record.topic, record.partition, record.offset, record.value);
/// }
/// # Ok(()) }
/// ```
pub struct MultiClusterKafkaSource<D: Deserializer> {
    cfg: SourceConfig,
    service: Arc<dyn KafkaMetadataService>,
    deserializer: Arc<D>,
    event_timestamps: Option<crate::base::watermark::EventTimestamps<D::Value>>,
}

impl<D: Deserializer> std::fmt::Debug for MultiClusterKafkaSource<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiClusterKafkaSource")
            .field("subscription", &self.cfg.subscription)
            .field("group_id", &self.cfg.group_id)
            .field("bounded", &self.cfg.bounded())
            .field("parallelism", &self.cfg.parallelism)
            .field("properties", &self.cfg.properties)
            .finish()
    }
}

impl<D: Deserializer> MultiClusterKafkaSource<D> {
    /// True when the source ends (stopping offsets set).
    pub fn is_bounded(&self) -> bool {
        self.cfg.bounded()
    }

    /// Starts the source with its configured number of readers.
    ///
    /// Reads metadata, connects to every cluster and discovers partitions before it
    /// returns: an unknown stream id or an unreachable cluster is an error here.
    pub async fn open_parallel(
        self,
    ) -> Result<(SourceCoordinator, Vec<SourceReader<D>>), SourceError> {
        let cfg = Arc::new(self.cfg);
        let clients = Arc::new(crate::kafka::shared::ClientShare::default());
        let group_mode = cfg.group_mode;
        let retained = crate::base::retention::Retained::default();
        let active = crate::base::active::ActiveClusters::default();
        let stream_index = crate::base::metadata::index::StreamIndex::default();
        let ack_wanted = crate::base::ack::AckRequests::default();
        let (notice_tx, notice_rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let mut senders = BTreeMap::new();
        let mut readers = Vec::new();
        for id in 0..cfg.parallelism {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(id, tx);
            readers.push(SourceReader::new(ReaderParts {
                settings: ReaderSettings {
                    id,
                    deserializer: self.deserializer.clone(),
                    max_batch: cfg.max_batch,
                    poll_timeout: cfg.poll_timeout,
                    include_headers: cfg.include_headers,
                    policy: cfg.policy,
                    client_hooks: cfg.client_hooks.clone(),
                    shard: cfg.shard,
                    event_timestamps: self.event_timestamps.clone(),
                },
                events: rx,
                notices: notice_tx.clone(),
                shared: SharedHandles {
                    clients: clients.clone(),
                    retained: retained.clone(),
                    active: active.clone(),
                    stream_index: stream_index.clone(),
                },
                time_order: cfg.order == crate::base::watermark::ReadOrder::Time,
                watermarks: cfg
                    .watermarks
                    .map(|s| (s, cfg.restore.as_ref().and_then(|c| c.watermark_ms))),
            }));
        }
        drop(notice_tx);
        let enumerator = Enumerator::start(
            cfg,
            self.service,
            senders,
            notice_rx,
            cmd_rx,
            crate::enumerator::Shared {
                retained,
                active,
                stream_index,
                ack_wanted: ack_wanted.clone(),
                clients,
            },
        )
        .await?;
        let shard = enumerator.shard_keeper();
        let cfg_group_mode = group_mode;
        let task = tokio::spawn(enumerator.run());
        Ok((
            SourceCoordinator {
                commands: cmd_tx,
                task: Some(task),
                shard,
                group_mode: cfg_group_mode,
                ack_wanted,
            },
            readers,
        ))
    }

    /// Starts the source as one stream (one reader; `parallelism` must be 1).
    pub async fn open(self) -> Result<KafkaSourceStream<D>, SourceError> {
        if self.cfg.parallelism != 1 {
            return Err(SourceError::Config(ConfigError::new(
                "parallelism",
                "open() reads with one reader; use open_parallel() for parallelism > 1",
            )));
        }
        let (coordinator, mut readers) = self.open_parallel().await?;
        let reader = readers.pop().ok_or(SourceError::Closed)?;
        Ok(KafkaSourceStream {
            coordinator,
            reader,
        })
    }
}

/// Controls a running source: commits, shutdown.
#[derive(Debug)]
pub struct SourceCoordinator {
    commands: mpsc::Sender<Command>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// A sharded source's membership.
    shard: Option<crate::kafka::shard_lock::ShardKeeper>,
    /// Group mode: the groups are left on close.
    group_mode: bool,
    /// Group mode: a revocation waits for the program's acknowledgement.
    ack_wanted: crate::base::ack::AckRequests,
}

/// How long closing a sharded source waits for its membership to be released.
const SHARD_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl SourceCoordinator {
    /// Commits a checkpoint's offsets to each cluster under the group id. Call it once
    /// the checkpoint is durable: Kafka then shows the group's progress, and
    /// `StartingOffsets::Committed` resumes there.
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        self.committer().commit(checkpoint).await
    }

    /// A handle that commits for this source from anywhere (another task, say), so
    /// a program need not wait for a commit where it reads. See [`Committer`].
    pub fn committer(&self) -> Committer {
        Committer {
            commands: self.commands.clone(),
        }
    }

    /// Group mode: leaves every cluster's group (once), so that the other instances
    /// take the partitions at once. Leaving revokes every partition, which the
    /// enumerator answers with the acknowledged positions: it must still run.
    async fn leave_groups(&mut self) {
        if !std::mem::take(&mut self.group_mode) {
            return;
        }
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::LeaveGroups(tx)).await.is_ok() {
            let wait = crate::enumerator::LEAVE_GROUPS_WAIT;
            if tokio::time::timeout(wait, rx).await.is_err() {
                tracing::warn!("the groups were not left within {wait:?}");
            }
        }
    }

    /// Group mode: true while a cluster's group takes partitions back from this
    /// instance and waits for the program to acknowledge (commit) what it was handed
    /// out of them. A program that commits on an interval should commit now; the
    /// partitions are released at the last acknowledged position after a while
    /// otherwise (records after it are read again by their next owner). In a bounded
    /// run it is also true after a split reached its stop, until the next commit: the
    /// run ends only once the group's committed offsets are at every stop.
    pub fn acknowledgement_wanted(&self) -> bool {
        self.ack_wanted.get()
    }

    /// Group mode: a handle whose [`AckRequests::asked`] returns once
    /// [`Self::acknowledgement_wanted`] turns true (or turned true since its last
    /// return), so that a program can commit at once rather than find out on its
    /// next look while it reads. Never asks outside group mode.
    ///
    /// [`AckRequests::asked`]: crate::AckRequests::asked
    pub fn acknowledgement_requests(&self) -> crate::base::ack::AckRequests {
        self.ack_wanted.clone()
    }

    /// Stops the enumerator and waits for it (readers stop when dropped or closed).
    pub async fn close(mut self) {
        self.leave_groups().await;
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        // A sharded source leaves its shard's group, so that the next instance of the
        // shard can start at once (waited for up to two seconds).
        if let Some(k) = self.shard.take() {
            k.release(SHARD_RELEASE_WAIT).await;
        }
    }
}

/// Commits checkpoints' offsets for a running source, apart from the stream that
/// reads it: a program can hand commits to a task of their own and go on reading
/// while a cluster's coordinator is slow. Commits run in the order they are asked, so
/// a group's offsets never go back. Cheap to clone; once the source is closed, a
/// commit fails with [`SourceError::Closed`].
///
/// ```no_run
/// # async fn run(mut stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>)
/// # -> Result<(), multicluster_kafka::error::SourceError> {
/// let committer = stream.committer();
/// let checkpoint = stream.checkpoint()?;
/// // … once the checkpoint is durable:
/// tokio::spawn(async move { committer.commit(&checkpoint).await });
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Committer {
    commands: mpsc::Sender<Command>,
}

impl Committer {
    /// Commits a durable checkpoint's offsets to each cluster, as
    /// [`SourceCoordinator::commit`].
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Commit(checkpoint.clone(), tx))
            .await
            .map_err(|_| SourceError::Closed)?;
        rx.await.map_err(|_| SourceError::Closed)?
    }

    /// Group mode: says that the program durably processed what `checkpoint` covers,
    /// without waiting for a commit. A partition the group takes back waits for this
    /// (see [`SourceCoordinator::acknowledgement_wanted`]); [`commit`](Self::commit)
    /// says it too, but only once the commits before it are done, which a slow
    /// coordinator can delay. The released partitions' positions are committed by the
    /// source itself. Returns at once; nothing happens outside group mode.
    pub async fn acknowledge(&self, checkpoint: &Checkpoint) {
        let _ = self
            .commands
            .send(Command::Acknowledge(checkpoint.clone()))
            .await;
    }
}

impl Drop for SourceCoordinator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(k) = &self.shard {
            k.release_in_background();
        }
    }
}

/// A running source read as one stream of records.
#[derive(Debug)]
pub struct KafkaSourceStream<D: Deserializer> {
    coordinator: SourceCoordinator,
    reader: SourceReader<D>,
}

impl<D: Deserializer> KafkaSourceStream<D> {
    /// The next record, or `None` at the end of a bounded input.
    pub async fn next(&mut self) -> Option<Result<Record<D::Value>, SourceError>> {
        self.reader.next().await
    }

    /// The next batch of records (all from one cluster), or `None` at the end of a
    /// bounded input. Cheaper per record than [`next`](Self::next); a checkpoint taken
    /// after it returns resumes right after the batch's last records. See
    /// [`SourceReader::next_batch`].
    ///
    /// ```no_run
    /// # async fn run(mut stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>)
    /// # -> Result<(), multicluster_kafka::error::SourceError> {
    /// while let Some(batch) = stream.next_batch().await {
    ///     for record in batch?.iter() {
    ///         println!("{} {}/{}@{}: {}", record.cluster, record.topic, record.partition, record.offset, record.value);
    ///     }
    ///     let _checkpoint = stream.checkpoint()?; // resumes after the batch
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        self.reader.next_batch().await
    }

    /// [`next_batch`](Self::next_batch) with at most `max` records (at least one);
    /// see [`SourceReader::next_batch_up_to`].
    pub async fn next_batch_up_to(
        &mut self,
        max: usize,
    ) -> Option<Result<RecordBatch<D::Value>, SourceError>> {
        self.reader.next_batch_up_to(max).await
    }

    /// Waits until [`next`](Self::next) or [`next_batch`](Self::next_batch) would
    /// return at once, taking nothing; see [`SourceReader::ready`].
    pub async fn ready(&mut self) {
        self.reader.ready().await
    }

    /// A checkpoint consistent with the records handed out so far.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        self.reader.checkpoint()
    }

    /// The watermark of what was handed out so far (milliseconds since the epoch), with
    /// [`SourceBuilder::watermarks`]; see [`SourceReader::watermark`].
    pub fn watermark(&mut self) -> Option<i64> {
        self.reader.watermark()
    }

    /// The records as a [`futures_core::Stream`], for programs that compose streams
    /// (`StreamExt`, `select`, sinks). The stream owns the source and closes it when
    /// dropped; it ends at the end of a bounded input. Use [`next`](Self::next)
    /// instead when the program takes checkpoints.
    ///
    /// ```no_run
    /// # async fn run(stream: multicluster_kafka::KafkaSourceStream<multicluster_kafka::deserializer::Utf8>) {
    /// use futures_util::StreamExt;
    ///
    /// let mut records = std::pin::pin!(stream.into_stream());
    /// while let Some(record) = records.next().await {
    ///     println!("{}", record.unwrap().value);
    /// }
    /// # }
    /// ```
    pub fn into_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<Record<D::Value>, SourceError>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let item = s.next().await?;
            Some((item, s))
        })
    }

    /// The records a batch at a time as a [`futures_core::Stream`] (see
    /// [`next_batch`](Self::next_batch) and [`into_stream`](Self::into_stream)).
    pub fn into_batch_stream(
        self,
    ) -> impl futures_core::Stream<Item = Result<RecordBatch<D::Value>, SourceError>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let item = s.next_batch().await?;
            Some((item, s))
        })
    }

    /// Commits a durable checkpoint's offsets to each cluster.
    pub async fn commit(&self, checkpoint: &Checkpoint) -> Result<(), SourceError> {
        self.coordinator.commit(checkpoint).await
    }

    /// A handle that commits for this source while the stream goes on reading (see
    /// [`Committer`]).
    pub fn committer(&self) -> Committer {
        self.coordinator.committer()
    }

    /// Group mode: true while partitions taken back wait for the program to
    /// acknowledge them; see [`SourceCoordinator::acknowledgement_wanted`].
    pub fn acknowledgement_wanted(&self) -> bool {
        self.coordinator.acknowledgement_wanted()
    }

    /// Group mode: a handle that says when an acknowledgement is asked for; see
    /// [`SourceCoordinator::acknowledgement_requests`].
    pub fn acknowledgement_requests(&self) -> crate::base::ack::AckRequests {
        self.coordinator.acknowledgement_requests()
    }

    /// Stops reading: waits until the reader has let its consumers go (closed at once
    /// when the reader made them), and stops the enumerator. A cluster's client that
    /// the reader shared with the enumerator, and the enumerator's other clients, are
    /// destroyed on threads of their own, not waited for: their log lines and
    /// [`ClientHooks`](crate::hooks::ClientHooks) calls can come for a moment
    /// after this returns. Consumers of clusters the reader stopped reading earlier
    /// close on their own threads too.
    pub async fn close(mut self) {
        // Group mode: the groups first, so that the other instances take over while
        // the reader's consumers close.
        self.coordinator.leave_groups().await;
        self.reader.close().await;
        self.coordinator.close().await;
    }
}
