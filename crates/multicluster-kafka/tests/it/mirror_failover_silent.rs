//! Failover from a source whose packets are dropped, on real brokers: the source's
//! cluster sits behind the test kit's proxy, which is switched to dropping everything.
//! Its own binary: a cluster whose every request hangs is kept apart from the other
//! mirror tests' sources and clusters.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{ClusterOptions, TestCluster, TestRecord};
use multicluster_kafka::metadata::{MirrorOf, Translate};
use multicluster_kafka::prelude::*;
use support::{cluster, meta, meta_at, read_records, shared_source, stream};

/// Records `from..to` over two partitions, each with a key and its own timestamp.
fn records_range(from: usize, to: usize) -> Vec<TestRecord> {
    (from..to)
        .map(|i| {
            TestRecord::value(format!("r{i}"))
                .to_partition((i % 2) as i32)
                .with_key(format!("k{i}"))
                .at(1_700_000_000_000 + i as i64 * 1_000)
        })
        .collect()
}

/// A source whose packets are dropped (no refusal, no error: every request hangs) is
/// failed over once it has not answered for `failoverAfter`, not at the client's
/// much longer timeout.
#[test]
fn a_silent_source_is_failed_over_after_failover_after_not_the_client_timeout() {
    let east = ProxiedCluster::start(ClusterOptions::new("fs-east"))
        .expect("cluster fs-east starts behind a proxy");
    let west = cluster("fs-west");
    let topic = "silent";
    east.cluster().create_topic(topic, 2).unwrap();
    west.create_topic(topic, 2).unwrap();
    let first = records_range(0, 20);
    east.cluster().produce(topic, &first).unwrap();
    west.produce(topic, &first).unwrap();
    let mut mirror = meta(west, &[topic]);
    let mut of = MirrorOf::new("fs-east", Translate::Identical);
    of.failover_after = Some(Duration::from_secs(3));
    mirror.mirror_of = Some(of);
    let pair = stream(
        "s",
        vec![
            (
                "fs-east",
                meta_at(east.proxied_bootstrap_servers(), &[topic]),
            ),
            ("fs-west", mirror),
        ],
    );
    let svc = Arc::new(StaticMetadataService::new([pair]).unwrap());
    mck_testkit::runtime().block_on(async {
        let mut source_stream = shared_source(svc)
            .partition_discovery_interval(Duration::from_secs(1))
            .client_timeout(Duration::from_secs(30))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut got = Vec::new();
        read_records(&mut source_stream, 20, &mut got).await;
        assert!(got.iter().all(|r| &*r.cluster == "fs-east"));
        let began = std::time::Instant::now();
        east.proxy().blackhole();
        west.produce(topic, &records_range(20, 30)).unwrap();
        read_records(&mut source_stream, 10, &mut got).await;
        let took = began.elapsed();
        assert!(
            took >= Duration::from_secs(3),
            "failed over before failoverAfter: {took:?}"
        );
        assert!(
            took < Duration::from_secs(15),
            "failed over after {took:?}: failoverAfter is 3 s, the client timeout 30 s"
        );
        for r in &mut got {
            r.cluster = if &*r.cluster == "fs-east" {
                "east".into()
            } else {
                "west".into()
            };
        }
        // Each record once, in order per partition: the source's, then the mirror's.
        let mut per_partition: BTreeMap<i32, Vec<(String, String)>> = BTreeMap::new();
        for r in &got {
            per_partition
                .entry(r.partition)
                .or_default()
                .push((r.value.clone(), r.cluster.to_string()));
        }
        for (p, seen) in per_partition {
            let values: Vec<&str> = seen.iter().map(|(v, _)| v.as_str()).collect();
            let want: Vec<String> = (0..30)
                .filter(|i| i % 2 == p as usize)
                .map(|i| format!("r{i}"))
                .collect();
            assert_eq!(values, want, "partition {p}: each record once, in order");
            let first_west = seen
                .iter()
                .position(|(_, c)| c == "west")
                .expect("continued on the mirror");
            assert!(
                seen[first_west..].iter().all(|(_, c)| c == "west"),
                "partition {p}: {seen:?}"
            );
        }
        source_stream.close().await;
    });
    east.proxy().pass();
}
