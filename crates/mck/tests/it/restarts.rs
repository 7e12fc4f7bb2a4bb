//! Restart semantics of `mck consume`, as a user meets them through the binary, on real
//! Kafka clusters (`restart-a`, `restart-b`; each test has topics of its own):
//!
//! - follow runs and bounded runs (`--until latest`, `-e`) take turns on one
//!   `--checkpoint-dir` and one `--output` while records are produced all along, most of
//!   them ended by `kill -9`: the file ends up with every record exactly once, and each
//!   bounded run that is left alone ends, even right after a follow run;
//! - the same bounded command run again appends what is new since, and a follow run on
//!   the same directory goes on from there;
//! - a cluster's bootstrap list edited to lead to another Kafka cluster is refused with
//!   one warning (the old cluster is read on) until the metadata sets the cluster's
//!   starting offsets, which reads the new cluster from those.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, shared_cluster};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

fn cluster_a() -> &'static KafkaCluster {
    shared_cluster("restart-a").expect("cluster restart-a starts")
}

/// Both clusters, started at the same time.
fn clusters() -> (&'static KafkaCluster, &'static KafkaCluster) {
    std::thread::scope(|s| {
        let a = s.spawn(cluster_a);
        let b = shared_cluster("restart-b").expect("cluster restart-b starts");
        (a.join().expect("the thread starting restart-a"), b)
    })
}

fn os(s: impl AsRef<std::ffi::OsStr>) -> OsString {
    s.as_ref().to_owned()
}

