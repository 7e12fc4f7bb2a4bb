//! Small helpers shared by the real and mock clusters.

use std::collections::HashMap;
use std::future::Future;
use std::net::TcpListener;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message};

use crate::{Produced, TestRecord, TestkitError, TransactionEnd};

/// The last `n` lines of `text`.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `n` distinct free TCP ports on 127.0.0.1. All are bound at once (so the kernel
/// cannot hand out one twice), then released; a port is never handed out twice in one
/// process. Ports are kept for restarts.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    let mut held = Vec::new();
    let mut ports = Vec::new();
    while ports.len() < n {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        if !given.contains(&port) && !ports.contains(&port) {
            ports.push(port);
        }
        held.push(l);
    }
    given.extend(&ports);
    Ok(ports)
}

/// Runs a future to completion on a fresh thread with its own current-thread runtime,
/// so it works whether or not the caller is inside a tokio runtime.
pub(crate) fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the test kit cannot build a tokio runtime")
                .block_on(fut)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

struct Collect {
    results: Mutex<HashMap<usize, Result<Produced, String>>>,
}

impl ClientContext for Collect {}

impl ProducerContext for Collect {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<usize>) {
        let outcome = match result {
            Ok(m) => Ok(Produced {
                partition: m.partition(),
                offset: m.offset(),
            }),
            Err((e, _)) => Err(e.to_string()),
        };
        self.results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(*index, outcome);
    }
}

/// Produces `records` to `topic` in order (idempotent producer, so per-partition order
/// holds even on retries) and waits for every acknowledgement.
pub(crate) fn produce_records(
    cluster: &str,
    bootstrap: &str,
    topic: &str,
    records: &[TestRecord],
    extra: &[(&str, &str)],
) -> Result<Vec<Produced>, TestkitError> {
    produce_records_in(cluster, bootstrap, topic, records, extra, None)
}

/// [`produce_records`], inside one transaction of a producer with this
/// `transactional.id` when `transaction` is given: begun before the first record,
/// ended as it says once every record is acknowledged.
pub(crate) fn produce_records_in(
    cluster: &str,
    bootstrap: &str,
    topic: &str,
    records: &[TestRecord],
    extra: &[(&str, &str)],
    transaction: Option<(&str, TransactionEnd)>,
) -> Result<Vec<Produced>, TestkitError> {
    let fail = |message: String| TestkitError::Kafka {
        cluster: cluster.to_string(),
        message,
    };
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    if let Some((id, _)) = transaction {
        config.set("transactional.id", id);
    }
    let producer: ThreadedProducer<Collect> = config
        .create_with_context(Collect {
            results: Mutex::new(HashMap::new()),
        })
        .map_err(|e| fail(format!("cannot create producer: {e}")))?;
    if transaction.is_some() {
        producer
            .init_transactions(Duration::from_secs(60))
            .and_then(|()| producer.begin_transaction())
            .map_err(|e| fail(format!("begin a transaction on {topic}: {e}")))?;
    }
    for (i, r) in records.iter().enumerate() {
        let mut rec: BaseRecord<'_, [u8], [u8], Box<usize>> =
            BaseRecord::with_opaque_to(topic, Box::new(i)).payload(r.value.as_slice());
        if let Some(k) = &r.key {
            rec = rec.key(k.as_slice());
        }
        if let Some(p) = r.partition {
            rec = rec.partition(p);
        }
        if let Some(ts) = r.timestamp {
            rec = rec.timestamp(ts);
        }
        if !r.headers.is_empty() {
            let mut h = OwnedHeaders::new_with_capacity(r.headers.len());
            for (name, value) in &r.headers {
                h = h.insert(Header {
                    key: name,
                    value: Some(value.as_slice()),
                });
            }
            rec = rec.headers(h);
        }
        let mut rec = rec;
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((e, back)) => {
                    if matches!(
                        e.rdkafka_error_code(),
                        Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                    ) {
                        std::thread::sleep(Duration::from_millis(5));
                        rec = back;
                    } else {
                        return Err(fail(format!("send to {topic}: {e}")));
                    }
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(90))
        .map_err(|e| fail(format!("flush to {topic}: {e}")))?;
    match transaction {
        Some((_, TransactionEnd::Commit)) => {
            producer
                .commit_transaction(Duration::from_secs(60))
                .map_err(|e| fail(format!("commit the transaction on {topic}: {e}")))?
        }
        Some((_, TransactionEnd::Abort)) => producer
            .abort_transaction(Duration::from_secs(60))
            .map_err(|e| fail(format!("abort the transaction on {topic}: {e}")))?,
        None => {}
    }
    let mut results = producer
        .context()
        .results
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::with_capacity(records.len());
    for i in 0..records.len() {
        match results.remove(&i) {
            Some(Ok(p)) => out.push(p),
            Some(Err(e)) => return Err(fail(format!("record {i} to {topic} failed: {e}"))),
            None => {
                return Err(fail(format!(
                    "record {i} to {topic} was never acknowledged"
                )));
            }
        }
    }
    Ok(out)
}
