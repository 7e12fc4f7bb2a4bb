//! Checkpoints: a snapshot of every split's position, consistent with the records
//! handed out, that a new source restores from.
//!
//! The encoding is self-describing JSON with a format name and a version. It holds
//! logical cluster ids, Kafka `cluster.id`s, topics, partitions and offsets, and never a
//! client property (so no bootstrap list and no credential).

mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use store::{CheckpointStore, FileCheckpointStore};

use crate::base::split::{KafkaSplit, LastRecord, SplitId};

/// The format name written into every encoded checkpoint.
pub const CHECKPOINT_FORMAT: &str = "multicluster-kafka/checkpoint";

/// The version [`Checkpoint::encode`] writes. Every earlier version stays readable.
pub const CHECKPOINT_VERSION: u32 = 5;

/// Why a checkpoint could not be read, written or applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The bytes are not a checkpoint of a known version.
    #[error("{origin}: not a readable checkpoint: {reason}")]
    Decode {
        /// Where the bytes came from (a file path, or `<bytes>`).
        origin: String,
        /// What was wrong.
        reason: String,
    },
    /// File-system trouble.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One split's position in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SplitCheckpoint {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset of the next record to hand out.
    pub next_offset: i64,
    /// Set when the split's topic or cluster left the metadata: the position is kept
    /// until this wall-clock time (ms since the epoch), so the split resumes here if it
    /// returns in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained_until_ms: Option<i64>,
    /// The last record handed out for this split (version 3): what a mirror of the
    /// cluster continues after, and on a mirror still looking for it, the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastRecord>,
}

/// One logical cluster's part of a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterCheckpoint {
    /// The Kafka `cluster.id` the positions belong to, when known. Positions are never
    /// applied to a different physical cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_cluster_id: Option<String>,
    /// True once the cluster's first partition discovery finished: partitions found
    /// later are new and start at the new-partition position (earliest).
    #[serde(default)]
    pub initial_discovery_done: bool,
    /// Positions, sorted by topic and partition.
    pub splits: Vec<SplitCheckpoint>,
}

/// A consistent snapshot of a source.
///
/// ```
/// use multicluster_kafka::checkpoint::Checkpoint;
/// use multicluster_kafka::split::{KafkaSplit, SplitId};
/// let cp = Checkpoint::from_splits([KafkaSplit {
///     id: SplitId::new("east", "orders", 0), next_offset: 42, stop_offset: None, last: None }]);
/// let bytes = cp.encode();
/// assert_eq!(Checkpoint::decode(&bytes).unwrap(), cp);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// Logical cluster id → positions.
    pub clusters: BTreeMap<String, ClusterCheckpoint>,
    /// Small values an application stores beside the positions (for example the length
    /// of an output file). Never put secrets here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_data: BTreeMap<String, String>,
    /// The shard a sharded source read ([`ScaleOut::Shard`](crate::ScaleOut::Shard)):
    /// its checkpoints hold only that shard's splits. A run with another shard layout
    /// takes each split it owns at the later of this position and the group's
    /// committed offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::base::shard::Shard>,
    /// The source's watermark (milliseconds since the epoch) when the checkpoint was
    /// taken, with [`SourceBuilder::watermarks`](crate::SourceBuilder::watermarks): a
    /// source restored from it never hands out a watermark behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark_ms: Option<i64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<T> {
    format: String,
    version: u32,
    checkpoint: T,
}

