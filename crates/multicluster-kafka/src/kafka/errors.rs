//! librdkafka's errors in the source's words: each code as a [`KafkaErrorKind`], and
//! whether a later attempt may meet it again.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::base::properties::ClientProperties;
use crate::error::{KafkaErrorKind, SourceError};

impl SourceError {
    /// librdkafka refused to make a cluster's client (an invalid property, a
    /// certificate that does not load): not retriable. The message is scrubbed of
    /// every secret property value.
    pub(crate) fn cluster(
        cluster: &str,
        what: &str,
        e: &dyn std::fmt::Display,
        props: &ClientProperties,
    ) -> Self {
        // librdkafka's reason may quote the value: it names the key instead.
        let refused = props.refusal(&e.to_string());
        let message = match &refused.key {
            Some(key) => format!(
                "{what}: property `{key}` refused by librdkafka: {}",
                refused.reason
            ),
            None => format!("{what}: {}", refused.reason),
        };
        SourceError::Kafka {
            cluster: cluster.to_string(),
            message,
            kind: KafkaErrorKind::Configuration,
            retriable: false,
        }
    }

    /// A librdkafka error of a cluster, described by `message`.
    pub(crate) fn kafka(cluster: &str, message: String, e: &KafkaError) -> Self {
        let code = e.rdkafka_error_code();
        SourceError::Kafka {
            cluster: cluster.to_string(),
            message,
            kind: kind_of_error(e),
            retriable: code.is_some_and(is_retriable_code),
        }
    }
}

/// The kind of a librdkafka error: of its code, or of what failed when it has none.
pub(crate) fn kind_of_error(e: &KafkaError) -> KafkaErrorKind {
    match e.rdkafka_error_code() {
        Some(code) => kind_of(code),
        None => match e {
            KafkaError::ClientConfig(..) | KafkaError::ClientCreation(_) | KafkaError::Nul(_) => {
                KafkaErrorKind::Configuration
            }
            _ => KafkaErrorKind::Other,
        },
    }
}

/// The kind of librdkafka's error `code`.
pub(crate) fn kind_of(code: RDKafkaErrorCode) -> KafkaErrorKind {
    use KafkaErrorKind as K;
    use RDKafkaErrorCode as C;
    match code {
        C::BrokerTransportFailure
        | C::AllBrokersDown
        | C::Resolve
        | C::NetworkException
        | C::BrokerNotAvailable => K::Transport,
        C::OperationTimedOut | C::RequestTimedOut | C::TimedOutQueue | C::MessageTimedOut => {
            K::Timeout
        }
        C::LeaderNotAvailable
        | C::NotLeaderForPartition
        | C::ReplicaNotAvailable
        | C::NotEnoughReplicas
        | C::NotEnoughReplicasAfterAppend
        | C::FencedLeaderEpoch
        | C::UnknownLeaderEpoch
        | C::OffsetNotAvailable
        | C::PreferredLeaderNotAvailable
        | C::KafkaStorageError => K::LeaderMoving,
        C::CoordinatorLoadInProgress
        | C::CoordinatorNotAvailable
        | C::NotCoordinator
        | C::RebalanceInProgress
        | C::WaitingForCoordinator => K::CoordinatorMoving,
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => {
            K::UnknownTopicOrPartition
        }
        C::OffsetOutOfRange => K::OffsetOutOfRange,
        C::Authentication | C::SaslAuthenticationFailed => K::Authentication,
        C::SSL => K::Tls,
        C::TopicAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed
        | C::DelegationTokenAuthorizationFailed => K::Authorization,
        C::InvalidConfig | C::InvalidArgument => K::Configuration,
        C::UnsupportedVersion | C::UnsupportedFeature | C::UnsupportedForMessageFormat => {
            K::Unsupported
        }
        C::ThrottlingQuotaExceeded => K::Throttled,
        _ => K::Other,
    }
}

/// librdkafka errors that a later attempt may not meet: the network, timeouts,
/// brokers and leaders moving, coordinators loading.
fn is_retriable_code(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::OperationTimedOut
            | C::RequestTimedOut
            | C::TimedOutQueue
            | C::Resolve
            | C::NetworkException
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::BrokerNotAvailable
            | C::ReplicaNotAvailable
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::CoordinatorLoadInProgress
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
            | C::RebalanceInProgress
            | C::WaitingForCoordinator
            | C::Retry
            | C::FencedLeaderEpoch
            | C::UnknownLeaderEpoch
            | C::OffsetNotAvailable
            | C::PreferredLeaderNotAvailable
            | C::KafkaStorageError
            | C::UnknownTopicOrPartition
            | C::ThrottlingQuotaExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::metadata::MetadataError;

    fn kafka(code: RDKafkaErrorCode) -> SourceError {
        SourceError::kafka(
            "east",
            "metadata request".into(),
            &KafkaError::MetadataFetch(code),
        )
    }

    #[test]
    fn a_kafka_error_gets_its_kind_and_says_whether_trying_again_may_help() {
        let down = kafka(RDKafkaErrorCode::BrokerTransportFailure);
        assert!(down.is_retriable());
        assert_eq!(down.kafka_kind(), Some(KafkaErrorKind::Transport));
        assert_eq!(down.cluster_id(), Some("east"));
        for (stays, kind) in [
            (
                RDKafkaErrorCode::SaslAuthenticationFailed,
                KafkaErrorKind::Authentication,
            ),
            (
                RDKafkaErrorCode::TopicAuthorizationFailed,
                KafkaErrorKind::Authorization,
            ),
            (
                RDKafkaErrorCode::InvalidConfig,
                KafkaErrorKind::Configuration,
            ),
        ] {
            let e = kafka(stays);
            assert!(!e.is_retriable(), "{stays:?}");
            assert_eq!(e.kafka_kind(), Some(kind), "{stays:?}");
        }
        assert_eq!(
            kafka(RDKafkaErrorCode::NotLeaderForPartition).kafka_kind(),
            Some(KafkaErrorKind::LeaderMoving)
        );
        let refused = SourceError::cluster(
            "east",
            "create client",
            &"bad value",
            &ClientProperties::new(),
        );
        assert!(!refused.is_retriable());
        assert_eq!(refused.kafka_kind(), Some(KafkaErrorKind::Configuration));
        // A refused client names the key, never the value.
        let mut props = ClientProperties::new();
        props.set("fetch.max.bytes", "banana");
        let refused = SourceError::cluster(
            "east",
            "create client",
            &"Invalid value \"banana\" for configuration property \"fetch.max.bytes\"",
            &props,
        );
        let text = refused.to_string();
        assert!(!text.contains("banana"), "{text}");
        assert!(
            text.contains("property `fetch.max.bytes` refused"),
            "{text}"
        );
        assert!(
            SourceError::internal("a discovery task", "panicked")
                .to_string()
                .starts_with("internal error: a discovery task failed")
        );
        assert!(!SourceError::Closed.is_retriable());
        let service = MetadataError::Service {
            service: "http://meta".into(),
            message: "503".into(),
            retriable: true,
        };
        assert!(SourceError::Metadata(service).is_retriable());
    }
}
