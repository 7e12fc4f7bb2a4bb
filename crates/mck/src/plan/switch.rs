//! A switch onto a mirror: NEW takes a stream's source cluster out while a mirror of
//! it (`mirrorOf`) stays in the stream or comes in. For each partition of the
//! mirror's topics `mck plan` shows the source split it continues, where it would
//! start on the mirror (the translated lower bound, from the library's
//! [`carry`]) and how that was found, and flags what would hold it up.
//!
//! Positions come from a checkpoint (`--checkpoint-dir`, `--checkpoint`); without one
//! only the pairing is shown. The mirror is asked for its partitions, their offsets
//! and the offset at each last record's timestamp
//! ([`multicluster_kafka::inspect::inspect_at_times`]), and for `translate: mm2` for
//! MirrorMaker 2's offset syncs and the group's checkpoints kept there
//! ([`multicluster_kafka::inspect::mirror_maker_syncs`]), as a running source does
//! when its source leaves.

use multicluster_kafka::checkpoint::{Checkpoint, FileCheckpointStore, SplitCheckpoint};
use multicluster_kafka::inspect::{
    PartitionReport, SyncWanted, inspect_at_times, mirror_maker_syncs,
};
use multicluster_kafka::metadata::{MirrorOf, Translate};
use multicluster_kafka::unstable::translate::{
    Carried, MirrorFacts, OffsetSync, SourcePosition, carry,
};

use super::*;

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

/// Where positions come from: a checkpoint, and the file it was read from.
#[derive(Debug)]
pub struct Positions {
    /// The file the checkpoint was read from.
    pub file: PathBuf,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
}

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

/// The checkpoint in `file`, or the newest one of `dir` that decodes (a newer one
/// that does not is named in a warning).
pub fn read_positions(
    dir: Option<&Path>,
    file: Option<&Path>,
) -> Result<Option<Positions>, String> {
    if let Some(file) = file {
        let bytes =
            std::fs::read(file).map_err(|e| format!("--checkpoint {}: {e}", file.display()))?;
        let checkpoint = Checkpoint::decode(&bytes).map_err(|e| {
            let e = e.to_string();
            let reason = e.strip_prefix("<bytes>: ").unwrap_or(&e);
            format!("--checkpoint {}: {reason}", file.display())
        })?;
        return Ok(Some(Positions {
            file: file.to_path_buf(),
            checkpoint,
        }));
    }
    let Some(dir) = dir else { return Ok(None) };
    if !dir.is_dir() {
        return Err(format!(
            "--checkpoint-dir {}: not a directory",
            dir.display()
        ));
    }
    let store = FileCheckpointStore::open(dir, usize::MAX)
        .map_err(|e| format!("--checkpoint-dir {}: {e}", dir.display()))?;
    let files = store
        .list()
        .map_err(|e| format!("--checkpoint-dir {}: {e}", dir.display()))?;
    let mut newest_error: Option<String> = None;
    for (_, path) in files.iter().rev() {
        let decoded = std::fs::read(path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|bytes| {
                Checkpoint::decode(&bytes).map_err(|e| {
                    let e = e.to_string();
                    format!(
                        "{}: {}",
                        path.display(),
                        e.strip_prefix("<bytes>: ").unwrap_or(&e)
                    )
                })
            });
        match decoded {
            Ok(checkpoint) => {
                if let Some(e) = &newest_error {
                    crate::stdio::say!(
                        "mck: warning: {e}; using the checkpoint before it, {}",
                        path.display()
                    );
                }
                return Ok(Some(Positions {
                    file: path.clone(),
                    checkpoint,
                }));
            }
            Err(e) => {
                newest_error.get_or_insert(e);
            }
        }
    }
    Err(match newest_error {
        Some(e) => e,
        None => format!("--checkpoint-dir {}: no checkpoint there", dir.display()),
    })
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

/// What is known of where one partition of the mirror continues.
#[derive(Clone, Copy, Debug, Default)]
struct Known<'a> {
    /// The source split's position in the checkpoint.
    source: Option<&'a SplitCheckpoint>,
    /// The mirror's own position in the checkpoint (taken after the switch).
    own: Option<&'a SplitCheckpoint>,
    /// MirrorMaker 2's offset sync or checkpoint to translate with, and whether it is
    /// the checkpoint.
    sync: Option<(OffsetSync, bool)>,
    /// Whether a checkpoint was given at all.
    with_checkpoint: bool,
}

