//! `mck-bench scale mock` (hidden): the clusters curve's clusters (librdkafka mock
//! clusters, or with `--real` the test kit's single-broker Kafka clusters) and their
//! producers, in a process of their own so that the measured process holds only the
//! source.
//!
//! It starts `--clusters + --extra` single-broker clusters, creates topic `t`
//! (`--partitions` partitions) on each and topics `u0` … on the first, prints one line
//! `ready <bootstrap> …` (in cluster order) and then follows commands on stdin:
//!
//! - `rate N R`: from now on `t` on clusters `0..N` gets `R / N` records/s each;
//!   every `--extra` cluster's `t` and the first cluster's `u*` topics get
//!   `--side-rate` records/s each; the other clusters get nothing;
//! - `quit` (or the end of stdin): stop.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, MockKafkaCluster, TestCluster};
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// Options of `scale mock`.
#[derive(clap::Args, Debug)]
pub struct MockArgs {
    /// Measured clusters (the largest point of the curve).
    #[arg(long)]
    pub clusters: usize,
    /// Clusters for the handover rounds, after the measured ones.
    #[arg(long)]
    pub extra: usize,
    /// Partitions of `t` on every cluster.
    #[arg(long)]
    pub partitions: i32,
    /// Topics `u0`, `u1`, … on the first cluster (one per reconciliation round).
    #[arg(long)]
    pub side_topics: usize,
    /// Value size in bytes.
    #[arg(long)]
    pub value_size: usize,
    /// Records/s on each extra cluster and on each `u*` topic.
    #[arg(long)]
    pub side_rate: f64,
    /// Real single-broker Kafka clusters (the test kit's child JVMs) instead of
    /// librdkafka mock clusters.
    #[arg(long)]
    pub real: bool,
}

/// Starts cluster `i`: a mock cluster, or a real one with a small heap.
fn start_cluster(i: usize, real: bool) -> Box<dyn TestCluster + Send> {
    if real {
        let options = ClusterOptions::new(format!("k{i}")).jvm_options([
            "-Xms256m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
        ]);
        Box::new(KafkaCluster::start(options).expect("a real Kafka cluster"))
    } else {
        Box::new(MockKafkaCluster::start(&format!("m{i}"), 1).expect("a mock cluster"))
    }
}

/// Records/s to one topic of one cluster.
#[derive(Clone)]
struct Flow {
    cluster: usize,
    topic: String,
    rate: f64,
}

/// The flows of `rate N R`.
fn flows(args: &MockArgs, n: usize, total: f64) -> Vec<Flow> {
    let n = n.min(args.clusters);
    let mut out: Vec<Flow> = (0..n)
        .map(|c| Flow {
            cluster: c,
            topic: "t".into(),
            rate: total / n.max(1) as f64,
        })
        .collect();
    out.extend((0..args.extra).map(|h| Flow {
        cluster: args.clusters + h,
        topic: "t".into(),
        rate: args.side_rate,
    }));
    out.extend((0..args.side_topics).map(|k| Flow {
        cluster: 0,
        topic: format!("u{k}"),
        rate: args.side_rate,
    }));
    out
}

pub fn mock(args: &MockArgs) {
    let count = args.clusters + args.extra;
    // Four at a time: real brokers start in about 5 s each, and more JVMs starting at
    // once on a small machine only wait for each other.
    let mut clusters: Vec<Box<dyn TestCluster + Send>> = Vec::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(4) {
        std::thread::scope(|s| {
            let started: Vec<_> = chunk
                .iter()
                .map(|&i| {
                    s.spawn(move || {
                        let c = start_cluster(i, args.real);
                        c.create_topic("t", args.partitions).expect("topic t");
                        c
                    })
                })
                .collect();
            clusters.extend(
                started
                    .into_iter()
                    .map(|h| h.join().expect("a cluster start thread")),
            );
        });
    }
    for k in 0..args.side_topics {
        clusters[0]
            .create_topic(&format!("u{k}"), 1)
            .expect("topic u");
    }
    let producers: Vec<BaseProducer> = clusters
        .iter()
        .map(|c| {
            ClientConfig::new()
                .set("bootstrap.servers", c.bootstrap_servers())
                .set("linger.ms", "5")
                .set("queue.buffering.max.messages", "1000000")
                .create()
                .expect("a producer")
        })
        .collect();
    let bootstraps: Vec<String> = clusters.iter().map(|c| c.bootstrap_servers()).collect();
    println!("ready {}", bootstraps.join(" "));
    std::io::stdout().flush().expect("stdout");

    let current: Arc<Mutex<Vec<Flow>>> = Arc::default();
    let dropped = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        s.spawn(|| produce_loop(&producers, &current, &stop, &dropped, args.value_size));
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["rate", n, r] => {
                    let (n, r) = (n.parse().expect("N"), r.parse().expect("R"));
                    *current.lock().unwrap() = flows(args, n, r);
                }
                ["quit"] => break,
                _ => eprintln!("scale mock: unknown command {line:?}"),
            }
        }
        stop.store(true, Ordering::Release);
    });
    let dropped = dropped.load(Ordering::Acquire);
    if dropped > 0 {
        eprintln!("scale mock: {dropped} records not queued (queue full)");
    }
}

/// Produces every flow at its rate, in ticks of 5 ms, until `stop`.
fn produce_loop(
    producers: &[BaseProducer],
    current: &Mutex<Vec<Flow>>,
    stop: &std::sync::atomic::AtomicBool,
    dropped: &AtomicU64,
    value_size: usize,
) {
    let value = vec![b'v'; value_size];
    // Records owed to each flow (fractions carry over between ticks).
    let mut owed: Vec<f64> = Vec::new();
    let mut flows: Vec<Flow> = Vec::new();
    let mut last = Instant::now();
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(5));
        {
            let now = current.lock().unwrap();
            if now.len() != flows.len()
                || now
                    .iter()
                    .zip(&flows)
                    .any(|(a, b)| a.cluster != b.cluster || a.rate != b.rate)
            {
                flows = now.clone();
                owed = vec![0.0; flows.len()];
            }
        }
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        for (flow, owed) in flows.iter().zip(owed.iter_mut()) {
            *owed += flow.rate * dt;
            while *owed >= 1.0 {
                *owed -= 1.0;
                let record = BaseRecord::<(), [u8]>::to(&flow.topic).payload(&value[..]);
                if producers[flow.cluster].send(record).is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for p in producers {
            p.poll(Duration::ZERO);
        }
    }
    for p in producers {
        let _ = p.flush(Duration::from_secs(2));
    }
}
