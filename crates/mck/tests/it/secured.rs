//! `mck` against real TLS and SASL listeners (one broker with every listener of the
//! test kit's secured clusters): each listener and each codec read once with secrets
//! from `${env:…}` and `${file:…}`, no secret in any output even at debug level, bad
//! credentials and certificates as one-line errors with a non-zero exit, and a
//! migration onto a SASL_SSL cluster by editing the metadata file under load.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{
    KafkaCluster, Listener, Seen, TestCluster, TestRecord, fill_values, produce_until_stopped,
};
use support::{PATIENCE, arg, scrape, tail, wait_for_lines};

fn secure() -> &'static KafkaCluster {
    mck_testkit::shared_secured_cluster().expect("the secured cluster starts")
}

/// The plaintext and the secured cluster, started at the same time.
fn plain_and_secure() -> (&'static KafkaCluster, &'static KafkaCluster) {
    mck_testkit::shared_plain_and_secured().expect("the plaintext and the secured cluster start")
}

/// Environment variables the metadata files name; every `mck` run here gets them.
fn secret_env() -> Vec<(&'static str, String)> {
    let sec = secure().security().unwrap();
    vec![
        ("MCK_TEST_SCRAM_PASSWORD", sec.scram_password.clone()),
        ("MCK_TEST_PLAIN_PASSWORD", sec.plain_password.clone()),
    ]
}

/// Every secret a run could leak: the passwords and the client key's body.
fn secrets() -> Vec<String> {
    let sec = secure().security().unwrap();
    let mut out = vec![sec.scram_password.clone(), sec.plain_password.clone()];
    for key in [&sec.client_key, &sec.expired_client_key] {
        let text = std::fs::read_to_string(key).unwrap();
        out.extend(
            text.lines()
                .filter(|l| !l.starts_with("-----"))
                .map(str::to_string),
        );
    }
    out
}

fn assert_no_secret(what: &str, text: &str) {
    for s in secrets() {
        assert!(!text.contains(&s), "a secret appears in {what}");
    }
}

/// `mck` with the environment variables the metadata files name.
fn mck() -> Command {
    let mut cmd = support::mck();
    cmd.envs(secret_env());
    cmd
}

/// A rich-layout cluster entry reaching `listener` on the secured cluster, with
/// `changes` applied (`None` removes a key). Passwords are `${env:…}` references,
/// the client key a `${file:…}` reference (`ssl.key.pem`) to a copy next to the file.
fn cluster_yaml(
    dir: &Path,
    id: &str,
    listener: Listener,
    changes: &[(&str, Option<&str>)],
) -> String {
    let mut props = mck_testkit::listener_properties_in(secure(), listener, dir, id, changes);
    if let Some(pw) = props.get_mut("sasl.password") {
        for (var, value) in secret_env() {
            if *pw == value {
                *pw = format!("${{env:{var}}}");
            }
        }
    }
    mck_testkit::rich_cluster_entry(id, &props)
}

fn plain_yaml(id: &str, c: &KafkaCluster) -> String {
    format!(
        "  {id}:\n    bootstrapServers: \"{}\"\n",
        c.bootstrap_servers()
    )
}

/// Writes (atomically) a metadata file with one stream `s` over `clusters`
/// (id, entry, topics).
fn write_metadata(path: &Path, clusters: &[(&str, String, Vec<String>)]) {
    mck_testkit::write_atomically(path, &mck_testkit::rich_metadata(clusters));
}

