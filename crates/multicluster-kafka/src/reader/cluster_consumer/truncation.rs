//! Positions checked by their leader epoch (KIP-320), as the native path checks
//! them: a restored position is sought with the epoch of the record before it, so
//! librdkafka asks the leader (OffsetsForLeaderEpoch) before it fetches anything,
//! as it does by itself after a leader change; a log truncated below the position
//! (an unclean leader election) is then read on from where the logs part.
//!
//! With `auto.offset.reset=error` (the reader's setting) librdkafka reports what it
//! found as an automatic-reset failure whose text alone says what the leader
//! answered ([`Checked::from_text`]), and stops fetching the partition, which is
//! assigned again where the source reads on.

use std::time::{Duration, Instant};

use rdkafka::error::RDKafkaErrorCode;

use super::*;

/// How long adding splits waits at most for librdkafka to take their positions to
/// check (a partition's start waits for those leaving the assignment to stop).
const SEEK_CHECKED: Duration = Duration::from_secs(10);

/// What librdkafka found when it checked a position by its leader epoch and the
/// log did not hold it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Checked {
    /// The log was truncated below the position `from`: the logs part at `to`,
    /// the end of `epoch`, the last epoch both share.
    Truncated { from: i64, to: i64, epoch: i32 },
    /// The leader knows no epoch up to the position's (`at`): nothing says that
    /// anything before it is gone, and it is read on unchecked.
    Unknown { at: i64 },
}

impl Checked {
    /// What an automatic-reset failure's text says librdkafka found, if it is one
    /// of a position checked by its epoch. librdkafka's words (2.1 on):
    /// `Partition log truncation detected at offset 300 (leader epoch 5): broker end
    /// offset is 250 (offset leader epoch 4). …`, or `No epoch found less or equal
    /// to offset 300 (leader epoch 5): broker end offset is -1 (offset leader epoch
    /// -1). …`.
    pub(super) fn from_text(text: &str) -> Option<Self> {
        let at = number_after(text, "Partition log truncation detected at offset ")
            .or_else(|| number_after(text, "No epoch found less or equal to offset "))?;
        let end = number_after(text, "broker end offset is ")?;
        let epoch = number_after(text, "(offset leader epoch ")?;
        let epoch = i32::try_from(epoch).ok()?;
        Some(if end >= 0 && epoch >= 0 && end < at {
            Self::Truncated {
                from: at,
                to: end,
                epoch,
            }
        } else {
            Self::Unknown { at }
        })
    }
}

