//! How `describe` and `plan` show a cluster: its bootstrap list (secrets redacted) and
//! why a lookup of it failed.

use multicluster_kafka::error::SourceError;
use multicluster_kafka::properties::{BOOTSTRAP_SERVERS, ClientProperties};

/// `bootstrap.servers` as a person may see it (redacted if it came from a secret
/// reference).
pub fn shown_bootstrap(props: &ClientProperties) -> String {
    props
        .redacted()
        .find(|(k, _)| *k == BOOTSTRAP_SERVERS)
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

/// The reason a cluster lookup failed, without the `cluster `id`:` prefix the text
/// already shows.
pub fn failure_reason(e: &SourceError) -> String {
    match e {
        SourceError::Cluster { message, .. } | SourceError::Kafka { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    }
}
