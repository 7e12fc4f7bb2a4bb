//! Network faults between the source and one of two real clusters.
//!
//! Cluster `west` sits behind a fault proxy (its brokers advertise the proxy's
//! address, so the source's clients never bypass it); cluster `east` is reached
//! directly. Records are produced to both all along, straight to the brokers. While
//! `west`'s network blackholes, resets every connection every second, or adds half a
//! second of latency each way:
//!
//! - `east`'s records keep coming out within a few seconds of being produced, those
//!   of a partition `east` gains during the blackhole too;
//! - once the network heals, every record of both clusters comes out exactly once;
//! - closing or dropping the source ends promptly, whatever `west`'s network does,
//!   and so does shutting down the runtime that ran it.
//!
//! The reset storm lasts 20 s (one reset of every connection a second), the
//! latency 12 s, the blackhole 10 s against a 6 s session timeout.
//!
//! The tests share the two clusters and the proxy, so they run one at a time.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use mck_testkit::proxy::{FaultProxy, Mode, ProxiedCluster};
use mck_testkit::{
    ClusterOptions, KafkaCluster, TestCluster, assert_flowed_during, shared_cluster,
};
use multicluster_kafka::prelude::*;
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use support::{Got, Reading, assert_read_once, meta, meta_at, source_over};

/// Partitions of every topic on each cluster.
const PARTITIONS: i32 = 3;
/// The session timeout the source's clients get; the blackhole outlasts it.
const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// How long after being produced a record of the healthy cluster must come out while
/// the other cluster's network fails. Generous: the machine is small and shared.
const MAX_HEALTHY_LAG: Duration = Duration::from_secs(5);
/// How long closing or dropping a source may take.
const PROMPT: Duration = Duration::from_secs(10);
/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

fn east() -> &'static KafkaCluster {
    shared_cluster("nf-east").expect("cluster nf-east starts")
}

static WEST: OnceLock<ProxiedCluster> = OnceLock::new();

extern "C" fn stop_west() {
    if let Some(w) = WEST.get() {
        w.cluster().shutdown();
    }
}

/// The cluster behind the proxy, started once (both clusters start side by side).
fn west() -> &'static ProxiedCluster {
    if let Some(w) = WEST.get() {
        return w;
    }
    static START: Mutex<()> = Mutex::new(());
    let _one = START.lock().unwrap_or_else(|p| p.into_inner());
    WEST.get_or_init(|| {
        let w = std::thread::scope(|s| {
            let e = s.spawn(east);
            let w = ProxiedCluster::start(ClusterOptions::new("nf-west"))
                .expect("cluster nf-west starts behind a proxy");
            e.join().expect("cluster nf-east starts");
            w
        });
        // SAFETY: registers a plain extern "C" function that captures nothing.
        unsafe {
            libc::atexit(stop_west);
        }
        w
    })
}

/// One test at a time owns the proxy; it is back to passing when the test ends.
struct Exclusive {
    _lock: MutexGuard<'static, ()>,
    proxy: &'static FaultProxy,
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        self.proxy.pass();
    }
}

fn exclusive() -> Exclusive {
    static LOCK: Mutex<()> = Mutex::new(());
    let lock = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let proxy = west().proxy();
    proxy.pass();
    Exclusive { _lock: lock, proxy }
}

// ---------------------------------------------------------------------------
// Producing all along

#[derive(Default)]
struct Acks {
    failed: Mutex<Vec<String>>,
    acked: AtomicU64,
}

impl rdkafka::ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => self
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.to_string()),
        }
    }
}

/// A record a [`Feed`] sent.
#[derive(Clone, Debug)]
struct Sent {
    value: String,
    at: Instant,
}

/// A producer thread writing `<prefix>-<n>` round-robin to every partition of a
/// topic (as many as `partitions` says at the time), one record every 20 ms,
/// straight to the brokers.
struct Feed {
    prefix: String,
    partitions: Arc<AtomicI32>,
    sent: Arc<Mutex<Vec<Sent>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    producer: Arc<ThreadedProducer<Acks>>,
}

