//! Each cluster's state as `mck describe` and `mck consume` show it, through the real
//! binary and real pipes.
//!
//! - `describe` over a broker's SASL PLAIN listener with the right password
//!   (connected), the same listener with a wrong one (rejected: credentials refused) and
//!   a port nothing listens on (unreachable), each with its bootstrap list and reason,
//!   in the table and in `--json`, with exit status 0;
//! - properties librdkafka refuses (a bad value, an unknown key, a file that does not
//!   load, a secret whose value it would echo): `consume` fails at once with one line
//!   naming the metadata file, the cluster and the key, never the value, exit status
//!   1; `describe` names the same line and marks the cluster refused.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, Listener, TestCluster};
use serde_json::Value;
use support::arg;

/// The one broker these tests talk to: the test kit's secured cluster.
fn secure() -> &'static KafkaCluster {
    mck_testkit::shared_secured_cluster().expect("the secured cluster starts")
}

/// A loopback port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Runs `mck` with `args` and `env`, stdin closed, and waits at most `within`.
fn run(args: &[&str], env: &[(&str, &str)], within: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mck"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mck starts");
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > within {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "mck {args:?} did not end within {within:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A rich-layout cluster entry with these properties (values quoted as they are).
fn entry(id: &str, props: &[(&str, String)]) -> String {
    let mut yaml = format!("  {id}:\n    properties:\n");
    for (k, v) in props {
        yaml.push_str(&format!("      {k}: \"{v}\"\n"));
    }
    yaml
}

/// Writes a metadata file with stream `s` reading `topic` on each cluster.
fn metadata(dir: &Path, name: &str, clusters: &[(&str, String)], topic: &str) -> PathBuf {
    let path = dir.join(name);
    let entries: Vec<(&str, String, Vec<String>)> = clusters
        .iter()
        .map(|(id, e)| (*id, e.clone(), vec![topic.to_string()]))
        .collect();
    std::fs::write(&path, mck_testkit::rich_metadata(&entries)).unwrap();
    path
}

fn cluster<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["streams"][0]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == id)
        .unwrap_or_else(|| panic!("no cluster {id} in {v}"))
}

