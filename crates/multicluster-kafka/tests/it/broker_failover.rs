//! Broker failures inside one cluster, read through the library.
//!
//! Cluster `three` has three brokers; its topic has 6 partitions, replication factor
//! 3 and `min.insync.replicas` 2. Kafka's own Java producer (`acks=all`, idempotent)
//! writes to it all along, and a second, single-broker cluster `solo` is fed too.
//! While a source reads both, the leader of a partition of `three` is killed with
//! SIGKILL, left dead long enough for its partitions to get new leaders, and started
//! again; once every replica is back in sync the same happens to another leader.
//!
//! - while a broker is dead, the partitions it led are read from their new leaders;
//! - `solo`'s records keep coming out all along;
//! - once production stops, every record of both clusters came out exactly once, in
//!   offset order per partition.

use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{
    ClusterOptions, KafkaCluster, TestCluster, TestRecord, busiest_leader,
    java_produce_until_stopped, three_broker_options,
};
use multicluster_kafka::prelude::*;
use support::{Reading, assert_read_once, meta, source_over};

const TOPIC: &str = "failover";
const PARTITIONS: i32 = 6;
/// How long the controller waits for a dead broker's heartbeat before moving its
/// leaderships (Kafka's default is 9 s).
const BROKER_SESSION: Duration = Duration::from_secs(4);
/// How long a killed broker stays dead: past [`BROKER_SESSION`], so its partitions
/// move to other leaders meanwhile.
const OUTAGE: Duration = Duration::from_secs(10);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

fn start_clusters() -> (KafkaCluster, KafkaCluster) {
    std::thread::scope(|s| {
        let solo = s.spawn(|| KafkaCluster::start(ClusterOptions::new("bf-solo")));
        let three = KafkaCluster::start(three_broker_options("bf-three", BROKER_SESSION))
            .expect("the 3-broker cluster starts");
        let solo = solo
            .join()
            .expect("starting bf-solo panicked")
            .expect("the 1-broker cluster starts");
        (three, solo)
    })
}

/// A thread feeding `solo` (librdkafka, waiting for the acknowledgements), 10 records
/// every 50 ms, values `solo-<n>`.
fn solo_feed(
    solo: Arc<KafkaCluster>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut values = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<String> = (values.len()..values.len() + 10)
                .map(|n| format!("solo-{n}"))
                .collect();
            let records: Vec<TestRecord> = batch
                .iter()
                .map(|v| TestRecord::value(v.clone()).with_key("k"))
                .collect();
            solo.produce(TOPIC, &records).expect("produce to solo");
            values.extend(batch);
            std::thread::sleep(Duration::from_millis(50));
        }
        values
    })
}

fn source(three: &KafkaCluster, solo: &KafkaCluster) -> MultiClusterKafkaSource<Utf8> {
    let stream = KafkaStream::new("bf")
        .with_cluster("three", meta(three, &[TOPIC]))
        .with_cluster("solo", meta(solo, &[TOPIC]));
    source_over(stream)
        .starting_offsets(StartingOffsets::Earliest)
        .build()
        .unwrap()
}

#[test]
fn leaders_killed_and_restarted_under_load_lose_and_repeat_nothing() {
    let began = Instant::now();
    let (three, solo) = start_clusters();
    let (three, solo) = (Arc::new(three), Arc::new(solo));
    three.create_topic(TOPIC, PARTITIONS).unwrap();
    solo.create_topic(TOPIC, 2).unwrap();
    three
        .await_in_sync(TOPIC, PATIENCE)
        .expect("every replica in sync at the start");
    eprintln!("clusters ready after {:?}", began.elapsed());

    let stop = Arc::new(AtomicBool::new(false));
    let java = three
        .java_producer(TOPIC, &[])
        .expect("the Java producer starts");
    let three_feed = java_produce_until_stopped(java, "three", stop.clone());
    let solo_feed = solo_feed(solo.clone(), stop.clone());

    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let stream = tokio::time::timeout(PATIENCE, source(&three, &solo).open())
            .await
            .expect("open() ends")
            .expect("the source opens");
        let reading = Reading::start(stream);
        reading.until("three", 200, PATIENCE).await;
        reading.until("solo", 50, PATIENCE).await;
        eprintln!("both clusters flowing after {:?}", began.elapsed());

        let mut killed_before = None;
        for round in 0..2 {
            let (victim, led) = busiest_leader(&three, TOPIC, killed_before);
            let t3 = three.clone();
            let killed_at = Instant::now();
            tokio::task::spawn_blocking(move || t3.kill_broker(victim))
                .await
                .unwrap()
                .expect("kill -9 a leader");
            eprintln!("round {round}: killed broker {victim}, leader of partitions {led:?}");
            tokio::time::sleep(OUTAGE).await;

            // The dead broker's partitions moved and were read from their new leaders.
            let leaders = three.partition_leaders(TOPIC).expect("partition leaders");
            assert!(
                leaders.iter().all(|l| *l != Some(victim)),
                "round {round}: broker {victim} still leads after {OUTAGE:?} dead: {leaders:?}"
            );
            let during = reading.snapshot();
            let moved_and_read: BTreeSet<i32> = during
                .iter()
                .filter(|g| {
                    g.cluster == "three"
                        && led.contains(&g.partition)
                        && g.at > killed_at + Duration::from_secs(1)
                })
                .map(|g| g.partition)
                .collect();
            let solo_during = during
                .iter()
                .filter(|g| g.cluster == "solo" && g.at > killed_at + Duration::from_secs(1))
                .count();
            eprintln!(
                "round {round}: during the outage, partitions {moved_and_read:?} of {led:?} \
                 read from new leaders ({leaders:?}), {solo_during} solo records"
            );
            assert_eq!(
                moved_and_read,
                led.iter().copied().collect::<BTreeSet<i32>>(),
                "round {round}: partitions the dead broker {victim} led were not read from \
                 their new leaders within {OUTAGE:?}; errors: {:?}",
                reading.errors.lock().unwrap()
            );
            assert!(
                solo_during > 50,
                "round {round}: solo stalled while a broker of three was dead ({solo_during})"
            );

            let t3 = three.clone();
            let restarted = Instant::now();
            tokio::task::spawn_blocking(move || {
                t3.restart_broker(victim)?;
                t3.await_in_sync(TOPIC, PATIENCE)
            })
            .await
            .unwrap()
            .expect("the killed broker comes back in sync");
            eprintln!(
                "round {round}: broker {victim} back and in sync in {:?}",
                restarted.elapsed()
            );
            killed_before = Some(victim);
        }

        // Produce a little more with every broker up, then stop and read to the end.
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.store(true, Ordering::Relaxed);
        let (three_sent, solo_sent) = tokio::task::spawn_blocking(move || {
            (
                three_feed.join().expect("the Java feed"),
                solo_feed.join().expect("the solo feed"),
            )
        })
        .await
        .unwrap();
        eprintln!(
            "produced {} records to three, {} to solo",
            three_sent.len(),
            solo_sent.len()
        );
        reading.until_all("three", &three_sent, PATIENCE).await;
        reading.until_all("solo", &solo_sent, PATIENCE).await;
        // Give a repeat the time to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let got = reading.close(Duration::from_secs(10)).await;
        assert_read_once("three", three_sent.iter().map(String::as_str), &got);
        assert_read_once("solo", solo_sent.iter().map(String::as_str), &got);
    });
    eprintln!("done in {:?}", began.elapsed());
}
