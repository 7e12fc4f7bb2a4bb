//! Real Kafka clusters for tests written in other languages (the Python package's):
//! `mck-test-kafka east west` starts one single-broker KRaft cluster per name, as the
//! Rust tests start theirs, prints one JSON line `{"east": "127.0.0.1:PORT", ...}`
//! once every broker answers, and stops them all when its standard input closes (or
//! it is killed: the brokers die with it).

use std::io::{Read, Write};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

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
                    let cluster = KafkaCluster::start(ClusterOptions::new(name.clone()));
                    (name, cluster)
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
    let line: Vec<String> = clusters
        .iter()
        .map(|(name, c)| format!("{:?}: {:?}", name, c.bootstrap_servers()))
        .collect();
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{{{}}}", line.join(", "));
    let _ = out.flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(clusters);
}
