//! Positions librdkafka found outside their logs (records deleted by retention or
//! `kafka-delete-records`, a topic re-created): an error, or a reset to the log's start
//! or end, as the out-of-range policy says.

use super::*;

/// How long the lookups for a position outside the log (its range, the reset) wait.
const OUT_OF_RANGE_LOOKUP: std::time::Duration = std::time::Duration::from_secs(10);

impl ClusterConsumer {
    /// Applies the out-of-range policy to positions librdkafka found outside their
    /// logs: with the policy to fail, the first one is the error to return; else each
    /// partition jumps to the log's start or end, said and counted.
    pub(super) fn out_of_range(&mut self, hits: Vec<(String, i32, i64)>) -> Option<SourceError> {
        let mut fatal = None;
        for (topic, partition, offset) in hits {
            // The log's range now, for the error (or the reset).
            let range = self
                .consumer()
                .fetch_watermarks(&topic, partition, OUT_OF_RANGE_LOOKUP)
                .ok();
            let split = format!("{}/{topic}/{partition}", self.cluster);
            let target = match (self.policy.out_of_range, range) {
                (OffsetReset::Earliest, Some((low, _))) => low,
                (OffsetReset::Latest, Some((_, high))) => high,
                _ => {
                    fatal.get_or_insert(SourceError::OffsetOutOfRange {
                        split,
                        offset,
                        log_start: range.map(|r| r.0),
                        log_end: range.map(|r| r.1),
                    });
                    continue;
                }
            };
            let (low, high) = range.unwrap_or_default();
            tracing::warn!(
                split = %split,
                offset,
                log_start = low,
                log_end = high,
                to = target,
                "position outside the log (records deleted, or the topic re-created); resetting as the out-of-range policy says"
            );
            metrics::counter!(
                crate::metrics::OFFSET_RESETS,
                "cluster" => self.cluster.to_string(),
                "topic" => topic.clone()
            )
            .increment(1);
            // librdkafka stopped the partition on the error and takes no seek: it is
            // assigned again at the new position.
            let mut tpl = TopicPartitionList::new();
            let reassigned = tpl
                .add_partition_offset(&topic, partition, Offset::Offset(target))
                .and_then(|()| self.consumer().incremental_unassign(&tpl))
                .and_then(|()| self.consumer().incremental_assign(&tpl));
            if let Err(e) = reassigned {
                let message = format!("reset of {topic}/{partition} to offset {target}: {e}");
                fatal.get_or_insert(SourceError::kafka(&self.cluster, message, &e));
            }
        }
        fatal
    }
}