impl Feed {
    fn start(bootstrap: String, topic: &str, prefix: &str) -> Feed {
        let producer: ThreadedProducer<Acks> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "60000")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create_with_context(Acks::default())
            .expect("producer");
        let producer = Arc::new(producer);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let partitions = Arc::new(AtomicI32::new(PARTITIONS));
        let thread = {
            let (producer, sent, stop) = (producer.clone(), sent.clone(), stop.clone());
            let count = partitions.clone();
            let (topic, prefix) = (topic.to_string(), prefix.to_string());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let value = format!("{prefix}-{n}");
                    let partition = (n % count.load(Ordering::Relaxed) as u64) as i32;
                    let mut rec = BaseRecord::to(&topic)
                        .payload(value.as_bytes())
                        .key("k")
                        .partition(partition);
                    // A partition just added is unknown until the producer's next
                    // metadata refresh (every second here).
                    let patience = Instant::now() + Duration::from_secs(20);
                    while let Err((e, back)) = producer.send::<str, [u8]>(rec) {
                        assert!(Instant::now() < patience, "queue a record: {e}");
                        std::thread::sleep(Duration::from_millis(20));
                        rec = back;
                    }
                    sent.lock().unwrap_or_else(|p| p.into_inner()).push(Sent {
                        value,
                        at: Instant::now(),
                    });
                    n += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        Feed {
            prefix: prefix.to_string(),
            partitions,
            sent,
            stop,
            thread: Some(thread),
            producer,
        }
    }

    /// Waits until `n` records are acknowledged: the topic's partitions serve.
    fn wait_acked(&self, n: u64) {
        let began = Instant::now();
        while self.producer.context().acked.load(Ordering::Relaxed) < n {
            let failed = self.producer.context().failed.lock().unwrap().clone();
            assert!(
                failed.is_empty(),
                "{}: produce failed: {failed:?}",
                self.prefix
            );
            assert!(
                began.elapsed() < PATIENCE,
                "{}: {n} records not acknowledged within {PATIENCE:?}",
                self.prefix
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops producing, waits for every acknowledgement, and returns what was sent.
    fn finish(mut self) -> Vec<Sent> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("producer thread");
        self.producer
            .flush(Duration::from_secs(60))
            .expect("every record is acknowledged");
        let failed = self.producer.context().failed.lock().unwrap().clone();
        assert!(
            failed.is_empty(),
            "{}: produce failed: {failed:?}",
            self.prefix
        );
        let sent = self.sent.lock().unwrap().clone();
        assert_eq!(
            self.producer.context().acked.load(Ordering::Relaxed),
            sent.len() as u64,
            "{}: every record acknowledged",
            self.prefix
        );
        sent
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Reading

fn source(topic: &str) -> MultiClusterKafkaSource<Utf8> {
    let stream = KafkaStream::new("nf")
        .with_cluster("east", meta(east(), &[topic]))
        .with_cluster(
            "west",
            meta_at(west().proxied_bootstrap_servers(), &[topic]),
        );
    source_over(stream)
        .starting_offsets(StartingOffsets::Earliest)
        // Discovery runs often, so it runs while the network fails too.
        .partition_discovery_interval(Duration::from_secs(1))
        .metadata_discovery_interval(Duration::from_secs(1))
        .property(
            "session.timeout.ms",
            SESSION_TIMEOUT.as_millis().to_string(),
        )
        .property("heartbeat.interval.ms", "2000")
        .build()
        .unwrap()
}

fn create_topics(topic: &str) {
    east().create_topic(topic, PARTITIONS).unwrap();
    west().cluster().create_topic(topic, PARTITIONS).unwrap();
}

/// What a fault sees of the run.
struct Ctx {
    proxy: &'static FaultProxy,
    got: Arc<Mutex<Vec<Got>>>,
    topic: String,
    /// Partitions the east feed writes to.
    east_partitions: Arc<AtomicI32>,
    /// What the west feed has queued so far.
    west_sent: Arc<Mutex<Vec<Sent>>>,
}

impl Ctx {
    /// How many of `west`'s records came out after `t`.
    fn west_out_since(&self, t: Instant) -> usize {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.cluster == "west" && g.at > t)
            .count()
    }

    /// How many of `west`'s records queued after `t` came out before `until`: only a
    /// path around the proxy can carry one out while it holds every byte. (A record
    /// fetched before the fault may still come out late, if the stream was slow to
    /// hand it over, so the time a record came out alone proves nothing.)
    fn west_sent_after_out_before(&self, t: Instant, until: Instant) -> Vec<String> {
        let sent_after: std::collections::BTreeSet<String> = self
            .west_sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|s| s.at > t)
            .map(|s| s.value.clone())
            .collect();
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.cluster == "west" && g.at < until && sent_after.contains(&g.value))
            .map(|g| g.value.clone())
            .collect()
    }
}

/// Runs the two feeds and a source over them; `fault` runs the fault (returning when
/// it is over, network healed) and checks what happened during it; then every record
/// of both clusters must come out exactly once.
async fn scenario<F, Fut>(topic: &str, fault: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: std::future::Future<Output = (Instant, Instant)>,
{
    let began = Instant::now();
    let t = topic.to_string();
    tokio::task::spawn_blocking(move || create_topics(&t))
        .await
        .unwrap();
    let east_feed = Feed::start(east().bootstrap_servers(), topic, "east");
    let west_feed = Feed::start(west().cluster().bootstrap_servers(), topic, "west");
    // A topic just created may not serve yet: the source opens once it does.
    tokio::task::block_in_place(|| {
        east_feed.wait_acked(5);
        west_feed.wait_acked(5);
    });
    let stream = tokio::time::timeout(PATIENCE, source(topic).open())
        .await
        .expect("open() ends")
        .expect("the source opens");
    let reading = Reading::start(stream);
    reading.until("east", 20, PATIENCE).await;
    reading.until("west", 20, PATIENCE).await;
    eprintln!("{topic}: both clusters flowing after {:?}", began.elapsed());

    let proxy = west().proxy();
    let before = proxy.stats();
    let ctx = Ctx {
        proxy,
        got: reading.got.clone(),
        topic: topic.to_string(),
        east_partitions: east_feed.partitions.clone(),
        west_sent: west_feed.sent.clone(),
    };
    let (fault_start, fault_end) = fault(ctx).await;
    assert_eq!(proxy.mode(), Mode::Pass, "the fault heals the network");
    let during = reading.snapshot();
    eprintln!(
        "{topic}: fault over after {:?}; proxy {:?} -> {:?}",
        fault_end - fault_start,
        before,
        proxy.stats()
    );

    // Keep producing a little after the heal, then stop and read everything.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (east_sent, west_sent) = tokio::task::spawn_blocking(move || {
        let e = east_feed.finish();
        let w = west_feed.finish();
        (e, w)
    })
    .await
    .unwrap();
    let healed = Instant::now();
    reading.until("east", east_sent.len(), PATIENCE).await;
    reading.until("west", west_sent.len(), PATIENCE).await;
    eprintln!(
        "{topic}: all {} east and {} west records out {:?} after the feeds stopped",
        east_sent.len(),
        west_sent.len(),
        healed.elapsed()
    );
    // Give a repeat the time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = reading.close(PROMPT).await;

