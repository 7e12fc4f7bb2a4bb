//! `mck consume` as a terminal user meets it, on a real Kafka cluster: records show up
//! while the command runs (through a pipe and on a terminal driven by tmux), `| head`
//! ends a run quietly, tombstones from Kafka's own console producer print as null, and
//! kcat's short forms (`-b -t -o -e -c -p -f -X`) work.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord, shared_cluster};
use support::{checkpoint_files, mck, wait_exit, wait_for_lines};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

fn cluster() -> &'static KafkaCluster {
    shared_cluster("live").expect("cluster live starts")
}

fn topic(name: &str, partitions: i32) -> String {
    let c = cluster();
    c.create_topic(name, partitions).expect("create topic");
    name.to_string()
}

fn produce(topic: &str, values: &[&str]) {
    let records: Vec<TestRecord> = values
        .iter()
        .map(|v| TestRecord::value(*v).to_partition(0).with_key("k"))
        .collect();
    cluster().produce(topic, &records).expect("produce");
}

/// Sends SIGINT and waits for the exit status.
fn interrupt(child: &mut Child) -> i32 {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_exit(child, None).code().unwrap_or(-1)
}

/// The lines of a child's stdout, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().expect("stdout is piped");
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

/// A metadata file (Flink's layout) with stream `s` on the live cluster's `topics`.
fn stream_s(topics: &[&str]) -> String {
    mck_testkit::flink_metadata("s", &[(cluster(), topics)])
}

fn next_line(rx: &mpsc::Receiver<String>, what: &str) -> serde_json::Value {
    let line = rx
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("no line on stdout for {what} within {PATIENCE:?}"));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

