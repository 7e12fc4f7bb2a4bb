//! How long a fresh librdkafka consumer takes from a manual `assign` at a known offset
//! to its first record, with plain rust-rdkafka (no multicluster-kafka code), so the
//! handover benchmark's figures can be split into the library's part and librdkafka's:
//!
//! ```sh
//! cargo run --release -p mck-bench --example assign_latency -- [ROUNDS] [MODE]
//! ```
//!
//! MODE is a list of words joined by `-`: `batch` polls the consumer queue with
//! `rd_kafka_consume_batch_queue` like the library's readers (otherwise
//! `BaseConsumer::poll(10 ms)`); `zero` polls the batch with a zero timeout and sleeps
//! 10 ms between empty polls; `incr` assigns with `incremental_assign`; `backoff` sets
//! `fetch.queue.backoff.ms=10`; `logq` gives the client its own log queue; `event`
//! enables a queue-event callback; `nudge` asks for the topic's metadata right after the
//! assignment (what the library does). `GAP_MS` waits that long between creating the
//! consumer and assigning (a connected, idle consumer: the case that is slow without
//! `nudge`). Setting `RDKAFKA_DEBUG` (librdkafka `debug` contexts) prints librdkafka's
//! log lines as the consumer serves them.
//!
//! Safety, for every `unsafe` block below: the client pointer comes from a consumer
//! that outlives the block; the queues made here are destroyed once, after their
//! callback is disabled and before the consumer is dropped; each message returned by
//! `rd_kafka_consume_batch_queue` is read and then destroyed exactly once.

use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster, TestRecord};
use rdkafka::bindings as rd;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

struct Ctx(Instant);

impl ClientContext for Ctx {
    fn log(&self, _level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        eprintln!(
            "{:>8.1} ms {fac}: {log_message}",
            self.0.elapsed().as_secs_f64() * 1e3
        );
    }
}
impl ConsumerContext for Ctx {}

unsafe extern "C" fn noop(_rk: *mut rd::rd_kafka_t, _opaque: *mut std::ffi::c_void) {}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("rounds"))
        .unwrap_or(10);
    let mode = std::env::args().nth(2).unwrap_or_default();
    let batch = mode.contains("batch");
    let incremental = mode.contains("incr");
    let batch_timeout = if mode.contains("zero") { 0 } else { 10 };
    let cluster = KafkaCluster::start(ClusterOptions::new("assign")).expect("cluster starts");
    cluster.create_topic("h", 1).unwrap();
    let mut latencies = Vec::new();
    for round in 0..rounds {
        cluster
            .produce("h", &[TestRecord::value(format!("r-{round}"))])
            .unwrap();
        let t0 = Instant::now();
        let mut config = cluster.client_config();
        config
            .set("group.id", "assign-latency")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "error");
        if let Ok(debug) = std::env::var("RDKAFKA_DEBUG") {
            config.set("debug", debug);
        }
        if mode.contains("backoff") {
            config.set("fetch.queue.backoff.ms", "10");
        }
        let consumer: BaseConsumer<Ctx> = config.create_with_context(Ctx(t0)).unwrap();
        let log_queue = mode.contains("logq").then(|| unsafe {
            let q = rd::rd_kafka_queue_new(consumer.client().native_ptr());
            rd::rd_kafka_set_log_queue(consumer.client().native_ptr(), q);
            q
        });
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("h", 0, Offset::Offset(round as i64))
            .unwrap();
        if let Ok(gap) = std::env::var("GAP_MS") {
            std::thread::sleep(Duration::from_millis(gap.parse().unwrap()));
        }
        if incremental {
            consumer.incremental_assign(&tpl).unwrap();
        } else {
            consumer.assign(&tpl).unwrap();
        }
        if mode.contains("nudge") {
            // Ask for the topic's metadata without waiting: the answer updates the
            // partition leaders, so the fetch starts without waiting for librdkafka's
            // 1 s scan of leaderless partitions.
            let _ = consumer.fetch_metadata(Some("h"), Duration::ZERO);
        }
        let assigned = t0.elapsed();
        let queue = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        if mode.contains("event") {
            unsafe { rd::rd_kafka_queue_cb_event_enable(queue, Some(noop), std::ptr::null_mut()) };
        }
        loop {
            if batch {
                let mut msgs = [std::ptr::null_mut::<rd::rd_kafka_message_t>(); 64];
                let n = unsafe {
                    rd::rd_kafka_consume_batch_queue(
                        queue,
                        batch_timeout,
                        msgs.as_mut_ptr(),
                        msgs.len(),
                    )
                };
                let mut got = false;
                for m in msgs.iter().take(n.max(0) as usize) {
                    got |=
                        unsafe { (**m).err } == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR;
                    unsafe { rd::rd_kafka_message_destroy(*m) };
                }
                // Serve the main queue too (logs, errors), as BaseConsumer::poll does.
                let _ = consumer.poll(Duration::ZERO);
                if got {
                    break;
                }
                if batch_timeout == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
            } else if let Some(m) = consumer.poll(Duration::from_millis(10)) {
                m.expect("a record");
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "no record in 30 s");
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        eprintln!(
            "round {round}: assigned at {:.0} ms, first record at {ms:.0} ms",
            assigned.as_secs_f64() * 1e3
        );
        latencies.push(ms);
        if mode.contains("event") {
            unsafe { rd::rd_kafka_queue_cb_event_enable(queue, None, std::ptr::null_mut()) };
        }
        unsafe { rd::rd_kafka_queue_destroy(queue) };
        if let Some(q) = log_queue {
            unsafe { rd::rd_kafka_queue_destroy(q) };
        }
        drop(consumer);
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "assign -> first record, {rounds} fresh consumers: min {:.0} ms, median {:.0} ms, max {:.0} ms",
        latencies[0],
        latencies[rounds / 2],
        latencies[rounds - 1]
    );
}
