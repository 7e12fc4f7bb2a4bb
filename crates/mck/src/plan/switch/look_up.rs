//! Asking the mirror of a switch and translating each partition's position onto it.

use multicluster_kafka::checkpoint::SplitCheckpoint;
use multicluster_kafka::inspect::{
    PartitionReport, SyncWanted, inspect_at_times, mirror_maker_syncs,
};
use multicluster_kafka::metadata::Translate;
use multicluster_kafka::unstable::translate::{
    Carried, MirrorFacts, OffsetSync, SourcePosition, carry,
};

use super::*;

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
    use crate::plan::switch::tests::stream;
    use multicluster_kafka::split::{Fingerprint, LastRecord};

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
