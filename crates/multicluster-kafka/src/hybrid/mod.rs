//! History from files, then the live multi-cluster stream: a [`HybridSource`] reads a
//! bounded [`FileSource`] to its end, then switches to a [`MultiClusterKafkaSource`](crate::MultiClusterKafkaSource)
//! that starts where the files stopped, with no gap and no overlap.
//!
//! Where Kafka starts ([`SwitchPolicy`]):
//! - [`SwitchPolicy::AfterLargestTimestamp`] (the default): with `T` the largest event
//!   timestamp in the files, every partition of every cluster starts at its first
//!   record whose timestamp is **strictly after** `T` (Kafka's offset-for-time lookup
//!   at `T + 1`). Records at exactly `T` are taken to be in the files. With no record
//!   in the files, the Kafka builder's own starting offsets apply.
//! - [`SwitchPolicy::Offsets`]: explicit starting offsets.
//!
//! Per-cluster starting offsets in the metadata take precedence over the ones the
//! switch sets, as they do over any builder setting: leave them unset on streams a
//! hybrid reads.
//!
//! Checkpoints ([`HybridCheckpoint`]) say which side is being read and where, so a
//! checkpoint taken before, during or after the switch restores to the right source at
//! the right position. They travel in a regular [`Checkpoint`] (see
//! [`HybridCheckpoint::into_checkpoint`]) so one checkpoint store serves both.

use serde::{Deserialize, Serialize};

use crate::base::checkpoint::Checkpoint;
use crate::base::offsets::StartingOffsets;
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::file_source::{FileCheckpoint, FileRecord, FileSource, FileSourceBuilder};
use crate::record::Record;
use crate::source::{KafkaSourceStream, SourceBuilder};

/// Where the Kafka side starts when the files end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SwitchPolicy {
    /// After the largest event timestamp in the files (strictly after it).
    #[default]
    AfterLargestTimestamp,
    /// At these offsets.
    Offsets(StartingOffsets),
}

/// A record from either side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HybridRecord<V> {
    /// From the history files.
    File(FileRecord),
    /// From Kafka.
    Kafka(Record<V>),
}

/// Where a hybrid stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "stage")]
pub enum HybridCheckpoint {
    /// Still reading the files.
    Files {
        /// Their positions.
        files: FileCheckpoint,
    },
    /// Switched to Kafka.
    Kafka {
        /// Where Kafka partitions without a position start (fixed at the switch;
        /// `None`: the Kafka builder's own, because the files held no record).
        starting: Option<StartingOffsets>,
        /// The largest event timestamp the files held (for the record).
        files_max_timestamp: Option<i64>,
        /// Kafka positions.
        kafka: Checkpoint,
    },
}

/// The `user_data` key of a [`Checkpoint`] that carries a hybrid's stage.
pub const HYBRID_KEY: &str = "hybrid";

impl HybridCheckpoint {
    /// As a regular checkpoint: Kafka positions (none while on the files) plus the
    /// hybrid's stage in `user_data["hybrid"]`.
    pub fn into_checkpoint(mut self) -> Checkpoint {
        // The Kafka positions move into the checkpoint; the stage keeps the rest.
        let mut cp = match &mut self {
            HybridCheckpoint::Files { .. } => Checkpoint::default(),
            HybridCheckpoint::Kafka { kafka, .. } => std::mem::take(kafka),
        };
        // Serializing these plain types cannot fail.
        let text = serde_json::to_string(&self).unwrap_or_default();
        cp.user_data.insert(HYBRID_KEY.into(), text);
        cp
    }

    /// Reads a checkpoint written by [`into_checkpoint`](Self::into_checkpoint).
    /// `None` when it holds no hybrid stage.
    pub fn from_checkpoint(mut cp: Checkpoint) -> Result<Option<Self>, SourceError> {
        let Some(text) = cp.user_data.remove(HYBRID_KEY) else {
            return Ok(None);
        };
        let mut stage: HybridCheckpoint = serde_json::from_str(&text).map_err(|e| {
            SourceError::Checkpoint(crate::base::checkpoint::CheckpointError::Decode {
                origin: "<checkpoint>".into(),
                reason: format!("the hybrid stage is unreadable: {e}"),
            })
        })?;
        if let HybridCheckpoint::Kafka { kafka, .. } = &mut stage {
            *kafka = cp;
        }
        Ok(Some(stage))
    }
}

/// The Kafka source being opened.
type OpenKafka<D> =
    std::pin::Pin<Box<dyn Future<Output = Result<KafkaSourceStream<D>, SourceError>> + Send>>;

enum Stage<D: Deserializer> {
    Files(FileSource),
    Kafka {
        stream: Box<KafkaSourceStream<D>>,
        starting: Option<StartingOffsets>,
        files_max_timestamp: Option<i64>,
    },
    /// Opening the Kafka source at the switch; kept across cancelled `next` calls.
    Opening {
        open: OpenKafka<D>,
        starting: Option<StartingOffsets>,
        files_max_timestamp: Option<i64>,
        /// The files' final positions (what a checkpoint taken now holds).
        files: FileCheckpoint,
    },
    /// Before start, or after a failed switch.
    Switching,
}

