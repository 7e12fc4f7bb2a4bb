//! How to start a [`KafkaCluster`](super::KafkaCluster).

use std::time::Duration;

use crate::DEFAULT_READY_TIMEOUT;
#[cfg(doc)]
use crate::{KafkaCluster, Listener};

/// The options of the test kit's JVMs: a small heap and quick start-up over peak speed.
pub(crate) fn small_jvm_options() -> Vec<String> {
    [
        "-Xms256m",
        "-Xmx512m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-Djava.awt.headless=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// How to start a [`KafkaCluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Logical cluster id (names directories, logs and errors).
    pub logical_id: String,
    /// Number of brokers (default 1). The first min(3, n) run as combined
    /// broker+controller when n ≥ 3, otherwise only the first one is a controller.
    pub brokers: usize,
    /// JVM options for each broker.
    pub jvm_options: Vec<String>,
    /// Extra `server.properties` entries, applied last.
    pub broker_config: Vec<(String, String)>,
    /// How long a broker may take to answer a metadata request.
    pub ready_timeout: Duration,
    /// Adds the secured listeners of [`Listener`] to every broker, with certificates
    /// and credentials generated at start (see [`KafkaCluster::security`]).
    pub secured: bool,
    /// One port per broker: each broker gets a `PROXIED` listener (plaintext) that it
    /// advertises at `127.0.0.1:<port>` instead of its own, so clients that bootstrap
    /// through a proxy on that port stay behind it. Empty: no such listener.
    pub advertise_via: Vec<u16>,
    /// Broker `i` (from 0) sits in rack `rack-<i>`, and a leader points a consumer
    /// that names its rack (`client.rack`) to a replica there (KIP-392).
    pub racks: bool,
}

impl ClusterOptions {
    /// One broker with small-heap defaults.
    pub fn new(logical_id: impl Into<String>) -> Self {
        Self {
            logical_id: logical_id.into(),
            brokers: 1,
            jvm_options: small_jvm_options(),
            broker_config: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            secured: false,
            advertise_via: Vec::new(),
            racks: false,
        }
    }

    /// Adds a `PROXIED` listener to every broker, advertised at `127.0.0.1:<port>`
    /// (one port per broker, in order) rather than at the broker's own port; see
    /// [`KafkaCluster::proxied_listeners`] for where a proxy must forward to. The
    /// `PLAINTEXT` listener the test kit itself uses stays direct.
    pub fn advertise_via(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.advertise_via = ports.into_iter().collect();
        self
    }

    /// Puts broker `i` (from 0) in rack `rack-<i>` and has leaders send a consumer
    /// that names its rack to a replica in it (Kafka's `RackAwareReplicaSelector`,
    /// KIP-392).
    pub fn racks(mut self) -> Self {
        self.racks = true;
        self
    }

    /// Adds the secured listeners ([`Listener`]): mTLS, SASL_SSL with SCRAM-SHA-512,
    /// SASL_PLAINTEXT with PLAIN, SASL_SSL with OAUTHBEARER, and two SSL listeners
    /// with a bad broker certificate (expired; another host's). The `PLAINTEXT`
    /// listener stays for the test kit's own calls.
    pub fn secured(mut self) -> Self {
        self.secured = true;
        self
    }

    /// Turns on KRaft's standard authorizer. Resources without ACLs stay open to
    /// everyone, and the test kit's own `PLAINTEXT` principal (and the brokers') is a
    /// super user, so only the ACLs a test adds (see [`crate::tools::add_acl`]) restrict
    /// anything.
    pub fn authorizer(self) -> Self {
        self.broker_config(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .broker_config("allow.everyone.if.no.acl.found", "true")
        .broker_config("super.users", "User:ANONYMOUS")
    }

    /// Sets the broker count.
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n.max(1);
        self
    }

    /// Adds a `server.properties` entry.
    pub fn broker_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.broker_config.push((key.into(), value.into()));
        self
    }

    /// Replaces the JVM options (for example to let C2 compile for benchmarks).
    pub fn jvm_options<I: IntoIterator<Item = S>, S: Into<String>>(mut self, opts: I) -> Self {
        self.jvm_options = opts.into_iter().map(Into::into).collect();
        self
    }
}
