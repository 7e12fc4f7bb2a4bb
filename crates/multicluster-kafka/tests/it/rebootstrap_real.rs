//! A broker that comes back at another address while the address clients bootstrap
//! from stays, as a Kubernetes pod does when it restarts with a new IP behind a
//! Service: the source's clients learned the broker's old address from metadata, find
//! every broker they know down, bootstrap again (librdkafka's re-bootstrap, KIP-899)
//! and read on at the new address. Nothing is lost or read twice.
//!
//! One real broker whose `PROXIED` listener is advertised at a proxy's address (the
//! "old" address); clients bootstrap through a second proxy. The broker is restarted
//! advertising a third proxy's address while the old one refuses every connection.

use crate::support;

use std::time::Duration;

use mck_testkit::proxy::{FaultProxy, Mode, ProxiedCluster};
use mck_testkit::{ClusterOptions, TestCluster, TestRecord};
use support::{Reading, assert_read_once, one_topic_source};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

fn values(from: usize, n: usize) -> Vec<String> {
    (from..from + n).map(|i| format!("v-{i}")).collect()
}

fn produce(c: &mck_testkit::KafkaCluster, values: &[String]) {
    let records: Vec<TestRecord> = values
        .iter()
        .map(|v| TestRecord::value(v.clone()))
        .collect();
    c.produce("t", &records).expect("the test kit produces");
}

#[test]
fn a_broker_back_at_another_address_behind_the_same_bootstrap_is_read_on() {
    let proxied =
        ProxiedCluster::start(ClusterOptions::new("rebootstrap")).expect("the cluster starts");
    let cluster = proxied.cluster();
    cluster.create_topic("t", 2).expect("topic t");
    let listener = cluster.proxied_listeners()[0];
    let bootstrap = FaultProxy::start(listener).expect("the bootstrap proxy");
    let new_address = FaultProxy::start(listener).expect("the new address's proxy");

    let first = values(0, 200);
    produce(cluster, &first);
    mck_testkit::runtime().block_on(async {
        let stream = one_topic_source(&bootstrap.addr().to_string(), "t")
            .client_timeout(Duration::from_secs(10))
            .build()
            .unwrap()
            .open()
            .await
            .expect("the source starts");
        let reading = Reading::start(stream);
        reading.until_all("c", &first, PATIENCE).await;

        // The broker moves: its old address refuses everything from now on.
        proxied.proxy().set_mode(Mode::Reset);
        proxied.proxy().reset_all();
        let moved = std::time::Instant::now();
        cluster
            .restart_advertising_via(0, new_address.port())
            .expect("the broker comes back at its new address");
        let second = values(200, 200);
        produce(cluster, &second);
        reading.until_all("c", &second, PATIENCE).await;
        eprintln!("read on {:?} after the move", moved.elapsed());
        assert!(
            new_address.stats().accepted > 0,
            "the source's clients reached the new address"
        );

        let got = reading.close(Duration::from_secs(20)).await;
        let sent: Vec<String> = first.iter().chain(&second).cloned().collect();
        assert_read_once("c", sent.iter().map(String::as_str), &got);
    });
}