/// Reads history files, then Kafka. See the [module docs](self).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use multicluster_kafka::file_source::FileSource;
/// use multicluster_kafka::hybrid::{HybridRecord, HybridSource};
/// use multicluster_kafka::prelude::*;
///
/// let kafka = MultiClusterKafkaSource::builder()
///     .metadata_service(FileMetadataService::watch("streams.yaml")?)
///     .stream_ids(["orders"])
///     .deserializer(ValueOnly::<String>::utf8());
/// let files = FileSource::builder("history/").timestamp_field("ts");
/// let mut source = HybridSource::new(files, kafka).open().await?;
/// while let Some(record) = source.next().await {
///     match record? {
///         HybridRecord::File(r) => println!("file {}:{}", r.file, r.line),
///         HybridRecord::Kafka(r) => println!("kafka {}/{}@{}", r.cluster, r.topic, r.offset),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct HybridSource<D: Deserializer> {
    files: FileSourceBuilder,
    kafka: SourceBuilder<D>,
    policy: SwitchPolicy,
    restore: Option<HybridCheckpoint>,
}

impl<D: Deserializer> HybridSource<D> {
    /// Files first, then the Kafka source `kafka` configures (its starting offsets
    /// apply only when the files hold no record).
    pub fn new(files: FileSourceBuilder, kafka: SourceBuilder<D>) -> Self {
        Self {
            files,
            kafka,
            policy: SwitchPolicy::default(),
            restore: None,
        }
    }

    /// Where Kafka starts (default: after the largest timestamp in the files).
    pub fn switch_policy(mut self, policy: SwitchPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Resumes from a checkpoint (on whichever side it was taken).
    pub fn restore_from(mut self, checkpoint: HybridCheckpoint) -> Self {
        self.restore = Some(checkpoint);
        self
    }

    /// Starts reading: the files, or Kafka directly when restoring after the switch.
    pub async fn open(self) -> Result<HybridStream<D>, SourceError> {
        let mut stream = HybridStream {
            stage: Stage::Switching,
            kafka: Some(self.kafka),
            policy: self.policy,
            switched: None,
        };
        match self.restore {
            Some(HybridCheckpoint::Kafka {
                starting,
                files_max_timestamp,
                kafka,
            }) => {
                stream
                    .start_kafka(starting, files_max_timestamp, Some(kafka))
                    .await?;
            }
            Some(HybridCheckpoint::Files { files }) => {
                stream.stage = Stage::Files(self.files.restore_from(files).open()?);
            }
            None => stream.stage = Stage::Files(self.files.open()?),
        }
        Ok(stream)
    }
}

/// What happened at the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// The largest event timestamp in the files.
    pub files_max_timestamp: Option<i64>,
    /// Where Kafka started (`None`: at the Kafka builder's own starting offsets).
    pub starting: Option<StartingOffsets>,
}

/// A running hybrid source.
pub struct HybridStream<D: Deserializer> {
    stage: Stage<D>,
    kafka: Option<SourceBuilder<D>>,
    policy: SwitchPolicy,
    switched: Option<Switch>,
}

impl<D: Deserializer> std::fmt::Debug for HybridStream<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridStream")
            .field("on_kafka", &self.on_kafka())
            .field("switched", &self.switched)
            .finish()
    }
}

impl<D: Deserializer> HybridStream<D> {
    /// The Kafka source, about to open.
    fn open_kafka(
        &mut self,
        starting: &Option<StartingOffsets>,
        restore: Option<Checkpoint>,
    ) -> Result<OpenKafka<D>, SourceError> {
        let mut builder = self.kafka.take().ok_or(SourceError::Closed)?;
        if let Some(o) = starting {
            builder = builder.starting_offsets(o.clone());
        }
        if let Some(cp) = restore {
            builder = builder.restore_from(cp);
        }
        let source = builder.build()?;
        Ok(Box::pin(source.open()))
    }

    async fn start_kafka(
        &mut self,
        starting: Option<StartingOffsets>,
        files_max_timestamp: Option<i64>,
        restore: Option<Checkpoint>,
    ) -> Result<(), SourceError> {
        let stream = self.open_kafka(&starting, restore)?.await?;
        self.stage = Stage::Kafka {
            stream: Box::new(stream),
            starting,
            files_max_timestamp,
        };
        Ok(())
    }

    /// True once reading Kafka.
    pub fn on_kafka(&self) -> bool {
        matches!(self.stage, Stage::Kafka { .. })
    }

    /// The switch this stream made, if it made one (a stream restored on the Kafka
    /// side made none).
    pub fn switch(&self) -> Option<&Switch> {
        self.switched.as_ref()
    }

