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

/// Starts `n` single-broker clusters, `bench-a`, `bench-b`, ..., in parallel, with
/// [`cluster_options`].
pub fn start_many(n: usize) -> Vec<KafkaCluster> {
    let names: Vec<String> = (0..n)
        .map(|i| match u8::try_from(i).ok().filter(|i| *i < 26) {
            Some(i) => format!("bench-{}", char::from(b'a' + i)),
            None => format!("bench-{i}"),
        })
        .collect();
    std::thread::scope(|s| {
        let started: Vec<_> = names
            .iter()
            .map(|name| s.spawn(move || KafkaCluster::start(cluster_options(name))))
            .collect();
        started
            .into_iter()
            .zip(&names)
            .map(|(h, name)| {
                h.join()
                    .expect("start thread")
                    .unwrap_or_else(|e| panic!("cluster {name} starts: {e}"))
            })
            .collect()
    })
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
