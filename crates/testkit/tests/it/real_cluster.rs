//! The test kit against real Apache Kafka brokers.

use std::collections::BTreeSet;
use std::time::Duration;

use mck_testkit::{
    ClusterOptions, KafkaCluster, TestCluster, TestRecord, read_topic, shared_cluster,
};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

fn values(n: usize, prefix: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::value(format!("{prefix}-{i}")).with_key(format!("k{i}")))
        .collect()
}

fn kafka_cluster_id_seen_by_client(bootstrap: &str) -> String {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    c.client()
        .fetch_cluster_id(Duration::from_secs(10))
        .expect("broker reports a cluster id")
}

fn pids_of(cluster_log_dir: &std::path::Path) -> Vec<i32> {
    // A broker's command line holds its own properties path, which lives in its log dir.
    let needle = cluster_log_dir.display().to_string();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmd).contains(&needle)
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn two_real_clusters_start_produce_consume_and_stop() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| KafkaCluster::start(ClusterOptions::new("kit-a")));
        let b = s.spawn(|| KafkaCluster::start(ClusterOptions::new("kit-b")));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (a, b) = (a.expect("cluster a starts"), b.expect("cluster b starts"));
    eprintln!(
        "startup: a {:.1}s, b {:.1}s (started concurrently)",
        a.startup_time().as_secs_f64(),
        b.startup_time().as_secs_f64()
    );
    assert_ne!(a.bootstrap_servers(), b.bootstrap_servers());
    let (ida, idb) = (
        kafka_cluster_id_seen_by_client(&a.bootstrap_servers()),
        kafka_cluster_id_seen_by_client(&b.bootstrap_servers()),
    );
    assert_eq!(ida, a.kafka_cluster_id());
    assert_eq!(idb, b.kafka_cluster_id());
    assert_ne!(ida, idb, "each cluster has its own Kafka cluster.id");

    for (c, prefix) in [(&a, "from-a"), (&b, "from-b")] {
        c.create_topic("orders", 3).unwrap();
        let produced = c.produce("orders", &values(30, prefix)).unwrap();
        assert_eq!(produced.len(), 30);
        let read = read_topic(c, "orders").unwrap();
        let got: BTreeSet<String> = read
            .iter()
            .map(|r| String::from_utf8(r.value.clone()).unwrap())
            .collect();
        let want: BTreeSet<String> = (0..30).map(|i| format!("{prefix}-{i}")).collect();
        assert_eq!(got, want);
        assert_eq!(read.len(), 30, "no record read twice");
    }

    let log_dir = a.log_dir().to_path_buf();
    assert!(
        !pids_of(&log_dir).is_empty(),
        "the broker JVM is visible while running"
    );
    drop(a);
    drop(b);
    assert!(pids_of(&log_dir).is_empty(), "no JVM left after stop");
    assert!(
        log_dir.join("node-1/server.log").exists(),
        "broker logs are kept under target/"
    );
}

#[test]
fn a_killed_broker_restarts_with_its_data() {
    let c = KafkaCluster::start(ClusterOptions::new("kit-restart")).unwrap();
    c.create_topic("durable", 2).unwrap();
    c.produce("durable", &values(50, "before")).unwrap();
    c.kill_broker(0).unwrap();
    assert!(
        pids_of(c.log_dir()).is_empty(),
        "kill -9 leaves no broker process"
    );
    c.restart_broker(0).unwrap();
    c.produce("durable", &values(10, "after")).unwrap();
    let read = read_topic(&c, "durable").unwrap();
    let got: BTreeSet<String> = read
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    assert_eq!(got.len(), 60);
    assert!(got.contains("before-0") && got.contains("before-49") && got.contains("after-9"));
}

#[test]
fn partitions_can_be_added_to_a_topic_on_a_real_cluster() {
    let c = shared_cluster("kit-shared").unwrap();
    c.create_topic("growing", 1).unwrap();
    c.add_partitions("growing", 4).unwrap();
    let recs: Vec<TestRecord> = (0..4)
        .map(|p| TestRecord::value(format!("p{p}")).to_partition(p))
        .collect();
    let produced = c.produce("growing", &recs).unwrap();
    let parts: BTreeSet<i32> = produced.iter().map(|p| p.partition).collect();
    assert_eq!(parts, (0..4).collect());
}

#[test]
fn produced_records_keep_their_timestamps_and_order() {
    let c = shared_cluster("kit-shared").unwrap();
    c.create_topic("stamped", 1).unwrap();
    let recs: Vec<TestRecord> = (0..20)
        .map(|i| TestRecord::value(format!("v{i}")).at(1_700_000_000_000 + i))
        .collect();
    c.produce("stamped", &recs).unwrap();
    let read = read_topic(c, "stamped").unwrap();
    let values: Vec<String> = read
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    assert_eq!(values, (0..20).map(|i| format!("v{i}")).collect::<Vec<_>>());
    assert_eq!(read[5].timestamp, Some(1_700_000_000_005));
}

#[test]
fn a_three_broker_cluster_keeps_serving_with_one_broker_down() {
    let c = KafkaCluster::start(ClusterOptions::new("kit-three").brokers(3)).unwrap();
    assert_eq!(c.broker_count(), 3);
    assert_eq!(c.bootstrap_servers().split(',').count(), 3);
    c.create_topic("replicated", 3).unwrap();
    c.produce("replicated", &values(30, "before")).unwrap();
    c.kill_broker(2).unwrap();
    c.produce("replicated", &values(30, "during")).unwrap();
    c.restart_broker(2).unwrap();
    let read = read_topic(&c, "replicated").unwrap();
    let got: BTreeSet<String> = read
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    assert_eq!(got.len(), 60, "every record survives a broker loss");
}