    assert_read_once("east", east_sent.iter().map(|r| r.value.as_str()), &got);
    assert_read_once("west", west_sent.iter().map(|r| r.value.as_str()), &got);
    // The healthy cluster kept flowing during the fault.
    let came: BTreeMap<&str, Instant> = during
        .iter()
        .filter(|g| g.cluster == "east")
        .map(|g| (g.value.as_str(), g.at))
        .collect();
    eprintln!("{topic}: east, during the fault:");
    assert_flowed_during(
        east_sent.iter().map(|r| (r.value.as_str(), r.at)),
        |v| came.get(v).copied(),
        (fault_start, fault_end),
        MAX_HEALTHY_LAG,
        "east stalled while west failed",
    );
    eprintln!("{topic}: done in {:?}", began.elapsed());
}

/// A blackhole longer than the session timeout, then the heal. `east` grows a
/// partition during the blackhole: its records must come out during it too.
#[test]
fn a_blackhole_longer_than_the_session_timeout_stalls_only_its_cluster() {
    let _x = exclusive();
    mck_testkit::runtime().block_on(scenario("nf-blackhole", |ctx| async move {
        let hole = SESSION_TIMEOUT + Duration::from_secs(4);
        let start = Instant::now();
        ctx.proxy.blackhole();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let topic = ctx.topic.clone();
        tokio::task::spawn_blocking(move || east().add_partitions(&topic, PARTITIONS as usize + 1))
            .await
            .unwrap()
            .expect("east grows a partition");
        ctx.east_partitions.store(PARTITIONS + 1, Ordering::Relaxed);
        eprintln!(
            "east grew to {} partitions {:?} into the blackhole",
            PARTITIONS + 1,
            start.elapsed()
        );
        tokio::time::sleep_until((start + hole).into()).await;
        let end = Instant::now();
        ctx.proxy.pass();
        // The blackhole held: no west record written during it came out before the
        // heal.
        let leaked = ctx.west_sent_after_out_before(start + Duration::from_millis(100), end);
        assert!(
            leaked.is_empty(),
            "west records written during its blackhole came out before the heal \
             (the proxy is not in the path): {leaked:?}"
        );
        (start, end)
    }));
}