/// Replaces a file the way config tools do: a temporary file renamed over it.
fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn lines_in(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A running `mck consume`; its stderr goes to a file. Killed if dropped running (a
/// failed assertion leaves no process behind).
struct Run {
    child: Child,
    stderr: PathBuf,
    began: Instant,
}

impl Run {
    fn start(args: &[OsString], stdout: Stdio, stderr: PathBuf) -> Run {
        let err = std::fs::File::create(&stderr).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mck"))
            .arg("consume")
            .args(args)
            .stdout(stdout)
            .stderr(Stdio::from(err))
            .spawn()
            .expect("mck starts");
        Run {
            child,
            stderr,
            began: Instant::now(),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// `kill -9`; the exit status instead when the run had already ended by itself.
    fn kill9(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
        None
    }

    /// Waits for the run to end by itself; fails after `within`.
    fn wait(&mut self, within: Duration, what: &str) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{what} did not end within {within:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGINT, then waits for the exit status.
    fn interrupt(&mut self, what: &str) -> ExitStatus {
        assert!(
            self.exited().is_none(),
            "{what} ended before SIGINT; stderr:\n{}",
            self.stderr()
        );
        // SAFETY: plain kill(2) on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) },
            0
        );
        self.wait(PATIENCE, &format!("{what} after SIGINT"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A small xorshift generator: random kill moments, reproducible from the printed seed
/// (`RESTARTS_SEED=<n>`).
struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("RESTARTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("RESTARTS_SEED={seed}");
        Rng(seed)
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(from + self.0 % (to - from))
    }
}

/// Records per partition in each batch of a [`Feed`].
const BATCH_PER_PARTITION: i32 = 40;

/// Records per cluster produced at once before a bounded run that is killed.
const BURST: usize = 20_000;

/// Records produced in the background to every partition of a topic, values
/// `<prefix>-<partition>-<seq>` (`seq` counting up across partitions), in acknowledged
/// batches (a producer each) until stopped.
struct Feed {
    stop: Arc<AtomicBool>,
    /// Records to add to the next batch (see [`Feed::burst`]).
    extra: Arc<AtomicUsize>,
    sent: Arc<Mutex<Vec<String>>>,
    thread: JoinHandle<()>,
}

impl Feed {
    fn start(c: &'static KafkaCluster, topic: &str, partitions: i32, prefix: &str) -> Feed {
        let stop = Arc::new(AtomicBool::new(false));
        let extra = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, extra, sent) = (stop.clone(), extra.clone(), sent.clone());
            let (topic, prefix) = (topic.to_string(), prefix.to_string());
            std::thread::spawn(move || {
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut values = Vec::new();
                    let mut batch = Vec::new();
                    let n = (BATCH_PER_PARTITION * partitions) as usize
                        + extra.swap(0, Ordering::Relaxed);
                    for _ in 0..n {
                        let p = seq % partitions;
                        let v = format!("{prefix}-{p}-{seq}");
                        batch.push(TestRecord::value(v.clone()).to_partition(p));
                        values.push(v);
                        seq += 1;
                    }
                    c.produce(&topic, &batch)
                        .unwrap_or_else(|e| panic!("producing to {prefix}: {e}"));
                    sent.lock().unwrap().extend(values);
                    std::thread::sleep(Duration::from_millis(40));
                }
            })
        };
        Feed {
            stop,
            extra,
            sent,
            thread,
        }
    }

    /// Adds `records` to the next batch and waits until they are acknowledged: a
    /// backlog a bounded run takes a while to read.
    fn burst(&self, records: usize) {
        let before = self.sent.lock().unwrap().len();
        self.extra.store(records, Ordering::Relaxed);
        let until = Instant::now() + PATIENCE;
        while self.sent.lock().unwrap().len() < before + records {
            assert!(Instant::now() < until, "a burst of {records} records");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The values acknowledged so far.
    fn acknowledged(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the producing thread");
        Arc::try_unwrap(self.sent).unwrap().into_inner().unwrap()
    }
}

/// Checks that the output holds each of `sent` exactly once and nothing else, and
/// that the records of each partition come in the order they were produced.
fn assert_each_once_in_order(got: &[String], sent: &[String]) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut last: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    for (i, v) in got.iter().enumerate() {
        *counts.entry(v.as_str()).or_default() += 1;
        let (partition, seq) = v.rsplit_once('-').expect("values are <prefix>-<p>-<seq>");
        let seq: u64 = seq.parse().expect("a sequence number");
        if let Some((prev, at)) = last.insert(partition.to_string(), (seq, i + 1)) {
            assert!(
                seq > prev,
                "{partition}: {v} at line {} after seq {prev} at line {at}",
                i + 1
            );
        }
    }
    let want: BTreeSet<&str> = sent.iter().map(String::as_str).collect();
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    let missing: Vec<_> = want.iter().filter(|v| !counts.contains_key(*v)).collect();
    let unknown: Vec<_> = counts.keys().filter(|v| !want.contains(*v)).collect();
    assert!(
        twice.is_empty(),
        "{} records in the file more than once, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    assert!(
        missing.is_empty(),
        "{} of {} records not in the file, e.g. {:?}",
        missing.len(),
        want.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(unknown.is_empty(), "records never produced: {unknown:?}");
    assert_eq!(got.len(), sent.len());
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// A follow run, killed with SIGKILL after 1 to 4 s.
    Follow,
    /// A bounded run with this option. When `kill`, it starts after a burst of
    /// [`BURST`] records per cluster (a backlog to read) and is killed with SIGKILL 0
    /// to 15 ms after its first line reaches the file, mid-way; else it is left to end
    /// by itself.
    Bounded { until: &'static str, kill: bool },
}

#[test]
fn kill_nines_of_bounded_and_follow_runs_on_one_checkpoint_dir_leave_each_record_once() {
    const TOPIC: &str = "restart-loop";
    const PARTITIONS: i32 = 4;
    let began = Instant::now();
    let (a, b) = clusters();
    for c in [a, b] {
        c.create_topic(TOPIC, PARTITIONS).unwrap();
    }
    eprintln!("clusters ready after {:?}", began.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata("orders", &[(a, &[TOPIC]), (b, &[TOPIC])]),
    )
    .unwrap();
    let out = dir.path().join("out.txt");
    let args: Vec<OsString> = vec![
        os(&md),
        os("--stream"),
        os("orders"),
        os("--output"),
        os(&out),
        os("--checkpoint-dir"),
        os(dir.path().join("ck")),
        os("--checkpoint-interval"),
        os("500ms"),
        os("--format"),
        os("value"),
    ];
    let feeds = [
        Feed::start(a, TOPIC, PARTITIONS, "a"),
        Feed::start(b, TOPIC, PARTITIONS, "b"),
    ];
    let acknowledged = || -> Vec<String> { feeds.iter().flat_map(Feed::acknowledged).collect() };
    let mut rng = Rng::from_env();

    use Mode::*;
    let plan = [
        Follow,
        Bounded {
            until: "--until=latest",
            kill: false,
        },
        Follow,
        Bounded {
            until: "-e",
            kill: true,
        },
        Bounded {
            until: "-e",
            kill: false,
        },
        Follow,
        Bounded {
            until: "--until=latest",
            kill: true,
        },
        Bounded {
            until: "-e",
            kill: true,
        },
        Follow,
        Bounded {
            until: "-e",
            kill: false,
        },
    ];
    let mut completed = Vec::new();
    let mut killed_bounded = 0;
    for (i, mode) in plan.iter().enumerate() {
        let mut run_args = args.clone();
        if let Bounded { until, .. } = mode {
            run_args.push(os(until));
        }
        if let Bounded { kill: true, .. } = mode {
            // A backlog that takes the run a while to read, so that the kill comes
            // while it writes (a few thousand records took it under 10 ms).
            for feed in &feeds {
                feed.burst(BURST);
            }
        }
        let before = acknowledged();
        let mut run = Run::start(
            &run_args,
            Stdio::null(),
            dir.path().join(format!("stderr-{i}")),
        );
        let what = format!("run {i} ({mode:?})");
        let outcome = match *mode {
            Follow => {
                std::thread::sleep(rng.millis(1000, 4000));
                let ended = run.kill9();
                assert!(
                    ended.is_none(),
                    "{what} ended by itself ({ended:?}); stderr:\n{}",
                    run.stderr()
                );
                "killed".to_string()
            }
            Bounded { kill: true, .. } => {
                // The file's length, not its lines: looked at every millisecond, so
                // the kill is not late for a run that reads its backlog in tens of ms.
                let length = || std::fs::metadata(&out).map_or(0, |m| m.len());
                let at_start = length();
                let until = Instant::now() + PATIENCE;
                while length() <= at_start && run.exited().is_none() {
                    assert!(
                        Instant::now() < until,
                        "{what} wrote nothing within {PATIENCE:?}; stderr:\n{}",
                        run.stderr()
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(rng.millis(0, 15));
                match run.kill9() {
                    None => {
                        killed_bounded += 1;
                        "killed mid-way".to_string()
                    }
                    Some(status) => {
                        assert!(
                            status.success(),
                            "{what} ended with {status}; stderr:\n{}",
                            run.stderr()
                        );
                        "ended before its kill".to_string()
                    }
                }
            }
            Bounded { kill: false, .. } => {
                let status = run.wait(PATIENCE, &what);
                let took = run.began.elapsed();
                assert!(
                    status.success(),
                    "{what} ended with {status} after {took:?}; stderr:\n{}",
                    run.stderr()
                );
                // It read at least to the log ends it found, which are past every
                // record acknowledged before it started.
                let got: BTreeSet<String> = lines_in(&out).into_iter().collect();
                let short: Vec<_> = before.iter().filter(|v| !got.contains(*v)).collect();
                assert!(
                    short.is_empty(),
                    "{what} ended without {} records produced before it started, e.g. {:?}; \
                     stderr:\n{}",
                    short.len(),
                    &short[..short.len().min(5)],
                    run.stderr()
                );
                completed.push(took);
                format!("ended with 0 in {took:?}")
            }
        };
        eprintln!(
            "{what}: {outcome} after {:?}; {} lines in the file, {} records produced",
            run.began.elapsed(),
            lines_in(&out).len(),
            acknowledged().len()
        );
    }

    assert!(
        killed_bounded > 0,
        "no bounded run was still running when its kill came: the test proved less than it says"
    );
    let [fa, fb] = feeds;
    let mut sent = fa.finish();
    sent.extend(fb.finish());
    let mut last_args = args.clone();
    last_args.push(os("-e"));
    let mut run = Run::start(&last_args, Stdio::null(), dir.path().join("stderr-last"));
    let status = run.wait(PATIENCE, "the final bounded run");
    assert!(
        status.success(),
        "the final bounded run ended with {status}; stderr:\n{}",
        run.stderr()
    );
    eprintln!(
        "final bounded run: ended with 0 in {:?}; bounded runs left alone took {completed:?}",
        run.began.elapsed()
    );
    assert_each_once_in_order(&lines_in(&out), &sent);
    eprintln!(
        "{} records exactly once, done in {:?}",
        sent.len(),
        began.elapsed()
    );
}

#[test]
fn the_same_bounded_command_again_appends_what_is_new_and_a_follow_run_goes_on() {
    const TOPIC: &str = "restart-rerun";
    const PARTITIONS: i32 = 3;
    let began = Instant::now();
    let a = cluster_a();
    a.create_topic(TOPIC, PARTITIONS).unwrap();
    let mut seq = 0;
    let mut produce = |n: usize| -> Vec<String> {
        let mut values = Vec::new();
        let records: Vec<TestRecord> = (0..n)
            .map(|_| {
                let p = seq % PARTITIONS;
                let v = format!("r-{p}-{seq}");
                seq += 1;
                values.push(v.clone());
                TestRecord::value(v).to_partition(p)
            })
            .collect();
        a.produce(TOPIC, &records).unwrap();
        values
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(&md, mck_testkit::flink_metadata("rerun", &[(a, &[TOPIC])])).unwrap();
    let out = dir.path().join("export.txt");
    let args: Vec<OsString> = vec![
        os(&md),
        os("-s"),
        os("rerun"),
        os("--output"),
        os(&out),
        os("--checkpoint-dir"),
        os(dir.path().join("ck")),
        os("--format"),
        os("value"),
    ];
    let mut bounded_args = args.clone();
    bounded_args.extend([os("--until"), os("latest")]);
    let export = |n: usize| {
        let mut run = Run::start(
            &bounded_args,
            Stdio::null(),
            dir.path().join(format!("stderr-{n}")),
        );
        let status = run.wait(PATIENCE, &format!("bounded run {n}"));
        assert!(
            status.success(),
            "bounded run {n} ended with {status}; stderr:\n{}",
            run.stderr()
        );
        eprintln!("bounded run {n}: ended with 0 in {:?}", run.began.elapsed());
        lines_in(&out)
    };

    let first = produce(30);
    let after_first = export(1);
    assert_eq!(sorted(after_first.clone()), sorted(first.clone()));

    let second = produce(21);
    let after_second = export(2);
    assert_eq!(
        after_second[..after_first.len()],
        after_first[..],
        "the first export is kept as it was"
    );
    assert_eq!(
        sorted(after_second[after_first.len()..].to_vec()),
        sorted(second.clone()),
        "the second run appends exactly the records produced since the first"
    );

    let after_third = export(3);
    assert_eq!(
        after_third, after_second,
        "nothing new since: nothing appended"
    );

    let mut follow = Run::start(&args, Stdio::null(), dir.path().join("stderr-follow"));
    std::thread::sleep(Duration::from_secs(1));
    let third = produce(12);
    let until = Instant::now() + PATIENCE;
    while lines_in(&out).len() < after_second.len() + third.len() {
        assert!(
            follow.exited().is_none(),
            "the follow run ended by itself; stderr:\n{}",
            follow.stderr()
        );
        assert!(
            Instant::now() < until,
            "the follow run wrote {} of {} lines within {PATIENCE:?}; stderr:\n{}",
            lines_in(&out).len(),
            after_second.len() + third.len(),
            follow.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Anything written twice would show up now.
    std::thread::sleep(Duration::from_millis(500));
    let status = follow.interrupt("the follow run");
    assert_eq!(
        status.code(),
        Some(0),
        "SIGINT ends the follow run with 0; stderr:\n{}",
        follow.stderr()
    );
    let all = lines_in(&out);
    assert_eq!(all[..after_second.len()], after_second[..]);
    assert_eq!(
        sorted(all[after_second.len()..].to_vec()),
        sorted(third.clone()),
        "the follow run goes on after the bounded runs: only what was produced since"
    );
    let mut sent = first;
    sent.extend(second);
    sent.extend(third);
    assert_each_once_in_order(&all, &sent);
    eprintln!("done in {:?}", began.elapsed());
}

/// The rich layout: cluster `east` at `bootstrap`, stream `s` reading `topic` there.
fn east_metadata(bootstrap: &str, topic: &str, starting: Option<&str>) -> String {
    let starting = starting
        .map(|s| format!("    startingOffsets: {s}\n"))
        .unwrap_or_default();
    format!(
        "clusters:\n  east:\n    bootstrapServers: {bootstrap}\n{starting}\
         streams:\n  s:\n    clusters:\n      east:\n        topics: [{topic}]\n"
    )
}

/// stdout lines of a run, as they come.
fn stdout_lines(run: &mut Run) -> mpsc::Receiver<String> {
    let out = run.child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Receives lines into `seen` until it holds every one of `want`.
fn receive_until(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    want: &[String],
    run: &Run,
    what: &str,
) {
    let until = Instant::now() + PATIENCE;
    while !want.iter().all(|w| seen.contains(w)) {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!(
                "{what}: not all of {want:?} printed within {PATIENCE:?}; printed {seen:?}; \
                 stderr:\n{}",
                run.stderr()
            ),
        }
    }
}

/// Receives whatever comes within `d`.
fn receive_for(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, d: Duration) {
    let until = Instant::now() + d;
    while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        seen.push(line);
    }
}

#[test]
fn a_bootstrap_list_switched_to_another_cluster_is_refused_until_starting_offsets_are_set() {
    const TOPIC: &str = "restart-switch";
    const WARNING: &str = "the new bootstrap list leads to another Kafka cluster";
    let began = Instant::now();
    let (a, b) = clusters();
    let produce = |c: &KafkaCluster, prefix: &str, range: std::ops::Range<usize>| {
        let values: Vec<String> = range.map(|i| format!("{prefix}-{i}")).collect();
        let records: Vec<TestRecord> = values
            .iter()
            .map(|v| TestRecord::value(v.as_str()).to_partition(0))
            .collect();
        c.produce(TOPIC, &records).unwrap();
        values
    };
    for c in [a, b] {
        c.create_topic(TOPIC, 1).unwrap();
    }
    assert_ne!(a.kafka_cluster_id(), b.kafka_cluster_id());
    let a_start = produce(a, "A", 0..5);
    let b_start = produce(b, "B", 0..7);

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(&md, east_metadata(&a.bootstrap_servers(), TOPIC, None)).unwrap();
    let stderr_path = dir.path().join("stderr");
    let mut run = Run::start(
        &[os(&md), os("-s"), os("s"), os("--format"), os("value")],
        Stdio::piped(),
        stderr_path.clone(),
    );
    let rx = stdout_lines(&mut run);
    let mut seen = Vec::new();
    receive_until(&rx, &mut seen, &a_start, &run, "reading A");
    assert_eq!(seen, a_start);

    // `east` now points at B: another Kafka cluster, same topic name.
    write_atomically(&md, &east_metadata(&b.bootstrap_servers(), TOPIC, None));
    let edited = Instant::now();
    let warnings = || -> Vec<String> {
        std::fs::read_to_string(&stderr_path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(WARNING))
            .map(str::to_string)
            .collect()
    };
    while warnings().is_empty() {
        assert!(
            edited.elapsed() < PATIENCE,
            "no warning about another cluster within {PATIENCE:?}; stderr:\n{}",
            run.stderr()
        );
        assert!(
            run.exited().is_none(),
            "the run ended after the edit; stderr:\n{}",
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("warned {:?} after the edit", edited.elapsed());
    let a_more = produce(a, "A", 5..8);
    receive_until(&rx, &mut seen, &a_more, &run, "reading A on after the edit");
    // Past the file service's periodic re-read (10 s): the refusal is said once.
    receive_for(
        &rx,
        &mut seen,
        Duration::from_secs(11).saturating_sub(edited.elapsed()),
    );
    let mut want_a = a_start.clone();
    want_a.extend(a_more.iter().cloned());
    assert_eq!(
        seen,
        want_a,
        "still reading A after the edit, nothing of B; stderr:\n{}",
        run.stderr()
    );
    let said = warnings();
    assert_eq!(said.len(), 1, "one warning line; stderr:\n{}", run.stderr());
    assert!(
        said[0].starts_with("mck: warning: ")
            && said[0].contains("east")
            && said[0].contains(b.kafka_cluster_id()),
        "the warning names the cluster and the other cluster.id: {}",
        said[0]
    );

    // Marked replaced: `east`'s own starting offsets read B from its start.
    write_atomically(
        &md,
        &east_metadata(&b.bootstrap_servers(), TOPIC, Some("earliest")),
    );
    let marked = Instant::now();
    let from = seen.len();
    receive_until(&rx, &mut seen, &b_start, &run, "reading B from its start");
    eprintln!("B read {:?} after marking it replaced", marked.elapsed());
    let b_more = produce(b, "B", 7..9);
    let a_late = produce(a, "A", 8..9);
    receive_until(&rx, &mut seen, &b_more, &run, "reading B on");
    receive_for(&rx, &mut seen, Duration::from_secs(1));
    let mut want_b = b_start.clone();
    want_b.extend(b_more.iter().cloned());
    assert_eq!(
        seen[from..],
        want_b[..],
        "B from its start, once, and nothing more of A ({a_late:?}); stderr:\n{}",
        run.stderr()
    );
    let status = run.interrupt("the follow run");
    assert_eq!(
        status.code(),
        Some(0),
        "SIGINT ends the run with 0; stderr:\n{}",
        run.stderr()
    );
    assert_eq!(warnings().len(), 1, "stderr:\n{}", run.stderr());
    eprintln!("done in {:?}", began.elapsed());
}
