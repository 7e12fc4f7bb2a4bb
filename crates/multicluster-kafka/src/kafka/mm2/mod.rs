//! MirrorMaker 2's offset syncs and checkpoints, read from the mirror cluster: where a
//! record of the source is on its copy, for carrying a split's position across
//! ([`crate::base::translate`]).
//!
//! Both are records of MirrorMaker's internal topics, written with the fixed-layout
//! schemas of Kafka's own protocol: fields one after another, big-endian integers, a
//! string an `INT16` byte length and that many bytes of UTF-8.
//!
//! | record | topic | key | value |
//! |---|---|---|---|
//! | offset sync | `mm2-offset-syncs.<source alias>.internal` on the target (partition 0) | source topic `STRING`, partition `INT32` | upstream offset `INT64`, downstream offset `INT64` |
//! | checkpoint | `<source alias>.checkpoints.internal` on the target | group `STRING`, target topic `STRING`, partition `INT32` | version `INT16` (0), upstream offset `INT64`, downstream offset `INT64`, metadata `STRING` |
//!
//! With MirrorMaker's default `offset-syncs.topic.location=source` the offset syncs
//! are on the source cluster instead (`mm2-offset-syncs.<target alias>.internal`),
//! which this module does not read (see [`look_up`]).
//!
//! Broker data is never trusted: a record that does not decode is skipped and
//! reported ([`Lookup::skipped`]) with where it is and what was wrong, byte by byte.

use std::collections::BTreeMap;
use std::fmt;

use crate::base::translate::OffsetSync;
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;

mod records;
use records::{CheckpointRecord, DecodeError, SyncRecord};

/// The offset-syncs topic MirrorMaker 2 writes on the *target* cluster of a flow from
/// the cluster it calls `source_alias` (`offset-syncs.topic.location=target`).
pub(crate) fn offset_syncs_topic(source_alias: &str) -> String {
    format!("mm2-offset-syncs.{source_alias}.internal")
}

/// The checkpoints topic MirrorMaker 2 writes on the target cluster of a flow from
/// the cluster it calls `source_alias`.
pub(crate) fn checkpoints_topic(source_alias: &str) -> String {
    format!("{source_alias}.checkpoints.internal")
}

/// What a lower bound is wanted for: one partition of a mirror whose split on the
/// source left the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The topic on the mirror (checkpoints name it).
    pub topic: String,
    /// The topic on the source (offset syncs name it).
    pub source_topic: String,
    pub partition: i32,
    /// The source offset to translate: the last record handed out there, or the next
    /// offset when none was.
    pub upstream: i64,
}

/// What was found for one wanted partition: the newest offset sync and the newest
/// checkpoint of the group that are at or below the wanted upstream offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    pub sync: Option<OffsetSync>,
    pub checkpoint: Option<OffsetSync>,
}

impl Found {
    /// The one to translate with, and whether it is the checkpoint: any offset sync
    /// found, even one farther from the wanted offset than the checkpoint; the
    /// checkpoint only without one.
    ///
    /// An offset sync pins one record: the records after it on the mirror are those
    /// after it on the source, at most one per source offset, so the record looked for
    /// is within as many records as there are source offsets between. A checkpoint
    /// does not: MirrorMaker translates the group's offset to one past the newest sync
    /// it kept below it, which may be far below, and the records between that sync and
    /// the group's offset come after the checkpoint's downstream offset on the mirror
    /// (MirrorMaker's consumers read them again). Its downstream offset is a lower
    /// bound of the record, but how many records follow before it is not known from
    /// the checkpoint.
    pub fn best(&self) -> Option<(OffsetSync, bool)> {
        match (self.sync, self.checkpoint) {
            (Some(s), _) => Some((s, false)),
            (None, Some(c)) => Some((c, true)),
            (None, None) => None,
        }
    }
}

/// A record of MirrorMaker's topics that did not decode, and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub error: DecodeError,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} offset {}: {}",
            self.topic, self.partition, self.offset, self.error
        )
    }
}

/// At most this many undecodable records are kept to be reported (all are counted).
const SKIPPED_KEPT: usize = 5;