    /// The next record: from the files until they end, then from Kafka. Cancel-safe,
    /// also while the switch opens the Kafka source (the next call goes on with it).
    pub async fn next(&mut self) -> Option<Result<HybridRecord<D::Value>, SourceError>> {
        loop {
            match &mut self.stage {
                Stage::Files(files) => match files.next().await {
                    Some(r) => return Some(r.map(HybridRecord::File)),
                    None if files.checkpoint().files.values().all(|p| p.done) => {
                        let max = files.max_timestamp();
                        let starting = match (&self.policy, max) {
                            (SwitchPolicy::Offsets(o), _) => Some(o.clone()),
                            (SwitchPolicy::AfterLargestTimestamp, Some(t)) => {
                                Some(StartingOffsets::Timestamp(t.saturating_add(1)))
                            }
                            (SwitchPolicy::AfterLargestTimestamp, None) => None,
                        };
                        tracing::info!(files_max_timestamp = ?max, ?starting, "files done; switching to Kafka");
                        let files = files.checkpoint();
                        self.stage = Stage::Switching;
                        match self.open_kafka(&starting, None) {
                            Ok(open) => {
                                self.stage = Stage::Opening {
                                    open,
                                    starting,
                                    files_max_timestamp: max,
                                    files,
                                }
                            }
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    // The file source failed earlier and ended: stay ended.
                    None => return None,
                },
                Stage::Kafka { stream, .. } => {
                    return stream.next().await.map(|r| r.map(HybridRecord::Kafka));
                }
                Stage::Opening { open, .. } => {
                    let opened = open.as_mut().await;
                    let (starting, files_max_timestamp) = match &self.stage {
                        Stage::Opening {
                            starting,
                            files_max_timestamp,
                            ..
                        } => (starting.clone(), *files_max_timestamp),
                        _ => (None, None),
                    };
                    self.stage = Stage::Switching;
                    match opened {
                        Ok(stream) => {
                            self.switched = Some(Switch {
                                files_max_timestamp,
                                starting: starting.clone(),
                            });
                            self.stage = Stage::Kafka {
                                stream: Box::new(stream),
                                starting,
                                files_max_timestamp,
                            };
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                Stage::Switching => return Some(Err(SourceError::Closed)),
            }
        }
    }

    /// A checkpoint consistent with the records handed out.
    pub fn checkpoint(&mut self) -> Result<HybridCheckpoint, SourceError> {
        match &mut self.stage {
            Stage::Files(files) => Ok(HybridCheckpoint::Files {
                files: files.checkpoint(),
            }),
            Stage::Kafka {
                stream,
                starting,
                files_max_timestamp,
            } => Ok(HybridCheckpoint::Kafka {
                starting: starting.clone(),
                files_max_timestamp: *files_max_timestamp,
                kafka: stream.checkpoint()?,
            }),
            // Every file record was handed out and no Kafka record yet: restoring
            // this makes the switch again.
            Stage::Opening { files, .. } => Ok(HybridCheckpoint::Files {
                files: files.clone(),
            }),
            Stage::Switching => Err(SourceError::Closed),
        }
    }

    /// Commits a durable checkpoint's Kafka offsets (nothing to commit on the files).
    pub async fn commit(&self, checkpoint: &HybridCheckpoint) -> Result<(), SourceError> {
        match (&self.stage, checkpoint) {
            (Stage::Kafka { stream, .. }, HybridCheckpoint::Kafka { kafka, .. }) => {
                stream.commit(kafka).await
            }
            _ => Ok(()),
        }
    }

    /// A handle that commits the Kafka offsets of checkpoints while this stream goes
    /// on reading, once it reads Kafka (`None` before: files have nothing to commit).
    /// See [`Committer`](crate::Committer).
    pub fn committer(&self) -> Option<crate::source::Committer> {
        match &self.stage {
            Stage::Kafka { stream, .. } => Some(stream.committer()),
            _ => None,
        }
    }

    /// Stops reading.
    pub async fn close(self) {
        if let Stage::Kafka { stream, .. } = self.stage {
            stream.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::split::{KafkaSplit, SplitId};

    #[test]
    fn hybrid_checkpoints_round_trip_through_a_regular_checkpoint() {
        let files = HybridCheckpoint::Files {
            files: FileCheckpoint {
                max_timestamp: Some(5),
                ..Default::default()
            },
        };
        let cp = files.clone().into_checkpoint();
        assert!(cp.clusters.is_empty());
        let back = Checkpoint::decode(&cp.encode()).unwrap();
        assert_eq!(
            HybridCheckpoint::from_checkpoint(back).unwrap(),
            Some(files)
        );

        let mut kafka = Checkpoint::from_splits([KafkaSplit {
            id: SplitId::new("east", "orders", 0),
            next_offset: 7,
            stop_offset: None,
            last: None,
        }]);
        kafka.user_data.insert("output-length".into(), "9".into());
        let on_kafka = HybridCheckpoint::Kafka {
            starting: Some(StartingOffsets::Timestamp(6)),
            files_max_timestamp: Some(5),
            kafka,
        };
        let cp = on_kafka.clone().into_checkpoint();
        assert_eq!(cp.split_count(), 1);
        let back = Checkpoint::decode(&cp.encode()).unwrap();
        assert_eq!(
            HybridCheckpoint::from_checkpoint(back).unwrap(),
            Some(on_kafka)
        );
        assert_eq!(
            HybridCheckpoint::from_checkpoint(Checkpoint::default()).unwrap(),
            None
        );
    }
}
