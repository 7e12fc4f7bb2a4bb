//! Broker failures inside one cluster, read through `mck consume --output
//! --checkpoint-dir`.
//!
//! Cluster `three` has three brokers; its topic has 6 partitions, replication factor
//! 3 and `min.insync.replicas` 2. Kafka's own Java producer (`acks=all`, idempotent)
//! writes to it all along while `mck consume` follows it into a file. The leader of
//! some partitions is killed with SIGKILL and started again, then another leader; the
//! `mck` process itself is killed with SIGKILL once while a broker is dead, and
//! started again with the same arguments. Once production stops and the run is
//! stopped with SIGINT, the file holds every record exactly once.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{
    KafkaCluster, TestCluster, assert_each_once, busiest_leader, java_produce_until_stopped,
    three_broker_options,
};
use support::{Run, checkpointed_args, lines_in, newest_checkpoint, output_values};

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

fn start_three() -> KafkaCluster {
    KafkaCluster::start(three_broker_options("bf-three", BROKER_SESSION))
        .expect("the 3-broker cluster starts")
}

#[test]
fn leaders_and_mck_killed_under_load_leave_each_record_in_the_file_once() {
    let began = Instant::now();
    let three = Arc::new(start_three());
    three.create_topic(TOPIC, PARTITIONS).unwrap();
    three
        .await_in_sync(TOPIC, PATIENCE)
        .expect("every replica in sync at the start");
    eprintln!("cluster ready after {:?}", began.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at(
            "orders",
            &[("three", &three.bootstrap_servers(), &[TOPIC])],
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("ck");
    let args = checkpointed_args(&md, "orders", &out, &cps);

    // The Java producer writes `three-<n>` every 5 ms until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let feed = java_produce_until_stopped(
        three
            .java_producer(TOPIC, &[])
            .expect("the Java producer starts"),
        "three",
        stop.clone(),
    );

    let mut run = Run::start(&args, dir.path().join("stderr-0"));
    run.wait_until("200 lines in the output", PATIENCE, || {
        lines_in(&out) >= 200
    });
    eprintln!("mck writing after {:?}", began.elapsed());

    let mut killed_before = None;
    let mut runs = 1;
    for round in 0..2 {
        let (victim, led) = busiest_leader(&three, TOPIC, killed_before);
        three.kill_broker(victim).expect("kill -9 a leader");
        let killed_at = Instant::now();
        eprintln!("round {round}: killed broker {victim}, leader of partitions {led:?}");
        if round == 0 {
            // mck dies too, mid-way, while the broker is dead; it comes back at once.
            std::thread::sleep(Duration::from_secs(3));
            run.child.kill().unwrap(); // SIGKILL
            run.child.wait().unwrap();
            eprintln!(
                "round {round}: killed mck at {} lines; newest checkpoint {:?}",
                lines_in(&out),
                newest_checkpoint(&cps)
            );
            run = Run::start(&args, dir.path().join(format!("stderr-{runs}")));
            runs += 1;
        }
        std::thread::sleep(OUTAGE.saturating_sub(killed_at.elapsed()));
        // The run goes on writing while the broker is dead.
        let before = lines_in(&out);
        run.wait_until("more lines while a broker is dead", PATIENCE, || {
            lines_in(&out) > before + 100
        });
        three
            .restart_broker(victim)
            .expect("the killed broker starts again");
        three
            .await_in_sync(TOPIC, PATIENCE)
            .expect("the killed broker catches up");
        eprintln!(
            "round {round}: broker {victim} back and in sync {:?} after its kill",
            killed_at.elapsed()
        );
        killed_before = Some(victim);
    }

    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let sent = feed.join().expect("the Java feed");
    eprintln!("produced {} records", sent.len());

    // Done when the file holds every record and a checkpoint covers it all.
    let before = newest_checkpoint(&cps).map_or(0, |(n, _)| n);
    run.wait_until("a checkpoint covering every record", PATIENCE, || {
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        lines_in(&out) >= sent.len()
            && newest_checkpoint(&cps).is_some_and(|(n, l)| n > before && l == len)
    });
    run.signal(libc::SIGINT);
    let status = run
        .exit_within(PATIENCE)
        .unwrap_or_else(|| panic!("mck consume did not exit; stderr:\n{}", run.stderr()));
    assert!(
        status.success(),
        "mck consume ended with {status} after SIGINT; stderr:\n{}",
        run.stderr()
    );

    let got: Vec<String> = output_values(&out).into_iter().map(|(_, v)| v).collect();
    assert_each_once(&got, &sent);
    assert_eq!(got.len(), sent.len());
    eprintln!("done in {:?} ({runs} runs of mck)", began.elapsed());
}
