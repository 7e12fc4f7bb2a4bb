//! `mck consume --output --checkpoint-dir` over two clusters while one's network
//! blackholes.
//!
//! Cluster `west` sits behind a fault proxy (its brokers advertise the proxy's
//! address, so `mck`'s clients never bypass it); cluster `east` is reached directly.
//! Records are produced to both all along, straight to the brokers. While `west`'s
//! network blackholes:
//!
//! - `east`'s records produced meanwhile reach the output file within a few seconds;
//! - SIGINT ends the run promptly, with status 0, leaving a checkpoint that covers
//!   the file;
//! - once the network heals, a run with the same arguments and `-e` completes the
//!   file: every record of both clusters in it exactly once.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_testkit::proxy::Mode;
use mck_testkit::{TestCluster, TestRecord, assert_each_once, assert_flowed_during};
use support::{Run, checkpointed_args, newest_checkpoint, output_values};

const TOPIC: &str = "nf";
const PARTITIONS: i32 = 3;
/// How long the blackhole lasts before the SIGINT.
const HOLE: Duration = Duration::from_secs(10);
/// How long after being produced a record of the healthy cluster must be in the file
/// while the other cluster's network is down. Generous: the machine is small and
/// shared.
const MAX_HEALTHY_LAG: Duration = Duration::from_secs(5);
/// How long a run may take to end after SIGINT, whatever `west`'s network does.
const PROMPT: Duration = Duration::from_secs(10);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// A record a feed produced, and when its acknowledgement came.
type Sent = (String, Instant);

/// A thread producing `<prefix>-<n>` to `topic` of `cluster`, 10 records every 50 ms,
/// waiting for each batch's acknowledgement.
fn feed(
    cluster: &'static dyn TestCluster,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Sent>> {
    std::thread::spawn(move || {
        let mut sent: Vec<Sent> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<String> = (sent.len()..sent.len() + 10)
                .map(|n| format!("{prefix}-{n}"))
                .collect();
            let records: Vec<TestRecord> = batch
                .iter()
                .enumerate()
                .map(|(i, v)| TestRecord::value(v.clone()).with_key(format!("k{i}")))
                .collect();
            cluster.produce(TOPIC, &records).expect("produce");
            let at = Instant::now();
            sent.extend(batch.into_iter().map(|v| (v, at)));
            std::thread::sleep(Duration::from_millis(50));
        }
        sent
    })
}

fn count_of(path: &Path, cluster: &str) -> usize {
    output_values(path)
        .iter()
        .filter(|(c, _)| c == cluster)
        .count()
}

/// Every value of `sent` is in `got` for `cluster` exactly once, and nothing else.
fn assert_exactly_once(cluster: &str, sent: &[Sent], got: &[(String, String)]) {
    assert_each_once(
        got.iter()
            .filter(|(c, _)| c == cluster)
            .map(|(_, v)| v.as_str()),
        sent.iter().map(|(v, _)| v.as_str()),
    );
}

#[test]
fn a_blackholed_cluster_neither_stalls_the_file_nor_holds_a_sigint() {
    let began = Instant::now();
    let (east, west) = support::east_and_proxied_west("nff");
    east.create_topic(TOPIC, PARTITIONS).unwrap();
    west.cluster().create_topic(TOPIC, PARTITIONS).unwrap();
    eprintln!("clusters ready after {:?}", began.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at(
            "orders",
            &[
                ("east", &east.bootstrap_servers(), &[TOPIC]),
                ("west", &west.proxied_bootstrap_servers(), &[TOPIC]),
            ],
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("ck");
    let args = checkpointed_args(&md, "orders", &out, &cps);

    let stop = Arc::new(AtomicBool::new(false));
    let east_feed = feed(east, "east", stop.clone());
    let west_feed = feed(west.cluster(), "west", stop.clone());

    let mut run = Run::start(&args, dir.path().join("stderr-1"));
    run.wait_until("records of both clusters in the file", PATIENCE, || {
        count_of(&out, "east") >= 20 && count_of(&out, "west") >= 20
    });
    eprintln!("both clusters in the file after {:?}", began.elapsed());

    // Blackhole west and watch the file: when each line first shows up.
    let proxy = west.proxy();
    let hole_start = Instant::now();
    proxy.blackhole();
    let seen: Arc<Mutex<BTreeMap<(String, String), Instant>>> = Arc::default();
    while hole_start.elapsed() < HOLE {
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        for line in output_values(&out) {
            seen.entry(line).or_insert(now);
        }
        drop(seen);
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!(
                "mck consume exited ({status}) during the blackhole; stderr:\n{}",
                run.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // SIGINT while west is still blackholed.
    let signalled = Instant::now();
    run.signal(libc::SIGINT);
    let status = run.exit_within(PATIENCE);
    let took = signalled.elapsed();
    let stderr1 = run.stderr();
    eprintln!("after SIGINT, mck ended in {took:?} with {status:?}");
    assert_eq!(proxy.mode(), Mode::Blackhole);
    proxy.pass();
    let status = status.unwrap_or_else(|| panic!("no exit {PATIENCE:?} after SIGINT:\n{stderr1}"));
    assert!(
        took < PROMPT,
        "mck took {took:?} to end after SIGINT while west was blackholed; stderr:\n{stderr1}"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "mck ended with {status} after one SIGINT; stderr:\n{stderr1}"
    );
    let file_len = std::fs::metadata(&out).unwrap().len();
    let (n, covered) = newest_checkpoint(&cps)
        .unwrap_or_else(|| panic!("no checkpoint left after SIGINT; stderr:\n{stderr1}"));
    eprintln!("checkpoint {n} covers {covered} of {file_len} bytes");
    assert_eq!(
        covered, file_len,
        "the checkpoint left after SIGINT does not cover the file; stderr:\n{stderr1}"
    );

    // East kept flowing into the file during the blackhole; west did not (the proxy is
    // in the path).
    let hole_end = hole_start + HOLE;
    let seen = seen.lock().unwrap().clone();
    stop.store(true, Ordering::Relaxed);
    let east_sent = east_feed.join().expect("east feed");
    let west_sent = west_feed.join().expect("west feed");
    eprintln!("east, during the blackhole:");
    assert_flowed_during(
        east_sent.iter().map(|(v, at)| (v.as_str(), *at)),
        |v| seen.get(&("east".to_string(), v.to_string())).copied(),
        (hole_start, hole_end),
        MAX_HEALTHY_LAG,
        &format!("east stalled while west was blackholed; stderr:\n{stderr1}"),
    );
    let west_in_hole = west_sent
        .iter()
        .filter(|(v, at)| {
            *at > hole_start + Duration::from_secs(1)
                && seen.contains_key(&("west".to_string(), v.clone()))
        })
        .count();
    assert_eq!(
        west_in_hole, 0,
        "west records produced during its blackhole reached the file: the proxy is not in \
         the path"
    );

    // Healed: the same arguments with -e read the rest and end.
    let mut args2 = args.clone();
    args2.push("-e".into());
    let mut run = Run::start(&args2, dir.path().join("stderr-2"));
    let status = run.exit_within(PATIENCE);
    let stderr2 = run.stderr();
    let status = status.unwrap_or_else(|| panic!("the -e run did not end:\n{stderr2}"));
    assert!(
        status.success(),
        "the -e run ended with {status}:\n{stderr2}"
    );
    let got = output_values(&out);
    assert_exactly_once("east", &east_sent, &got);
    assert_exactly_once("west", &west_sent, &got);
    eprintln!(
        "{} east and {} west records in the file once; done in {:?}",
        east_sent.len(),
        west_sent.len(),
        began.elapsed()
    );
}
