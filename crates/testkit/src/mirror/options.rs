//! How to start a [`MirrorMaker`](super::MirrorMaker): the replication flow, its
//! settings, and the `mm2.properties` they make.

use std::time::Duration;

use crate::real::small_jvm_options;
use crate::{DEFAULT_READY_TIMEOUT, TestCluster};

/// The cluster that holds the offset-syncs topic (MirrorMaker 2's
/// `offset-syncs.topic.location`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetSyncsLocation {
    /// On the source cluster, named after the target alias (MirrorMaker 2's default).
    #[default]
    Source,
    /// On the target cluster, named after the source alias.
    Target,
}

impl OffsetSyncsLocation {
    /// The value of `offset-syncs.topic.location`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Target => "target",
        }
    }
}

/// How MirrorMaker 2 names a topic's copy on the target (`replication.policy.class`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplicationPolicy {
    /// `DefaultReplicationPolicy`: `<source alias>.<topic>`.
    #[default]
    Default,
    /// `IdentityReplicationPolicy`: the topic's own name.
    Identity,
}

impl ReplicationPolicy {
    /// The Java class MirrorMaker 2 loads.
    pub fn class(self) -> &'static str {
        match self {
            Self::Default => "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            Self::Identity => "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        }
    }
}

/// One side of the replication flow: MirrorMaker 2's alias for a cluster and where it
/// is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorCluster {
    /// The alias: it names the copies (`<alias>.<topic>`) and every internal topic, so
    /// two mirrors sharing a cluster need aliases of their own. Letters, digits, `_`
    /// and `-` only.
    pub alias: String,
    /// `host:port,…`.
    pub bootstrap: String,
}

/// How to start a [`MirrorMaker`](super::MirrorMaker): one flow, source to target, in
/// dedicated mode, tuned so a test sees results within seconds.
#[derive(Clone, Debug)]
pub struct MirrorOptions {
    /// Where records come from.
    pub source: MirrorCluster,
    /// Where they are copied to.
    pub target: MirrorCluster,
    /// The topics to mirror: a Java regex matched against whole names (`topics`).
    pub topics: String,
    /// The consumer groups to checkpoint: a Java regex (`groups`).
    pub groups: String,
    /// `offset-syncs.topic.location`.
    pub offset_syncs_location: OffsetSyncsLocation,
    /// `sync.group.offsets.enabled`: commit the checkpointed offsets to the groups on
    /// the target (only to groups with no active member there).
    pub sync_group_offsets: bool,
    /// `emit.checkpoints.interval.seconds` (whole seconds, at least 1).
    pub emit_checkpoints_interval: Duration,
    /// `offset.lag.max`: how far the target may get past the last offset sync before
    /// another is written. 0 writes one for (nearly) every record.
    pub offset_lag_max: u64,
    /// `replication.policy.class`.
    pub replication_policy: ReplicationPolicy,
    /// How often MirrorMaker 2 looks for new topics and groups and syncs group offsets
    /// (`refresh.topics.interval.seconds`, `refresh.groups.interval.seconds`,
    /// `sync.group.offsets.interval.seconds`), and how often the worker commits (the
    /// target's `offset.flush.interval.ms`, which also sends the offset syncs held
    /// back by `offset.lag.max`). Whole seconds, at least 1.
    pub refresh_interval: Duration,
    /// Read the source with `isolation.level=read_committed`: records of aborted
    /// transactions are not copied. MirrorMaker 2's default (`false`) copies them.
    pub read_committed: bool,
    /// `tasks.max`.
    pub tasks_max: usize,
    /// The replication factor of the copies and of every internal topic.
    pub replication_factor: usize,
    /// `emit.heartbeats.enabled` for the flow: a `heartbeats` topic on the target,
    /// written every refresh interval. Off by default (no reverse flow runs either way).
    pub heartbeats: bool,
    /// Further `mm2.properties` entries, written last (so they win).
    pub properties: Vec<(String, String)>,
    /// The JVM's options.
    pub jvm_options: Vec<String>,
    /// How long the JVM may take to say it started.
    pub ready_timeout: Duration,
}

