//! `mirrorOf`: a cluster entry whose topics are a copy (a mirror) of another
//! cluster's, and how positions are carried across to it.
//!
//! A stream whose entry on the source cluster leaves continues on the mirror right
//! after the last record handed out from the source: the position is translated to a
//! lower bound ([`Translate`]) and then verified against the fingerprint of that
//! record. While both entries are in a stream the mirror is a standby and is not read.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::properties::ClientProperties;

/// How a position on the source cluster is translated to a lower bound on the mirror.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Translate {
    /// MirrorMaker 2: its offset syncs (on the source or the target cluster, per
    /// `offset-syncs.topic.location`), else its checkpoints, else timestamps.
    #[default]
    Mm2,
    /// Offsets are the same on both sides (Cluster Linking, Redpanda Shadowing,
    /// WarpStream Orbit, KIP-1279, MirrorMaker with `IdentityReplicationPolicy` on a
    /// topic without gaps).
    Identical,
    /// Only the records' timestamps: the first offset at the last record's timestamp.
    Timestamp,
}

impl Translate {
    /// The word used in metadata files.
    pub fn as_str(self) -> &'static str {
        match self {
            Translate::Mm2 => "mm2",
            Translate::Identical => "identical",
            Translate::Timestamp => "timestamp",
        }
    }
}

/// What to do when the mirror does not hold the last record handed out from the
/// source where it must be (it diverged, or records were deleted).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum OnMismatch {
    /// End the partition with an error naming it, the offsets looked at and what was
    /// expected.
    #[default]
    Fail,
    /// Continue at the translated lower bound, with a warning (records between it and
    /// the last record handed out may be read a second time).
    LowerBound,
}

/// The `mirrorOf` of a cluster entry: this cluster's topics copy `cluster`'s.
///
/// ```
/// use multicluster_kafka::metadata::{MirrorOf, Translate};
/// let m: MirrorOf = serde_json::from_str(
///     r#"{"cluster": "east", "translate": "mm2", "failoverAfter": "60s"}"#).unwrap();
/// assert_eq!(m.translate, Translate::Mm2);
/// assert_eq!(m.source_topic("east.orders"), Some("orders".to_string()));
/// assert_eq!(m.failover_after, Some(std::time::Duration::from_secs(60)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MirrorOf {
    /// The logical cluster whose topics these copy.
    pub cluster: String,
    /// How positions are translated.
    #[serde(default)]
    pub translate: Translate,
    /// Topic here → topic there, where it differs from the default (MirrorMaker's
    /// `<alias>.<topic>` for `mm2`, the same name otherwise).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topics: BTreeMap<String, String>,
    /// The source's alias in MirrorMaker (`mm2`; default: its logical id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Take over by itself once the source cluster has been unreachable this long.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "write_duration",
        deserialize_with = "read_duration"
    )]
    pub failover_after: Option<Duration>,
    /// What a mirror that does not hold the last record where it must be does.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_mismatch: OnMismatch,
    /// The source cluster's client properties, where the metadata defines that
    /// cluster apart from its streams (the richer file layout's `clusters:`): with
    /// `mm2`, MirrorMaker's offset syncs kept on the source are read with them even
    /// after the source left the streams (a restart after the switch). Not part of the
    /// written form; never shown (their `Debug` hides secrets).
    #[serde(skip)]
    pub source_properties: Option<ClientProperties>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl MirrorOf {
    /// A mirror of `cluster` translated by `translate`, with every other field at its
    /// default.
    pub fn new(cluster: impl Into<String>, translate: Translate) -> Self {
        Self {
            cluster: cluster.into(),
            translate,
            topics: BTreeMap::new(),
            alias: None,
            failover_after: None,
            on_mismatch: OnMismatch::Fail,
            source_properties: None,
        }
    }

    /// The source's alias in MirrorMaker.
    pub fn alias(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.cluster)
    }

    /// The topic on the source cluster that `topic` (here) copies; `None` when the
    /// name does not follow MirrorMaker's `<alias>.<topic>` and no map names it.
    pub fn source_topic(&self, topic: &str) -> Option<String> {
        if let Some(there) = self.topics.get(topic) {
            return Some(there.clone());
        }
        match self.translate {
            Translate::Mm2 => topic
                .strip_prefix(self.alias())
                .and_then(|rest| rest.strip_prefix('.'))
                .filter(|rest| !rest.is_empty())
                .map(str::to_string),
            Translate::Identical | Translate::Timestamp => Some(topic.to_string()),
        }
    }
}

fn write_duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_duration(*d)),
        None => s.serialize_none(),
    }
}

fn read_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A duration as humantime writes it: `500ms`, `60s`, `5m`, `1h 30m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!(
            "`{}` is not a duration such as 500ms, 60s or 5m: {e}",
            text.escape_debug()
        )
    })
}

fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mm2_topics_follow_the_default_replication_policy_unless_mapped() {
        let mut m = MirrorOf::new("east", Translate::Mm2);
        assert_eq!(m.source_topic("east.orders").as_deref(), Some("orders"));
        assert_eq!(m.source_topic("west.orders"), None);
        assert_eq!(m.source_topic("east."), None);
        m.alias = Some("dc1".into());
        assert_eq!(m.source_topic("dc1.a.b").as_deref(), Some("a.b"));
        m.topics.insert("copy".into(), "orders".into());
        assert_eq!(m.source_topic("copy").as_deref(), Some("orders"));
        let same = MirrorOf::new("east", Translate::Identical);
        assert_eq!(same.source_topic("orders").as_deref(), Some("orders"));
    }

    #[test]
    fn durations_read_and_write_in_one_unit() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "s", "10", "-1s", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s 500ms");
        assert_eq!(format_duration(Duration::from_secs(60)), "1m");
    }

    #[test]
    fn a_mirror_round_trips_through_json_and_rejects_unknown_fields() {
        let mut m = MirrorOf::new("east", Translate::Timestamp);
        m.failover_after = Some(Duration::from_secs(30));
        m.on_mismatch = OnMismatch::LowerBound;
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"failoverAfter\":\"30s\""), "{json}");
        assert!(json.contains("\"onMismatch\":\"lowerBound\""), "{json}");
        assert_eq!(serde_json::from_str::<MirrorOf>(&json).unwrap(), m);
        assert!(serde_json::from_str::<MirrorOf>(r#"{"cluster":"e","translat":"mm2"}"#).is_err());
        assert!(serde_json::from_str::<MirrorOf>(r#"{"cluster":"e","translate":"copy"}"#).is_err());
    }
}
