use std::path::PathBuf;

/// A test-kit failure. Messages carry the broker log tail where one exists, so a test
/// that cannot start Kafka fails loudly with the reason.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// `mvn` could not fetch the Kafka jars.
    #[error("fetching Kafka jars with Maven failed (command: {command}): {output}")]
    Maven {
        /// The command run.
        command: String,
        /// Its output tail.
        output: String,
    },
    /// Java is missing or could not be started.
    #[error("cannot run java: {0}")]
    Java(String),
    /// A broker did not come up.
    #[error(
        "broker {broker} of cluster `{cluster}` did not become ready: {reason}\n--- log tail ({log}) ---\n{tail}"
    )]
    BrokerNotReady {
        /// Logical cluster id.
        cluster: String,
        /// Broker index.
        broker: usize,
        /// What was observed.
        reason: String,
        /// Broker log file.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// MirrorMaker 2 did not start, died, or did not do what a test waited for.
    #[error("MirrorMaker 2 {flow}: {reason}\n--- log tail ({log}) ---\n{tail}")]
    Mirror {
        /// The replication flow, `<source alias>-><target alias>`.
        flow: String,
        /// What was observed.
        reason: String,
        /// Its log file.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// A Kafka client call failed.
    #[error("cluster `{cluster}`: {message}")]
    Kafka {
        /// Logical cluster id.
        cluster: String,
        /// What failed.
        message: String,
    },
    /// The operation is not supported by this kind of cluster.
    #[error("{0} is not supported by librdkafka mock clusters")]
    Unsupported(&'static str),
    /// File-system trouble.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}
