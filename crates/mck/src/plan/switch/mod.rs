//! A switch onto a mirror: NEW takes a stream's source cluster out while a mirror of
//! it (`mirrorOf`) stays in the stream or comes in. For each partition of the
//! mirror's topics `mck plan` shows the source split it continues, where it would
//! start on the mirror (the translated lower bound, from the library's
//! [`carry`](multicluster_kafka::unstable::translate::carry)) and how that was
//! found, and flags what would hold it up.
//!
//! Positions come from a checkpoint (`--checkpoint-dir`, `--checkpoint`); without one
//! only the pairing is shown. The mirror is asked for its partitions, their offsets
//! and the offset at each last record's timestamp
//! ([`multicluster_kafka::inspect::inspect_at_times`]), and for `translate: mm2` for
//! MirrorMaker 2's offset syncs and the group's checkpoints kept there
//! ([`multicluster_kafka::inspect::mirror_maker_syncs`]), as a running source does
//! when its source leaves.

use multicluster_kafka::checkpoint::SplitCheckpoint;
use multicluster_kafka::metadata::MirrorOf;

use super::positions::Positions;
use super::*;

mod look_up;

/// The mirror does not hold the record to continue after yet: the lower bound is at
/// or beyond its end, or no record is as late as the record's timestamp.
pub const LAGS: &str = "lags";
/// The mirror lacks the topic.
pub const TOPIC_MISSING: &str = "topic missing";
/// Nothing is known of the source split: the checkpoint holds no position for it.
pub const NO_POSITION: &str = "no position";
/// The mirror's topic has fewer partitions than the source's: this source split has
/// no partition to continue on.
pub const PARTITION_MISSING: &str = "partition missing";

/// One switch onto a mirror, in one stream.
#[derive(Debug)]
pub struct Switch {
    /// The stream id.
    pub stream: String,
    /// The cluster taken out (the mirror's `mirrorOf.cluster`).
    pub source: String,
    /// The mirror's cluster id.
    pub mirror: String,
    /// The mirror's `mirrorOf`.
    pub mirror_of: MirrorOf,
    /// The mirror's topics in NEW, each with the topic it copies on the source.
    pub topics: Vec<(String, Option<String>)>,
    /// The checkpoint file positions come from, if one was given.
    pub checkpoint: Option<PathBuf>,
    /// What the mirror told.
    pub status: SwitchStatus,
    /// Per partition, in topic and partition order.
    pub partitions: Vec<SwitchPartition>,
    /// `mm2`: why MirrorMaker 2's offset syncs did not all help (they could not be
    /// read, or records did not decode); positions then translate by timestamps.
    pub sync_warning: Option<String>,
    /// Properties to reach the mirror with.
    pub(super) properties: ClientProperties,
}

/// What is known of the mirror cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchStatus {
    /// Not asked (`--offline`).
    Offline,
    /// The mirror did not answer.
    Unreachable(String),
    /// The mirror answered.
    Known,
}

/// One partition of the mirror, or one source split with nowhere to go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPartition {
    /// The topic on the mirror.
    pub topic: String,
    /// The partition; `None` for a missing topic of which no source split is known.
    pub partition: Option<i32>,
    /// The topic on the source it copies.
    pub source_topic: Option<String>,
    /// The offset, on the source, of the last record handed out there: the record the
    /// mirror continues after.
    pub source_offset: Option<i64>,
    /// The source split's position in the checkpoint (the next record to hand out).
    pub source_next_offset: Option<i64>,
    /// Where the search for that record starts on the mirror: at or before its copy.
    pub lower_bound: Option<i64>,
    /// How the lower bound was found: `identical`, `timestamp`, `sync`, `checkpoint`,
    /// or `restored` when the checkpoint already holds the mirror's own position.
    pub found_by: Option<String>,
    /// The mirror partition's end offset, when asked.
    pub mirror_end: Option<i64>,
    /// [`LAGS`], [`TOPIC_MISSING`], [`NO_POSITION`], [`PARTITION_MISSING`].
    pub flags: Vec<&'static str>,
    /// Why there is no lower bound, or what it does not verify.
    pub note: Option<String>,
}

