//! A cluster's lookups on the native path: its id, topics and partitions, offsets
//! by position or time, and short reads of a partition, over connections of their
//! own on the source's tokio runtime (no thread of their own: a source's thread count
//! does not grow with its clusters). The enumerator calls them from its blocking
//! lookup threads, through [`super::lookups::NativeLookups`]; groups and commits stay
//! on librdkafka.
//!
//! A connection is taken from the idle ones of its broker for a call and given back
//! after an answer; one that fails is dropped. An idle connection the broker closed
//! meanwhile (`connections.max.idle.ms`) is replaced once, silently.
//!
//! Its parts: the connections and the brokers' addresses ([`pool`]), metadata
//! ([`metadata`]), offsets by position or time ([`offsets`]) and reads of a partition
//! ([`reads`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::error::SourceError;

use super::reported::{kind, kind_of_code, retriable_code};
use super::settings::Settings;
use multicluster_kafka_client::conn::{ConnectOptions, Connection};
use multicluster_kafka_client::error::NativeError;

mod metadata;
mod offsets;
mod pool;
mod reads;

/// The native lookups of one cluster.
pub(crate) struct Lookup {
    cluster: Arc<str>,
    /// What it was made from.
    settings: Settings,
    /// The settings' connection options, no answer waited for longer than `timeout`.
    connect: ConnectOptions,
    /// How long a call may take in all.
    timeout: Duration,
    runtime: Handle,
    /// Idle connections by broker address.
    idle: Mutex<HashMap<String, Vec<Connection>>>,
    /// Broker addresses by node id, from the last metadata answer.
    brokers: Mutex<BTreeMap<i32, String>>,
    /// The cluster refused the client (TLS, SASL) since its last answer.
    refused: AtomicBool,
    /// The last failure of a metadata request since the last answer.
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// The least and most a lookup waits before asking again.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Lookup {
    /// The lookups of `cluster` with its native `settings`, each within `timeout`, on
    /// `runtime`. Connects to nothing yet.
    pub fn new(cluster: Arc<str>, settings: &Settings, timeout: Duration, runtime: Handle) -> Self {
        let mut connect = settings.connect.clone();
        // No single answer is waited for longer than the whole call may take.
        connect.timeout = connect.timeout.min(timeout);
        Self {
            cluster,
            settings: settings.clone(),
            connect,
            timeout,
            runtime,
            idle: Mutex::new(HashMap::new()),
            brokers: Mutex::new(BTreeMap::new()),
            refused: AtomicBool::new(false),
            last_error: Mutex::new(None),
        }
    }

    /// Why the last metadata request failed, if none answered since.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `work` on the runtime and waits for it: blocks the calling thread, which
    /// is one of the enumerator's lookup threads (never a runtime's worker). The work
    /// is a task of the runtime, so a runtime that shuts down meanwhile drops it, and
    /// the call ends with [`SourceError::Closed`] (its timers would panic in a
    /// `Handle::block_on` then).
    fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, SourceError>> + Send + 'static,
    ) -> Result<T, SourceError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv().unwrap_or(Err(SourceError::Closed))
    }

    /// True when the cluster refused this client (TLS or SASL failed) since its last
    /// metadata answer.
    pub fn rejected(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

    /// The error of a call to `addr` the deadline ended.
    fn late(&self, addr: &str, what: &str) -> NativeError {
        NativeError::Timeout {
            addr: addr.to_string(),
            what: what.to_string(),
            timeout_ms: self.timeout.as_millis(),
        }
    }

    /// A connection error as the source's error of this cluster.
    fn error(&self, what: &str, e: &NativeError) -> SourceError {
        let (kind, retriable) = kind(e);
        SourceError::Kafka {
            cluster: self.cluster.to_string(),
            message: format!("{what}: {e}"),
            kind,
            retriable,
        }
    }

    /// A partition's error code in an answer as the source's error.
    fn broker_code(&self, what: &str, topic: &str, partition: i32, code: i16) -> SourceError {
        let text = multicluster_kafka_client::error::code_text(code)
            .unwrap_or_else(|| format!("error code {code}"));
        SourceError::Kafka {
            cluster: self.cluster.to_string(),
            message: format!("{what} of {topic}/{partition}: {text} (error code {code})"),
            kind: kind_of_code(code),
            retriable: retriable_code(code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::properties::ClientProperties;
    use crate::lookups::EndEarly;
    use crate::native::settings::{self, Given};

    #[test]
    fn a_lookup_ends_closed_when_its_runtime_shuts_down() {
        let rt = mck_testkit::runtime();
        // Port 1 refuses connections: the call tries again until its timeout.
        let props = ClientProperties::from_iter([("bootstrap.servers", "127.0.0.1:1")]);
        let cluster: Arc<str> = Arc::from("dead");
        let given = Given {
            cluster: &cluster,
            props: &props,
            hooks: None,
            runtime: true,
        };
        let settings = settings::settings(&given).unwrap();
        let timeout = Duration::from_secs(30);
        let lookup = Arc::new(Lookup::new(
            cluster,
            &settings,
            timeout,
            rt.handle().clone(),
        ));
        let pending = {
            let lookup = lookup.clone();
            std::thread::spawn(move || lookup.metadata(None, EndEarly::OnRefusal))
        };
        std::thread::sleep(Duration::from_millis(300));
        rt.shutdown_background();
        let during = pending.join().expect("the call does not panic");
        assert!(matches!(during, Err(SourceError::Closed)), "{during:?}");
        let after = lookup.metadata(None, EndEarly::OnAnyError);
        assert!(matches!(after, Err(SourceError::Closed)), "{after:?}");
    }
}
