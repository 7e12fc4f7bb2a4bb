//! How long a fresh librdkafka client takes from creation to its first metadata answer,
//! and then to a watermark query of a partition (which needs a connection to the
//! partition's leader), with plain rust-rdkafka and one local broker:
//!
//! ```sh
//! cargo run --release -p mck-bench --example connect_latency -- [ROUNDS] [RECONNECT_BACKOFF_MS]
//! ```
//!
//! Without RECONNECT_BACKOFF_MS the client keeps librdkafka's default (100 ms); the
//! library sets 10 ms (`multicluster_kafka::CLIENT_DEFAULTS`). librdkafka opens at most
//! one connection to a not-yet-connected broker per half of that setting, which is
//! what the first figure shows.

use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};
use rdkafka::consumer::{BaseConsumer, Consumer};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("rounds"))
        .unwrap_or(10);
    let backoff = std::env::args().nth(2);
    let cluster = KafkaCluster::start(ClusterOptions::new("connect")).expect("cluster starts");
    cluster.create_topic("c", 1).expect("topic");
    let (mut metadata, mut watermarks) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let mut config = cluster.client_config();
        config.set("group.id", "connect-latency");
        if let Some(ms) = &backoff {
            config.set("reconnect.backoff.ms", ms);
        }
        let consumer: BaseConsumer = config.create().expect("client");
        consumer
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("metadata");
        metadata.push(t0.elapsed().as_secs_f64() * 1e3);
        consumer
            .fetch_watermarks("c", 0, Duration::from_secs(10))
            .expect("watermarks");
        watermarks.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    for (what, v) in [
        ("first metadata answer", &mut metadata),
        ("first watermark answer", &mut watermarks),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "{what} after creating the client, {rounds} clients, reconnect.backoff.ms={}: min {:.0} ms, median {:.0} ms, max {:.0} ms",
            backoff.as_deref().unwrap_or("default (100)"),
            v[0],
            v[rounds / 2],
            v[rounds - 1]
        );
    }
}
