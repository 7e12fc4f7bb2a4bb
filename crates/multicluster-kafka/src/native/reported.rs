//! How the native path's errors are reported in the source's words: their
//! [`KafkaErrorKind`], whether they are retriable, and the program's client hooks that
//! hear of them.

use std::sync::Arc;

use crate::base::hooks::ClientHooks;
use crate::error::KafkaErrorKind;

use multicluster_kafka_client::partition::{PartitionIssue, code};
use multicluster_kafka_client::{
    ErrorListener, Listener, NativeError, ProvidedToken, TokenProvider, Tokens,
};

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

/// A connection error's kind as the source reports it, and whether it is retriable.
pub(super) fn kind(e: &NativeError) -> (KafkaErrorKind, bool) {
    match e {
        NativeError::Connect { .. } | NativeError::Io { .. } | NativeError::Closed { .. } => {
            (KafkaErrorKind::Transport, true)
        }
        NativeError::Timeout { .. } => (KafkaErrorKind::Timeout, true),
        NativeError::Broker { code, .. } => (kind_of_code(*code), retriable_code(*code)),
        NativeError::Tls { .. } => (KafkaErrorKind::Tls, false),
        NativeError::Auth { .. } => (KafkaErrorKind::Authentication, false),
        // The provider is asked again, as librdkafka asks it.
        NativeError::Token { .. } => (KafkaErrorKind::Authentication, true),
        NativeError::Unsupported { .. } => (KafkaErrorKind::Unsupported, false),
        _ => (KafkaErrorKind::Other, false),
    }
}

pub(super) fn retriable_code(code: i16) -> bool {
    leader_moving(code)
        || code == code::UNKNOWN_TOPIC_OR_PARTITION
        || code == code::REQUEST_TIMED_OUT
}

/// The kind of Kafka's error `code` in an answer.
pub(super) fn kind_of_code(code: i16) -> KafkaErrorKind {
    match code {
        code::OFFSET_OUT_OF_RANGE => KafkaErrorKind::OffsetOutOfRange,
        code::UNKNOWN_TOPIC_OR_PARTITION | code::UNKNOWN_TOPIC_ID => {
            KafkaErrorKind::UnknownTopicOrPartition
        }
        code::REQUEST_TIMED_OUT => KafkaErrorKind::Timeout,
        code::TOPIC_AUTHORIZATION_FAILED
        | code::GROUP_AUTHORIZATION_FAILED
        | code::CLUSTER_AUTHORIZATION_FAILED => KafkaErrorKind::Authorization,
        c if leader_moving(c) => KafkaErrorKind::LeaderMoving,
        _ => KafkaErrorKind::Other,
    }
}

/// The kind of why a partition's answer gave no records.
pub(super) fn issue_kind(issue: &PartitionIssue) -> KafkaErrorKind {
    match issue {
        PartitionIssue::OutOfRange { .. } => KafkaErrorKind::OffsetOutOfRange,
        PartitionIssue::LeaderMoved { .. } | PartitionIssue::Diverged(_) => {
            KafkaErrorKind::LeaderMoving
        }
        PartitionIssue::Unknown { .. } => KafkaErrorKind::UnknownTopicOrPartition,
        PartitionIssue::Failed { code } => kind_of_code(*code),
        _ => KafkaErrorKind::Other,
    }
}

/// The program's client hooks of a cluster as the client's listener: their `error`
/// hears of its connection errors, with their kind, as a librdkafka client's would.
struct HooksHearErrors(Arc<dyn ClientHooks>);

impl ErrorListener for HooksHearErrors {
    fn on_error(&self, error: &NativeError) {
        self.0.error(kind(error).0, &error.to_string());
    }
}

/// The listener that tells `hooks` (if any) of a cluster's connection errors.
pub(crate) fn listener(hooks: Option<&Arc<dyn ClientHooks>>) -> Listener {
    Listener(hooks.map(|h| Arc::new(HooksHearErrors(h.clone())) as Arc<dyn ErrorListener>))
}

/// The program's client hooks as the client's maker of OAUTHBEARER tokens.
struct HooksMakeTokens(Arc<dyn ClientHooks>);

impl TokenProvider for HooksMakeTokens {
    fn token(&self, config: Option<&str>) -> Result<ProvidedToken, Box<dyn std::error::Error>> {
        let made = self.0.generate_oauth_token(config)?;
        Ok(ProvidedToken {
            value: made.token,
            expires_ms: made.lifetime_ms,
        })
    }
}

/// The tokens `hooks` make, asked with `config` (`sasl.oauthbearer.config`).
pub(crate) fn hooks_tokens(hooks: Arc<dyn ClientHooks>, config: Option<String>) -> Tokens {
    Tokens::from_provider(Arc::new(HooksMakeTokens(hooks)), config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaErrorCode as C;

    #[test]
    fn a_kafka_error_code_is_of_the_same_kind_on_both_paths() {
        // librdkafka's codes for broker errors are Kafka's own numbers.
        for (kafka, librdkafka) in [
            (code::OFFSET_OUT_OF_RANGE, C::OffsetOutOfRange),
            (code::UNKNOWN_TOPIC_OR_PARTITION, C::UnknownTopicOrPartition),
            (code::LEADER_NOT_AVAILABLE, C::LeaderNotAvailable),
            (code::NOT_LEADER_OR_FOLLOWER, C::NotLeaderForPartition),
            (code::REQUEST_TIMED_OUT, C::RequestTimedOut),
            (code::REPLICA_NOT_AVAILABLE, C::ReplicaNotAvailable),
            (
                code::TOPIC_AUTHORIZATION_FAILED,
                C::TopicAuthorizationFailed,
            ),
            (
                code::GROUP_AUTHORIZATION_FAILED,
                C::GroupAuthorizationFailed,
            ),
            (
                code::CLUSTER_AUTHORIZATION_FAILED,
                C::ClusterAuthorizationFailed,
            ),
            (code::KAFKA_STORAGE_ERROR, C::KafkaStorageError),
            (code::FENCED_LEADER_EPOCH, C::FencedLeaderEpoch),
            (code::UNKNOWN_LEADER_EPOCH, C::UnknownLeaderEpoch),
            (code::OFFSET_NOT_AVAILABLE, C::OffsetNotAvailable),
            (
                code::PREFERRED_LEADER_NOT_AVAILABLE,
                C::PreferredLeaderNotAvailable,
            ),
        ] {
            assert_eq!(i32::from(kafka), librdkafka as i32, "{librdkafka:?}");
            assert_eq!(
                kind_of_code(kafka),
                crate::kafka::errors::kind_of(librdkafka),
                "{librdkafka:?}"
            );
        }
        assert_eq!(kind_of_code(12345), KafkaErrorKind::Other);
    }

    #[test]
    fn a_connection_error_is_of_the_kind_librdkafka_reports_for_it() {
        let refused = NativeError::Auth {
            addr: "127.0.0.1:9092".into(),
            mechanism: "PLAIN",
            message: "Authentication failed".into(),
        };
        assert_eq!(kind(&refused), (KafkaErrorKind::Authentication, false));
        let moving = PartitionIssue::LeaderMoved {
            code: code::NOT_LEADER_OR_FOLLOWER,
            hint: None,
        };
        assert_eq!(issue_kind(&moving), KafkaErrorKind::LeaderMoving);
        assert_eq!(
            issue_kind(&PartitionIssue::OutOfRange { offset: 7 }),
            KafkaErrorKind::OffsetOutOfRange
        );
    }
}
