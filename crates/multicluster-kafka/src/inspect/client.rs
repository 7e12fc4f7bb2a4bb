//! The client a lookup makes for itself, and errors that lose every secret value on
//! the way out.

use std::sync::Arc;

use super::InspectOptions;
use super::report::ClusterState;
use crate::base::properties::{ClientProperties, REDACTED, RefusedProperty};
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;

/// Removes every secret property value from a cluster error's message, and a
/// secret bootstrap list's brokers one by one (librdkafka names them in its errors).
pub(super) fn scrub(e: SourceError, properties: &ClientProperties) -> SourceError {
    let clean = |mut message: String| {
        for (k, v) in properties.iter() {
            if properties.is_secret(k) && !v.is_empty() {
                message = message.replace(v, REDACTED);
            }
        }
        crate::base::properties::hide_secrets(&message, &properties.secret_texts()).into_owned()
    };
    match e {
        SourceError::Cluster { cluster, message } => SourceError::Cluster {
            cluster,
            message: clean(message),
        },
        SourceError::Kafka {
            cluster,
            message,
            kind,
            retriable,
        } => SourceError::Kafka {
            cluster,
            message: clean(message),
            kind,
            retriable,
        },
        other => other,
    }
}

/// Makes a client of its own for `cluster` (properties librdkafka refuses are found
/// first, without a connection), makes first contact, and hands it with the Kafka
/// `cluster.id` to `ask`. Returns where the cluster stands and the answer; errors
/// lose every secret value, as in
/// [`inspect_cluster_state`](super::inspect_cluster_state).
pub(super) fn with_own_client<T>(
    cluster: &str,
    properties: &ClientProperties,
    options: &InspectOptions,
    ask: impl FnOnce(&ClusterClient, String) -> Result<T, SourceError>,
) -> (ClusterState, Result<T, SourceError>) {
    let refused = |r: RefusedProperty| {
        let e = SourceError::Cluster {
            cluster: cluster.to_string(),
            message: r.to_string(),
        };
        (ClusterState::Refused(r), Err(e))
    };
    if let Err(r) = properties.check() {
        return refused(r);
    }
    let client = match ClusterClient::new(
        None,
        Arc::from(cluster),
        properties,
        options.group.as_deref(),
        options.timeout,
        Default::default(),
        None,
    ) {
        Ok(client) => client,
        Err(e) => {
            let reason = match &e {
                SourceError::Cluster { message, .. } | SourceError::Kafka { message, .. } => {
                    message.clone()
                }
                other => other.to_string(),
            };
            return refused(properties.refusal(&reason));
        }
    };
    let answer = match client.first_contact() {
        Ok(kafka_cluster_id) => (
            ClusterState::Connected,
            ask(&client, kafka_cluster_id).map_err(|e| scrub(e, properties)),
        ),
        Err(e) => {
            let state = if client.rejected() {
                ClusterState::Rejected
            } else {
                ClusterState::Unreachable
            };
            (state, Err(scrub(e, properties)))
        }
    };
    // Destroying a consumer takes rust-rdkafka up to 100 ms of polling: not waited for.
    crate::kafka::client::close_detached(client);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_errors_lose_secret_values() {
        let mut props = ClientProperties::new();
        props.set("bootstrap.servers", "a:1");
        props.set("sasl.password", "hunter2");
        let e = SourceError::Cluster {
            cluster: "east".into(),
            message: "auth failed for password hunter2 at a:1".into(),
        };
        let shown = scrub(e, &props).to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("a:1") && shown.contains(REDACTED), "{shown}");
    }
}