/// The newest offset sync and checkpoint of each wanted partition, folded from
/// MirrorMaker's records in the order they were written (pure: [`look_up`] feeds it).
///
/// "Newest" is the last written of those at or below the wanted offset, not the one
/// with the highest upstream offset: when MirrorMaker copied records again (it lost
/// its own offsets, or the copy was truncated), a later sync points at the later
/// copy, after which the records continue.
#[derive(Debug)]
pub(crate) struct Lookup {
    group: Option<String>,
    wanted: Vec<Wanted>,
    /// (source topic, partition) → index in `wanted`.
    by_source: BTreeMap<(String, i32), usize>,
    /// (topic on the mirror, partition) → index in `wanted`.
    by_mirror: BTreeMap<(String, i32), usize>,
    found: Vec<Found>,
    /// Records decoded, per kind: (offset syncs, checkpoints).
    pub read: (u64, u64),
    /// The first undecodable records (up to [`SKIPPED_KEPT`]).
    pub skipped: Vec<Skipped>,
    /// How many records did not decode.
    pub skipped_count: u64,
}

impl Lookup {
    /// A lookup of `wanted`, with the checkpoints of `group` (none without a group).
    pub fn new(wanted: Vec<Wanted>, group: Option<&str>) -> Self {
        let mut by_source = BTreeMap::new();
        let mut by_mirror = BTreeMap::new();
        for (i, w) in wanted.iter().enumerate() {
            by_source.insert((w.source_topic.clone(), w.partition), i);
            by_mirror.insert((w.topic.clone(), w.partition), i);
        }
        Self {
            group: group.map(str::to_string),
            found: vec![Found::default(); wanted.len()],
            wanted,
            by_source,
            by_mirror,
            read: (0, 0),
            skipped: Vec::new(),
            skipped_count: 0,
        }
    }

    /// Whether checkpoints are looked at (the source has a group).
    pub fn wants_checkpoints(&self) -> bool {
        self.group.is_some()
    }

    /// Takes one record of the offset-syncs topic.
    pub fn offer_sync(&mut self, at: (&str, i32, i64), key: Option<&[u8]>, value: Option<&[u8]>) {
        match SyncRecord::decode(key, value) {
            Ok(s) => {
                self.read.0 += 1;
                let Some(&i) = self.by_source.get(&(s.topic, s.partition)) else {
                    return;
                };
                // Negative offsets say nothing of a record (MirrorMaker writes -1
                // for an offset it cannot translate).
                if s.upstream >= 0 && s.downstream >= 0 && s.upstream <= self.wanted[i].upstream {
                    self.found[i].sync = Some(OffsetSync {
                        upstream: s.upstream,
                        downstream: s.downstream,
                    });
                }
            }
            Err(error) => self.skip(at, error),
        }
    }

    /// Takes one record of the checkpoints topic.
    pub fn offer_checkpoint(
        &mut self,
        at: (&str, i32, i64),
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        match CheckpointRecord::decode(key, value) {
            Ok(c) => {
                self.read.1 += 1;
                if self.group.as_deref() != Some(c.group.as_str()) {
                    return;
                }
                let Some(&i) = self.by_mirror.get(&(c.topic, c.partition)) else {
                    return;
                };
                if c.upstream >= 0 && c.downstream >= 0 && c.upstream <= self.wanted[i].upstream {
                    self.found[i].checkpoint = Some(OffsetSync {
                        upstream: c.upstream,
                        downstream: c.downstream,
                    });
                }
            }
            Err(error) => self.skip(at, error),
        }
    }

    fn skip(&mut self, (topic, partition, offset): (&str, i32, i64), error: DecodeError) {
        self.skipped_count += 1;
        if self.skipped.len() < SKIPPED_KEPT {
            self.skipped.push(Skipped {
                topic: topic.to_string(),
                partition,
                offset,
                error,
            });
        }
    }

    /// What was found, by (topic on the mirror, partition); partitions with nothing
    /// are left out.
    pub fn found(&self) -> BTreeMap<(String, i32), Found> {
        self.wanted
            .iter()
            .zip(&self.found)
            .filter(|(_, f)| f.sync.is_some() || f.checkpoint.is_some())
            .map(|(w, f)| ((w.topic.clone(), w.partition), *f))
            .collect()
    }
}

