//! Handover latency: from a metadata file write that adds a cluster to the first record
//! read from that cluster, on both fetch paths and (unless `--skip-java`) for Flink's
//! `DynamicKafkaSource`, on the same brokers in one run.

use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;

use crate::cmd::median;
use mck_bench::peers::{self, PeerCluster};

/// A fetch path, as a cluster's `fetch.backend` property names it.
pub const PATHS: [&str; 2] = ["native", "librdkafka"];

/// The metadata file: `clusters` reading topic `topic` with `fetch.backend: path`.
fn metadata_yaml(clusters: &[&KafkaCluster], topic: &str, path: &str) -> String {
    let mut out = String::from("clusters:\n");
    for c in clusters {
        out.push_str(&format!(
            "  {}:\n    bootstrapServers: {}\n    properties:\n      fetch.backend: {path}\n",
            c.logical_id(),
            c.bootstrap_servers()
        ));
        // MCK_BENCH_RDKAFKA_DEBUG: librdkafka `debug` contexts for the readers' clients.
        if let Ok(debug) = std::env::var("MCK_BENCH_RDKAFKA_DEBUG") {
            out.push_str(&format!("      debug: \"{debug}\"\n"));
        }
    }
    out.push_str("streams:\n  s:\n    clusters:\n");
    for c in clusters {
        out.push_str(&format!(
            "      {}: {{ topics: [{topic}] }}\n",
            c.logical_id()
        ));
    }
    out
}

/// `mck-bench handover`: each fetch path's rounds, then Flink's, then one table.
pub fn handover(rounds: usize, skip_java: bool) {
    let (a, b) = mck_bench::start_clusters();
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    for path in PATHS {
        let l = handover_latencies(&a, &b, rounds, path);
        rows.push((format!("multicluster-kafka, {path} fetch path"), l));
    }
    let flink = if skip_java {
        None
    } else {
        let topic = "handover-flink";
        a.create_topic(topic, 1).expect("topic on a");
        b.create_topic(topic, 1).expect("topic on b");
        let l = peers::flink_handover(
            &PeerCluster::of(&a),
            &PeerCluster::of(&b),
            topic,
            &peers::FlinkHandoverOptions {
                rounds,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("Java peer failed: {e}"));
        let ms: Vec<f64> = l.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        rows.push((
            "Flink DynamicKafkaSource, 1 ms discovery interval".into(),
            ms.clone(),
        ));
        Some(median(ms))
    };
    println!(
        "handover: metadata file write -> first record from the added cluster, {rounds} rounds each"
    );
    println!();
    println!("| reader | min ms | median ms | max ms | median / Flink's |");
    println!("|---|---|---|---|---|");
    for (name, mut l) in rows {
        l.sort_by(f64::total_cmp);
        let mid = median(l.clone());
        let ratio = flink.map_or("-".into(), |f| format!("{:.2}", mid / f));
        println!(
            "| {name} | {:.0} | {mid:.0} | {:.0} | {ratio} |",
            l[0],
            l[l.len() - 1]
        );
    }
}

/// Handover latencies in ms, one per round, reading with the fetch path `path`: a
/// topic of its own (created here) on `a` and `b`, `b` added to a watched metadata
/// file in each round and removed again after it.
pub fn handover_latencies(
    a: &KafkaCluster,
    b: &KafkaCluster,
    rounds: usize,
    path: &str,
) -> Vec<f64> {
    let topic = format!("h-{path}");
    a.create_topic(&topic, 1).unwrap();
    b.create_topic(&topic, 1).unwrap();
    let dir = std::env::temp_dir().join(format!("mck-handover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("streams-{path}.yaml"));
    std::fs::write(&file, metadata_yaml(&[a], &topic, path)).unwrap();
    let rt = mck_testkit::runtime();
    let mut latencies = Vec::new();
    rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .metadata_service(FileMetadataService::watch(&file).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            // Only the file watch triggers reconciliation here.
            .metadata_discovery_interval(Duration::from_secs(3600))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        for round in 0..rounds {
            let marker = format!("b-{round}");
            b.produce(&topic, &[TestRecord::value(marker.clone())])
                .unwrap();
            let t0 = Instant::now();
            std::fs::write(&file, metadata_yaml(&[a, b], &topic, path)).unwrap();
            loop {
                let r = tokio::time::timeout(Duration::from_secs(60), source.next())
                    .await
                    .expect("a record from the added cluster within 60 s")
                    .expect("stream continues")
                    .expect("record");
                if &*r.cluster == b.logical_id() {
                    break;
                }
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            eprintln!("round {round}: {ms:.0} ms");
            latencies.push(ms);
            // Drain what else B had (a re-added cluster starts from earliest), then
            // remove B again.
            while let Ok(Some(_)) =
                tokio::time::timeout(Duration::from_millis(300), source.next()).await
            {}
            std::fs::write(&file, metadata_yaml(&[a], &topic, path)).unwrap();
            tokio::time::sleep(Duration::from_millis(1000)).await;
        }
        source.close().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
    latencies
}