#[test]
fn records_reach_a_pipe_while_the_command_runs_even_between_checkpoints() {
    let t = topic("live-pipe", 1);
    produce(&t, &["before-start"]);
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(&md, stream_s(&[&t])).unwrap();
    // Checkpoints an hour apart: output must not wait for them.
    let mut child = mck()
        .args([
            "consume",
            md.to_str().unwrap(),
            "--stream",
            "s",
            "-g",
            "live-pipe",
        ])
        .arg("--checkpoint-dir")
        .arg(dir.path().join("ck"))
        .args(["--checkpoint-interval", "1h"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    assert_eq!(
        next_line(&rx, "a record there at start")["value"],
        "before-start"
    );
    for i in 0..3 {
        let v = format!("while-running-{i}");
        produce(&t, &[&v]);
        assert_eq!(next_line(&rx, &v)["value"], v.as_str());
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command is still following"
    );
    assert_eq!(interrupt(&mut child), 0);
    let saved = checkpoint_files(&dir.path().join("ck")).len();
    assert!(saved > 0, "SIGINT writes a final checkpoint");
}

#[test]
fn records_reach_a_terminal_while_the_command_runs_and_ctrl_c_ends_it() {
    let tmux = Command::new("tmux").arg("-V").output();
    assert!(
        tmux.is_ok_and(|o| o.status.success()),
        "tmux is needed for this test (Debian package tmux; .ci/run installs it)"
    );
    let t = topic("live-tty", 1);
    produce(&t, &["tty-first"]);
    let session = format!("mck-live-{}", std::process::id());
    let command = format!(
        "{} consume -b {} -t {t}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_mck"),
        cluster().bootstrap_servers()
    );
    let ok = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "220",
            "-y",
            "50",
            &command,
        ])
        .status()
        .unwrap();
    assert!(ok.success(), "tmux starts a session");
    let capture = || {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wait_for = |text: &str| {
        let until = Instant::now() + PATIENCE;
        loop {
            let screen = capture();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "`{text}` not on the terminal within {PATIENCE:?}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for("tty-first");
    produce(&t, &["tty-second"]);
    let screen = wait_for("tty-second");
    assert!(!screen.contains("EXIT="), "still running: {screen}");
    Command::new("tmux")
        .args(["send-keys", "-t", &session, "C-c"])
        .status()
        .unwrap();
    let screen = wait_for("EXIT=");
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    assert!(screen.contains("EXIT=0"), "Ctrl-C ends with 0: {screen}");
}

/// Runs `mck consume ARGS | head -N` in bash and returns (mck's exit status, stdout,
/// stderr).
fn through_head(args: &str, n: usize) -> (i32, String, String) {
    let script = format!(
        "{} consume {args} | head -{n}; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_mck")
    );
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("`mck consume {args} | head -{n}` did not end within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn head_ends_a_follow_run_quietly_on_a_quiet_and_on_a_busy_stream() {
    let quiet = topic("live-head-quiet", 1);
    produce(&quiet, &["q0", "q1", "q2", "q3", "q4"]);
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let (code, out, err) = through_head(
        &format!(
            "-b {} -t {quiet} --format value --checkpoint-dir {}",
            cluster().bootstrap_servers(),
            ck.display()
        ),
        3,
    );
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out, "q0\nq1\nq2\n");
    assert!(!err.contains("error"), "{err}");
    assert!(
        !checkpoint_files(&ck).is_empty(),
        "a final checkpoint is written"
    );

    let busy = topic("live-head-busy", 1);
    let values: Vec<String> = (0..50_000).map(|i| format!("b{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    produce(&busy, &refs);
    let (code, out, err) = through_head(
        &format!("-b {} -t {busy} -f '%s\\n'", cluster().bootstrap_servers()),
        3,
    );
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out, "b0\nb1\nb2\n");
    assert!(
        !err.contains("Broken pipe") && !err.contains("error"),
        "{err}"
    );
}

/// Produces with Kafka's own console producer (Java, from the test kit's jars): each
/// entry is `key:value`, and the value `NULL` is a tombstone.
fn produce_with_console_producer(topic: &str, lines: &[&str]) {
    let libs = mck_testkit::kafka_libs().expect("kafka jars");
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg("org.apache.kafka.tools.ConsoleProducer")
        .args(["--bootstrap-server", &cluster().bootstrap_servers()])
        .args(["--topic", topic])
        .args(["--property", "parse.key=true"])
        .args(["--property", "key.separator=:"])
        .args(["--property", "null.marker=NULL"])
        .args(["--producer-property", "acks=all"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java starts");
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "console producer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn consume_all(args: &[&str]) -> (String, String) {
    let out = mck()
        .arg("consume")
        .args(["-b", &cluster().bootstrap_servers()])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "mck consume {args:?} failed: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

#[test]
fn a_tombstone_from_kafkas_console_producer_prints_as_null() {
    let t = topic("live-tombstones", 1);
    produce_with_console_producer(&t, &["a:first", "a:NULL", "b:"]);
    let (out, _) = consume_all(&["-t", &t, "-e"]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0]["value"], "first");
    assert!(lines[1]["value"].is_null(), "a tombstone is null: {out}");
    assert_eq!(lines[1]["key"], "a");
    assert_eq!(lines[2]["value"], "", "an empty value stays empty: {out}");
    let (out, _) = consume_all(&["-t", &t, "-e", "--format", "value"]);
    assert_eq!(out, "first\n\n\n");
    let (out, _) = consume_all(&["-t", &t, "-e", "-f", "%k:%S\\n"]);
    assert_eq!(out, "a:5\na:-1\nb:0\n");
}

#[test]
fn kcat_forms_pick_offsets_partitions_counts_and_formats() {
    let t = topic("live-kcat", 2);
    let records: Vec<TestRecord> = (0..2)
        .flat_map(|p| {
            (0..5).map(move |i| {
                TestRecord::value(format!("p{p}-{i}"))
                    .to_partition(p)
                    .with_key(format!("k{i}"))
                    .with_header("h", format!("{i}"))
            })
        })
        .collect();
    cluster().produce(&t, &records).unwrap();
    let sorted = |out: &str| {
        let mut v: Vec<&str> = out.lines().collect();
        v.sort();
        v.join(" ")
    };
    // The last two of each partition, then exit at the end.
    let (out, _) = consume_all(&["-t", &t, "-o", "-2", "-e", "--format", "value"]);
    assert_eq!(sorted(&out), "p0-3 p0-4 p1-3 p1-4");
    // An absolute offset, one partition, kcat placeholders with headers and cluster.
    let (out, _) = consume_all(&[
        "-t",
        &t,
        "-o",
        "3",
        "-e",
        "-p",
        "1",
        "-f",
        "%c %t %p %o %k %h %s\\n",
    ]);
    assert_eq!(
        out,
        format!("kafka {t} 1 3 k3 h=3 p1-3\nkafka {t} 1 4 k4 h=4 p1-4\n")
    );
    // A record count, with keywords in any case and a -X property.
    let (out, _) = consume_all(&[
        "-t",
        &t,
        "-o",
        "BEGINNING",
        "-c",
        "3",
        "-X",
        "fetch.wait.max.ms=50",
        "--format",
        "kv",
    ]);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().all(|l| l.starts_with('k') && l.contains('\t')),
        "{out}"
    );
    // Times: everything was produced within the last hour, none in the future.
    let (out, _) = consume_all(&["-t", &t, "-o", "@-1h", "-e", "--format", "value"]);
    assert_eq!(out.lines().count(), 10, "{out}");
    // Options from the environment.
    let out = mck()
        .args(["consume", "-e", "--format", "value"])
        .env("MCK_BROKERS", cluster().bootstrap_servers())
        .env("MCK_TOPIC", &t)
        .env("MCK_FROM", "-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sorted(&String::from_utf8_lossy(&out.stdout)), "p0-4 p1-4");
}

#[test]
fn a_bad_position_lists_every_accepted_form_and_exits_2() {
    let out = mck()
        .args([
            "consume",
            "-b",
            "127.0.0.1:9",
            "-t",
            "x",
            "--from",
            "yesterday",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for form in [
        "yesterday",
        "earliest",
        "latest",
        "committed",
        "-10",
        "@1700000000000",
        "RFC 3339",
        "@-1h",
    ] {
        assert!(err.contains(form), "{err} lacks {form}");
    }
    let out = mck()
        .args([
            "consume",
            "-b",
            "127.0.0.1:9",
            "-t",
            "x",
            "--until",
            "earliest",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot end a run"));
}

#[test]
fn completions_and_the_man_page_come_from_the_same_definitions() {
    let out = mck().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    for word in ["consume", "--format-string", "--brokers", "completions"] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
    let out = mck().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    assert!(page.contains("consume"));
}

#[test]
fn an_invalid_metadata_edit_is_one_plain_warning_without_colour_codes() {
    let t = topic("live-edit", 1);
    produce(&t, &["e0"]);
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    std::fs::write(&md, stream_s(&[&t])).unwrap();
    let mut child = mck()
        .args(["consume", "--metadata", md.to_str().unwrap(), "-s", "s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    assert_eq!(next_line(&rx, "e0")["value"], "e0");
    std::fs::write(&md, "- streamId: [unclosed\n").unwrap();
    std::thread::sleep(Duration::from_secs(4));
    produce(&t, &["e1"]);
    assert_eq!(
        next_line(&rx, "e1 after the bad edit")["value"],
        "e1",
        "reading goes on with the last good metadata"
    );
    // A good edit that adds a topic is applied and said in one line.
    let t2 = topic("live-edit-2", 1);
    produce(&t2, &["f0"]);
    std::fs::write(&md, stream_s(&[&t, &t2])).unwrap();
    assert_eq!(next_line(&rx, "f0 of the added topic")["value"], "f0");
    assert_eq!(interrupt(&mut child), 0);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        !err.contains('\u{1b}'),
        "ANSI codes on a non-terminal: {err:?}"
    );
    assert!(
        err.lines().all(|l| l.starts_with("mck: ")),
        "every line is a plain mck line: {err}"
    );
    let warned = err.lines().filter(|l| l.contains("streams.yaml")).count();
    assert_eq!(warned, 1, "the bad edit is reported once: {err}");
    let applied: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("mck: metadata: stream s:"))
        .collect();
    assert_eq!(applied.len(), 1, "one line for the applied edit: {err}");
    assert!(applied[0].contains(&t2), "{err}");
}

/// Runs a bounded `mck consume` to its end and returns its exit status.
fn bounded(args: &[String]) -> i32 {
    let mut child = mck().arg("consume").args(args).arg("-e").spawn().unwrap();
    wait_exit(&mut child, None).code().unwrap_or(-1)
}

#[test]
fn follow_then_bounded_then_follow_on_one_checkpoint_each_does_what_it_says() {
    let t = topic("live-modes", 1);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let args: Vec<String> = [
        "-b",
        &cluster().bootstrap_servers(),
        "-t",
        &t,
        "--format",
        "value",
        "--checkpoint-dir",
        dir.path().join("ck").to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let values: Vec<String> = (0..9).map(|i| format!("m{i}")).collect();
    let put = |range: std::ops::Range<usize>| {
        let refs: Vec<&str> = values[range].iter().map(String::as_str).collect();
        produce(&t, &refs);
    };

    put(0..5);
    let mut follow = mck().arg("consume").args(&args).spawn().unwrap();
    wait_for_lines(&out, 5, &mut follow, None);
    assert_eq!(interrupt(&mut follow), 0);

    assert_eq!(bounded(&args), 0, "a bounded run after a follow run ends");
    put(5..8);
    assert_eq!(bounded(&args), 0, "re-running the export ends too");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().lines().count(),
        8,
        "and reads what is new since"
    );

    let mut follow = mck().arg("consume").args(&args).spawn().unwrap();
    put(8..9);
    wait_for_lines(&out, 9, &mut follow, None);
    assert_eq!(interrupt(&mut follow), 0);
    let got: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        got, values,
        "every record once, in order, across the four runs"
    );
}

/// Sends SIGINT and returns how long the command took to exit, and its status.
fn time_interrupt(child: &mut Child) -> (Duration, i32) {
    let sent = Instant::now();
    let code = interrupt(child);
    (sent.elapsed(), code)
}

#[test]
fn sigint_ends_a_run_promptly_while_a_cluster_does_not_answer() {
    let t = topic("live-dead", 1);
    produce(&t, &["d0"]);
    let dead = mck_testkit::free_ports(1).unwrap()[0];
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    let live_only = stream_s(&[&t]);
    let with_dead = format!(
        "{live_only}    - clusterId: dead\n      bootstrapServers: 127.0.0.1:{dead}\n      topics: [{t}]\n"
    );

    // At start: the dead cluster holds the start-up; SIGINT still ends it.
    std::fs::write(&md, &with_dead).unwrap();
    let mut child = mck()
        .args(["consume", md.to_str().unwrap(), "-s", "s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (took, code) = time_interrupt(&mut child);
    assert_eq!(code, 0);
    assert!(
        took < Duration::from_secs(10),
        "SIGINT at start-up took {took:?}"
    );

    // While running: an edit adds the dead cluster; SIGINT still ends the run, with a
    // checkpoint of what was written.
    std::fs::write(&md, &live_only).unwrap();
    let ck = dir.path().join("ck");
    let mut child = mck()
        .args([
            "consume",
            md.to_str().unwrap(),
            "-s",
            "s",
            "-g",
            "live-dead",
        ])
        .arg("--checkpoint-dir")
        .arg(&ck)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    assert_eq!(next_line(&rx, "d0")["value"], "d0");
    std::fs::write(&md, &with_dead).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (took, code) = time_interrupt(&mut child);
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(10), "SIGINT took {took:?}");
    assert!(!checkpoint_files(&ck).is_empty(), "a final checkpoint");
}
