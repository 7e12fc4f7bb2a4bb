//! Real Kafka clusters for tests written in other languages (the Python package's):
//! `mck-test-kafka east west` starts one single-broker KRaft cluster per name, as the
//! Rust tests start theirs, prints one JSON line `{"east": "127.0.0.1:PORT", ...}`
//! once every broker answers, and stops them all when its standard input closes (or
//! it is killed: the brokers die with it). A name ending in `+secured` starts a
//! cluster with the test kit's secured listeners too; its line then also has
//! `"NAME+oauth": {…}`, the client properties of its SASL_SSL OAUTHBEARER listener.
//!
//! Commands on standard input, one a line, each answered by one line (`ok` or
//! `error: …`):
//!
//! - `mirror SOURCE TARGET TOPIC ALIAS`: MirrorMaker 2 copies TOPIC of SOURCE to
//!   `ALIAS.TOPIC` on TARGET (offset syncs on the target, at most every 100 records);
//!   answered once the copy holds a record.

use std::io::{BufRead, Write};
use std::time::Duration;

use mck_testkit::mirror::OffsetSyncsLocation;
use mck_testkit::{
    ClusterOptions, KafkaCluster, Listener, MirrorMaker, MirrorOptions, TestCluster,
};

fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() || names.iter().any(|n| n.starts_with('-')) {
        eprintln!("usage: mck-test-kafka NAME...  (one single-broker cluster per name)");
        std::process::exit(2);
    }
    let started: Vec<(String, Result<KafkaCluster, _>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = names
            .iter()
            .map(|name| {
                let name = name.clone();
                scope.spawn(move || {
                    let cluster = match name.strip_suffix("+secured") {
                        Some(plain) => KafkaCluster::start(ClusterOptions::new(plain).secured()),
                        None => KafkaCluster::start(ClusterOptions::new(name.clone())),
                    };
                    (name.trim_end_matches("+secured").to_string(), cluster)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a start thread"))
            .collect()
    });
    let mut clusters = Vec::new();
    for (name, cluster) in started {
        match cluster {
            Ok(c) => clusters.push((name, c)),
            Err(e) => {
                eprintln!("mck-test-kafka: cluster `{name}` did not start: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut line: Vec<String> = Vec::new();
    for (name, c) in &clusters {
        line.push(format!("{:?}: {:?}", name, c.bootstrap_servers()));
        if c.security().is_some() {
            let properties: Vec<String> = c
                .listener_properties(Listener::OauthSsl)
                .iter()
                .map(|(k, v)| format!("{k:?}: {v:?}"))
                .collect();
            line.push(format!("\"{name}+oauth\": {{{}}}", properties.join(", ")));
        }
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{{{}}}", line.join(", "));
    let _ = out.flush();
    let mut mirrors = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["mirror", source, target, topic, alias] => {
                let find = |name: &str| clusters.iter().find(|(n, _)| n == name).map(|(_, c)| c);
                match (find(source), find(target)) {
                    (Some(s), Some(t)) => mirror(s, t, topic, alias).map(|m| mirrors.push(m)),
                    _ => Err(format!("no cluster `{source}` or `{target}`")),
                }
            }
            _ => Err(format!("unknown command `{line}`")),
        };
        let _ = match answer {
            Ok(()) => writeln!(out, "ok"),
            Err(e) => writeln!(out, "error: {e}"),
        };
        let _ = out.flush();
    }
    drop(mirrors);
    drop(clusters);
}

/// MirrorMaker 2 from `source`'s `topic` to `alias.topic` on `target`, once copying.
fn mirror(
    source: &KafkaCluster,
    target: &KafkaCluster,
    topic: &str,
    alias: &str,
) -> Result<MirrorMaker, String> {
    let mm = MirrorMaker::start(
        MirrorOptions::between(alias, source, format!("{alias}-to"), target)
            .topics(topic)
            .offset_syncs_on(OffsetSyncsLocation::Target)
            .offset_lag_max(100),
    )
    .map_err(|e| e.to_string())?;
    mm.wait_for_records(&format!("{alias}.{topic}"), 1, Duration::from_secs(90))
        .map_err(|e| e.to_string())?;
    Ok(mm)
}
