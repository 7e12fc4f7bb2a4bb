//! The command line of each side: `mck consume`, the library's child, franz-go,
//! kcat and Kafka's Java tools.

use std::path::PathBuf;
use std::process::Command;

use mck_bench::peers;

use super::{Side, TOPIC};

/// The class `kafka-console-consumer.sh` runs.
const CONSOLE_CONSUMER_CLASS: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

/// The JVM options `kafka-console-consumer.sh` runs it with (its heap, and
/// `kafka-run-class.sh`'s default performance options).
const CONSOLE_JVM_OPTIONS: &[&str] = &[
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// `java` of `JAVA_HOME`, else the one on the path.
fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// What the sides need to build their command lines.
pub(super) struct Setup {
    pub(super) mck: PathBuf,
    pub(super) kcat: PathBuf,
    /// Each cluster's bootstrap list.
    pub(super) bootstraps: Vec<String>,
    /// The metadata file over every cluster (stream `bench`), with several.
    pub(super) metadata: Option<PathBuf>,
    /// Records over every cluster.
    pub(super) records: usize,
    /// Partitions of each cluster's topic.
    pub(super) partitions: i32,
    /// The test kit's Kafka jars, for the console consumer.
    pub(super) kafka_libs: Option<PathBuf>,
    /// The franz-go peer.
    pub(super) franz: Option<PathBuf>,
    /// `queued.max.messages.kbytes` for the `mck` sides.
    pub(super) budget_kb: Option<u64>,
}

/// The command line of `side`.
pub(super) fn command(side: Side, s: &Setup) -> Command {
    let b = s.bootstraps[0].as_str();
    match side {
        Side::MckJson
        | Side::MckValue
        | Side::MckJsonNative
        | Side::MckValueNative
        | Side::MckJsonTime
        | Side::MckValueTime => {
            let mut c = Command::new(&s.mck);
            match &s.metadata {
                Some(file) => c.arg("consume").arg(file).args(["-s", "bench"]),
                None => c.args(["consume", "-b", b, "-t", TOPIC]),
            };
            c.args(["-e", "--format"]);
            c.arg(
                if matches!(
                    side,
                    Side::MckJson | Side::MckJsonNative | Side::MckJsonTime
                ) {
                    "json"
                } else {
                    "value"
                },
            );
            let backend = if matches!(side, Side::MckJson | Side::MckValue) {
                "fetch.backend=librdkafka"
            } else {
                "fetch.backend=native"
            };
            c.args(["-X", backend]);
            if matches!(side, Side::MckJsonTime | Side::MckValueTime) {
                c.args(["--order", "time"]);
            }
            if let Some(kb) = s.budget_kb {
                c.arg("-X").arg(format!("queued.max.messages.kbytes={kb}"));
            }
            c
        }
        Side::LibNative | Side::LibLibrdkafka => {
            let mut c = Command::new(std::env::current_exe().expect("the bench binary"));
            c.args([
                "rss-child",
                "--side",
                "ours",
                "--api",
                "in-batch",
                "--topic",
                TOPIC,
            ])
            .args(["--partitions", &s.partitions.to_string()])
            .args(["--expected", &s.records.to_string()]);
            for (i, b) in s.bootstraps.iter().enumerate() {
                c.arg("--cluster").arg(format!("c{i}={b}"));
            }
            let backend = if side == Side::LibNative {
                "native"
            } else {
                "librdkafka"
            };
            c.env("MCK_FETCH_BACKEND", backend);
            c
        }
        Side::Franz => {
            let mut c = Command::new(s.franz.as_ref().expect("the franz-go peer"));
            c.arg("-b")
                .arg(s.bootstraps.join(";"))
                .args(["-t", TOPIC, "-n"])
                .arg(s.records.to_string());
            c
        }
        Side::KcatJson | Side::KcatValue => {
            let mut c = Command::new(&s.kcat);
            c.args(["-C", "-b", b, "-t", TOPIC, "-e", "-q", "-o", "beginning"]);
            if side == Side::KcatJson {
                c.arg("-J");
            } else {
                c.args(["-f", "%s\\n"]);
            }
            c
        }
        Side::Console => {
            let mut c = kafka_tool(s, CONSOLE_CONSUMER_CLASS);
            c.args([
                "--bootstrap-server",
                b,
                "--topic",
                TOPIC,
                "--from-beginning",
            ])
            .arg("--max-messages")
            .arg(s.records.to_string());
            c
        }
        Side::ConsumerPerf => {
            let mut c = kafka_tool(s, peers::CONSUMER_PERF_CLASS);
            c.args(["--bootstrap-server", b, "--topic", TOPIC, "--hide-header"])
                .args(["--timeout", "60000", "--messages"])
                .arg(s.records.to_string());
            c
        }
    }
}

/// `java` running one of Kafka's tools from the test kit's jars, with the JVM options
/// its script gets from `kafka-run-class.sh` (and `-Xmx512M`, the heap both the
/// console consumer's and `kafka-consumer-perf-test.sh` set).
fn kafka_tool(s: &Setup, class: &str) -> Command {
    let libs = s.kafka_libs.as_ref().expect("the Kafka jars");
    let mut c = Command::new(java());
    c.args(CONSOLE_JVM_OPTIONS)
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg(class);
    c
}