/// The partition `p` of the mirror's `topic`: translated from the source split's
/// position, or restored from the mirror's own.
fn translated(
    s: &Switch,
    topic: &str,
    source_topic: &Option<String>,
    p: &PartitionReport,
    known: Known<'_>,
) -> SwitchPartition {
    let Known {
        source,
        own,
        sync,
        with_checkpoint,
    } = known;
    let mut e = entry(topic, Some(p.partition), source_topic, source);
    e.mirror_end = Some(p.latest);
    if let Some(own) = own {
        // The checkpoint was taken after the switch: the mirror's split is restored.
        match own.last.as_ref().and_then(|l| l.search.as_ref()) {
            Some(search) => {
                e.lower_bound = Some(search.lower_bound);
                e.found_by = Some(search.found_by.clone());
                e.note = Some(format!(
                    "already on the mirror, still reading forward to the last record from {}",
                    search.cluster
                ));
                if search.lower_bound >= p.latest {
                    e.flags.push(LAGS);
                }
            }
            None => {
                e.lower_bound = Some(own.next_offset);
                e.found_by = Some("restored".into());
                e.note = Some("already read on the mirror: the checkpoint's position".into());
            }
        }
        return e;
    }
    let Some(split) = source else {
        if with_checkpoint {
            e.flags.push(NO_POSITION);
        }
        return e;
    };
    let facts = MirrorFacts {
        earliest: p.earliest,
        latest: p.latest,
        at_timestamp: p.at_timestamp,
        sync,
    };
    let from = SourcePosition {
        next_offset: split.next_offset,
        last: split.last.as_ref().map(|l| l.fingerprint),
    };
    let carried_topic = source_topic.as_deref().unwrap_or(topic);
    match carry(&s.mirror_of, carried_topic, from, &facts) {
        Carried::At {
            next_offset,
            last: Some(last),
        } => match last.search {
            Some(search) => {
                e.lower_bound = Some(search.lower_bound);
                e.found_by = Some(search.found_by);
                if search.lower_bound >= p.latest {
                    e.flags.push(LAGS);
                }
            }
            None => {
                e.lower_bound = Some(next_offset);
                e.found_by = Some(s.mirror_of.translate.as_str().into());
            }
        },
        Carried::At {
            next_offset,
            last: None,
        } => {
            e.lower_bound = Some(next_offset);
            e.found_by = Some(s.mirror_of.translate.as_str().into());
            e.note = Some("nothing handed out from the source yet: the same offset".into());
            if next_offset > p.latest {
                e.flags.push(LAGS);
            }
        }
        Carried::Unverified { next_offset, why } => {
            e.lower_bound = Some(next_offset);
            e.found_by = Some(
                match facts.sync {
                    Some((_, true)) => "checkpoint",
                    Some((_, false)) => "sync",
                    None => s.mirror_of.translate.as_str(),
                }
                .into(),
            );
            e.note = Some(format!("unverified: {why}"));
            if next_offset > p.latest {
                e.flags.push(LAGS);
            }
        }
        Carried::NotFound { why } => {
            e.note = Some(format!(
                "{why}: the partition starts at its starting offsets"
            ));
        }
    }
    e
}