/// The switches from `old` to `new`: in a stream of both files, a cluster entry of NEW
/// with `mirrorOf` whose source is in OLD's stream and not in NEW's.
pub fn switches(
    old: &BTreeMap<String, KafkaStream>,
    new: &BTreeMap<String, KafkaStream>,
    positions: Option<&Positions>,
) -> Vec<Switch> {
    let mut out = Vec::new();
    for (id, now) in new {
        let Some(was) = old.get(id) else { continue };
        for (mirror, entry) in &now.clusters {
            let Some(of) = &entry.mirror_of else { continue };
            if !was.clusters.contains_key(&of.cluster) || now.clusters.contains_key(&of.cluster) {
                continue;
            }
            let mut switch = Switch {
                stream: id.clone(),
                source: of.cluster.clone(),
                mirror: mirror.clone(),
                mirror_of: of.clone(),
                topics: entry
                    .topics
                    .iter()
                    .map(|t| (t.clone(), of.source_topic(t)))
                    .collect(),
                checkpoint: positions.map(|p| p.file.clone()),
                status: SwitchStatus::Offline,
                partitions: Vec::new(),
                sync_warning: None,
                properties: entry.properties.clone(),
            };
            switch.partitions = offline_partitions(&switch, positions);
            out.push(switch);
        }
    }
    out
}

/// The source's splits of `topic` in the checkpoint, by partition.
fn splits_of<'a>(
    positions: Option<&'a Positions>,
    cluster: &str,
    topic: Option<&str>,
) -> BTreeMap<i32, &'a SplitCheckpoint> {
    let (Some(p), Some(topic)) = (positions, topic) else {
        return BTreeMap::new();
    };
    p.checkpoint
        .clusters
        .get(cluster)
        .into_iter()
        .flat_map(|c| &c.splits)
        .filter(|s| s.topic == topic)
        .map(|s| (s.partition, s))
        .collect()
}

/// A partition entry with the source split's position (none when `split` is).
fn entry(
    topic: &str,
    partition: Option<i32>,
    source_topic: &Option<String>,
    split: Option<&SplitCheckpoint>,
) -> SwitchPartition {
    SwitchPartition {
        topic: topic.to_string(),
        partition,
        source_topic: source_topic.clone(),
        source_offset: split
            .and_then(|s| s.last.as_ref())
            .map(|l| l.fingerprint.offset),
        source_next_offset: split.map(|s| s.next_offset),
        ..SwitchPartition::default()
    }
}

/// What is shown without asking the mirror: the source splits the checkpoint holds.
fn offline_partitions(s: &Switch, positions: Option<&Positions>) -> Vec<SwitchPartition> {
    let mut out = Vec::new();
    for (topic, source_topic) in &s.topics {
        for (p, split) in splits_of(positions, &s.source, source_topic.as_deref()) {
            out.push(entry(topic, Some(p), source_topic, Some(split)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use multicluster_kafka::metadata::{ClusterMetadata, Translate};

    pub(super) fn stream(entries: &[(&str, Option<Translate>)]) -> BTreeMap<String, KafkaStream> {
        let mut s = KafkaStream::new("s");
        for (id, mirror) in entries {
            let mut b = ClusterMetadata::builder(format!("{id}:9092")).topic("t");
            if let Some(translate) = mirror {
                b = b.mirror_of(MirrorOf::new("east", *translate));
            }
            s = s.with_cluster(*id, b.build().unwrap());
        }
        BTreeMap::from([("s".to_string(), s)])
    }

    #[test]
    fn a_switch_is_a_source_leaving_a_stream_its_mirror_is_in() {
        let both = stream(&[("east", None), ("west", Some(Translate::Timestamp))]);
        let mirror = stream(&[("west", Some(Translate::Timestamp))]);
        let plain = stream(&[("west", None)]);
        let s = switches(&both, &mirror, None);
        assert_eq!(s.len(), 1);
        assert_eq!(
            (
                s[0].source.as_str(),
                s[0].mirror.as_str(),
                s[0].stream.as_str()
            ),
            ("east", "west", "s")
        );
        assert_eq!(s[0].topics, [("t".to_string(), Some("t".to_string()))]);
        // The mirror comes in with the edit: a switch too.
        assert_eq!(switches(&stream(&[("east", None)]), &mirror, None).len(), 1);
        // Both stay (a standby), the mirror was already read, no mirror, a new stream.
        assert!(switches(&both, &both, None).is_empty());
        assert!(switches(&mirror, &mirror, None).is_empty());
        assert!(switches(&both, &plain, None).is_empty());
        assert!(switches(&BTreeMap::new(), &mirror, None).is_empty());
    }
}
