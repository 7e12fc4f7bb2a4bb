//! The librdkafka mock cluster behind the test kit's common API: produce, consume back,
//! broker down and up, injected request errors.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use mck_testkit::{MockKafkaCluster, Produced, TestCluster, TestRecord, TestkitError};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{Message, Offset, TopicPartitionList};

/// How long a consumer may go without a new record before the test gives up. A bound
/// against hanging, not an assertion on speed.
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// `(partition, offset) -> value` for every record read.
type Seen = BTreeMap<(i32, i64), Vec<u8>>;

/// A consumer assigned to every partition of `topic` from the beginning (no group).
fn assigned_consumer(cluster: &MockKafkaCluster, topic: &str, partitions: i32) -> BaseConsumer {
    let consumer: BaseConsumer = cluster
        .client_config()
        // librdkafka wants a group id even for manual assignment; no group is joined.
        .set("group.id", "mock-cluster-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition offset");
    }
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// Polls until `seen` holds `total` records; panics if the consumer stalls. Client
/// errors (a broker going away, for example) are reported by librdkafka while it
/// reconnects; they are kept for the panic message, not fatal.
fn read_until(consumer: &BaseConsumer, seen: &mut Seen, total: usize) {
    let mut last_progress = Instant::now();
    let mut errors = Vec::new();
    while seen.len() < total {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let value = m.payload().unwrap_or_default().to_vec();
                let previous = seen.insert((m.partition(), m.offset()), value);
                assert!(
                    previous.is_none(),
                    "record {}@{} read twice",
                    m.partition(),
                    m.offset()
                );
                last_progress = Instant::now();
            }
            Some(Err(e)) => errors.push(e.to_string()),
            None => assert!(
                last_progress.elapsed() < STALL_LIMIT,
                "consumer stalled with {} of {total} records: {seen:?}; errors: {errors:?}",
                seen.len()
            ),
        }
    }
}

fn expected(acks: &[Produced], values: &[&str]) -> Seen {
    acks.iter()
        .zip(values)
        .map(|(a, v)| ((a.partition, a.offset), v.as_bytes().to_vec()))
        .collect()
}

fn records(values: &[&str], partitions: i32) -> Vec<TestRecord> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| TestRecord::value(*v).to_partition(i as i32 % partitions))
        .collect()
}

#[test]
fn records_produced_to_a_three_broker_mock_are_consumed_back() {
    let cluster = MockKafkaCluster::start("east", 3).unwrap();
    assert_eq!(cluster.broker_count(), 3);
    assert_eq!(cluster.logical_id(), "east");
    assert_eq!(cluster.bootstrap_servers().split(',').count(), 3);
    cluster.create_topic("orders", 3).unwrap();

    let values = ["a", "b", "c", "d", "e", "f"];
    let acks = cluster.produce("orders", &records(&values, 3)).unwrap();
    let positions: Vec<(i32, i64)> = acks.iter().map(|a| (a.partition, a.offset)).collect();
    assert_eq!(positions, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]);

    let consumer = assigned_consumer(&cluster, "orders", 3);
    let mut seen = Seen::new();
    read_until(&consumer, &mut seen, values.len());
    assert_eq!(seen, expected(&acks, &values));
}

#[test]
fn keys_headers_and_timestamps_survive_the_round_trip() {
    let cluster = MockKafkaCluster::start("east", 1).unwrap();
    cluster.create_topic("t", 1).unwrap();
    let record = TestRecord::value("v")
        .with_key("k")
        .with_header("h", "hv")
        .at(1_700_000_000_000)
        .to_partition(0);
    cluster.produce("t", &[record]).unwrap();

    let consumer = assigned_consumer(&cluster, "t", 1);
    let started = Instant::now();
    let m = loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => break m.detach(),
            Some(Err(e)) => panic!("consume error: {e}"),
            None => assert!(started.elapsed() < STALL_LIMIT, "no record arrived"),
        }
    };
    use rdkafka::message::Headers;
    assert_eq!(m.key(), Some(&b"k"[..]));
    assert_eq!(m.payload(), Some(&b"v"[..]));
    assert_eq!(m.timestamp().to_millis(), Some(1_700_000_000_000));
    let headers = m.headers().expect("headers");
    assert_eq!(headers.count(), 1);
    assert_eq!(headers.get(0).key, "h");
    assert_eq!(headers.get(0).value, Some(&b"hv"[..]));
}

#[test]
fn a_consumer_keeps_reading_after_a_broker_goes_down_and_comes_back() {
    let cluster = MockKafkaCluster::start("east", 3).unwrap();
    cluster.create_topic("orders", 3).unwrap();
    // Partition 0 is led by broker 0, the one that goes down.
    cluster.set_partition_leader("orders", 0, Some(0)).unwrap();

    let first = ["a", "b", "c"];
    let first_acks = cluster.produce("orders", &records(&first, 3)).unwrap();
    let consumer = assigned_consumer(&cluster, "orders", 3);
    let mut seen = Seen::new();
    read_until(&consumer, &mut seen, first.len());

    cluster.kill_broker(0).unwrap();
    // While its leader is down, partition 0 accepts nothing.
    let err = cluster
        .produce_with(
            "orders",
            &[TestRecord::value("lost").to_partition(0)],
            &[("message.timeout.ms", "3000")],
        )
        .unwrap_err();
    assert!(matches!(err, TestkitError::Kafka { .. }), "{err}");
    cluster.restart_broker(0).unwrap();

    let second = ["d", "e", "f"];
    let second_acks = cluster.produce("orders", &records(&second, 3)).unwrap();
    read_until(&consumer, &mut seen, first.len() + second.len());
    let mut want = expected(&first_acks, &first);
    want.extend(expected(&second_acks, &second));
    assert_eq!(seen, want);
}

