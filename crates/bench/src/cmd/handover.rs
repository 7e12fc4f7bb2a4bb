//! Handover latency: from a metadata file write that adds a cluster to the first record
//! read from that cluster.

use std::time::{Duration, Instant};

use mck_testkit::{KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;

fn metadata_yaml(clusters: &[&KafkaCluster]) -> String {
    let mut out = String::from("clusters:\n");
    for c in clusters {
        out.push_str(&format!(
            "  {}:\n    bootstrapServers: {}\n",
            c.logical_id(),
            c.bootstrap_servers()
        ));
        // MCK_BENCH_RDKAFKA_DEBUG: librdkafka `debug` contexts for the readers' clients.
        if let Ok(debug) = std::env::var("MCK_BENCH_RDKAFKA_DEBUG") {
            out.push_str(&format!("    properties: {{ debug: \"{debug}\" }}\n"));
        }
    }
    out.push_str("streams:\n  s:\n    clusters:\n");
    for c in clusters {
        out.push_str(&format!("      {}: {{ topics: [h] }}\n", c.logical_id()));
    }
    out
}

pub fn handover(rounds: usize) {
    let (a, b) = mck_bench::start_clusters();
    let mut latencies = handover_latencies(&a, &b, rounds);
    latencies.sort_by(f64::total_cmp);
    println!(
        "handover (file write -> first record from the added cluster), {rounds} rounds: min {:.0} ms, median {:.0} ms, max {:.0} ms",
        latencies[0],
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
}

/// Handover latencies in ms, one per round: topic `h` (created here) on `a` and `b`,
/// `b` added to a watched metadata file in each round and removed again after it.
pub fn handover_latencies(a: &KafkaCluster, b: &KafkaCluster, rounds: usize) -> Vec<f64> {
    a.create_topic("h", 1).unwrap();
    b.create_topic("h", 1).unwrap();
    let dir = std::env::temp_dir().join(format!("mck-handover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("streams.yaml");
    std::fs::write(&path, metadata_yaml(&[a])).unwrap();
    let rt = mck_testkit::runtime();
    let mut latencies = Vec::new();
    rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .metadata_service(FileMetadataService::watch(&path).unwrap())
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
            b.produce("h", &[TestRecord::value(marker.clone())])
                .unwrap();
            let t0 = Instant::now();
            std::fs::write(&path, metadata_yaml(&[a, b])).unwrap();
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
            std::fs::write(&path, metadata_yaml(&[a])).unwrap();
            tokio::time::sleep(Duration::from_millis(1000)).await;
        }
        source.close().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
    latencies
}
