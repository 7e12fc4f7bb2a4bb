//! Isolation: records/s from an unaffected cluster while another cluster's properties
//! change, against the same reader's steady-state rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mck_bench::peers;
use mck_testkit::{KafkaCluster, TestCluster};
use multicluster_kafka::prelude::*;

use super::TOPIC;
use crate::cpu::{broker_pids, pids_cpu, process_cpu};

pub fn isolation(records: usize, rebuild_interval: Duration) {
    let (a, b) = mck_bench::start_clusters();
    let r = isolation_run(&a, &b, TOPIC, records, rebuild_interval);
    println!(
        "isolation: cluster A {:.0} rec/s steady, {:.0} rec/s while B's properties changed ({} changes, {} rebuilds); ratio {:.3}; process CPU per A record {:.0} ns steady, {:.0} ns changing",
        r.steady,
        r.changing,
        r.changes,
        r.rebuilds,
        r.changing / r.steady,
        r.cpu_ns[0],
        r.cpu_ns[1]
    );
    for (kind, cores) in ["steady", "changing"].iter().zip(r.cores) {
        println!(
            "cores used while {kind}: this process {:.2}, A's broker {:.2}, B's broker {:.2}",
            cores[0], cores[1], cores[2]
        );
    }
}

/// What [`isolation_run`] measured.
pub struct Isolation {
    /// Cluster A's records/s while B is left alone.
    pub steady: f64,
    /// Cluster A's records/s while B's properties change every 100 ms.
    pub changing: f64,
    /// Property changes made to B's metadata.
    pub changes: u64,
    /// Rebuilds of B's clients they caused (fewer: see `rebuild_interval`).
    pub rebuilds: u64,
    /// This process's CPU ns per A record in each kind of phase ([steady, changing]).
    pub cpu_ns: [f64; 2],
    /// Cores used in each kind of phase ([steady, changing]) by this process, by A's
    /// broker and by B's broker.
    pub cores: [[f64; 3]; 2],
}

/// Fills `topic` on `a` (4 partitions, `records` records of 100 B) and on `b` (1
/// partition, 10 records), reads the stream of both with one reader while B's
/// `client.id` changes every 100 ms for 500 ms, then rests 500 ms, and so on; returns
/// A's rate in each kind of phase. The first tenth of A's records (at most 100 000)
/// warm up and are not counted.
pub fn isolation_run(
    a: &KafkaCluster,
    b: &KafkaCluster,
    topic: &str,
    records: usize,
    rebuild_interval: Duration,
) -> Isolation {
    use std::sync::atomic::{AtomicBool, Ordering};
    std::thread::scope(|s| {
        s.spawn(|| peers::prefill(a, topic, 4, records, 100).expect("pre-fill a"));
        s.spawn(|| peers::prefill(b, topic, 1, 10, 100).expect("pre-fill b"));
    });
    let meta = |c: &KafkaCluster, client_id: &str| {
        ClusterMetadata::builder(c.bootstrap_servers())
            .topic(topic)
            .property("client.id", client_id)
            .build()
            .unwrap()
    };
    let streams = |b_client: &str| {
        [KafkaStream::new("s")
            .with_cluster("a", meta(a, "a"))
            .with_cluster("b", meta(b, b_client))]
    };
    let svc = Arc::new(StaticMetadataService::new(streams("b-0")).unwrap());
    let rt = mck_testkit::runtime();
    let changing = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    // Seconds spent in each kind of phase and A's records read in it ([steady,
    // changing]), accounted by the reader at each phase switch and at the end.
    let (mut secs, mut counts, mut cpu) = ([0f64; 2], [0u64; 2], [[0f64; 3]; 2]);
    let brokers = [broker_pids(a), broker_pids(b)];
    let sample = || [process_cpu(), pids_cpu(&brokers[0]), pids_cpu(&brokers[1])];
    let add = |to: &mut [f64; 3], from: [f64; 3], now: [f64; 3]| {
        for i in 0..3 {
            to[i] += now[i] - from[i];
        }
    };
    let (mut changes, mut rebuilds) = (0u64, 0u64);
    rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone() as Arc<dyn KafkaMetadataService>)
            .stream_ids(["s"])
            .deserializer(RawValue)
            .include_headers(false)
            .rebuild_interval(rebuild_interval)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let warmup = (records / 10).min(100_000);
        let mut seen_a = 0usize;
        while seen_a < warmup {
            let r = source.next().await.unwrap().unwrap();
            if &*r.cluster == "a" {
                seen_a += 1;
            }
        }
        let rebuilds_before = REBUILDS.load(std::sync::atomic::Ordering::Relaxed);
        let toggler = {
            let (svc, changing, done) = (svc.clone(), changing.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    // 500 ms steady, then 500 ms with B's properties changed every 100 ms.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    changing.store(true, Ordering::Relaxed);
                    for _ in 0..5 {
                        n += 1;
                        let mut current = svc.all_streams().await.unwrap();
                        if let Some(b) = current.get_mut("s").and_then(|s| s.clusters.get_mut("b"))
                        {
                            b.properties.set("client.id", format!("b-{n}"));
                        }
                        svc.replace(current.into_values()).unwrap();
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    changing.store(false, Ordering::Relaxed);
                }
                n
            })
        };
        let total_a = records - seen_a;
        let mut read_a = 0usize;
        let (mut phase, mut phase_start, mut phase_n) = (0usize, Instant::now(), 0u64);
        let mut phase_cpu = sample();
        while read_a < total_a {
            let r = source.next().await.unwrap().unwrap();
            if &*r.cluster == "a" {
                read_a += 1;
                let now_phase = usize::from(changing.load(Ordering::Relaxed));
                if now_phase != phase {
                    secs[phase] += phase_start.elapsed().as_secs_f64();
                    counts[phase] += phase_n;
                    let now_cpu = sample();
                    add(&mut cpu[phase], phase_cpu, now_cpu);
                    phase_cpu = now_cpu;
                    (phase, phase_start, phase_n) = (now_phase, Instant::now(), 0);
                }
                phase_n += 1;
            }
        }
        secs[phase] += phase_start.elapsed().as_secs_f64();
        counts[phase] += phase_n;
        add(&mut cpu[phase], phase_cpu, sample());
        done.store(true, Ordering::Relaxed);
        changes = toggler.await.unwrap();
        rebuilds = REBUILDS.load(std::sync::atomic::Ordering::Relaxed) - rebuilds_before;
        source.close().await;
    });
    let rate = |i: usize| counts[i] as f64 / secs[i].max(1e-9);
    Isolation {
        steady: rate(0),
        changing: rate(1),
        changes,
        rebuilds,
        cpu_ns: [0, 1].map(|i| cpu[i][0] / counts[i].max(1) as f64 * 1e9),
        cores: [0, 1].map(|i| cpu[i].map(|c| c / secs[i].max(1e-9))),
    }
}

/// Client rebuilds after property changes, counted from the enumerator's log event.
static REBUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A tracing layer that counts [`REBUILDS`].
pub struct RebuildCounter;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RebuildCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 |= format!("{value:?}").contains("rebuilding the cluster's clients");
                }
            }
        }
        let mut m = Message(false);
        event.record(&mut m);
        if m.0 {
            REBUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
