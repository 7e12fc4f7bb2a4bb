//! The kinds of failure a Kafka cluster's client meets, in the source's words.

/// What kind of failure a Kafka cluster's client met, the same whichever fetch path
/// (the native one or librdkafka's) met it: what a program can do about it, not the
/// client's code for it. New kinds may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaErrorKind {
    /// The network: no broker reachable, a connection refused, reset or closed, a name
    /// that does not resolve.
    Transport,
    /// No answer within a timeout.
    Timeout,
    /// A partition's leader or replicas are moving or not yet known (leader not
    /// available, not the leader, a fenced or unknown leader epoch, a storage error).
    LeaderMoving,
    /// A group's coordinator is loading, moving or not yet known, or the group is
    /// rebalancing.
    CoordinatorMoving,
    /// The cluster does not know the topic or partition.
    UnknownTopicOrPartition,
    /// A position is outside the partition's log.
    OffsetOutOfRange,
    /// The cluster refused the client's credentials (SASL), or no token could be had.
    Authentication,
    /// The TLS handshake failed (a certificate, a key, a protocol).
    Tls,
    /// The client's principal may not do this (topic, group or cluster authorization).
    Authorization,
    /// A client property or setting is invalid or refused.
    Configuration,
    /// The brokers do not support a request or feature the client needs.
    Unsupported,
    /// The cluster asks the client to slow down (a quota).
    Throttled,
    /// Anything else.
    Other,
}

impl KafkaErrorKind {
    /// The kind's name as one word in snake case (`transport`, `leader_moving`), for
    /// logs, metrics and bindings.
    pub fn as_str(self) -> &'static str {
        match self {
            KafkaErrorKind::Transport => "transport",
            KafkaErrorKind::Timeout => "timeout",
            KafkaErrorKind::LeaderMoving => "leader_moving",
            KafkaErrorKind::CoordinatorMoving => "coordinator_moving",
            KafkaErrorKind::UnknownTopicOrPartition => "unknown_topic_or_partition",
            KafkaErrorKind::OffsetOutOfRange => "offset_out_of_range",
            KafkaErrorKind::Authentication => "authentication",
            KafkaErrorKind::Tls => "tls",
            KafkaErrorKind::Authorization => "authorization",
            KafkaErrorKind::Configuration => "configuration",
            KafkaErrorKind::Unsupported => "unsupported",
            KafkaErrorKind::Throttled => "throttled",
            KafkaErrorKind::Other => "other",
        }
    }
}

impl std::fmt::Display for KafkaErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
