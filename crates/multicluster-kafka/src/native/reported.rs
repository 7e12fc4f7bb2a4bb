//! How the native path's errors are reported as librdkafka's would be: their
//! librdkafka codes, whether they are retriable, and the program's client hooks that
//! hear of them.

use std::sync::Arc;

use crate::base::hooks::ClientHooks;

use super::error::NativeError;
use super::partition::code;

/// Whether a partition's error code says its leader is moving or not yet known:
/// worth asking again after a metadata refresh.
pub(super) fn leader_moving(code: i16) -> bool {
    matches!(
        code,
        code::LEADER_NOT_AVAILABLE
            | code::NOT_LEADER_OR_FOLLOWER
            | code::REPLICA_NOT_AVAILABLE
            | code::KAFKA_STORAGE_ERROR
            | code::FENCED_LEADER_EPOCH
            | code::UNKNOWN_LEADER_EPOCH
            | code::OFFSET_NOT_AVAILABLE
            | code::PREFERRED_LEADER_NOT_AVAILABLE
    )
}

/// A connection error's code as librdkafka's path reports it, and whether it is
/// retriable.
pub(super) fn kind(e: &NativeError) -> (Option<rdkafka::types::RDKafkaErrorCode>, bool) {
    use rdkafka::types::RDKafkaErrorCode as C;
    match e {
        NativeError::Connect { .. } | NativeError::Io { .. } | NativeError::Closed { .. } => {
            (Some(C::BrokerTransportFailure), true)
        }
        NativeError::Timeout { .. } => (Some(C::OperationTimedOut), true),
        NativeError::Broker { code, .. } => (rdkafka_code(*code), retriable_code(*code)),
        NativeError::Tls { .. } => (Some(C::SSL), false),
        NativeError::Auth { .. } => (Some(C::Authentication), false),
        // The provider is asked again, as librdkafka asks it.
        NativeError::Token { .. } => (Some(C::Authentication), true),
        _ => (None, false),
    }
}

pub(super) fn retriable_code(code: i16) -> bool {
    leader_moving(code)
        || code == code::UNKNOWN_TOPIC_OR_PARTITION
        || code == code::REQUEST_TIMED_OUT
}

/// librdkafka's name for Kafka's error codes the source tells apart.
pub(super) fn rdkafka_code(code: i16) -> Option<rdkafka::types::RDKafkaErrorCode> {
    use rdkafka::types::RDKafkaErrorCode as C;
    Some(match code {
        code::OFFSET_OUT_OF_RANGE => C::OffsetOutOfRange,
        code::UNKNOWN_TOPIC_OR_PARTITION => C::UnknownTopicOrPartition,
        code::LEADER_NOT_AVAILABLE => C::LeaderNotAvailable,
        code::NOT_LEADER_OR_FOLLOWER => C::NotLeaderForPartition,
        code::REQUEST_TIMED_OUT => C::RequestTimedOut,
        code::REPLICA_NOT_AVAILABLE => C::ReplicaNotAvailable,
        code::TOPIC_AUTHORIZATION_FAILED => C::TopicAuthorizationFailed,
        code::GROUP_AUTHORIZATION_FAILED => C::GroupAuthorizationFailed,
        code::CLUSTER_AUTHORIZATION_FAILED => C::ClusterAuthorizationFailed,
        code::KAFKA_STORAGE_ERROR => C::KafkaStorageError,
        code::FENCED_LEADER_EPOCH => C::FencedLeaderEpoch,
        code::UNKNOWN_LEADER_EPOCH => C::UnknownLeaderEpoch,
        code::OFFSET_NOT_AVAILABLE => C::OffsetNotAvailable,
        code::PREFERRED_LEADER_NOT_AVAILABLE => C::PreferredLeaderNotAvailable,
        _ => return None,
    })
}

/// The program's client hooks of a cluster, whose `error` hears of its connection
/// errors as a librdkafka client's would. `Debug` says only whether there are any.
#[derive(Clone, Default)]
pub(crate) struct ErrorHook(pub Option<Arc<dyn ClientHooks>>);

impl std::fmt::Debug for ErrorHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ErrorHook(set)"
        } else {
            "ErrorHook(none)"
        })
    }
}

impl ErrorHook {
    /// Tells the hooks of `e`, with librdkafka's code for it.
    pub(super) fn tell(&self, e: &NativeError) {
        if let Some(hooks) = &self.0 {
            let code = kind(e).0.unwrap_or(rdkafka::types::RDKafkaErrorCode::Fail);
            hooks.error(rdkafka::error::KafkaError::Global(code), &e.to_string());
        }
    }
}
