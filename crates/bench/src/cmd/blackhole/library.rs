//! The library rounds: one source reads both clusters, B's proxy passing or
//! blackholed, and its close and the runtime's drop are timed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use mck_testkit::proxy::ProxiedCluster;
use mck_testkit::{KafkaCluster, TestCluster};
use multicluster_kafka::prelude::*;

use super::{BlackholeArgs, PATIENCE, TOPIC};

/// What one library round measured.
#[derive(Clone, Copy, Debug)]
pub(super) struct Round {
    /// A's records/s from the clock's start to its last record.
    pub(super) rate: f64,
    /// Seconds the measured part took.
    pub(super) secs: f64,
    /// `close()`, in seconds.
    pub(super) close: f64,
    /// Dropping the runtime after `close()`, in seconds.
    pub(super) runtime_drop: f64,
    /// Bytes B's proxy forwarded to the client while the clock ran.
    pub(super) b_bytes_down: u64,
}

/// One library round; `blackhole`: switch B's proxy to a blackhole at the clock's
/// start. The proxy is back to passing when it returns.
pub(super) fn round(
    a: &KafkaCluster,
    b: &ProxiedCluster,
    args: &BlackholeArgs,
    blackhole: bool,
) -> Round {
    let meta = |bootstrap: String, client_id: &str| {
        ClusterMetadata::builder(bootstrap)
            .topic(TOPIC)
            .property("client.id", client_id)
            .build()
            .unwrap()
    };
    let stream = KafkaStream::new("s")
        .with_cluster("a", meta(a.bootstrap_servers(), "bench-a"))
        .with_cluster("b", meta(b.proxied_bootstrap_servers(), "bench-b"));
    let svc = Arc::new(StaticMetadataService::new([stream]).unwrap());
    let rt = mck_testkit::runtime();
    let proxy = b.proxy();
    let warmup = (args.records / 10).min(100_000);
    let (rate, secs, close, b_bytes_down) = rt.block_on(async {
        let mut source = MultiClusterKafkaSource::builder()
            .shared_metadata_service(svc.clone() as Arc<dyn KafkaMetadataService>)
            .stream_ids(["s"])
            .deserializer(RawValue)
            .include_headers(false)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let (mut seen_a, mut seen_b) = (0usize, 0usize);
        let mut sink = 0usize;
        // Up to the clock's start: every B record and A's warm-up.
        while seen_b < args.b_records || seen_a < warmup {
            let batch = next(&mut source).await;
            for r in batch.iter() {
                sink += r.value.len();
            }
            if &**batch.cluster() == "a" {
                seen_a += batch.len();
            } else {
                seen_b += batch.len();
            }
        }
        if blackhole {
            proxy.blackhole();
        }
        let bytes_before = proxy.stats().bytes_down;
        let from_a = seen_a;
        let start = Instant::now();
        let mut end = start;
        while seen_a < args.records {
            let batch = next(&mut source).await;
            for r in batch.iter() {
                sink += r.value.len();
            }
            if &**batch.cluster() == "a" {
                seen_a += batch.len();
                end = Instant::now();
            } else {
                seen_b += batch.len();
            }
        }
        black_box(sink);
        assert_eq!(seen_a, args.records, "A's records read");
        assert_eq!(seen_b, args.b_records, "B's records read");
        let b_bytes_down = proxy.stats().bytes_down - bytes_before;
        let secs = (end - start).as_secs_f64();
        let t = Instant::now();
        tokio::time::timeout(PATIENCE, source.close())
            .await
            .expect("close() within the patience");
        let close = t.elapsed().as_secs_f64();
        (
            (args.records - from_a) as f64 / secs.max(1e-9),
            secs,
            close,
            b_bytes_down,
        )
    });
    let t = Instant::now();
    drop(rt);
    let runtime_drop = t.elapsed().as_secs_f64();
    proxy.pass();
    Round {
        rate,
        secs,
        close,
        runtime_drop,
        b_bytes_down,
    }
}

/// The next batch, within [`PATIENCE`].
async fn next(source: &mut KafkaSourceStream<RawValue>) -> RecordBatch<Bytes> {
    tokio::time::timeout(PATIENCE, source.next_batch())
        .await
        .expect("a batch within the patience")
        .expect("the stream goes on")
        .expect("a batch")
}