#[test]
fn describe_shows_connected_rejected_and_unreachable_clusters_with_bootstrap_and_reason() {
    let c = secure();
    let sec = c.security().unwrap();
    let topic = "states-t";
    c.create_topic(topic, 2).unwrap();
    let listener: Vec<(String, String)> = c.listener_properties(Listener::PlainSasl);
    let bootstrap = c.listener_bootstrap(Listener::PlainSasl);
    let with_password = |pw: &str| -> Vec<(&str, String)> {
        listener
            .iter()
            .map(|(k, v)| {
                let v = if k == "sasl.password" {
                    pw.to_string()
                } else {
                    v.clone()
                };
                (k.as_str(), v)
            })
            .collect()
    };
    let wrong = format!("{}-wrong", sec.plain_password);
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let md = metadata(
        dir.path(),
        "states.yaml",
        &[
            ("live", entry("live", &with_password(&sec.plain_password))),
            ("guarded", entry("guarded", &with_password(&wrong))),
            (
                "dead",
                entry("dead", &[("bootstrap.servers", dead.clone())]),
            ),
        ],
        topic,
    );

    let table = run(
        &["describe", arg(&md), "--timeout", "5s"],
        &[],
        Duration::from_secs(60),
    );
    let (text, err) = texts(&table);
    eprintln!("{text}{err}");
    assert_eq!(table.status.code(), Some(0), "{err}");
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("  cluster {id}  ")))
            .unwrap_or_else(|| panic!("no line for {id}:\n{text}"))
            .to_string()
    };
    let live = line("live");
    assert!(
        live.starts_with(&format!(
            "  cluster live  bootstrap {bootstrap}  connected  kafka cluster.id "
        )),
        "{live}"
    );
    assert!(
        text.contains(&format!("topic {topic}  2 partition(s)")),
        "{text}"
    );
    let guarded = line("guarded");
    assert!(
        guarded.starts_with(&format!(
            "  cluster guarded  bootstrap {bootstrap}  rejected (credentials or TLS refused): "
        )),
        "{guarded}"
    );
    let lower = guarded.to_lowercase();
    assert!(
        lower.contains("authentication failed") || lower.contains("invalid credentials"),
        "{guarded}"
    );
    let down = line("dead");
    assert!(
        down.starts_with(&format!("  cluster dead  bootstrap {dead}  unreachable: ")),
        "{down}"
    );
    for secret in [&sec.plain_password, &wrong] {
        assert!(!text.contains(secret.as_str()) && !err.contains(secret.as_str()));
    }

    let json = run(
        &["describe", arg(&md), "--timeout", "5s", "--json"],
        &[],
        Duration::from_secs(60),
    );
    let (text, err) = texts(&json);
    assert_eq!(json.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let live = cluster(&v, "live");
    assert_eq!(live["state"], "connected", "{live}");
    assert_eq!(live["reachable"], true, "{live}");
    assert_eq!(live["bootstrapServers"], bootstrap.as_str(), "{live}");
    assert_eq!(live["kafkaClusterId"], c.kafka_cluster_id(), "{live}");
    let guarded = cluster(&v, "guarded");
    assert_eq!(guarded["state"], "rejected", "{guarded}");
    assert_eq!(guarded["reachable"], false, "{guarded}");
    assert!(
        guarded["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{guarded}"
    );
    let down = cluster(&v, "dead");
    assert_eq!(down["state"], "unreachable", "{down}");
    assert_eq!(down["bootstrapServers"], dead.as_str(), "{down}");
    assert!(
        down["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{down}"
    );
    for secret in [&sec.plain_password, &wrong] {
        assert!(!text.contains(secret.as_str()) && !err.contains(secret.as_str()));
    }
}

/// A property librdkafka refuses, as a case: its name, the cluster's extra properties,
/// the environment the file's references need, the key the error must name and the
/// values that must not appear.
struct Refused {
    what: &'static str,
    props: Vec<(&'static str, String)>,
    env: Vec<(&'static str, String)>,
    key: &'static str,
    hidden: Vec<String>,
}

fn refused_cases() -> Vec<Refused> {
    let keystore = "/nonexistent/s3cret-keystore-7f3a.p12".to_string();
    vec![
        Refused {
            what: "a refused value",
            props: vec![("fetch.max.bytes", "banana".into())],
            env: vec![],
            key: "fetch.max.bytes",
            hidden: vec!["banana".into()],
        },
        Refused {
            what: "an unknown key",
            props: vec![("fetch.max.bytez", "1048576".into())],
            env: vec![],
            key: "fetch.max.bytez",
            hidden: vec!["1048576".into()],
        },
        Refused {
            what: "a CA file that does not exist",
            props: vec![
                ("security.protocol", "SSL".into()),
                ("ssl.ca.location", "/nonexistent/ca-9d2e.pem".into()),
            ],
            env: vec![],
            key: "ssl.ca.location",
            hidden: vec!["ca-9d2e".into()],
        },
        // librdkafka names the key store's path in its reason; given by reference,
        // the path is a secret like the password beside it.
        Refused {
            what: "a secret librdkafka echoes",
            props: vec![
                ("security.protocol", "SSL".into()),
                ("ssl.keystore.location", "${env:MCK_TEST_KEYSTORE}".into()),
                (
                    "ssl.keystore.password",
                    "${env:MCK_TEST_KEYSTORE_PW}".into(),
                ),
            ],
            env: vec![
                ("MCK_TEST_KEYSTORE", keystore.clone()),
                ("MCK_TEST_KEYSTORE_PW", "ks-pw-5c1b".into()),
            ],
            key: "ssl.keystore.location",
            hidden: vec![keystore, "s3cret".into(), "ks-pw-5c1b".into()],
        },
    ]
}

#[test]
fn a_refused_property_is_one_line_naming_file_cluster_and_key_but_never_the_value() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens here: the refusal must come before any connection.
    let dead = format!("127.0.0.1:{}", closed_port());
    let mut failures = Vec::new();
    for case in refused_cases() {
        let mut props = vec![("bootstrap.servers", dead.clone())];
        props.extend(case.props.iter().cloned());
        let name = format!("{}.yaml", case.what.replace(' ', "-"));
        let md = metadata(dir.path(), &name, &[("odd", entry("odd", &props))], "t");
        let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        // consume's line has the key's line and column too (`FILE:L:C: cluster …`).
        let start = format!("mck: error: {}:", md.display());
        let body = format!(
            "cluster `odd`: property `{}` refused by librdkafka: ",
            case.key
        );
        let says = |line: &str| {
            line.strip_prefix(&start).is_some_and(|rest| {
                rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':' || c == ' ')
                    .starts_with(&body)
            })
        };
        for (mode, extra) in [("follow", &[][..]), ("bounded", &["-e"][..])] {
            let mut args = vec!["consume", arg(&md), "--stream", "s"];
            args.extend_from_slice(extra);
            let began = Instant::now();
            let out = run(&args, &env, Duration::from_secs(60));
            let took = began.elapsed();
            let (stdout, stderr) = texts(&out);
            eprintln!("{} ({mode}, {took:?}): {}", case.what, stderr.trim());
            let mut problems = Vec::new();
            if out.status.code() != Some(1) {
                problems.push(format!("exit status {:?}", out.status.code()));
            }
            if stderr.lines().count() != 1 || !says(&stderr) {
                problems.push("not the one located line".to_string());
            }
            if stderr.contains("panicked") {
                problems.push("a panic".into());
            }
            if took > Duration::from_secs(20) {
                problems.push(format!("took {took:?}"));
            }
            if !stdout.is_empty() {
                problems.push("wrote records".into());
            }
            for h in &case.hidden {
                if stderr.contains(h.as_str()) {
                    problems.push(format!("shows `{h}`"));
                }
            }
            if !problems.is_empty() {
                failures.push(format!(
                    "consume, {}, {mode}: {}: {stderr}",
                    case.what,
                    problems.join(", ")
                ));
            }
        }
        // describe: the same line on stderr, the cluster marked refused, status 1.
        let out = run(
            &["describe", arg(&md), "--json", "--timeout", "2s"],
            &env,
            Duration::from_secs(60),
        );
        let (stdout, stderr) = texts(&out);
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let odd = cluster(&v, "odd");
        if out.status.code() != Some(1)
            || !says(&stderr)
            || stderr.lines().count() != 1
            || odd["state"] != "refused"
            || odd["refusedProperty"] != case.key
            || case
                .hidden
                .iter()
                .any(|h| stdout.contains(h.as_str()) || stderr.contains(h.as_str()))
        {
            failures.push(format!(
                "describe, {}: {:?}: {stderr}{odd}",
                case.what,
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_refused_command_line_property_is_named_as_such() {
    let dead = format!("127.0.0.1:{}", closed_port());
    let out = run(
        &[
            "consume",
            "-b",
            &dead,
            "-t",
            "t",
            "-X",
            "fetch.max.bytes=banana",
        ],
        &[],
        Duration::from_secs(60),
    );
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "mck: error: -b {dead} -X: property `fetch.max.bytes` refused by librdkafka: \
             Invalid value for configuration property \"fetch.max.bytes\" (accepted: 0 .. 2147483135)"
        )
    );

    let dir = tempfile::tempdir().unwrap();
    let md = metadata(
        dir.path(),
        "m.yaml",
        &[(
            "east",
            entry("east", &[("bootstrap.servers", dead.clone())]),
        )],
        "t",
    );
    let out = run(
        &[
            "consume",
            arg(&md),
            "-s",
            "s",
            "-X",
            "fetch.max.bytes=banana",
        ],
        &[],
        Duration::from_secs(60),
    );
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "mck: error: -X (for cluster `east` of {}): property `fetch.max.bytes` refused",
            md.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("banana"), "{stderr}");
}

#[test]
fn quick_mode_says_within_seconds_that_its_cluster_does_not_answer_and_why() {
    // The topic listing waits up to the metadata timeout (30 s) for a cluster that
    // does not answer; before, nothing was said until then.
    let port = closed_port();
    let bootstrap = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mck"))
        .args(["consume", "-b", &bootstrap, "-t", "orders"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send((began.elapsed(), line));
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(15));
    let _ = child.kill();
    let _ = child.wait();
    let (at, line) = first.expect("a line on stderr within 15 s");
    assert!(
        line.starts_with("mck: warning: no answer from the cluster yet"),
        "{line}"
    );
    assert!(
        line.contains(&bootstrap),
        "names the bootstrap list: {line}"
    );
    assert!(
        line.contains("Connection refused"),
        "names librdkafka's last error: {line}"
    );
    assert!(line.contains("metadata timeout of 30s"), "{line}");
    assert!(
        at >= Duration::from_secs(4) && at < Duration::from_secs(12),
        "said after {at:?}: {line}"
    );
}
