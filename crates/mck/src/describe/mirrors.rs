//! How far each mirror is behind its source: MirrorMaker 2's offset syncs and the
//! newest records' timestamps, read from the clusters, and the records a mirror lacks.

use std::collections::BTreeMap;

use multicluster_kafka::inspect::{
    InspectOptions, Inspection, PartitionReport, SyncWanted, mirror_maker_syncs, newest_timestamps,
};
use multicluster_kafka::metadata::{KafkaStream, Translate};
use multicluster_kafka::unstable::translate::OffsetSync;

/// What tells how far each mirror is behind its source, beyond the offsets.
#[derive(Debug, Default)]
pub struct MirrorPositions {
    /// MirrorMaker 2's newest offset sync at or below each source partition's last
    /// record, by (mirror cluster, topic on the mirror, partition).
    pub syncs: BTreeMap<(String, String, i32), OffsetSync>,
    /// For a timestamp mirror, by (mirror cluster, topic on the mirror): how much
    /// older the mirror's newest record is than the source's, in milliseconds (the
    /// most over the partitions; 0 when it is not older).
    pub behind_ms: BTreeMap<(String, String), i64>,
}

/// Reads, for every mirror whose cluster and source both answered, what tells how far
/// it is behind: for `translate: mm2` MirrorMaker 2's offset syncs on the mirror for
/// the source's last records ([`behind_source`] estimates the distance with them),
/// for `translate: timestamp` the newest record's timestamp of each partition on both
/// sides. A mirror whose syncs cannot be read (or are kept on the source cluster), or
/// whose records cannot be read, gets none, and no distance.
pub(super) fn mirror_positions(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Inspection>,
    options: &InspectOptions,
) -> MirrorPositions {
    let mut out = MirrorPositions::default();
    let mut asked = std::collections::BTreeSet::new();
    for stream in streams.values() {
        for (cid, meta) in &stream.clusters {
            let Some(mirror) = meta.mirror_of.as_ref() else {
                continue;
            };
            if mirror.translate == Translate::Identical || !asked.insert(cid.clone()) {
                continue;
            }
            let (Some(Ok(here)), Some(Ok(there))) = (
                reports.get(cid).map(|i| i.result.as_ref()),
                reports.get(&mirror.cluster).map(|i| i.result.as_ref()),
            ) else {
                continue;
            };
            let mut wanted = Vec::new();
            for topic in &meta.topics {
                let (Some(parts), Some(source_topic)) =
                    (here.topics.get(topic), mirror.source_topic(topic))
                else {
                    continue;
                };
                let Some(source_parts) = there.topics.get(&source_topic) else {
                    continue;
                };
                for p in parts {
                    if let Some(s) = source_parts.iter().find(|s| s.partition == p.partition) {
                        wanted.push(SyncWanted {
                            topic: topic.clone(),
                            source_topic: source_topic.clone(),
                            partition: p.partition,
                            upstream: (s.latest - 1).max(0),
                        });
                    }
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let options = InspectOptions::new(options.timeout);
            if mirror.translate == Translate::Timestamp {
                let here: Vec<(String, i32)> = wanted
                    .iter()
                    .map(|w| (w.topic.clone(), w.partition))
                    .collect();
                let there: Vec<(String, i32)> = wanted
                    .iter()
                    .map(|w| (w.source_topic.clone(), w.partition))
                    .collect();
                let source_props = &stream.clusters[&mirror.cluster].properties;
                let (Ok(here_ts), Ok(there_ts)) = (
                    newest_timestamps(cid, &meta.properties, &here, &options),
                    newest_timestamps(&mirror.cluster, source_props, &there, &options),
                ) else {
                    continue;
                };
                for w in &wanted {
                    let mine = here_ts
                        .get(&(w.topic.clone(), w.partition))
                        .copied()
                        .flatten();
                    let theirs = there_ts
                        .get(&(w.source_topic.clone(), w.partition))
                        .copied()
                        .flatten();
                    // A source partition with no timestamp has nothing to be behind.
                    let Some(theirs) = theirs else { continue };
                    // A mirror partition that holds nothing yet has no time to compare.
                    let Some(mine) = mine else { continue };
                    let behind = (theirs - mine).max(0);
                    let slot = out
                        .behind_ms
                        .entry((cid.clone(), w.topic.clone()))
                        .or_insert(0);
                    *slot = (*slot).max(behind);
                }
                continue;
            }
            if let Ok(found) =
                mirror_maker_syncs(cid, &meta.properties, mirror.alias(), wanted, &options)
            {
                for ((topic, partition), (sync, _)) in found.found {
                    out.syncs.insert((cid.clone(), topic, partition), sync);
                }
            }
        }
    }
    out
}

/// How many records a mirror lacks of its source's copy of `topic`, over the
/// partitions both report: the source's end minus the mirror's for identical
/// offsets; for MirrorMaker 2, the source's end minus the source offset the mirror's
/// end stands for by the newest offset sync (an estimate: gaps after the sync, from
/// transactions or compaction, are counted as records). `None` for other entries,
/// timestamp mirrors (their offsets tell nothing: `mck plan` translates positions),
/// a source not described, or a partition without an offset sync.
pub(super) fn behind_source(
    cluster: &str,
    meta: &multicluster_kafka::metadata::ClusterMetadata,
    topic: &str,
    parts: &[PartitionReport],
    reports: &BTreeMap<String, Inspection>,
    mirrors: &MirrorPositions,
) -> Option<i64> {
    let mirror = meta.mirror_of.as_ref()?;
    let source = reports.get(&mirror.cluster)?.result.as_ref().ok()?;
    let source_parts = source.topics.get(&mirror.source_topic(topic)?)?;
    let mut behind = 0;
    for p in parts {
        let s = source_parts.iter().find(|s| s.partition == p.partition)?;
        let copied_to = match mirror.translate {
            Translate::Identical => p.latest,
            Translate::Mm2 => {
                let sync =
                    mirrors
                        .syncs
                        .get(&(cluster.to_string(), topic.to_string(), p.partition))?;
                sync.upstream + (p.latest - sync.downstream).max(0)
            }
            Translate::Timestamp => return None,
        };
        behind += (s.latest - copied_to).max(0);
    }
    Some(behind)
}