/// Reads MirrorMaker 2's offset syncs for the flow from `source_alias` (partition 0 of
/// [`offset_syncs_topic`] on this cluster) and, with a `group`, that group's
/// checkpoints ([`checkpoints_topic`], every partition), each from its beginning to
/// its end as the read starts, within the client's timeout each, and returns what
/// they say of `wanted`. A topic the cluster does not have holds nothing: no error.
///
/// Blocks. `client` must be a client of its own ([`ClusterClient::read_partition`]
/// assigns partitions to it), never the source's shared lookup client, which a
/// reader may fetch with.
///
/// Not read: offset syncs on the *source* cluster (MirrorMaker's default
/// `offset-syncs.topic.location=source`), which the caller cannot reach here.
pub(crate) fn look_up(
    client: &ClusterClient,
    source_alias: &str,
    group: Option<&str>,
    wanted: Vec<Wanted>,
) -> Result<Lookup, SourceError> {
    let mut lookup = Lookup::new(wanted, group);
    let syncs = offset_syncs_topic(source_alias);
    let checkpoints = checkpoints_topic(source_alias);
    let mut topics = std::collections::BTreeSet::from([syncs.clone()]);
    if lookup.wants_checkpoints() {
        topics.insert(checkpoints.clone());
    }
    let present = client.describe(&topics)?;
    if let Some(parts) = present.partitions.get(&syncs)
        && parts.contains(&0)
    {
        client.read_partition(&syncs, 0, &mut |offset, key, value| {
            lookup.offer_sync((&syncs, 0, offset), key, value);
        })?;
    }
    if lookup.wants_checkpoints()
        && let Some(parts) = present.partitions.get(&checkpoints)
    {
        for &p in parts {
            client.read_partition(&checkpoints, p, &mut |offset, key, value| {
                lookup.offer_checkpoint((&checkpoints, p, offset), key, value);
            })?;
        }
    }
    Ok(lookup)
}

/// The offset-syncs topic on a *source* cluster that a MirrorMaker flow into the
/// mirror `mirror_id` writes (`offset-syncs.topic.location=source`, MirrorMaker's
/// default): `mm2-offset-syncs.<target alias>.internal`. The target's alias is not in
/// the metadata, so the topic is found by its shape: the one there is, else the one
/// named after the mirror's logical id. `None` when there is none, or several and
/// none of them is named so.
pub(crate) fn source_syncs_topic(names: &[String], mirror_id: &str) -> Option<String> {
    let syncs: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("mm2-offset-syncs.") && n.ends_with(".internal"))
        .collect();
    match syncs.as_slice() {
        [one] => Some((*one).clone()),
        _ => {
            let named = offset_syncs_topic(mirror_id);
            syncs.into_iter().find(|n| **n == named).cloned()
        }
    }
}

