//! The cluster's native settings made from its properties: the fetches' sizes and
//! waits, the connections' options and the partitions' reading.

use std::time::Duration;

use crate::base::properties::ClientProperties;
use crate::error::SourceError;

use multicluster_kafka_client::calls::FetchSettings;
use multicluster_kafka_client::conn::ConnectOptions;
use multicluster_kafka_client::partition::PartitionOptions;

use super::security::{sasl, tls};
use super::{Given, Settings, refused};

/// A property as a number, or librdkafka's default; a value that is not one is an
/// error naming the key (never the value).
fn number<T: std::str::FromStr>(
    given: &Given<'_>,
    keys: &[&str],
    default: T,
) -> Result<T, SourceError> {
    for key in keys {
        if let Some(v) = given.props.get(key) {
            return v.trim().parse().map_err(|_| SourceError::Kafka {
                cluster: given.cluster.to_string(),
                message: format!("property `{key}` refused: not a number in range"),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
    }
    Ok(default)
}

/// The cluster's native settings from its properties (librdkafka's names and
/// defaults).
pub(crate) fn settings(given: &Given<'_>) -> Result<Settings, SourceError> {
    let props: &ClientProperties = given.props;
    let bootstrap: Vec<String> = props
        .bootstrap_servers()
        .unwrap_or_default()
        .split(',')
        .map(|s| {
            let s = s.trim();
            s.split_once("://").map_or(s, |(_, a)| a).to_string()
        })
        .filter(|s| !s.is_empty())
        .collect();
    let read_committed = match props.get("isolation.level").map(str::trim) {
        None | Some("read_committed") => true,
        Some("read_uncommitted") => false,
        Some(_) => {
            return Err(SourceError::Kafka {
                cluster: given.cluster.to_string(),
                message: "property `isolation.level` refused: read_committed or read_uncommitted"
                    .into(),
                kind: crate::error::KafkaErrorKind::Configuration,
                retriable: false,
            });
        }
    };
    let check_crcs = matches!(props.get("check.crcs").map(str::trim), Some("true"));
    let max_frame: usize = number(given, &["receive.message.max.bytes"], 100_000_000)?;
    let lanes = props
        .fetch_connections()
        .map_err(|e| refused(given, crate::base::properties::FETCH_CONNECTIONS, e.reason))?;
    let share_from = props
        .fetch_share_min_bytes()
        .map_err(|e| refused(given, crate::base::properties::FETCH_SHARE, e.reason))?;
    let max_bytes: i32 = number(given, &["fetch.max.bytes"], 52_428_800)?;
    let fetch = FetchSettings {
        max_wait_ms: number(given, &["fetch.wait.max.ms"], 500)?,
        min_bytes: number(given, &["fetch.min.bytes"], 1)?,
        // The fetches in flight to a broker share `fetch.max.bytes`, so a broker's
        // answers take no more memory than one fetch at a time would.
        max_bytes: (max_bytes / i32::try_from(lanes).unwrap_or(1).max(1)).max(1),
        read_committed,
        // A leader may point a client of a known rack to a replica in it
        // (KIP-392), which the cluster's broker tasks then follow.
        rack: props.get("client.rack").unwrap_or("").trim().to_string(),
    };
    let timeout_ms: u64 = number(given, &["socket.timeout.ms"], 60_000)?;
    let tls = tls(given)?;
    let connect = ConnectOptions {
        tls,
        sasl: sasl(given)?,
        client_id: props.get("client.id").unwrap_or("rdkafka").to_string(),
        // A fetch waits up to fetch.wait.max.ms before the broker answers.
        timeout: Duration::from_millis(timeout_ms)
            + Duration::from_millis(u64::try_from(fetch.max_wait_ms).unwrap_or(0)),
        max_frame_size: max_frame.max(max_bytes.max(0) as usize + (1 << 20)),
    };
    let budget_kb: usize = number(given, &["queued.max.messages.kbytes"], 65_536)?;
    let partition_max_bytes = number(
        given,
        &["max.partition.fetch.bytes", "fetch.message.max.bytes"],
        1_048_576,
    )?;
    let partition = PartitionOptions {
        read_committed,
        check_crcs,
        max_decompressed: max_frame.max(64 << 20),
    };
    Ok(Settings {
        bootstrap,
        connect,
        fetch,
        partition_max_bytes,
        budget: budget_kb.saturating_mul(1024).max(1 << 20),
        lanes,
        share_from,
        partition,
        errors: crate::native::reported::listener(given.hooks),
    })
}