impl Switch {
    /// The timestamps to look up on the mirror: each last record's, by mirror topic
    /// and partition (none for `identical`, which needs none).
    fn timestamps(&self, positions: Option<&Positions>) -> BTreeMap<(String, i32), i64> {
        let mut out = BTreeMap::new();
        if self.mirror_of.translate == Translate::Identical {
            return out;
        }
        for (topic, source_topic) in &self.topics {
            for (p, split) in splits_of(positions, &self.source, source_topic.as_deref()) {
                if let Some(ts) = split.last.as_ref().and_then(|l| l.fingerprint.timestamp) {
                    out.insert((topic.clone(), p), ts);
                }
            }
        }
        out
    }

    /// `mm2` with positions: the offset syncs (and with `group`, the group's
    /// checkpoints) MirrorMaker 2 keeps on the mirror, by mirror topic and partition.
    fn syncs(
        &mut self,
        positions: Option<&Positions>,
        group: Option<&str>,
        timeout: Duration,
    ) -> BTreeMap<(String, i32), (OffsetSync, bool)> {
        if self.mirror_of.translate != Translate::Mm2 {
            return BTreeMap::new();
        }
        let mut wanted = Vec::new();
        for (topic, source_topic) in &self.topics {
            let Some(source_topic) = source_topic else {
                continue;
            };
            for (p, split) in splits_of(positions, &self.source, Some(source_topic)) {
                wanted.push(SyncWanted {
                    topic: topic.clone(),
                    source_topic: source_topic.clone(),
                    partition: p,
                    upstream: split
                        .last
                        .as_ref()
                        .map_or(split.next_offset, |l| l.fingerprint.offset),
                });
            }
        }
        if wanted.is_empty() {
            return BTreeMap::new();
        }
        let mut options = InspectOptions::new(timeout);
        if let Some(g) = group.or(self.properties.get("group.id")) {
            options = options.group(g);
        }
        let alias = self.mirror_of.alias().to_string();
        match mirror_maker_syncs(&self.mirror, &self.properties, &alias, wanted, &options) {
            Ok(found) => {
                if found.skipped > 0 {
                    self.sync_warning = Some(format!(
                        "{} record(s) of MirrorMaker 2's topics do not decode, skipped: {}",
                        found.skipped,
                        found.first_skipped.join("; ")
                    ));
                }
                found.found
            }
            Err(e) => {
                self.sync_warning = Some(format!(
                    "MirrorMaker 2's offset syncs cannot be read ({}): translated by timestamps",
                    failure_reason(&e)
                ));
                BTreeMap::new()
            }
        }
    }