/// Adds the offset syncs of `topic` on the source cluster (read with `client`, a
/// client of its own) to `lookup`. Blocks.
pub(crate) fn offer_source_syncs(
    client: &ClusterClient,
    topic: &str,
    lookup: &mut Lookup,
) -> Result<(), SourceError> {
    client.read_partition(topic, 0, &mut |offset, key, value| {
        lookup.offer_sync((topic, 0, offset), key, value);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn string(s: &str) -> Vec<u8> {
        let mut out = (s.len() as i16).to_be_bytes().to_vec();
        out.extend(s.as_bytes());
        out
    }

    pub(super) fn sync_key(topic: &str, p: i32) -> Vec<u8> {
        let mut k = string(topic);
        k.extend(p.to_be_bytes());
        k
    }

    pub(super) fn sync_value(up: i64, down: i64) -> Vec<u8> {
        let mut v = up.to_be_bytes().to_vec();
        v.extend(down.to_be_bytes());
        v
    }

    pub(super) fn cp_key(group: &str, topic: &str, p: i32) -> Vec<u8> {
        let mut k = string(group);
        k.extend(string(topic));
        k.extend(p.to_be_bytes());
        k
    }

    pub(super) fn cp_value(up: i64, down: i64, meta: &str) -> Vec<u8> {
        let mut v = 0i16.to_be_bytes().to_vec();
        v.extend(up.to_be_bytes());
        v.extend(down.to_be_bytes());
        v.extend(string(meta));
        v
    }

    #[test]
    fn the_source_s_offset_syncs_topic_is_the_only_one_or_the_mirror_s() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let one = names(&["orders", "mm2-offset-syncs.dr.internal"]);
        assert_eq!(
            source_syncs_topic(&one, "west").as_deref(),
            Some("mm2-offset-syncs.dr.internal")
        );
        let two = names(&[
            "mm2-offset-syncs.a.internal",
            "mm2-offset-syncs.west.internal",
        ]);
        assert_eq!(
            source_syncs_topic(&two, "west").as_deref(),
            Some("mm2-offset-syncs.west.internal")
        );
        assert_eq!(source_syncs_topic(&two, "north"), None);
        assert_eq!(source_syncs_topic(&names(&["orders"]), "west"), None);
    }

    fn wanted(topic: &str, p: i32, upstream: i64) -> Wanted {
        Wanted {
            topic: format!("east.{topic}"),
            source_topic: topic.into(),
            partition: p,
            upstream,
        }
    }

    fn sync(upstream: i64, downstream: i64) -> OffsetSync {
        OffsetSync {
            upstream,
            downstream,
        }
    }

    #[test]
    fn the_newest_sync_at_or_below_the_wanted_offset_is_kept_per_partition() {
        let mut l = Lookup::new(vec![wanted("o", 0, 20), wanted("o", 1, 5)], None);
        let mut offset = 0;
        let mut offer = |l: &mut Lookup, topic: &str, p: i32, up: i64, down: i64| {
            offset += 1;
            let (k, v) = (sync_key(topic, p), sync_value(up, down));
            l.offer_sync(("syncs", 0, offset), Some(&k), Some(&v));
        };
        offer(&mut l, "o", 0, 10, 3);
        offer(&mut l, "o", 0, 20, 13);
        offer(&mut l, "o", 0, 21, 14); // past the wanted offset
        offer(&mut l, "o", 1, 4, 4);
        offer(&mut l, "o", 2, 1, 1); // not wanted
        offer(&mut l, "other", 0, 1, 1);
        // MirrorMaker copied partition 1 again from 2: the later copy counts.
        offer(&mut l, "o", 1, 2, 9);
        l.offer_sync(("syncs", 0, 99), Some(b"junk"), Some(b""));
        let found = l.found();
        assert_eq!(
            found[&("east.o".into(), 0)].best(),
            Some((sync(20, 13), false))
        );
        assert_eq!(
            found[&("east.o".into(), 1)].best(),
            Some((sync(2, 9), false))
        );
        assert_eq!(l.read, (7, 0));
        assert_eq!(l.skipped_count, 1);
        assert_eq!(
            l.skipped[0].to_string(),
            "syncs/0 offset 99: offset sync key at byte 2: needs 27253 more byte(s), 2 left"
        );
        // Nothing at or below: nothing found.
        let mut l = Lookup::new(vec![wanted("o", 0, 3)], None);
        let (k, v) = (sync_key("o", 0), sync_value(4, 4));
        l.offer_sync(("syncs", 0, 0), Some(&k), Some(&v));
        assert!(l.found().is_empty());
    }

    #[test]
    fn a_checkpoint_of_the_group_counts_only_without_a_sync() {
        let mut l = Lookup::new(vec![wanted("o", 0, 30), wanted("o", 1, 30)], Some("app"));
        assert!(l.wants_checkpoints());
        let cp = |l: &mut Lookup, group: &str, topic: &str, p: i32, up: i64, down: i64| {
            let (k, v) = (cp_key(group, topic, p), cp_value(up, down, ""));
            l.offer_checkpoint(("cps", 0, 0), Some(&k), Some(&v));
        };
        let s = |l: &mut Lookup, p: i32, up: i64, down: i64| {
            let (k, v) = (sync_key("o", p), sync_value(up, down));
            l.offer_sync(("syncs", 0, 0), Some(&k), Some(&v));
        };
        // Partition 0: a sync at 10, a closer checkpoint at 28: the sync.
        s(&mut l, 0, 10, 5);
        cp(&mut l, "app", "east.o", 0, 28, 19);
        // Partition 1: no sync; the newest checkpoint at or below 30. A later one past
        // the wanted offset, another group's, one named by the source topic and one
        // MirrorMaker could not translate (-1) do not count.
        cp(&mut l, "app", "east.o", 1, 20, 11);
        cp(&mut l, "app", "east.o", 1, 31, 22);
        cp(&mut l, "other", "east.o", 1, 29, 20);
        cp(&mut l, "app", "o", 1, 29, 20);
        cp(&mut l, "app", "east.o", 1, 25, -1);
        let found = l.found();
        assert_eq!(
            found[&("east.o".into(), 0)].best(),
            Some((sync(10, 5), false))
        );
        assert_eq!(
            found[&("east.o".into(), 1)].best(),
            Some((sync(20, 11), true))
        );
        assert_eq!(l.read, (1, 6));
        let f = Found {
            sync: Some(sync(5, 5)),
            checkpoint: Some(sync(9, 6)),
        };
        assert_eq!(f.best(), Some((sync(5, 5), false)));
        let only = Found {
            sync: None,
            checkpoint: Some(sync(5, 6)),
        };
        assert_eq!(only.best(), Some((sync(5, 6), true)));
        // Without a group, checkpoints are not looked at.
        let mut l = Lookup::new(vec![wanted("o", 0, 30)], None);
        cp(&mut l, "app", "east.o", 0, 20, 11);
        assert!(l.found().is_empty());
    }

    #[test]
    fn the_topics_are_named_after_the_source_alias() {
        assert_eq!(offset_syncs_topic("east"), "mm2-offset-syncs.east.internal");
        assert_eq!(checkpoints_topic("east"), "east.checkpoints.internal");
    }
}
