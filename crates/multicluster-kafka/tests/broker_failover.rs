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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use tokio::sync::oneshot;

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
        let three = KafkaCluster::start(
            ClusterOptions::new("bf-three")
                .brokers(3)
                .broker_config("min.insync.replicas", "2")
                .broker_config(
                    "broker.session.timeout.ms",
                    BROKER_SESSION.as_millis().to_string(),
                )
                .broker_config("broker.heartbeat.interval.ms", "1000"),
        )
        .expect("the 3-broker cluster starts");
        let solo = solo
            .join()
            .expect("starting bf-solo panicked")
            .expect("the 1-broker cluster starts");
        (three, solo)
    })
}

/// A thread feeding `three` through the Java producer, one record every 5 ms, values
/// `three-<n>`; joining it gives every value, all acknowledged.
fn java_feed(
    producer: mck_testkit::JavaProducer,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut producer = producer;
        let mut values = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let v = format!("three-{}", values.len());
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

#[derive(Clone, Debug)]
struct Got {
    cluster: String,
    partition: i32,
    offset: i64,
    value: String,
    at: Instant,
}

/// The source's records as they come, read by a task until told to stop.
struct Reading {
    got: Arc<Mutex<Vec<Got>>>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<(KafkaSourceStream<Utf8>, Option<String>)>,
}

impl Reading {
    fn start(mut stream: KafkaSourceStream<Utf8>) -> Reading {
        let got = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = {
            let (got, errors) = (got.clone(), errors.clone());
            tokio::spawn(async move {
                let end = loop {
                    tokio::select! {
                        biased;
                        _ = &mut stopped => break None,
                        r = stream.next() => match r {
                            Some(Ok(r)) => got.lock().unwrap().push(Got {
                                cluster: r.cluster.to_string(),
                                partition: r.partition,
                                offset: r.offset,
                                value: r.value,
                                at: Instant::now(),
                            }),
                            // Cluster and metadata errors are reports; the source
                            // goes on.
                            Some(Err(
                                e @ (SourceError::Cluster { .. } | SourceError::Metadata(_)),
                            )) => errors.lock().unwrap().push(e.to_string()),
                            Some(Err(e)) => break Some(format!("fatal error: {e}")),
                            None => break Some("the unbounded stream ended".to_string()),
                        },
                    }
                };
                (stream, end)
            })
        };
        Reading {
            got,
            errors,
            stop: Some(stop),
            task,
        }
    }

    fn snapshot(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    fn values_of(&self, cluster: &str) -> BTreeSet<String> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.cluster == cluster)
            .map(|g| g.value.clone())
            .collect()
    }

    /// Waits until every value of `want` came out of `cluster`.
    async fn until_all(&self, cluster: &str, want: &[String]) {
        let began = Instant::now();
        loop {
            let have = self.values_of(cluster);
            let missing = want.iter().filter(|v| !have.contains(*v)).count();
            if missing == 0 {
                return;
            }
            assert!(
                began.elapsed() < PATIENCE,
                "{cluster}: {missing} of {} records not out within {PATIENCE:?}; errors: {:?}",
                want.len(),
                self.errors.lock().unwrap()
            );
            assert!(!self.task.is_finished(), "the reading task ended early");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `cluster` has handed out at least `n` records.
    async fn until_count(&self, cluster: &str, n: usize) {
        let began = Instant::now();
        while self.values_of(cluster).len() < n {
            assert!(
                began.elapsed() < PATIENCE,
                "{cluster}: fewer than {n} records within {PATIENCE:?}; errors: {:?}",
                self.errors.lock().unwrap()
            );
            assert!(!self.task.is_finished(), "the reading task ended early");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn close(mut self) -> Vec<Got> {
        let _ = self.stop.take().unwrap().send(());
        let (stream, end) = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the reading task stops promptly")
            .expect("the reading task does not panic");
        assert_eq!(end, None, "the source failed");
        tokio::time::timeout(Duration::from_secs(10), stream.close())
            .await
            .expect("close() ends promptly");
        let errors = self.errors.lock().unwrap().clone();
        eprintln!(
            "{} reported errors, e.g. {:?}",
            errors.len(),
            errors.first()
        );
        self.got.lock().unwrap().clone()
    }
}

/// Every value of `sent` came out of `cluster` exactly once and nothing else did; per
/// partition in offset order.
fn assert_exactly_once(cluster: &str, sent: &[String], got: &[Got]) {
    let mine: Vec<&Got> = got.iter().filter(|g| g.cluster == cluster).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &mine {
        *counts.entry(g.value.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    let want: BTreeSet<&str> = sent.iter().map(String::as_str).collect();
    let missing: Vec<_> = want.iter().filter(|v| !counts.contains_key(*v)).collect();
    let unknown: Vec<_> = counts.keys().filter(|v| !want.contains(*v)).collect();
    assert!(
        twice.is_empty(),
        "{cluster}: {} records read more than once, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    assert!(
        missing.is_empty(),
        "{cluster}: {} of {} records never read, e.g. {:?}",
        missing.len(),
        sent.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(unknown.is_empty(), "{cluster}: unexpected {unknown:?}");
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for g in &mine {
        if let Some(prev) = last.insert(g.partition, g.offset) {
            assert!(
                g.offset > prev,
                "{cluster}/{}: offset {} after {prev}",
                g.partition,
                g.offset
            );
        }
    }
}

fn source(three: &KafkaCluster, solo: &KafkaCluster) -> MultiClusterKafkaSource<Utf8> {
    let stream = KafkaStream::new("bf")
        .with_cluster(
            "three",
            ClusterMetadata::builder(three.bootstrap_servers())
                .topic(TOPIC)
                .build()
                .unwrap(),
        )
        .with_cluster(
            "solo",
            ClusterMetadata::builder(solo.bootstrap_servers())
                .topic(TOPIC)
                .build()
                .unwrap(),
        );
    MultiClusterKafkaSource::builder()
        .metadata_service(StaticMetadataService::new([stream]).unwrap())
        .stream_ids(["bf"])
        .deserializer(ValueOnly::<String>::utf8())
        .starting_offsets(StartingOffsets::Earliest)
        .build()
        .unwrap()
}

/// The broker leading the most partitions of the topic, other than `not`.
fn busiest_leader(three: &KafkaCluster, not: Option<usize>) -> (usize, Vec<i32>) {
    let leaders = three.partition_leaders(TOPIC).expect("partition leaders");
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
    let three_feed = java_feed(java, stop.clone());
    let solo_feed = solo_feed(solo.clone(), stop.clone());

    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let stream = tokio::time::timeout(PATIENCE, source(&three, &solo).open())
            .await
            .expect("open() ends")
            .expect("the source opens");
        let reading = Reading::start(stream);
        reading.until_count("three", 200).await;
        reading.until_count("solo", 50).await;
        eprintln!("both clusters flowing after {:?}", began.elapsed());

        let mut killed_before = None;
        for round in 0..2 {
            let (victim, led) = busiest_leader(&three, killed_before);
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
        reading.until_all("three", &three_sent).await;
        reading.until_all("solo", &solo_sent).await;
        // Give a repeat the time to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let got = reading.close().await;
        assert_exactly_once("three", &three_sent, &got);
        assert_exactly_once("solo", &solo_sent, &got);
    });
    eprintln!("done in {:?}", began.elapsed());
}
