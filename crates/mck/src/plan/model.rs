//! What `mck plan` finds: the changes to streams and clusters, and what each cluster
//! reports of its splits.

use super::*;

/// Everything the command shows.
#[derive(Debug, Default)]
pub struct Changes {
    /// Stream ids only in the new file.
    pub streams_added: BTreeSet<String>,
    /// Stream ids only in the old file.
    pub streams_removed: BTreeSet<String>,
    /// Clusters added, removed or changed, by id.
    pub clusters: Vec<ClusterPlan>,
    /// Clusters in both files that stay as they are.
    pub unchanged: BTreeSet<String>,
    /// Streams moving onto a mirror of a cluster taken out of them.
    pub switches: Vec<Switch>,
}

/// How a cluster changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only in the new file.
    Added,
    /// Only in the old file.
    Removed,
    /// In both, with a difference.
    Changed,
}

impl Kind {
    pub(super) fn word(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::Changed => "changed",
        }
    }
}

/// One property key that differs; values only when not secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyChange {
    /// The key.
    pub key: String,
    /// "added", "removed" or "changed".
    pub change: &'static str,
    /// True when the value is a secret (then neither value is shown).
    pub secret: bool,
    /// The old value, when shown.
    pub old: Option<String>,
    /// The new value, when shown.
    pub new: Option<String>,
}

/// Where the new splits of a cluster start, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartRule {
    /// The starting offsets that apply.
    pub offsets: StartingOffsets,
    /// Where they come from.
    pub from: &'static str,
}

/// What is known about a cluster's splits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Splits {
    /// Not looked up (`--offline`).
    NotLookedUp,
    /// The cluster did not answer.
    Unreachable(String),
    /// What the cluster reported.
    Known {
        /// New splits: topic, partition, and where each would start (or why not known).
        added: Vec<(String, i32, Result<i64, String>)>,
        /// Splits no longer read.
        removed: Vec<(String, i32)>,
        /// Topics to add or remove that the cluster does not have.
        missing: BTreeSet<String>,
    },
}

/// The change to one cluster.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    /// Logical cluster id.
    pub cluster: String,
    /// Added, removed or changed.
    pub kind: Kind,
    /// `bootstrap.servers` as shown (redacted if secret), from the new file when there.
    pub bootstrap: String,
    /// Topics read from now on (every topic of an added cluster).
    pub topics_added: BTreeSet<String>,
    /// Topics no longer read (every topic of a removed cluster).
    pub topics_removed: BTreeSet<String>,
    /// Property keys that differ (changed clusters only).
    pub properties: Vec<PropertyChange>,
    /// `(what, old, new)` for starting / stopping offsets that differ, per stream
    /// (`stoppingOffsets of stream orders`).
    pub offsets: Vec<(String, String, String)>,
    /// True when `bootstrap.servers` changed: the new list is asked, and flagged when
    /// it does not answer.
    pub bootstrap_changed: bool,
    /// Where the new splits start (when there are topics added).
    pub start: Option<StartRule>,
    /// The splits added and removed.
    pub splits: Splits,
    /// Properties to reach the cluster with, and the topics to ask about.
    pub(super) lookup: Option<(ClientProperties, BTreeSet<String>)>,
}

impl ClusterPlan {
    pub(super) fn query(&self, timeout: Duration, group: Option<&str>) -> Option<ClusterQuery> {
        let (properties, topics) = self.lookup.clone()?;
        let mut options = InspectOptions::new(timeout);
        if let Some(start) = &self.start {
            if start.offsets.needs_committed()
                && let Some(g) = group.or(properties.get("group.id"))
            {
                options = options.group(g);
            }
            if let Some(ts) = start.offsets.timestamp() {
                options = options.timestamp(ts);
            }
        }
        Some(ClusterQuery {
            cluster: self.cluster.clone(),
            properties,
            topics,
            options,
        })
    }
}
