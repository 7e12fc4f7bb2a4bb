//! `mck consume --order time` through network faults, on real Kafka clusters: the
//! shared `time-a` reached directly, beside a cluster of each test's own behind the
//! test kit's fault proxy (its brokers advertise the proxy, so `mck` never bypasses
//! it), written to straight to its brokers whatever the proxy does.
//!
//! - A cluster dead from the start (its proxy blackholed) holds the live cluster's
//!   records back no longer than start-up's grace and the idle timeout; once it is
//!   back, what it got meanwhile (older than what went out) comes out late, in
//!   offset order, counted in `mck_late_records_total`.
//! - A cluster cut off while read, with `kill -9` of `mck` while it is cut off, a
//!   restart still cut off (killed again), a run once it is back killed right after
//!   its first write, and a last run: every record of both clusters in the file
//!   exactly once, in offset order per partition, the cut-off cluster's records of
//!   meanwhile late rather than dropped.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster, TestRecord, assert_each_once};
use support::{
    PATIENCE, Run, checkpointed_args, complete_lines, newest_checkpoint, output_values, scrape,
};

/// The idle timeout of every run here: a cluster that brought nothing for this long
/// stops holding the merge back.
const IDLE: Duration = Duration::from_secs(2);
/// How long a follow run's start waits for the other clusters once one answered
/// (`START_GRACE` in the library's `enumerator/mod.rs`); a cluster that has not
/// answered by then is taken up later.
const START_GRACE: Duration = Duration::from_secs(5);
/// Room on top of a bound for a small shared machine: starting `mck`, connecting,
/// fetching, writing the file. Generous; the bounds it widens are far below what a
/// cluster holding the merge for ever (or start-up waiting for the dead cluster's
/// client timeout, 30 s) would take.
const SLACK: Duration = Duration::from_secs(10);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64
}

/// The shared live cluster `time-a` and a cluster `proxied` behind a fault proxy,
/// started side by side; `topic` of `partitions` partitions on both.
fn live_and_proxied(
    topic: &str,
    partitions: i32,
    proxied: &str,
) -> (&'static KafkaCluster, ProxiedCluster) {
    let (live, behind) = std::thread::scope(|s| {
        let live = s.spawn(|| {
            mck_testkit::shared_cluster("time-a")
                .unwrap_or_else(|e| panic!("cluster time-a starts: {e:?}"))
        });
        let behind = ProxiedCluster::start(ClusterOptions::new(proxied))
            .unwrap_or_else(|e| panic!("cluster {proxied} starts behind a proxy: {e:?}"));
        (live.join().expect("the thread starting time-a"), behind)
    });
    live.create_topic(topic, partitions).unwrap();
    behind.cluster().create_topic(topic, partitions).unwrap();
    (live, behind)
}

/// A metadata file in `dir` with stream `s`: `topic` on cluster `live` (direct) and
/// on cluster `cut` (through its proxies).
fn metadata(
    dir: &Path,
    topic: &str,
    live: &KafkaCluster,
    cut: &ProxiedCluster,
) -> std::path::PathBuf {
    let md = dir.join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at(
            "s",
            &[
                ("live", &live.bootstrap_servers(), &[topic]),
                ("cut", &cut.proxied_bootstrap_servers(), &[topic]),
            ],
        ),
    )
    .unwrap();
    md
}

/// A line of the JSON-lines output.
#[derive(Debug)]
struct Line {
    cluster: String,
    value: String,
    timestamp: i64,
}

/// The output's lines (none while there is no file); fails unless each partition's
/// offsets increase down the file.
fn lines(path: &Path) -> Vec<Line> {
    output_values(path);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    complete_lines(&text)
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            Line {
                cluster: v["cluster"].as_str().unwrap().to_string(),
                value: v["value"].as_str().unwrap().to_string(),
                timestamp: v["timestamp"].as_i64().expect("a timestamp"),
            }
        })
        .collect()
}

/// Whether every value of `want` is in the output for `cluster`.
fn has_all(path: &Path, cluster: &str, want: &[String]) -> bool {
    let got: std::collections::HashSet<String> = lines(path)
        .into_iter()
        .filter(|l| l.cluster == cluster)
        .map(|l| l.value)
        .collect();
    want.iter().all(|w| got.contains(w))
}