/// (cluster, topic, partition, offset, value) of each JSON line of `path`.
fn read_output(path: &Path) -> Vec<Seen> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (
                v["cluster"].as_str().unwrap().to_string(),
                v["topic"].as_str().unwrap().to_string(),
                v["partition"].as_i64().unwrap() as i32,
                v["offset"].as_i64().unwrap(),
                v["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_listener_and_codec_is_consumed_once_and_no_secret_is_ever_shown() {
    let c = secure();
    let dir = tempfile::tempdir().unwrap();
    let mut want = BTreeSet::new();
    let mut clusters = Vec::new();
    for (listener, id) in Listener::READ_THROUGH {
        let topic = format!("mck-through-{id}");
        c.create_topic(&topic, 2).unwrap();
        want.extend(fill_values(c, &topic, 2, 40, id));
        let mut topics = vec![topic];
        if listener == Listener::ScramSsl {
            // Compressed by Kafka's own Java producer, read over SASL_SSL.
            for codec in ["gzip", "snappy", "lz4", "zstd"] {
                let topic = format!("mck-codec-{codec}");
                c.create_topic(&topic, 2).unwrap();
                let values: Vec<String> = (0..300).map(|i| format!("{codec}-{i:04}")).collect();
                c.produce_with_java(&topic, &values, &[("compression.type", codec)])
                    .unwrap();
                want.extend(values);
                topics.push(topic);
            }
        }
        clusters.push((id, cluster_yaml(dir.path(), id, listener, &[]), topics));
    }
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &clusters);
    let out = dir.path().join("out.jsonl");
    let cps = dir.path().join("checkpoints");
    let run = mck()
        .args(["consume", "--metadata", arg(&md), "--stream", "s"])
        .args(["--until", "latest", "--group", "mck-secured"])
        .args(["--output", arg(&out), "--checkpoint-dir", arg(&cps)])
        .args(["-X", "debug=security,broker"])
        .env("MCK_LOG", "debug")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&run);
    assert!(
        run.status.success(),
        "mck consume failed; stderr tail:\n{}",
        tail(&stderr)
    );
    assert!(
        stderr.contains("librdkafka") || stderr.contains("SASL") || stderr.contains("SSL"),
        "MCK_LOG=debug with debug=security,broker shows librdkafka's lines"
    );
    assert_no_secret("stdout", &stdout);
    assert_no_secret("stderr at MCK_LOG=debug", &stderr);
    mck_testkit::assert_exactly_once(&read_output(&out), &want);
    for e in std::fs::read_dir(&cps).unwrap() {
        let path = e.unwrap().path();
        assert_no_secret(
            &format!("checkpoint {}", path.display()),
            &std::fs::read_to_string(&path).unwrap(),
        );
    }

    // describe, plan and validate reach or show the same clusters without a secret.
    let describe = mck()
        .args(["describe", "--metadata", arg(&md), "--json"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&describe);
    assert!(describe.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let described = v["streams"][0]["clusters"].as_array().unwrap();
    assert_eq!(described.len(), Listener::READ_THROUGH.len(), "{stdout}");
    for cl in described {
        assert_eq!(cl["reachable"], true, "{cl}");
        assert_eq!(cl["kafkaClusterId"], c.kafka_cluster_id(), "{cl}");
    }
    assert_no_secret("describe", &format!("{stdout}{stderr}"));
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "clusters: {}\nstreams: {}\n").unwrap();
    for args in [
        vec!["plan", arg(&empty), arg(&md)],
        vec!["plan", "--json", arg(&empty), arg(&md)],
        vec!["validate", arg(&md)],
        vec!["validate", "--json", arg(&md)],
    ] {
        let out = mck().args(&args).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert_no_secret(&format!("{args:?}"), &format!("{stdout}{stderr}"));
    }
}

/// A bad setting, and the words one of which its error must contain.
type Bad = (
    &'static str,
    Listener,
    Vec<(&'static str, String)>,
    &'static [&'static str],
);