/// Every connection to the cluster reset every second, for 20 seconds.
#[test]
fn connections_reset_every_second_stall_only_their_cluster() {
    let _x = exclusive();
    mck_testkit::runtime().block_on(scenario("nf-reset", |ctx| async move {
        let resets_before = ctx.proxy.stats().resets;
        let start = Instant::now();
        for _ in 0..20 {
            ctx.proxy.reset_all();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let end = Instant::now();
        let resets = ctx.proxy.stats().resets - resets_before;
        eprintln!("{resets} connections reset");
        assert!(
            resets >= 20,
            "the source's connections were reset {resets} times in 20 s"
        );
        (start, end)
    }));
}

/// Half a second more each way on every chunk to and from the cluster.
#[test]
fn half_a_second_of_latency_slows_only_its_cluster() {
    let _x = exclusive();
    let delay = Duration::from_millis(500);
    mck_testkit::runtime().block_on(scenario("nf-latency", move |ctx| async move {
        let start = Instant::now();
        ctx.proxy.delay(delay);
        tokio::time::sleep(Duration::from_secs(12)).await;
        let end = Instant::now();
        ctx.proxy.pass();
        // West kept flowing, slower.
        let west = ctx.west_out_since(start + Duration::from_secs(2));
        assert!(west > 50, "west records out during the latency: {west}");
        (start, end)
    }));
}

type Fault = (&'static str, fn(&FaultProxy));

const FAULTS: [Fault; 3] = [
    ("blackhole", FaultProxy::blackhole),
    ("reset", FaultProxy::reset),
    ("latency", |p| p.delay(Duration::from_millis(500))),
];

/// Opens a source over both clusters, waits for records, applies `fault` to `west`
/// (and leaves it on), then closes or drops the source; returns how long that took.
async fn stop_during(topic: &str, fault: fn(&FaultProxy), close: bool) -> Duration {
    let stream = tokio::time::timeout(PATIENCE, source(topic).open())
        .await
        .expect("open() ends")
        .expect("the source opens");
    let reading = Reading::start(stream);
    reading.until("east", 10, PATIENCE).await;
    reading.until("west", 10, PATIENCE).await;
    fault(west().proxy());
    // Long enough for requests and a discovery to be in flight into the fault.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let east_before = reading.count_of("east");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        reading.count_of("east") > east_before,
        "east records kept coming during the fault"
    );
    let t = Instant::now();
    if close {
        reading.close(PROMPT).await;
    } else {
        let mut reading = reading;
        let _ = reading.stop.take().unwrap().send(());
        let (stream, _) = tokio::time::timeout(PROMPT, &mut reading.task)
            .await
            .expect("the reading task stops")
            .unwrap();
        drop(stream);
    }
    t.elapsed()
}

/// Feeds both clusters for a stop test.
fn feeds(topic: &str) -> (Feed, Feed) {
    create_topics(topic);
    let east_feed = Feed::start(east().bootstrap_servers(), topic, "east");
    let west_feed = Feed::start(west().cluster().bootstrap_servers(), topic, "west");
    east_feed.wait_acked(5);
    west_feed.wait_acked(5);
    (east_feed, west_feed)
}

/// Closing or dropping the source ends promptly while one cluster's network
/// blackholes, resets every connection, or lags.
#[test]
fn the_source_closes_and_drops_promptly_during_every_fault() {
    let x = exclusive();
    let _feeds = feeds("nf-stop");
    let rt = mck_testkit::runtime();
    let mut slow = Vec::new();
    for (name, fault) in FAULTS {
        for close in [true, false] {
            let how = if close { "close()" } else { "drop" };
            let took = rt.block_on(stop_during("nf-stop", fault, close));
            x.proxy.pass();
            eprintln!("{name}: {how} took {took:?}");
            if took > PROMPT {
                slow.push(format!("{name}: {how} took {took:?}"));
            }
        }
    }
    assert!(slow.is_empty(), "not prompt: {slow:#?}");
}

/// The runtime that ran the source shuts down promptly after the source is closed
/// while one cluster's network fails: an application that returns from `main`
/// then ends, rather than waiting for calls to that cluster to time out.
#[test]
fn the_runtime_shuts_down_promptly_after_a_close_during_every_fault() {
    let x = exclusive();
    let _feeds = feeds("nf-runtime");
    let mut slow = Vec::new();
    for (name, fault) in FAULTS {
        let rt = mck_testkit::runtime();
        let took = rt.block_on(stop_during("nf-runtime", fault, true));
        // The fault stays on while the runtime shuts down (in a thread, so a hang
        // is seen, not suffered).
        let t = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = tx.send(());
        });
        let done = rx.recv_timeout(PROMPT).is_ok();
        let shutdown = t.elapsed();
        x.proxy.pass();
        if !done {
            // Let the leftover work end now that the network is back.
            let _ = rx.recv_timeout(PATIENCE);
        }
        eprintln!(
            "{name}: close() took {took:?}, then the runtime's shutdown {}",
            if done {
                format!("{shutdown:?}")
            } else {
                format!(
                    "over {PROMPT:?} (ended {:?} after it began, once healed)",
                    t.elapsed()
                )
            }
        );
        if !done {
            slow.push(format!(
                "{name}: the runtime's shutdown took over {PROMPT:?} after close() returned"
            ));
        }
    }
    assert!(slow.is_empty(), "not prompt: {slow:#?}");
}