impl MirrorOptions {
    /// A flow from the cluster at `source_bootstrap`, called `source_alias`, to the one
    /// at `target_bootstrap`, called `target_alias`: every topic, every group, offset
    /// syncs on the source, a sync for every record (`offset.lag.max=0`), checkpoints
    /// and refreshes every second, group offsets not synced, the default replication
    /// policy, `read_uncommitted`, one task, replication factor 1, no heartbeats.
    pub fn new(
        source_alias: impl Into<String>,
        source_bootstrap: impl Into<String>,
        target_alias: impl Into<String>,
        target_bootstrap: impl Into<String>,
    ) -> Self {
        Self {
            source: MirrorCluster {
                alias: source_alias.into(),
                bootstrap: source_bootstrap.into(),
            },
            target: MirrorCluster {
                alias: target_alias.into(),
                bootstrap: target_bootstrap.into(),
            },
            topics: ".*".into(),
            groups: ".*".into(),
            offset_syncs_location: OffsetSyncsLocation::Source,
            sync_group_offsets: false,
            emit_checkpoints_interval: Duration::from_secs(1),
            offset_lag_max: 0,
            replication_policy: ReplicationPolicy::Default,
            refresh_interval: Duration::from_secs(1),
            read_committed: false,
            tasks_max: 1,
            replication_factor: 1,
            heartbeats: false,
            properties: Vec::new(),
            jvm_options: small_jvm_options(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }

    /// [`MirrorOptions::new`] between two test clusters, with these aliases.
    pub fn between(
        source_alias: impl Into<String>,
        source: &dyn TestCluster,
        target_alias: impl Into<String>,
        target: &dyn TestCluster,
    ) -> Self {
        Self::new(
            source_alias,
            source.bootstrap_servers(),
            target_alias,
            target.bootstrap_servers(),
        )
    }

    /// Mirrors only the topics whose whole name matches this Java regex.
    pub fn topics(mut self, regex: impl Into<String>) -> Self {
        self.topics = regex.into();
        self
    }

    /// Checkpoints only the groups whose whole name matches this Java regex.
    pub fn groups(mut self, regex: impl Into<String>) -> Self {
        self.groups = regex.into();
        self
    }

    /// Sets `offset-syncs.topic.location`.
    pub fn offset_syncs_on(mut self, location: OffsetSyncsLocation) -> Self {
        self.offset_syncs_location = location;
        self
    }

    /// Sets `sync.group.offsets.enabled`.
    pub fn sync_group_offsets(mut self, on: bool) -> Self {
        self.sync_group_offsets = on;
        self
    }

    /// Sets `emit.checkpoints.interval.seconds`.
    pub fn emit_checkpoints_every(mut self, interval: Duration) -> Self {
        self.emit_checkpoints_interval = interval;
        self
    }

    /// Sets `offset.lag.max`.
    pub fn offset_lag_max(mut self, max: u64) -> Self {
        self.offset_lag_max = max;
        self
    }

    /// Sets `replication.policy.class`.
    pub fn replication_policy(mut self, policy: ReplicationPolicy) -> Self {
        self.replication_policy = policy;
        self
    }

    /// Sets the refresh intervals ([`MirrorOptions::refresh_interval`]).
    pub fn refresh_every(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// Reads the source `read_committed`.
    pub fn read_committed(mut self) -> Self {
        self.read_committed = true;
        self
    }

    /// Sets `tasks.max`.
    pub fn tasks_max(mut self, n: usize) -> Self {
        self.tasks_max = n.max(1);
        self
    }

    /// Sets the replication factor of the copies and the internal topics.
    pub fn replication_factor(mut self, n: usize) -> Self {
        self.replication_factor = n.max(1);
        self
    }

    /// Turns the flow's heartbeats on or off.
    pub fn heartbeats(mut self, on: bool) -> Self {
        self.heartbeats = on;
        self
    }

    /// Adds an `mm2.properties` entry, written after the test kit's own.
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// `<source alias>-><target alias>`, as MirrorMaker 2 writes a flow.
    pub fn flow(&self) -> String {
        format!("{}->{}", self.source.alias, self.target.alias)
    }

    /// The name of the copy of the source's `topic` on the target.
    pub fn remote_topic(&self, topic: &str) -> String {
        match self.replication_policy {
            ReplicationPolicy::Default => format!("{}.{topic}", self.source.alias),
            ReplicationPolicy::Identity => topic.to_string(),
        }
    }

    /// The offset-syncs topic: `mm2-offset-syncs.<target alias>.internal` on the
    /// source, or `mm2-offset-syncs.<source alias>.internal` on the target (the alias
    /// of the *other* cluster, whichever holds it).
    pub fn offset_syncs_topic(&self) -> String {
        let other = match self.offset_syncs_location {
            OffsetSyncsLocation::Source => &self.target.alias,
            OffsetSyncsLocation::Target => &self.source.alias,
        };
        format!("mm2-offset-syncs.{other}.internal")
    }

    /// The cluster that holds [`MirrorOptions::offset_syncs_topic`].
    pub fn offset_syncs_cluster(&self) -> &MirrorCluster {
        match self.offset_syncs_location {
            OffsetSyncsLocation::Source => &self.source,
            OffsetSyncsLocation::Target => &self.target,
        }
    }

    /// The checkpoints topic on the target: `<source alias>.checkpoints.internal`
    /// (whatever the replication policy).
    pub fn checkpoints_topic(&self) -> String {
        format!("{}.checkpoints.internal", self.source.alias)
    }

    /// Why these options cannot start, if they cannot.
    pub(super) fn check(&self) -> Result<(), String> {
        for alias in [&self.source.alias, &self.target.alias] {
            let ok = !alias.is_empty()
                && alias
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                return Err(format!(
                    "alias {alias:?}: use letters, digits, `_` and `-` only"
                ));
            }
        }
        if self.source.alias == self.target.alias {
            return Err("the source and the target have the same alias".into());
        }
        Ok(())
    }

    /// The `mm2.properties` of these options, one `key = value` a line (backslashes
    /// escaped, as Java's properties format wants).
    pub fn properties_text(&self) -> String {
        let (s, t) = (&self.source.alias, &self.target.alias);
        let secs = |d: Duration| d.as_secs().max(1).to_string();
        let refresh = secs(self.refresh_interval);
        let rf = self.replication_factor.to_string();
        let mut props: Vec<(String, String)> = vec![
            ("clusters".into(), format!("{s}, {t}")),
            // Every plugin MirrorMaker needs has a ServiceLoader manifest; the default
            // (`hybrid_warn`) also scans every class, which takes seconds.
            ("plugin.discovery".into(), "service_load".into()),
            (format!("{t}.plugin.discovery"), "service_load".into()),
            (
                format!("{s}.bootstrap.servers"),
                self.source.bootstrap.clone(),
            ),
            (
                format!("{t}.bootstrap.servers"),
                self.target.bootstrap.clone(),
            ),
            (format!("{s}->{t}.enabled"), "true".into()),
            (format!("{s}->{t}.topics"), self.topics.clone()),
            (format!("{s}->{t}.groups"), self.groups.clone()),
            (format!("{t}->{s}.enabled"), "false".into()),
            // Without this the reverse flow's herder runs, for heartbeats only.
            (format!("{t}->{s}.emit.heartbeats.enabled"), "false".into()),
            (
                format!("{s}->{t}.emit.heartbeats.enabled"),
                self.heartbeats.to_string(),
            ),
            ("emit.heartbeats.interval.seconds".into(), refresh.clone()),
            (
                "offset-syncs.topic.location".into(),
                self.offset_syncs_location.as_str().into(),
            ),
            (
                "sync.group.offsets.enabled".into(),
                self.sync_group_offsets.to_string(),
            ),
            (
                "sync.group.offsets.interval.seconds".into(),
                refresh.clone(),
            ),
            ("emit.checkpoints.enabled".into(), "true".into()),
            (
                "emit.checkpoints.interval.seconds".into(),
                secs(self.emit_checkpoints_interval),
            ),
            ("offset.lag.max".into(), self.offset_lag_max.to_string()),
            (
                "replication.policy.class".into(),
                self.replication_policy.class().into(),
            ),
            ("refresh.topics.interval.seconds".into(), refresh.clone()),
            ("refresh.groups.interval.seconds".into(), refresh.clone()),
            // The brokers run without an authorizer.
            ("sync.topic.acls.enabled".into(), "false".into()),
            ("tasks.max".into(), self.tasks_max.to_string()),
            ("replication.factor".into(), rf.clone()),
            ("offset-syncs.topic.replication.factor".into(), rf.clone()),
            ("checkpoints.topic.replication.factor".into(), rf.clone()),
            ("heartbeats.topic.replication.factor".into(), rf.clone()),
            ("offset.storage.replication.factor".into(), rf.clone()),
            ("config.storage.replication.factor".into(), rf.clone()),
            ("status.storage.replication.factor".into(), rf),
            // The worker of a flow takes its settings from the target's entries.
            (
                format!("{t}.offset.flush.interval.ms"),
                (self.refresh_interval.as_millis().max(100)).to_string(),
            ),
        ];
        if self.read_committed {
            props.push((
                format!("{s}.consumer.isolation.level"),
                "read_committed".into(),
            ));
        }
        props.extend(self.properties.iter().cloned());
        props
            .iter()
            .map(|(k, v)| format!("{k} = {}\n", v.replace('\\', "\\\\")))
            .collect()
    }
}