/// The integer right after `words` in `text`.
fn number_after(text: &str, words: &str) -> Option<i64> {
    let rest = &text[text.find(words)? + words.len()..];
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

impl ClusterConsumer {
    /// Seeks the positions just assigned that know the leader epoch of the record
    /// before them (`(topic, partition, offset, epoch)`) to themselves with that
    /// epoch: librdkafka fetches nothing of them until the leader has confirmed its
    /// log holds that epoch up to the position, and what it fetched before the seek
    /// is dropped. A partition whose start is still pending is sought again until
    /// it has started; one that cannot be sought is read on unchecked, said.
    pub(super) fn seek_checked(&self, mut checked: Vec<(Arc<str>, i32, i64, i32)>) {
        let deadline = Instant::now() + SEEK_CHECKED;
        while !checked.is_empty() {
            let mut tpl = TopicPartitionList::new();
            for (topic, partition, offset, epoch) in &checked {
                if tpl
                    .add_partition_offset(topic, *partition, Offset::Offset(*offset))
                    .is_ok()
                {
                    set_leader_epoch(&mut tpl, topic, *partition, *epoch);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let sought = match self.consumer().seek_partitions(tpl, left) {
                Ok(sought) => sought,
                Err(e) => {
                    tracing::warn!(cluster = %self.cluster, error = %e, "seeking restored positions to check them by their leader epoch failed; reading on from them unchecked");
                    return;
                }
            };
            let mut again = Vec::new();
            for e in sought.elements() {
                let Err(error) = e.error() else { continue };
                let Some(c) = checked
                    .iter()
                    .find(|c| *c.0 == *e.topic() && c.1 == e.partition())
                else {
                    continue;
                };
                if error.rdkafka_error_code() == Some(RDKafkaErrorCode::State)
                    && Instant::now() < deadline
                {
                    // Not started yet: librdkafka starts it once the partitions
                    // leaving the assignment have stopped.
                    again.push(c.clone());
                } else {
                    tracing::warn!(split = %format!("{}/{}/{}", self.cluster, c.0, c.1), offset = c.2, error = %error, "seeking a restored position to check it by its leader epoch failed; reading on from it unchecked");
                }
            }
            if !again.is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
            checked = again;
        }
    }

    /// Reads on the partitions whose positions librdkafka checked and found not in
    /// the log: a truncated one from where the logs part, said, counted and reported
    /// in `polled` (as the native path does), one whose epoch the leader does not
    /// know from its position, unchecked. librdkafka stopped each on the error: it
    /// is assigned again there. Returns the error of one that could not be.
    pub(super) fn read_on(
        &mut self,
        hits: Vec<(String, i32, Checked)>,
        polled: &mut Polled,
    ) -> Option<SourceError> {
        let mut fatal = None;
        for (topic, partition, checked) in hits {
            let topic = self.topic(&topic);
            let id = SplitId {
                cluster: self.cluster.clone(),
                topic: topic.clone(),
                partition,
            };
            let mut tpl = TopicPartitionList::new();
            let at = match checked {
                Checked::Truncated { from, to, epoch } => {
                    crate::reader::fetch_path::warn_truncated(&id, from, to, epoch);
                    metrics::counter!(
                        crate::metrics::OFFSET_RESETS,
                        "cluster" => self.cluster.to_string(),
                        "topic" => topic.to_string()
                    )
                    .increment(1);
                    polled.truncated.push((id, from));
                    // The position keeps the epoch its offset ends, for the check
                    // after the next leader change.
                    let added = tpl.add_partition_offset(&topic, partition, Offset::Offset(to));
                    if added.is_ok() {
                        set_leader_epoch(&mut tpl, &topic, partition, epoch);
                    }
                    added.map(|()| to)
                }
                Checked::Unknown { at } => {
                    tracing::debug!(split = %id, offset = at, "the leader knows no epoch up to the position's; reading on from it unchecked");
                    tpl.add_partition_offset(&topic, partition, Offset::Offset(at))
                        .map(|()| at)
                }
            };
            let reassigned = at.and_then(|at| {
                self.consumer()
                    .incremental_unassign(&tpl)
                    .and_then(|()| self.consumer().incremental_assign(&tpl))
                    .map(|()| at)
            });
            if let Err(e) = reassigned {
                let message = format!("reading on {topic}/{partition} where its log is: {e}");
                fatal.get_or_insert(SourceError::kafka(&self.cluster, message, &e));
            }
        }
        fatal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn librdkafkas_words_say_where_the_logs_part_or_that_the_epoch_is_unknown() {
        // As librdkafka 2.12 words the automatic-reset failure (name: details).
        let truncated = "Local: No offset to automatically reset to: Partition log \
            truncation detected at offset 300 (leader epoch 5): broker end offset is 250 \
            (offset leader epoch 4). Reset to INVALID.: Local: Partition log truncation \
            detected (broker 3)";
        assert_eq!(
            Checked::from_text(truncated),
            Some(Checked::Truncated {
                from: 300,
                to: 250,
                epoch: 4
            })
        );
        let unknown = "Local: No offset to automatically reset to: No epoch found less or \
            equal to offset 300 (leader epoch 5): broker end offset is -1 (offset leader \
            epoch -1). Reset using configured policy.: Local: Partition log truncation \
            detected (broker 3)";
        assert_eq!(
            Checked::from_text(unknown),
            Some(Checked::Unknown { at: 300 })
        );
        // A position outside the log is not one of them.
        let out_of_range = "Local: No offset to automatically reset to: fetch failed due to \
            requested offset not available on the broker: Broker: Offset out of range \
            (broker 1)";
        assert_eq!(Checked::from_text(out_of_range), None);
        assert_eq!(number_after("at offset -12)", "at offset "), Some(-12));
        assert_eq!(number_after("at offset x", "at offset "), None);
    }
}