#[test]
fn an_injected_retriable_produce_error_fails_without_retries_and_is_retried_otherwise() {
    let cluster = MockKafkaCluster::start("east", 3).unwrap();
    cluster.create_topic("t", 1).unwrap();
    let not_enough = RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS;

    // Without retries the first injected error is the record's fate.
    cluster
        .request_errors(RDKafkaApiKey::Produce, &[not_enough])
        .unwrap();
    let err = cluster
        .produce_with(
            "t",
            &[TestRecord::value("x").to_partition(0)],
            &[("enable.idempotence", "false"), ("retries", "0")],
        )
        .unwrap_err();
    assert!(err.to_string().contains("NotEnoughReplicas"), "{err}");

    // With the default (retrying, idempotent) producer, the same errors are absorbed
    // and the record lands exactly once.
    cluster
        .request_errors(RDKafkaApiKey::Produce, &[not_enough, not_enough])
        .unwrap();
    let acks = cluster
        .produce("t", &[TestRecord::value("y").to_partition(0)])
        .unwrap();
    assert_eq!(
        acks,
        [Produced {
            partition: 0,
            offset: 0
        }]
    );

    let consumer = assigned_consumer(&cluster, "t", 1);
    let mut seen = Seen::new();
    read_until(&consumer, &mut seen, 1);
    assert_eq!(seen, expected(&acks, &["y"]));
}

#[test]
fn an_injected_fatal_produce_error_fails_the_produce_until_cleared() {
    let cluster = MockKafkaCluster::start("east", 1).unwrap();
    cluster.create_topic("t", 1).unwrap();
    let denied = RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
    cluster
        .request_errors(RDKafkaApiKey::Produce, &[denied, denied, denied])
        .unwrap();
    let err = cluster
        .produce("t", &[TestRecord::value("x").to_partition(0)])
        .unwrap_err();
    match &err {
        TestkitError::Kafka { cluster, message } => {
            assert_eq!(cluster, "east");
            assert!(message.contains("TopicAuthorizationFailed"), "{message}");
        }
        other => panic!("unexpected error: {other}"),
    }

    cluster
        .clear_request_errors(RDKafkaApiKey::Produce)
        .unwrap();
    let acks = cluster
        .produce("t", &[TestRecord::value("y").to_partition(0)])
        .unwrap();
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].partition, 0);
}

#[test]
fn a_delayed_broker_still_serves_and_unknown_brokers_are_refused() {
    let cluster = MockKafkaCluster::start("east", 2).unwrap();
    cluster.create_topic("t", 1).unwrap();
    cluster.set_partition_leader("t", 0, Some(1)).unwrap();
    cluster
        .set_round_trip_delay(1, Duration::from_millis(50))
        .unwrap();
    let acks = cluster
        .produce("t", &[TestRecord::value("slow").to_partition(0)])
        .unwrap();
    assert_eq!(
        acks,
        [Produced {
            partition: 0,
            offset: 0
        }]
    );

    assert!(cluster.set_round_trip_delay(2, Duration::ZERO).is_err());
    assert!(cluster.kill_broker(2).is_err());
    assert!(cluster.restart_broker(5).is_err());
    assert!(cluster.set_partition_leader("t", 0, Some(2)).is_err());
}

#[test]
fn partition_growth_timestamp_lookup_and_deletion_are_unsupported() {
    let cluster = MockKafkaCluster::start("east", 1).unwrap();
    cluster.create_topic("t", 1).unwrap();
    assert!(matches!(
        cluster.add_partitions("t", 2),
        Err(TestkitError::Unsupported(_))
    ));
    assert!(matches!(
        cluster.offset_for_timestamp("t", 0, 0),
        Err(TestkitError::Unsupported(_))
    ));
    assert!(matches!(
        cluster.delete_topic("t"),
        Err(TestkitError::Unsupported(_))
    ));
}

#[test]
fn dropping_the_cluster_closes_its_listeners() {
    let cluster = MockKafkaCluster::start("east", 2).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let first = bootstrap.split(',').next().unwrap().to_string();
    TcpStream::connect(&first).expect("a running mock broker accepts connections");
    drop(cluster);
    assert!(
        TcpStream::connect(&first).is_err(),
        "{first} still accepts connections after the cluster was dropped"
    );
}

#[test]
fn the_cluster_can_be_shared_between_threads() {
    let cluster = MockKafkaCluster::start("east", 3).unwrap();
    cluster.create_topic("t", 3).unwrap();
    let acks: Vec<Produced> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|p| {
                let cluster = &cluster;
                s.spawn(move || {
                    cluster
                        .produce("t", &[TestRecord::value(format!("p{p}")).to_partition(p)])
                        .unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut partitions: Vec<i32> = acks.iter().map(|a| a.partition).collect();
    partitions.sort();
    assert_eq!(partitions, [0, 1, 2]);
}