impl Checkpoint {
    /// A checkpoint holding these splits (a split given twice keeps the last).
    pub fn from_splits(splits: impl IntoIterator<Item = KafkaSplit>) -> Self {
        let mut clusters: BTreeMap<String, ClusterCheckpoint> = BTreeMap::new();
        for s in splits {
            let entry = SplitCheckpoint {
                topic: s.id.topic.to_string(),
                partition: s.id.partition,
                next_offset: s.next_offset,
                retained_until_ms: None,
                last: s.last,
            };
            match clusters.get_mut(&*s.id.cluster) {
                Some(c) => c.splits.push(entry),
                None => {
                    let c = clusters.entry(s.id.cluster.to_string()).or_default();
                    c.splits.push(entry);
                }
            }
        }
        for c in clusters.values_mut() {
            // Stable: among duplicates the last given stays last, and is the one kept.
            c.splits
                .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            c.splits.dedup_by(|later, kept| {
                let same = later.topic == kept.topic && later.partition == kept.partition;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        Checkpoint {
            clusters,
            user_data: BTreeMap::new(),
            shard: None,
            watermark_ms: None,
        }
    }

    /// Records (or replaces) one split's position.
    pub fn put(&mut self, split: &KafkaSplit) {
        let cluster = self
            .clusters
            .entry(split.id.cluster.to_string())
            .or_default();
        let entry = SplitCheckpoint {
            topic: split.id.topic.to_string(),
            partition: split.id.partition,
            next_offset: split.next_offset,
            retained_until_ms: None,
            last: split.last.clone(),
        };
        match cluster
            .splits
            .iter_mut()
            .find(|s| s.topic == entry.topic && s.partition == entry.partition)
        {
            Some(s) => *s = entry,
            None => cluster.splits.push(entry),
        }
    }

    /// Merges the checkpoints of several readers into one. A split present in several
    /// keeps the furthest position.
    /// The watermark of the merged checkpoint is the lowest of the parts' (each
    /// reader's watermark holds only for its own splits).
    pub fn merge(parts: impl IntoIterator<Item = Checkpoint>) -> Checkpoint {
        let mut out = Checkpoint::default();
        for part in parts {
            out.watermark_ms = match (out.watermark_ms, part.watermark_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            for (cluster, c) in part.clusters {
                let o = out.clusters.entry(cluster).or_default();
                if o.kafka_cluster_id.is_none() {
                    o.kafka_cluster_id = c.kafka_cluster_id;
                }
                o.initial_discovery_done |= c.initial_discovery_done;
                for s in c.splits {
                    match o
                        .splits
                        .iter_mut()
                        .find(|x| x.topic == s.topic && x.partition == s.partition)
                    {
                        Some(x) if x.next_offset >= s.next_offset => {}
                        Some(x) => *x = s,
                        None => o.splits.push(s),
                    }
                }
            }
            out.user_data.extend(part.user_data);
            out.shard = out.shard.or(part.shard);
        }
        out.normalize();
        out
    }

    /// Sorts splits so equal checkpoints encode to equal bytes.
    pub fn normalize(&mut self) {
        for c in self.clusters.values_mut() {
            c.splits.sort();
        }
    }

    /// Every split in the checkpoint.
    pub fn splits(&self) -> impl Iterator<Item = KafkaSplit> + '_ {
        self.clusters.iter().flat_map(|(cluster, c)| {
            c.splits.iter().map(move |s| KafkaSplit {
                id: SplitId::new(cluster, &s.topic, s.partition),
                next_offset: s.next_offset,
                // Where to stop belongs to the run reading it, not to the checkpoint.
                stop_offset: None,
                last: s.last.clone(),
            })
        })
    }

    /// Number of splits.
    pub fn split_count(&self) -> usize {
        self.clusters.values().map(|c| c.splits.len()).sum()
    }

    /// Encodes the checkpoint (current version).
    pub fn encode(&self) -> Vec<u8> {
        let envelope = Envelope {
            format: CHECKPOINT_FORMAT.to_string(),
            version: CHECKPOINT_VERSION,
            checkpoint: self,
        };
        serde_json::to_vec(&envelope).expect("a checkpoint always serializes")
    }

    /// Decodes a checkpoint of any supported version.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        Self::decode_from(bytes, "<bytes>")
    }

    pub(crate) fn decode_from(bytes: &[u8], origin: &str) -> Result<Checkpoint, CheckpointError> {
        let err = |reason: String| CheckpointError::Decode {
            origin: origin.to_string(),
            reason: one_line(&reason),
        };
        let head: Envelope<serde_json::Value> =
            serde_json::from_slice(bytes).map_err(|e| err(format!("invalid JSON: {e}")))?;
        if head.format != CHECKPOINT_FORMAT {
            let mut format: String = head.format.chars().take(MAX_QUOTED).collect();
            if format.len() < head.format.len() {
                format.push('…');
            }
            return Err(err(format!(
                "format is `{format}`, expected `{CHECKPOINT_FORMAT}`"
            )));
        }
        match head.version {
            // Version 1 also held each split's stop, which belonged to the run that
            // wrote it (a bounded run after a follow run would never end): dropped.
            1 => {
                let mut body = head.checkpoint;
                if let Some(clusters) = body.get_mut("clusters").and_then(|c| c.as_object_mut()) {
                    for cluster in clusters.values_mut() {
                        let splits = cluster.get_mut("splits").and_then(|s| s.as_array_mut());
                        for split in splits.into_iter().flatten() {
                            if let Some(split) = split.as_object_mut() {
                                split.remove("stopOffset");
                            }
                        }
                    }
                }
                let mut cp: Checkpoint =
                    serde_json::from_value(body).map_err(|e| err(format!("version 1: {e}")))?;
                cp.normalize();
                Ok(cp)
            }
            // Version 5 added the last record's leader epoch (`leaderEpoch`), version 4
            // the watermark (`watermarkMs`), version 3 each split's last record
            // (`last`); version 2 is the same without them.
            v @ (2..=5) => {
                let mut cp: Checkpoint = serde_json::from_value(head.checkpoint)
                    .map_err(|e| err(format!("version {v}: {e}")))?;
                cp.normalize();
                Ok(cp)
            }
            v => Err(err(format!(
                "version {v} is newer than this build reads (up to {CHECKPOINT_VERSION})"
            ))),
        }
    }
}

/// The longest text of the checkpoint quoted back in an error.
const MAX_QUOTED: usize = 80;

/// The message with control characters escaped: strings of the checkpoint (a format
/// name, an unknown field) quoted in it can hold line breaks, and the message goes
/// into one log line.
fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_grouped_by_cluster_sorted_and_a_split_given_twice_keeps_the_last() {
        let split = |cluster: &str, topic: &str, partition, next_offset| KafkaSplit {
            id: SplitId::new(cluster, topic, partition),
            next_offset,
            stop_offset: None,
            last: None,
        };
        let cp = Checkpoint::from_splits([
            split("west", "t", 1, 10),
            split("east", "u", 0, 1),
            split("west", "s", 2, 20),
            split("west", "t", 1, 11),
            split("east", "t", 3, 2),
            split("west", "t", 0, 5),
            split("west", "t", 1, 12),
        ]);
        let got: Vec<(String, String, i32, i64)> = cp
            .splits()
            .map(|s| {
                let (c, t) = (s.id.cluster.to_string(), s.id.topic.to_string());
                (c, t, s.id.partition, s.next_offset)
            })
            .collect();
        let want = [
            ("east", "t", 3, 2),
            ("east", "u", 0, 1),
            ("west", "s", 2, 20),
            ("west", "t", 0, 5),
            ("west", "t", 1, 12),
        ];
        let want: Vec<(String, String, i32, i64)> = want
            .iter()
            .map(|(c, t, p, o)| (c.to_string(), t.to_string(), *p, *o))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_version_1_checkpoint_written_by_hand_stays_readable() {
        let v1 = br#"{"format":"multicluster-kafka/checkpoint","version":1,"checkpoint":{
            "clusters":{"east":{"kafkaClusterId":"abc","initialDiscoveryDone":true,
            "splits":[{"topic":"t","partition":1,"nextOffset":5},
                      {"topic":"t","partition":0,"nextOffset":7,"stopOffset":9}]}}}}"#;
        let cp = Checkpoint::decode(v1).unwrap();
        let east = &cp.clusters["east"];
        assert_eq!(east.kafka_cluster_id.as_deref(), Some("abc"));
        assert_eq!(east.splits[0].partition, 0, "splits are sorted");
        assert_eq!(east.splits[0].next_offset, 7);
        assert_eq!(cp.split_count(), 2);
        // Written again, it is the current version, without the old run's stop.
        let again = String::from_utf8(cp.encode()).unwrap();
        assert!(again.contains(r#""version":5"#), "{again}");
        assert!(!again.contains("stopOffset"), "{again}");
        assert_eq!(Checkpoint::decode(again.as_bytes()).unwrap(), cp);
    }

    /// Version 4 holds the watermark; a version 3 checkpoint has none, and merging
    /// readers' checkpoints keeps the lowest.
    #[test]
    fn the_watermark_is_kept_and_merged_to_the_lowest() {
        let v3 = br#"{"format":"multicluster-kafka/checkpoint","version":3,"checkpoint":{"clusters":{}}}"#;
        assert_eq!(Checkpoint::decode(v3).unwrap().watermark_ms, None);
        let at = |w| Checkpoint {
            watermark_ms: w,
            ..Checkpoint::default()
        };
        let bytes = at(Some(1_700_000_000_000)).encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#""watermarkMs":1700000000000"#), "{text}");
        assert_eq!(
            Checkpoint::decode(&bytes).unwrap(),
            at(Some(1_700_000_000_000))
        );
        let merged = Checkpoint::merge([at(Some(9)), at(None), at(Some(4))]);
        assert_eq!(merged.watermark_ms, Some(4));
        assert_eq!(Checkpoint::merge([at(None)]).watermark_ms, None);
    }

    #[test]
    fn unknown_versions_and_formats_are_refused() {
        let future = br#"{"format":"multicluster-kafka/checkpoint","version":99,"checkpoint":{}}"#;
        let e = Checkpoint::decode(future).unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
        let other = br#"{"format":"something-else","version":1,"checkpoint":{}}"#;
        assert!(Checkpoint::decode(other).is_err());
        assert!(Checkpoint::decode(b"\x00garbage").is_err());
    }

    #[test]
    fn decode_errors_are_one_line_and_quote_little() {
        let format = br#"{"format":"a\nb","version":1,"checkpoint":{}}"#;
        let e = Checkpoint::decode(format).unwrap_err().to_string();
        assert!(e.contains("format is `a\\nb`"), "{e}");
        let field = br#"{"format":"multicluster-kafka/checkpoint","version":1,"checkpoint":{
            "clusters":{"c":{"splits":[],"x\ry":1}}}}"#;
        let e = Checkpoint::decode(field).unwrap_err().to_string();
        assert!(e.contains("unknown field `x\\ry`"), "{e}");
        let long = format!(
            r#"{{"format":"{}","version":1,"checkpoint":{{}}}}"#,
            "f".repeat(500)
        );
        let e = Checkpoint::decode(long.as_bytes()).unwrap_err().to_string();
        assert!(e.len() < 300, "{e}");
        for e in [format.as_slice(), field, long.as_bytes()].map(Checkpoint::decode) {
            let shown = e.unwrap_err().to_string();
            assert!(!shown.contains(['\n', '\r']), "{shown}");
        }
    }

    #[test]
    fn put_replaces_a_split_position() {
        let id = SplitId::new("c", "t", 0);
        let mut cp = Checkpoint::default();
        cp.put(&KafkaSplit {
            id: id.clone(),
            next_offset: 1,
            stop_offset: None,
            last: None,
        });
        cp.put(&KafkaSplit {
            id,
            next_offset: 2,
            stop_offset: None,
            last: None,
        });
        assert_eq!(cp.split_count(), 1);
        assert_eq!(cp.splits().next().unwrap().next_offset, 2);
    }
}