    /// Asks the mirror and translates every partition's position onto it; `group` is
    /// the source's, whose MirrorMaker checkpoints count (default: the mirror's
    /// `group.id` property).
    pub fn look_up(
        &mut self,
        positions: Option<&Positions>,
        group: Option<&str>,
        timeout: Duration,
    ) {
        let topics: BTreeSet<String> = self.topics.iter().map(|(t, _)| t.clone()).collect();
        let found = inspect_at_times(
            &self.mirror,
            &self.properties,
            &topics,
            &self.timestamps(positions),
            &InspectOptions::new(timeout),
        );
        let report = match found.result {
            Ok(r) => r,
            Err(e) => {
                self.status = SwitchStatus::Unreachable(failure_reason(&e));
                return;
            }
        };
        self.status = SwitchStatus::Known;
        let syncs = self.syncs(positions, group, timeout);
        let mut out = Vec::new();
        for (topic, source_topic) in &self.topics {
            let sources = splits_of(positions, &self.source, source_topic.as_deref());
            let own = splits_of(positions, &self.mirror, Some(topic));
            let Some(parts) = report.topics.get(topic) else {
                if sources.is_empty() {
                    let mut e = entry(topic, None, source_topic, None);
                    e.flags.push(TOPIC_MISSING);
                    out.push(e);
                }
                for (p, split) in &sources {
                    let mut e = entry(topic, Some(*p), source_topic, Some(split));
                    e.flags.push(TOPIC_MISSING);
                    out.push(e);
                }
                continue;
            };
            for p in parts {
                let known = Known {
                    source: sources.get(&p.partition).copied(),
                    own: own.get(&p.partition).copied(),
                    sync: syncs.get(&(topic.clone(), p.partition)).copied(),
                    with_checkpoint: positions.is_some(),
                };
                out.push(translated(self, topic, source_topic, p, known));
            }
            for (p, split) in &sources {
                if !parts.iter().any(|m| m.partition == *p) {
                    let mut e = entry(topic, Some(*p), source_topic, Some(split));
                    e.flags.push(PARTITION_MISSING);
                    out.push(e);
                }
            }
        }
        self.partitions = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use multicluster_kafka::metadata::ClusterMetadata;
    use multicluster_kafka::split::{Fingerprint, LastRecord};

    fn stream(entries: &[(&str, Option<Translate>)]) -> BTreeMap<String, KafkaStream> {
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

    fn split(partition: i32, next_offset: i64, last: Option<(i64, i64)>) -> SplitCheckpoint {
        SplitCheckpoint {
            topic: "t".into(),
            partition,
            next_offset,
            retained_until_ms: None,
            last: last.map(|(offset, ts)| {
                LastRecord::at(Fingerprint {
                    offset,
                    timestamp: Some(ts),
                    hash: 1,
                    leader_epoch: None,
                })
            }),
        }
    }

    fn report(partition: i32, earliest: i64, latest: i64, at: Option<i64>) -> PartitionReport {
        PartitionReport {
            partition,
            earliest,
            latest,
            committed: None,
            at_timestamp: at,
        }
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

    #[test]
    fn positions_translate_as_the_source_would_and_flag_a_mirror_behind() {
        let mirror = stream(&[("west", Some(Translate::Identical))]);
        let s = &switches(&stream(&[("east", None)]), &mirror, None)[0];
        let source = Some("t".to_string());
        let at = |p: &PartitionReport, sp: Option<&SplitCheckpoint>, sync| {
            let known = Known {
                source: sp,
                sync,
                with_checkpoint: true,
                ..Known::default()
            };
            translated(s, "t", &source, p, known)
        };
        let held = at(
            &report(0, 0, 10, None),
            Some(&split(0, 8, Some((7, 5)))),
            None,
        );
        assert_eq!(
            (held.lower_bound, held.found_by.as_deref(), held.flags.len()),
            (Some(7), Some("identical"), 0)
        );
        assert_eq!(
            (held.source_offset, held.source_next_offset),
            (Some(7), Some(8))
        );
        let behind = at(
            &report(0, 0, 7, None),
            Some(&split(0, 8, Some((7, 5)))),
            None,
        );
        assert_eq!(behind.flags, [LAGS]);
        let nothing = at(&report(0, 0, 7, None), None, None);
        assert_eq!(
            (nothing.lower_bound, nothing.flags),
            (None, vec![NO_POSITION])
        );

        // MirrorMaker 2 without a record handed out: its own rule, unverified.
        let mm2 = stream(&[("west", Some(Translate::Mm2))]);
        let mut s = switches(&stream(&[("east", None)]), &mm2, None).remove(0);
        s.topics = vec![("east.t".into(), Some("t".into()))];
        let sync = OffsetSync {
            upstream: 4,
            downstream: 2,
        };
        let e = translated(
            &s,
            "east.t",
            &source,
            &report(0, 0, 9, None),
            Known {
                source: Some(&split(0, 6, None)),
                sync: Some((sync, false)),
                with_checkpoint: true,
                ..Known::default()
            },
        );
        assert_eq!(
            (e.lower_bound, e.found_by.as_deref()),
            (Some(3), Some("sync"))
        );
        assert!(e.note.unwrap().starts_with("unverified: "));
        // By timestamp with nothing handed out: nothing to look up.
        let e = translated(
            &s,
            "east.t",
            &source,
            &report(0, 0, 9, None),
            Known {
                source: Some(&split(0, 6, None)),
                sync: None,
                with_checkpoint: true,
                ..Known::default()
            },
        );
        assert_eq!((e.lower_bound, e.found_by), (None, None));
        assert!(e.note.unwrap().contains("starts at its starting offsets"));
    }
}
