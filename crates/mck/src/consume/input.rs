//! What the command reads, Kafka alone or history files then Kafka, behind one
//! interface for the read loop.

use super::*;
use multicluster_kafka::AckRequests;

/// What the command reads: Kafka alone, or history files then Kafka.
///
/// Kafka alone is read a batch at a time and its values stay in their batches
/// ([`InBatch`]): no handle per record. History files then Kafka come one record
/// at a time, each with its value.
pub(super) enum Input {
    Kafka(Box<KafkaSourceStream<InBatch>>),
    Hybrid(Box<HybridStream<NullableValue>>),
}

/// One record from either: the library's own record of a hybrid source.
pub(super) type Item = HybridRecord<Option<Bytes>>;

/// What one read gives: a batch of Kafka records, or one record.
pub(super) enum Read {
    Batch(RecordBatch<()>),
    One(Item),
}

impl Input {
    /// The next records, at most `max`: a batch when the input reads Kafka alone,
    /// else one record (a --backfill run has no batches).
    pub(super) async fn next(&mut self, max: usize) -> Option<Result<Read, SourceError>> {
        match self {
            Input::Kafka(s) => s.next_batch_up_to(max).await.map(|r| r.map(Read::Batch)),
            Input::Hybrid(s) => s.next().await.map(|r| r.map(Read::One)),
        }
    }

    /// The watermark of what was handed out (Kafka alone; none while history files
    /// are read).
    pub(super) fn watermark(&mut self) -> Option<i64> {
        match self {
            Input::Kafka(s) => s.watermark(),
            Input::Hybrid(_) => None,
        }
    }

    pub(super) fn checkpoint(&mut self) -> Result<Checkpoint, SourceError> {
        match self {
            Input::Kafka(s) => s.checkpoint(),
            Input::Hybrid(s) => s.checkpoint().map(HybridCheckpoint::into_checkpoint),
        }
    }

    /// What commits `cp`'s offsets, and the checkpoint to give it: none while a
    /// --backfill run still reads files (nothing to commit there).
    pub(super) fn commit_job(
        &self,
        cp: &Checkpoint,
    ) -> Result<Option<(Committer, Checkpoint)>, SourceError> {
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
    pub(super) fn acknowledgement_wanted(&self) -> bool {
        match self {
            Input::Kafka(s) => s.acknowledgement_wanted(),
            Input::Hybrid(_) => false,
        }
    }

    /// Group mode: what says when the source asks for an acknowledgement.
    pub(super) fn acknowledgement_requests(&self) -> Option<AckRequests> {
        match self {
            Input::Kafka(s) => Some(s.acknowledgement_requests()),
            Input::Hybrid(_) => None,
        }
    }

    pub(super) async fn close(self) {
        match self {
            Input::Kafka(s) => s.close().await,
            Input::Hybrid(s) => s.close().await,
        }
    }
}
