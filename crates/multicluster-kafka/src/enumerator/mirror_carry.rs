//! Carrying splits onto a mirror: where the new partitions of a mirror (`mirrorOf`)
//! start when their split on the source left the stream with a position, translated
//! by timestamps, MirrorMaker 2's offset syncs and checkpoints, or the same offset.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::metadata::{MirrorOf, Translate};
use crate::base::split::{LastRecord, SplitId};
use crate::base::translate::{Carried, MirrorFacts, OffsetSync, SourcePosition, carry};
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;
use crate::kafka::client::close_detached;
use crate::kafka::mm2;

/// Makes a client for one discovery (see
/// [`Discovery::aside`](super::discovery::Discovery::aside)).
pub(super) type MakeClient = Box<dyn FnOnce() -> Result<ClusterClient, SourceError> + Send>;

/// What reading MirrorMaker 2's offset syncs needs: a client of the mirror, the
/// source's group (for its checkpoints) and, while the source's settings are known
/// (a live switch), a client of the source, whose syncs MirrorMaker writes there by
/// default.
pub(super) struct Mm2Clients {
    pub(super) mirror: MakeClient,
    pub(super) group: Option<String>,
    pub(super) source: Option<MakeClient>,
}

/// Where a mirror's partition starts: the offset, and the search for the last record
/// handed out from the source.
type CarriedStart = (i64, Option<LastRecord>);

/// Where the new partitions of a mirror start, for those whose split on the source
/// left the stream with a position (retained): translated (see
/// [`carry`](crate::base::translate::carry)) and taken out of the retained positions.
pub(super) fn carry_to_mirror(
    cluster: &str,
    client: &ClusterClient,
    mirror: &MirrorOf,
    retained: &crate::base::retention::Retained,
    new: &[(String, i32)],
    facts: &BTreeMap<(String, i32), crate::base::offsets::PartitionFacts>,
    mm2: Option<Mm2Clients>,
) -> Result<BTreeMap<(String, i32), CarriedStart>, SourceError> {
    let live: BTreeMap<SplitId, crate::base::retention::RetainedSplit> =
        retained.live().into_iter().collect();
    let mut from: Vec<(String, i32, SplitId, SourcePosition)> = Vec::new();
    for (topic, p) in new {
        let Some(source_topic) = mirror.source_topic(topic) else {
            continue;
        };
        let id = SplitId::new(&mirror.cluster, &source_topic, *p);
        if let Some(r) = live.get(&id) {
            let last = r.last.as_ref().map(|l| l.fingerprint);
            from.push((
                topic.clone(),
                *p,
                id,
                SourcePosition {
                    next_offset: r.next_offset,
                    last,
                },
            ));
        }
    }
    if from.is_empty() {
        return Ok(BTreeMap::new());
    }
    let lookups: Vec<(String, i32, i64)> = from
        .iter()
        .filter_map(|(t, p, _, s)| Some((t.clone(), *p, s.last?.timestamp?)))
        .collect();
    let at_times = if mirror.translate == Translate::Identical {
        BTreeMap::new()
    } else {
        client.offsets_at_times(&lookups)?
    };
    let syncs = match mm2 {
        Some(clients) if mirror.translate == Translate::Mm2 => {
            let wanted = from
                .iter()
                .map(|(topic, p, source_id, position)| mm2::Wanted {
                    topic: topic.clone(),
                    source_topic: source_id.topic.to_string(),
                    partition: *p,
                    upstream: position.last.map_or(position.next_offset, |l| l.offset),
                })
                .collect();
            mm2_syncs(cluster, mirror, clients, wanted)
        }
        _ => BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    let mut taken = BTreeSet::new();
    for (topic, p, source_id, position) in from {
        let key = (topic.clone(), p);
        let f = &facts[&key];
        let mirror_facts = MirrorFacts {
            earliest: f.earliest,
            latest: f.latest,
            at_timestamp: at_times.get(&key).copied().flatten(),
            sync: syncs.get(&key).copied(),
        };
        let split = format!("{cluster}/{topic}/{p}");
        match carry(mirror, &source_id.topic, position, &mirror_facts) {
            Carried::At { next_offset, last } => {
                let search = last.as_ref().and_then(|l| l.search.as_ref());
                tracing::info!(
                    split,
                    source = %source_id,
                    next_offset,
                    source_offset = ?position.last.map(|l| l.offset),
                    found_by = ?search.map(|s| s.found_by.as_str()),
                    lower_bound = ?search.map(|s| s.lower_bound),
                    sync = ?mirror_facts.sync,
                    "continuing a split on its mirror from the source's position"
                );
                out.insert(key, (next_offset, last));
            }
            Carried::Unverified { next_offset, why } => {
                tracing::warn!(split, source = %source_id, next_offset, "continuing a split on its mirror at the translated lower bound, unverified ({why}): records there may be read a second time");
                out.insert(key, (next_offset, None));
            }
            Carried::NotFound { why } => {
                tracing::warn!(split, source = %source_id, "cannot carry the source's position to its mirror ({why}); the split starts at its starting offsets");
            }
        }
        taken.insert(source_id);
    }
    let _ = retained.take(|id| taken.contains(id));
    Ok(out)
}

/// MirrorMaker 2's newest offset sync (else the group's newest checkpoint) at or
/// below each wanted source offset, by the mirror's topic and partition, read on the
/// mirror cluster with a client of its own made by `make`. A read that fails is
/// warned about and leaves timestamps to translate with: the last record is verified
/// on the mirror either way.
fn mm2_syncs(
    cluster: &str,
    mirror: &MirrorOf,
    clients: Mm2Clients,
    wanted: Vec<mm2::Wanted>,
) -> BTreeMap<(String, i32), (OffsetSync, bool)> {
    let Mm2Clients {
        mirror: make,
        group,
        source,
    } = clients;
    let group = group.as_deref();
    // MirrorMaker's default `offset-syncs.topic.location=source` writes the syncs to
    // the source cluster: read there too while its settings are known (a live switch;
    // not after a failover or at a restart, where the source left the metadata).
    let alias = mirror.alias();
    let client = match make() {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(cluster, alias, error = %e, "no client to read MirrorMaker 2's offset syncs with; translating positions by timestamps");
            return BTreeMap::new();
        }
    };
    let looked = mm2::look_up(&client, alias, group, wanted);
    // Closing waits for librdkafka's threads; the answer does not.
    close_detached(client);
    let looked = looked.map(|mut lookup| {
        if let Some(make) = source {
            source_syncs(cluster, mirror, make, &mut lookup);
        }
        lookup
    });
    let lookup = match looked {
        Ok(lookup) => lookup,
        Err(e) => {
            tracing::warn!(cluster, alias, error = %e, "cannot read MirrorMaker 2's offset syncs and checkpoints; translating positions by timestamps");
            return BTreeMap::new();
        }
    };
    if lookup.skipped_count > 0 {
        let first: Vec<String> = lookup.skipped.iter().map(ToString::to_string).collect();
        tracing::warn!(cluster, alias, skipped = lookup.skipped_count, first = %first.join("; "), "skipped records of MirrorMaker 2's topics that do not decode as offset syncs or checkpoints");
    }
    let found: BTreeMap<(String, i32), (OffsetSync, bool)> = lookup
        .found()
        .into_iter()
        .filter_map(|(key, f)| f.best().map(|best| (key, best)))
        .collect();
    tracing::debug!(
        cluster,
        alias,
        syncs = lookup.read.0,
        checkpoints = lookup.read.1,
        found = found.len(),
        "read MirrorMaker 2's offset syncs and checkpoints"
    );
    found
}

