//! What a mirror's cluster tells of how it follows its source: MirrorMaker 2's offset
//! syncs and checkpoints, and the timestamps of the newest records.

use std::collections::BTreeMap;

use super::InspectOptions;
use super::client::with_own_client;
use crate::base::properties::ClientProperties;
use crate::base::translate::OffsetSync;
use crate::error::SourceError;

/// One partition of a mirror whose source position is to be translated with
/// MirrorMaker 2's offset syncs and checkpoints ([`mirror_maker_syncs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncWanted {
    /// The topic on the mirror (MirrorMaker's checkpoints name it).
    pub topic: String,
    /// The topic it copies on the source (the offset syncs name it).
    pub source_topic: String,
    /// The partition (the same on both sides).
    pub partition: i32,
    /// The source offset to translate: the last record handed out there, or the next
    /// offset when none was.
    pub upstream: i64,
}

/// What MirrorMaker 2's topics on a mirror cluster say of the wanted partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorMakerSyncs {
    /// By (topic on the mirror, partition): the newest offset sync at or below the
    /// wanted offset, or the group's newest checkpoint when that is closer, and
    /// whether it is the checkpoint. Partitions with neither are left out.
    pub found: BTreeMap<(String, i32), (OffsetSync, bool)>,
    /// Offset syncs and checkpoints read.
    pub read: (u64, u64),
    /// How many records of those topics did not decode.
    pub skipped: u64,
    /// The first of them: where each is and what was wrong, byte by byte.
    pub first_skipped: Vec<String>,
}

/// Reads, on the mirror `cluster`, MirrorMaker 2's offset syncs of the flow from the
/// source MirrorMaker calls `source_alias` (`mm2-offset-syncs.<alias>.internal`,
/// written there with `offset-syncs.topic.location=target`) and, when `options`
/// names a group, that group's checkpoints (`<alias>.checkpoints.internal`), and
/// returns for each of `wanted` what to translate its position with
/// ([`crate::unstable::translate::MirrorFacts::sync`]). Topics the cluster does not
/// have hold nothing: no error. Records that do not decode are skipped and counted.
///
/// Blocks: each topic partition is read from its start to its end as the read
/// starts, within `options.timeout`, on a client of its own.
///
/// # Errors
///
/// [`SourceError::Cluster`] when the cluster cannot be reached or a read does not end
/// in time. The message names `cluster` and never contains a secret property value.
pub fn mirror_maker_syncs(
    cluster: &str,
    properties: &ClientProperties,
    source_alias: &str,
    wanted: Vec<SyncWanted>,
    options: &InspectOptions,
) -> Result<MirrorMakerSyncs, SourceError> {
    let wanted = wanted
        .into_iter()
        .map(|w| crate::kafka::mm2::Wanted {
            topic: w.topic,
            source_topic: w.source_topic,
            partition: w.partition,
            upstream: w.upstream,
        })
        .collect();
    with_own_client(cluster, properties, options, |client, _| {
        let lookup =
            crate::kafka::mm2::look_up(client, source_alias, options.group.as_deref(), wanted)?;
        Ok(MirrorMakerSyncs {
            found: lookup
                .found()
                .into_iter()
                .filter_map(|(key, f)| f.best().map(|best| (key, best)))
                .collect(),
            read: lookup.read,
            skipped: lookup.skipped_count,
            first_skipped: lookup.skipped.iter().map(ToString::to_string).collect(),
        })
    })
    .1
}

/// The timestamp of the newest record of each of `partitions` on `cluster` (`None`
/// for an empty partition, or one whose last offset holds no record, such as a
/// transaction marker), on a client of its own: what `mck describe` compares a
/// timestamp mirror with its source by.
///
/// # Errors
///
/// [`SourceError::Cluster`] (or [`SourceError::Kafka`]) when the cluster cannot be
/// reached or refuses the client. The message names `cluster` and never contains a
/// secret property value.
pub fn newest_timestamps(
    cluster: &str,
    properties: &ClientProperties,
    partitions: &[(String, i32)],
    options: &InspectOptions,
) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
    with_own_client(cluster, properties, options, |client, _| {
        client.newest_timestamps(partitions)
    })
    .1
}
