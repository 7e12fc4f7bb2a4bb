//! What the broker-failover tests of the library and of the command line share: a
//! cluster that rides out the loss of a broker, the leader to kill, and Kafka's own
//! producer writing all along.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{ClusterOptions, JavaProducer, KafkaCluster};

/// Options for a cluster `logical_id` of three brokers that loses no acknowledged
/// record while one is dead (`min.insync.replicas` 2), and whose controller moves a
/// dead broker's leaderships once `broker_session` passes without its heartbeat (one
/// a second).
pub fn three_broker_options(logical_id: &str, broker_session: Duration) -> ClusterOptions {
    ClusterOptions::new(logical_id)
        .brokers(3)
        .broker_config("min.insync.replicas", "2")
        .broker_config(
            "broker.session.timeout.ms",
            broker_session.as_millis().to_string(),
        )
        .broker_config("broker.heartbeat.interval.ms", "1000")
}

/// The broker leading the most partitions of `topic`, other than `not`, and the
/// partitions it leads. Panics if the leaders cannot be had or none is left, as a
/// test would.
pub fn busiest_leader(
    cluster: &KafkaCluster,
    topic: &str,
    not: Option<usize>,
) -> (usize, Vec<i32>) {
    let leaders = cluster.partition_leaders(topic).expect("partition leaders");
    let mut by_broker: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
    for (p, l) in leaders.iter().enumerate() {
        if let Some(b) = l
            && Some(*b) != not
        {
            by_broker.entry(*b).or_default().push(p as i32);
        }
    }
    by_broker
        .into_iter()
        .max_by_key(|(_, ps)| ps.len())
        .unwrap_or_else(|| panic!("no leader to kill among {leaders:?}"))
}

/// Starts a thread that sends `<prefix>-<n>` (`n` counting from 0) through
/// `producer`, one record every 5 ms, until `stop` is set, then waits for every
/// acknowledgement; joining it gives every value sent. The thread panics if the
/// producer refuses a record or one is not acknowledged.
pub fn java_produce_until_stopped(
    mut producer: JavaProducer,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut values = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let v = format!("{prefix}-{}", values.len());
            producer.send(&v).expect("the Java producer takes a record");
            values.push(v);
            std::thread::sleep(Duration::from_millis(5));
        }
        producer
            .finish()
            .expect("the Java producer had every record acknowledged");
        values
    })
}
