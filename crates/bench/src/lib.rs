//! Pieces of the end-to-end benchmark shared by the `mck-bench` command and the examples.
//!
//! - [`peers`]: the Java peers (Kafka's `ConsumerPerformance`, Flink's
//!   `DynamicKafkaSource`), run as child processes against the test kit's brokers.
//! - [`start_clusters`]: the two clusters every measure runs on ([`cluster_options`]).

pub mod peers;

use mck_testkit::{ClusterOptions, KafkaCluster};

/// The options of a benchmark cluster named `id`: one broker with the JVM options
/// every figure in BENCHMARKS.md was taken with.
pub fn cluster_options(id: &str) -> ClusterOptions {
    ClusterOptions::new(id).jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ])
}

/// Starts the benchmark's two single-broker clusters, `bench-a` and `bench-b`, in
/// parallel, with [`cluster_options`].
pub fn start_clusters() -> (KafkaCluster, KafkaCluster) {
    let opts = cluster_options;
    std::thread::scope(|s| {
        let a = s.spawn(|| KafkaCluster::start(opts("bench-a")));
        let b = s.spawn(|| KafkaCluster::start(opts("bench-b")));
        (
            a.join()
                .expect("start thread")
                .expect("cluster bench-a starts"),
            b.join()
                .expect("start thread")
                .expect("cluster bench-b starts"),
        )
    })
}