/// Adds the offset syncs MirrorMaker keeps on the source cluster to `lookup`. A source
/// that cannot be read is warned about: the mirror's own syncs, checkpoints and
/// timestamps remain.
fn source_syncs(cluster: &str, mirror: &MirrorOf, make: MakeClient, lookup: &mut mm2::Lookup) {
    let source = mirror.cluster.as_str();
    let read = make().and_then(|client| {
        // A source that is gone (its definition kept in the metadata) is given up
        // about a second after its brokers refuse, not at the client timeout.
        let found = client
            .first_contact()
            .and_then(|_| client.topic_names(|n| n.starts_with("mm2-offset-syncs.")))
            .and_then(|names| match mm2::source_syncs_topic(&names, cluster) {
                Some(topic) => {
                    mm2::offer_source_syncs(&client, &topic, lookup).map(|()| Some(topic))
                }
                None => Ok(None),
            });
        close_detached(client);
        found
    });
    match read {
        Ok(Some(topic)) => tracing::debug!(
            cluster,
            source,
            topic,
            "read MirrorMaker 2's offset syncs on the source cluster"
        ),
        Ok(None) => tracing::debug!(
            cluster,
            source,
            "no MirrorMaker 2 offset syncs on the source cluster (or several flows, none named after this mirror)"
        ),
        Err(e) => {
            tracing::warn!(cluster, source, error = %e, "cannot read MirrorMaker 2's offset syncs on the source cluster; translating by the mirror's syncs, checkpoints or timestamps")
        }
    }
}