#[test]
fn bad_credentials_and_certificates_exit_non_zero_with_one_line_naming_cluster_and_cause() {
    let c = secure();
    let sec = c.security().unwrap();
    c.create_topic("mck-bad-creds", 1).unwrap();
    let auth: &[&str] = &["authentication failed", "invalid credentials"];
    // librdkafka says "certificate verify failed" for every rejected broker
    // certificate, without the check that failed (issuer, expiry, host name).
    let verify: &[&str] = &["certificate verify failed"];
    let cases: Vec<Bad> = vec![
        (
            "wrong password",
            Listener::ScramSsl,
            vec![("sasl.password", format!("{}x", sec.scram_password))],
            auth,
        ),
        (
            "unknown user",
            Listener::ScramSsl,
            vec![("sasl.username", "mallory".into())],
            auth,
        ),
        (
            "untrusted CA",
            Listener::ScramSsl,
            vec![("ssl.ca.location", sec.other_ca.display().to_string())],
            verify,
        ),
        ("expired certificate", Listener::ExpiredCert, vec![], verify),
        ("hostname mismatch", Listener::WrongHost, vec![], verify),
    ];
    // All at once: each must end by itself as soon as librdkafka says the cluster
    // refused the client, well before the client timeout (30 s).
    let dir = tempfile::tempdir().unwrap();
    let began = Instant::now();
    let mut runs: Vec<(&str, &[&str], Child, PathBuf)> = Vec::new();
    for (what, listener, changes, cause) in &cases {
        let sub = dir.path().join(what.replace(' ', "-"));
        std::fs::create_dir_all(&sub).unwrap();
        let changes: Vec<(&str, Option<&str>)> = changes
            .iter()
            .map(|(k, v)| (*k, Some(v.as_str())))
            .collect();
        let md = sub.join("streams.yaml");
        write_metadata(
            &md,
            &[(
                "guarded",
                cluster_yaml(&sub, "guarded", *listener, &changes),
                vec!["mck-bad-creds".into()],
            )],
        );
        let stderr = sub.join("stderr");
        let child = mck()
            .args(["consume", "--metadata", arg(&md), "--stream", "s"])
            .args(["--until", "latest"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        runs.push((what, cause, child, stderr));
    }
    let mut failures = Vec::new();
    // Meanwhile, describe marks the refusing cluster unreachable with the cause.
    for (what, _, _, cause) in &cases[..1] {
        let md = dir.path().join(what.replace(' ', "-")).join("streams.yaml");
        let out = mck()
            .args([
                "describe",
                "--metadata",
                arg(&md),
                "--json",
                "--timeout",
                "5s",
            ])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        let v: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("describe: {e}: {stdout}{stderr}"));
        let guarded = &v["streams"][0]["clusters"][0];
        let error = guarded["error"].as_str().unwrap_or_default().to_lowercase();
        if guarded["reachable"] != false || !cause.iter().any(|c| error.contains(c)) {
            failures.push(format!("describe, {what}: {guarded}"));
        }
        if secrets()
            .iter()
            .any(|s| stdout.contains(s) || stderr.contains(s))
        {
            failures.push(format!("describe, {what}: shows a secret"));
        }
    }
    for (what, cause, mut child, stderr) in runs {
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if began.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let took = began.elapsed();
        let err = std::fs::read_to_string(&stderr).unwrap();
        eprintln!("{what} ({took:?}): {}", err.trim());
        let lower = err.to_lowercase();
        let mut problems = Vec::new();
        match status {
            None => problems.push("did not exit within 15 s".to_string()),
            Some(s) if s.code() != Some(1) => problems.push(format!("exited with {s}")),
            Some(_) => {}
        }
        if err.trim().lines().count() != 1 {
            problems.push("is not one line".into());
        }
        if !err.contains("mck: error: cluster `guarded`") {
            problems.push("does not name the cluster".into());
        }
        if !cause.iter().any(|c| lower.contains(c)) {
            problems.push("does not name the cause".into());
        }
        if secrets().iter().any(|s| err.contains(s)) {
            problems.push("shows a secret".into());
        }
        if !problems.is_empty() {
            failures.push(format!("{what}: {}: {}", problems.join(", "), err.trim()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn join(h: std::thread::JoinHandle<Vec<String>>) -> Vec<String> {
    h.join().unwrap()
}

#[test]
fn a_migration_onto_a_sasl_ssl_cluster_by_editing_the_file_under_load_is_exactly_once() {
    let (old, new) = plain_and_secure();
    let topic = "mck-migrating";
    old.create_topic(topic, 2).unwrap();
    new.create_topic(topic, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    let on_old = || ("old", plain_yaml("old", old), vec![topic.to_string()]);
    let on_new = || {
        (
            "new",
            cluster_yaml(dir.path(), "new", Listener::ScramSsl, &[]),
            vec![topic.to_string()],
        )
    };
    write_metadata(&md, &[on_old()]);
    let out = dir.path().join("out.jsonl");
    let stderr = dir.path().join("stderr");
    let metrics_addr = format!("127.0.0.1:{}", mck_testkit::free_ports(1).unwrap()[0]);
    let mut child = mck()
        .args(["consume", "--metadata", arg(&md), "--stream", "s"])
        .args(["--output", arg(&out)])
        .args(["--checkpoint-dir", arg(&dir.path().join("cp"))])
        .args(["--metrics-addr", &metrics_addr])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let stop_old = Arc::new(AtomicBool::new(false));
    let p_old = produce_until_stopped(old, topic, "on-old", true, stop_old.clone());
    wait_for_lines(&out, 100, &mut child, Some(&stderr));

    // Both clusters; producers move to the new one.
    write_metadata(&md, &[on_old(), on_new()]);
    let stop_new = Arc::new(AtomicBool::new(false));
    let p_new = produce_until_stopped(new, topic, "on-new", true, stop_new.clone());
    std::thread::sleep(Duration::from_millis(300));
    stop_old.store(true, Ordering::Relaxed);
    let mut want: BTreeSet<String> = join(p_old).into_iter().collect();
    let until = Instant::now() + PATIENCE;
    while !read_output(&out).iter().any(|r| r.0 == "new") {
        assert!(Instant::now() < until, "nothing read from the new cluster");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The new cluster only, once the old one is drained.
    let old_count = want.len();
    let until = Instant::now() + PATIENCE;
    while read_output(&out).iter().filter(|r| r.0 == "old").count() < old_count {
        assert!(Instant::now() < until, "the old cluster was not drained");
        std::thread::sleep(Duration::from_millis(50));
    }
    write_metadata(&md, &[on_new()]);
    std::thread::sleep(Duration::from_millis(500));
    stop_new.store(true, Ordering::Relaxed);
    want.extend(join(p_new));
    wait_for_lines(&out, want.len(), &mut child, Some(&stderr));

    let metrics = scrape(&metrics_addr);
    assert!(metrics.contains("cluster=\"new\""), "{metrics}");
    assert_no_secret("metrics", &metrics);

    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(status.success(), "mck consume: {status}\n{}", tail(&log));
    assert_no_secret("stderr", &log);
    mck_testkit::assert_exactly_once(&read_output(&out), &want);
}

#[test]
fn quick_mode_reaches_a_scram_tls_listener_with_x_properties() {
    let c = secure();
    let topic = "quick-scram";
    c.create_topic(topic, 2).unwrap();
    let records: Vec<TestRecord> = (0..20)
        .map(|i| TestRecord::value(format!("q{i}")).to_partition(i % 2))
        .collect();
    c.produce(topic, &records).unwrap();
    let mut cmd = mck();
    cmd.args(["consume", "-b", &c.listener_bootstrap(Listener::ScramSsl)])
        .args(["-t", topic, "-e", "--format", "value"]);
    // The metadata client of quick mode needs these as much as the readers do.
    for (k, v) in c.listener_properties(Listener::ScramSsl) {
        cmd.arg("-X").arg(format!("{k}={v}"));
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("q{i}")).collect();
    want.sort();
    assert_eq!(got, want);
    assert_no_secret("stderr", &stderr);
}

#[test]
fn quick_mode_with_a_wrong_password_fails_at_once_with_one_line_naming_the_cause() {
    let c = secure();
    let sec = c.security().unwrap();
    let mut cmd = mck();
    cmd.args(["consume", "-b", &c.listener_bootstrap(Listener::ScramSsl)])
        .args(["-t", "quick-wrong-password", "-e"]);
    for (k, v) in c.listener_properties(Listener::ScramSsl) {
        let v = if k == "sasl.password" {
            format!("{v}x")
        } else {
            v
        };
        cmd.arg("-X").arg(format!("{k}={v}"));
    }
    let began = Instant::now();
    let out = cmd.output().unwrap();
    let took = began.elapsed();
    let (stdout, stderr) = text(&out);
    eprintln!("({took:?}) {}", stderr.trim());
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    // The metadata client's listing is the first request: its error, once.
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("mck: error: "), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("authentication failed"),
        "{stderr}"
    );
    assert!(!stderr.contains(&sec.scram_password), "{stderr}");
    // librdkafka says why within a second; the client timeout is 30 s.
    assert!(took < Duration::from_secs(10), "took {took:?}: {stderr}");
}

#[test]
fn describe_and_plan_on_tls_listeners_never_die_at_exit() {
    // They close their clients on threads of their own and exit without waiting:
    // OpenSSL's exit-time cleanup, when a client made it initialise itself, freed
    // what those threads still used (SIGSEGV with nothing on stderr, about one run
    // in 50). 60 runs of each find that with a probability above 90 %.
    let c = secure();
    let dir = tempfile::tempdir().unwrap();
    let mut clusters = Vec::new();
    for (listener, id) in Listener::READ_THROUGH {
        let topic = format!("mck-exit-{id}");
        c.create_topic(&topic, 1).unwrap();
        clusters.push((id, cluster_yaml(dir.path(), id, listener, &[]), vec![topic]));
    }
    let md = dir.path().join("streams.yaml");
    write_metadata(&md, &clusters);
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "clusters: {}\nstreams: {}\n").unwrap();
    let mut died = Vec::new();
    for run in 0..60 {
        for args in [
            vec!["describe", "--metadata", arg(&md), "--json"],
            vec!["plan", arg(&empty), arg(&md)],
        ] {
            let out = mck().args(&args).output().unwrap();
            if !out.status.success() {
                died.push(format!(
                    "run {run} {args:?}: {:?} {}",
                    out.status,
                    text(&out).1
                ));
            }
        }
    }
    assert!(died.is_empty(), "{}", died.join("\n"));
}
