//! Shard mode with real processes on real brokers: `mck consume --scale-out
//! shard:I/N`.
//!
//! Clusters `east` and `west` (Kafka 4.x, KRaft) each hold topic `orders` with 6
//! partitions; Kafka's own Java producer writes to both all along. Two shards of
//! `mck consume --output --checkpoint-dir --group` read the stream, each into its own
//! file. Each shard is killed with SIGKILL and started again, twice; a third process
//! started as an instance of a live shard is refused. Then both shards stop with
//! SIGTERM and the stream is resharded: three shards start, shards 0 and 1 with their
//! files and checkpoints, shard 2 fresh. Once production stops, the three files
//! together hold every record exactly once.
//!
//! The brokers' consumer session timeout is 6 s here (45 s by default), so a killed
//! shard's membership is freed, and its restart admitted, within seconds.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, assert_each_once, java_produce_until_stopped};
use support::{Run, checkpointed_args, lines_in, newest_checkpoint, output_values};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "shards-test";
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(120);

fn start_cluster(id: &str) -> KafkaCluster {
    support::group_cluster(id, TOPIC, PARTITIONS)
}

/// One shard's place on disk: its output file and checkpoint directory.
struct ShardFiles {
    out: PathBuf,
    ck: PathBuf,
}

fn shard_args(md: &Path, files: &ShardFiles, shard: &str) -> Vec<String> {
    let mut args = checkpointed_args(md, TOPIC, &files.out, &files.ck);
    args.extend(
        [
            "--group",
            GROUP,
            "--scale-out",
            &format!("shard:{shard}"),
            "--shard-lock-wait",
            "30s",
        ]
        .map(String::from),
    );
    args
}

#[test]
fn shards_survive_kills_refuse_a_twin_and_reshard_exactly_once() {
    let began = Instant::now();
    let (east, west) = std::thread::scope(|s| {
        let east = s.spawn(|| start_cluster("east"));
        let west = s.spawn(|| start_cluster("west"));
        (east.join().unwrap(), west.join().unwrap())
    });
    eprintln!("clusters ready after {:?}", began.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at(
            TOPIC,
            &[
                ("east", &east.bootstrap_servers(), &[TOPIC]),
                ("west", &west.bootstrap_servers(), &[TOPIC]),
            ],
        ),
    )
    .unwrap();
    let files: Vec<ShardFiles> = (0..3)
        .map(|i| ShardFiles {
            out: dir.path().join(format!("out-{i}.jsonl")),
            ck: dir.path().join(format!("ck-{i}")),
        })
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let feeds = [(&east, "east"), (&west, "west")].map(|(c, prefix)| {
        java_produce_until_stopped(
            c.java_producer(TOPIC, &[])
                .expect("the Java producer starts"),
            prefix,
            stop.clone(),
        )
    });

    let mut runs: Vec<Run> = (0..2)
        .map(|i| {
            Run::start(
                &shard_args(&md, &files[i], &format!("{i}/2")),
                dir.path().join(format!("stderr-{i}-0")),
            )
        })
        .collect();
    for (i, run) in runs.iter_mut().enumerate() {
        let out = &files[i].out;
        run.wait_until("100 lines in the shard's output", PATIENCE, || {
            lines_in(out) >= 100
        });
    }
    eprintln!("both shards writing after {:?}", began.elapsed());

    // A second instance of live shard 0 is refused, whatever its own files.
    let twin_files = ShardFiles {
        out: dir.path().join("twin.jsonl"),
        ck: dir.path().join("ck-twin"),
    };
    let mut twin_args = shard_args(&md, &twin_files, "0/2");
    *twin_args.last_mut().unwrap() = "4s".into();
    let mut twin = Run::start(&twin_args, dir.path().join("stderr-twin"));
    let status = twin
        .exit_within(PATIENCE)
        .expect("the twin of a live shard exits");
    let said = twin.stderr();
    assert_eq!(status.code(), Some(1), "twin: {status}; stderr:\n{said}");
    assert!(
        said.contains("shard 0/2")
            && said.contains(&format!("{GROUP}-shard-0"))
            && said.contains("held by a live member"),
        "the twin's error names the shard, its instance id and why:\n{said}"
    );
    assert_eq!(lines_in(&twin_files.out), 0, "the twin wrote nothing");

    // Each shard is killed with SIGKILL and started again, twice.
    for round in 1..=2 {
        for i in 0..2 {
            let before = lines_in(&files[i].out);
            runs[i].child.kill().unwrap();
            runs[i].child.wait().unwrap();
            eprintln!(
                "round {round}: killed shard {i} at {before} lines; newest checkpoint {:?}",
                newest_checkpoint(&files[i].ck)
            );
            runs[i] = Run::start(
                &shard_args(&md, &files[i], &format!("{i}/2")),
                dir.path().join(format!("stderr-{i}-{round}")),
            );
            let out = files[i].out.clone();
            runs[i].wait_until("the restarted shard writing again", PATIENCE, || {
                lines_in(&out) >= before + 50
            });
        }
    }
    eprintln!("kills done after {:?}", began.elapsed());

    // A graceful stop of every shard, then three shards.
    for run in &runs {
        run.signal(libc::SIGTERM);
    }
    for (i, run) in runs.iter_mut().enumerate() {
        let status = run.exit_within(PATIENCE).expect("a shard exits on SIGTERM");
        assert!(
            status.success(),
            "shard {i}/2 ended with {status}; stderr:\n{}",
            run.stderr()
        );
    }
    let mut runs: Vec<Run> = (0..3)
        .map(|i| {
            Run::start(
                &shard_args(&md, &files[i], &format!("{i}/3")),
                dir.path().join(format!("stderr-{i}-of-3")),
            )
        })
        .collect();
    let out2 = files[2].out.clone();
    runs[2].wait_until("the new shard writing", PATIENCE, || lines_in(&out2) >= 50);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let mut sent: Vec<String> = Vec::new();
    for feed in feeds {
        sent.extend(feed.join().expect("a Java feed"));
    }
    eprintln!("produced {} records", sent.len());

    let total = || files.iter().map(|f| lines_in(&f.out)).sum::<usize>();
    let until = Instant::now() + PATIENCE;
    while total() < sent.len() && Instant::now() < until {
        for run in &mut runs {
            if let Some(status) = run.child.try_wait().unwrap() {
                panic!("a shard exited early ({status}):\n{}", run.stderr());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // A little longer: anything read twice would show up now.
    std::thread::sleep(Duration::from_secs(2));
    for run in &runs {
        run.signal(libc::SIGINT);
    }
    for (i, run) in runs.iter_mut().enumerate() {
        let status = run.exit_within(PATIENCE).expect("a shard exits on SIGINT");
        assert!(
            status.success(),
            "shard {i}/3 ended with {status}; stderr:\n{}",
            run.stderr()
        );
    }

    let mut got = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let values = output_values(&f.out);
        eprintln!("shard {i}: {} records", values.len());
        assert!(!values.is_empty(), "shard {i} read nothing");
        got.extend(values.into_iter().map(|(_, v)| v));
    }
    assert_each_once(&got, &sent);
    eprintln!("done in {:?}", began.elapsed());
}