/// Produces `<prefix>-<p>-<i>` for `i` in `range` to `topic` of `cluster`, the
/// partitions in turn, each stamped `at(i)`; returns the values.
fn produce(
    cluster: &KafkaCluster,
    topic: &str,
    partitions: i32,
    prefix: &str,
    range: std::ops::Range<usize>,
    at: impl Fn(usize) -> i64,
) -> Vec<String> {
    let (values, records): (Vec<String>, Vec<TestRecord>) = range
        .map(|i| {
            let p = i as i32 % partitions;
            let v = format!("{prefix}-{p}-{i}");
            (v.clone(), TestRecord::value(v).to_partition(p).at(at(i)))
        })
        .unzip();
    cluster.produce(topic, &records).unwrap();
    values
}

/// The value of `mck_late_records_total` for `cluster` at the metrics endpoint `addr`
/// (0 while it has no series).
fn late_records(addr: &str, cluster: &str) -> u64 {
    let label = format!("cluster=\"{cluster}\"");
    scrape(addr)
        .lines()
        .filter(|l| l.starts_with("mck_late_records_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[test]
fn a_cluster_dead_at_start_holds_time_order_back_only_until_idle_then_comes_late() {
    const TOPIC: &str = "time-dead-at-start";
    let began = Instant::now();
    let (live, cut) = live_and_proxied(TOPIC, 2, "time-dead");
    eprintln!("clusters ready after {:?}", began.elapsed());
    // Dead from the start: connections to it are accepted and never answered.
    cut.set_mode(mck_testkit::proxy::Mode::Blackhole);
    let t0 = now_ms();
    // The dead cluster's records are older than every live one: once it is back, they
    // are late.
    let cut_old = produce(cut.cluster(), TOPIC, 2, "cut", 0..6, |i| {
        t0 - 60_000 + i as i64
    });
    let live_old = produce(live, TOPIC, 2, "live", 0..6, |i| t0 - 30_000 + i as i64);

    let dir = tempfile::tempdir().unwrap();
    let md = metadata(dir.path(), TOPIC, live, &cut);
    let out = dir.path().join("out.jsonl");
    let metrics_addr = format!("127.0.0.1:{}", mck_testkit::free_ports(1).unwrap()[0]);
    let mut args = checkpointed_args(&md, "s", &out, &dir.path().join("ck"));
    args.extend(
        [
            "--order",
            "time",
            "--idle-timeout",
            "2s",
            "--metrics-addr",
            &metrics_addr,
        ]
        .map(String::from),
    );
    let started = Instant::now();
    let mut run = Run::start(&args, dir.path().join("stderr"));
    run.wait_until("the live cluster's first record", PATIENCE, || {
        !lines(&out).is_empty()
    });
    let first = started.elapsed();
    eprintln!("the first record came {first:?} after start");
    // Start-up waits START_GRACE for the dead cluster once the live one answered,
    // then the merge may hold for up to the idle timeout.
    let bound = START_GRACE + IDLE + SLACK;
    assert!(
        first < bound,
        "the live cluster's first record came {first:?} after start, past {bound:?}: the \
         dead cluster held time order back; stderr:\n{}",
        run.stderr()
    );
    run.wait_until("every record of the live cluster", PATIENCE, || {
        has_all(&out, "live", &live_old)
    });

    // Still dead: a new live record is held no longer than the idle timeout.
    let sent = Instant::now();
    let live_now = produce(live, TOPIC, 2, "live", 6..7, |_| now_ms());
    run.wait_until("a new live record", PATIENCE, || {
        has_all(&out, "live", &live_now)
    });
    let took = sent.elapsed();
    assert!(
        took < IDLE + SLACK,
        "a live record took {took:?} with the other cluster dead; stderr:\n{}",
        run.stderr()
    );
    assert!(
        lines(&out).iter().all(|l| l.cluster == "live"),
        "a record of the blackholed cluster: the proxy is not in the path"
    );
    let newest_live = lines(&out).iter().map(|l| l.timestamp).max().unwrap();

    // Back: its records, older than what went out, come out late, nothing dropped.
    let healed = Instant::now();
    cut.set_mode(mck_testkit::proxy::Mode::Pass);
    run.wait_until(
        "the records of the cluster back from the dead",
        PATIENCE,
        || has_all(&out, "cut", &cut_old),
    );
    eprintln!("its records came {:?} after it was back", healed.elapsed());
    let got = lines(&out);
    let late: Vec<&Line> = got.iter().filter(|l| l.cluster == "cut").collect();
    assert!(
        late.iter().all(|l| l.timestamp < newest_live),
        "not late: {late:?}"
    );
    assert_each_once(
        got.iter().map(|l| (l.cluster.as_str(), l.value.as_str())),
        cut_old.iter().map(|v| ("cut", v.as_str())).chain(
            live_old
                .iter()
                .chain(&live_now)
                .map(|v| ("live", v.as_str())),
        ),
    );
    run.wait_until(
        "mck_late_records_total counting the late records",
        PATIENCE,
        || late_records(&metrics_addr, "cut") >= cut_old.len() as u64,
    );
    assert_eq!(
        late_records(&metrics_addr, "cut"),
        cut_old.len() as u64,
        "every late record counted once"
    );
    assert_eq!(
        late_records(&metrics_addr, "live"),
        0,
        "none of the live cluster's"
    );
    run.signal(libc::SIGTERM);
    assert!(run.wait(), "SIGTERM ends the run with 0:\n{}", run.stderr());
    eprintln!("done in {:?}", began.elapsed());
}

/// `kill -9`, asserting the run was still going.
fn kill9(run: &mut Run, what: &str) {
    if let Some(status) = run.child.try_wait().unwrap() {
        panic!("{what} ended by itself ({status}):\n{}", run.stderr());
    }
    run.child.kill().unwrap();
    run.child.wait().unwrap();
}

/// Waits until a checkpoint covers the whole output file (nothing is written
/// meanwhile: the records still to come are held by the cut-off cluster).
fn wait_for_checkpoint_of_all(run: &mut Run, out: &Path, ck: &Path) {
    let len = std::fs::metadata(out).unwrap().len();
    run.wait_until("a checkpoint covering the file", PATIENCE, || {
        newest_checkpoint(ck).is_some_and(|(_, covered)| covered >= len)
    });
    assert_eq!(
        std::fs::metadata(out).unwrap().len(),
        len,
        "the file grew while the cut-off cluster held what was left"
    );
}

#[test]
fn kill_9_around_a_cut_off_cluster_in_time_order_leaves_each_record_once() {
    const TOPIC: &str = "time-cut-kill";
    const P: i32 = 2;
    // Records per cluster written at a step before the cut and after it heals, and
    // at each of the three steps while it is cut off.
    const FEW: usize = 20;
    const MEANWHILE: usize = 200;
    let began = Instant::now();
    let (live, cut) = live_and_proxied(TOPIC, P, "time-cut");
    eprintln!("clusters ready after {:?}", began.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let md = metadata(dir.path(), TOPIC, live, &cut);
    let (out, ck) = (dir.path().join("out.jsonl"), dir.path().join("ck"));
    let mut args = checkpointed_args(&md, "s", &out, &ck);
    args.extend(["--order", "time", "--idle-timeout", "2s"].map(String::from));
    // Both clusters get `n` records at each step, the cut-off one first (older).
    let mut next = 0;
    let mut step = |n: usize| -> (Vec<String>, Vec<String>) {
        let range = next..next + n;
        next += n;
        let c = produce(cut.cluster(), TOPIC, P, "cut", range.clone(), |_| now_ms());
        let l = produce(live, TOPIC, P, "live", range, |_| now_ms());
        (c, l)
    };
    let mut cut_sent = Vec::new();
    let mut live_sent = Vec::new();

    // Run 1 reads both.
    let (c, l) = step(FEW);
    let mut run = Run::start(&args, dir.path().join("stderr-1"));
    run.wait_until("both clusters' first records", PATIENCE, || {
        has_all(&out, "cut", &c) && has_all(&out, "live", &l)
    });
    cut_sent.extend(c);
    live_sent.extend(l);

    // Cut off while read: the live cluster's next records wait no longer than the
    // idle timeout.
    cut.set_mode(mck_testkit::proxy::Mode::Blackhole);
    let hole = Instant::now();
    let (c, l) = step(MEANWHILE);
    run.wait_until(
        "the live cluster's records while the other is cut off",
        PATIENCE,
        || has_all(&out, "live", &l),
    );
    let held = hole.elapsed();
    eprintln!("the live cluster's records came {held:?} after the cut");
    assert!(
        held < IDLE + SLACK,
        "the cut-off cluster held the live one's records {held:?}; stderr:\n{}",
        run.stderr()
    );
    cut_sent.extend(c);
    live_sent.extend(l);
    wait_for_checkpoint_of_all(&mut run, &out, &ck);
    kill9(&mut run, "run 1");

    // Records while no run reads; run 2 starts with the cluster still cut off.
    let (c, l) = step(MEANWHILE);
    cut_sent.extend(c);
    live_sent.extend(l.clone());
    let mut run = Run::start(&args, dir.path().join("stderr-2"));
    run.wait_until("the live cluster's records in run 2", PATIENCE, || {
        has_all(&out, "live", &l)
    });
    let (c, l) = step(MEANWHILE);
    run.wait_until("the live cluster's new records in run 2", PATIENCE, || {
        has_all(&out, "live", &l)
    });
    cut_sent.extend(c);
    live_sent.extend(l);
    wait_for_checkpoint_of_all(&mut run, &out, &ck);
    kill9(&mut run, "run 2");
    let lines_before = lines(&out).len();
    let newest_before = lines(&out).iter().map(|l| l.timestamp).max().unwrap();
    assert_eq!(
        lines(&out).iter().filter(|l| l.cluster == "cut").count(),
        FEW,
        "only the cut-off cluster's records of before the cut went out"
    );

    // Back; run 3 is killed -9 right after its first write (the late records go out
    // first; the live cluster's newest ones, newer than the cut-off cluster's, may
    // still be held by the merge), and run 4 reads to the end.
    cut.set_mode(mck_testkit::proxy::Mode::Pass);
    let (c, l) = step(FEW);
    cut_sent.extend(c);
    live_sent.extend(l);
    let length = || std::fs::metadata(&out).map_or(0, |m| m.len());
    let before = length();
    let mut run = Run::start(&args, dir.path().join("stderr-3"));
    run.wait_until("run 3's first record", PATIENCE, || length() > before);
    std::thread::sleep(Duration::from_millis(5));
    kill9(&mut run, "run 3");
    eprintln!(
        "run 3 killed with {} of {} records in the file",
        lines(&out).len(),
        cut_sent.len() + live_sent.len()
    );
    let mut run = Run::start(&args, dir.path().join("stderr-4"));
    run.wait_until("every record", PATIENCE, || {
        has_all(&out, "cut", &cut_sent) && has_all(&out, "live", &live_sent)
    });
    // Anything written twice would show by now.
    std::thread::sleep(Duration::from_millis(500));
    run.signal(libc::SIGTERM);
    assert!(run.wait(), "SIGTERM ends run 4 with 0:\n{}", run.stderr());

    // `lines` checked offset order per partition down the whole file.
    let got = lines(&out);
    assert_each_once(
        got.iter().map(|l| (l.cluster.as_str(), l.value.as_str())),
        cut_sent
            .iter()
            .map(|v| ("cut", v.as_str()))
            .chain(live_sent.iter().map(|v| ("live", v.as_str()))),
    );
    // What the cut-off cluster got meanwhile came after newer records: late, not
    // dropped.
    let late = got[lines_before..]
        .iter()
        .filter(|l| l.cluster == "cut" && l.timestamp < newest_before)
        .count();
    assert_eq!(
        late,
        3 * MEANWHILE,
        "the cut-off cluster's records of meanwhile, late"
    );
    eprintln!("{} records once, done in {:?}", got.len(), began.elapsed());
}
