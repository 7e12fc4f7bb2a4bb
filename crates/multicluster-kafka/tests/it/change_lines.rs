//! One plain line per metadata change the source applied, at the
//! `multicluster_kafka::changes` target; a metadata service that fails, or a topic a
//! cluster lacks, is not warned about by the source at every read. Mock clusters; in a process of its
//! own because it installs a global tracing subscriber.

use crate::support;
use rusty_fork::rusty_fork_test;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster};
use multicluster_kafka::metadata::{KafkaMetadataService, MetadataError, MirrorOf, Translate};
use multicluster_kafka::prelude::*;
use support::{Capture, meta_at, shared_source};
use tokio::sync::watch;
use tracing::Level;

/// What the library's change log said, one message a change.
fn changes(capture: &Capture) -> Vec<String> {
    capture.messages(|target, _| target == "multicluster_kafka::changes")
}

/// What the library's enumerator warned of.
fn enumerator_warnings(capture: &Capture) -> Vec<String> {
    capture.messages(|target, level| {
        target.starts_with("multicluster_kafka::enumerator") && level == Level::WARN
    })
}

/// A static service that fails every read while `failing` is set.
struct Flaky {
    inner: StaticMetadataService,
    failing: AtomicBool,
}

impl Flaky {
    fn check(&self) -> Result<(), MetadataError> {
        if self.failing.load(Ordering::Relaxed) {
            return Err(MetadataError::Cluster {
                cluster: "meta".into(),
                message: "unreachable".into(),
            });
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl KafkaMetadataService for Flaky {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check()?;
        self.inner.describe_streams(stream_ids).await
    }
    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.check()?;
        self.inner.all_streams().await
    }
    async fn close(&self) -> Result<(), MetadataError> {
        self.inner.close().await
    }
    fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.inner.changes()
    }
}

/// Stream `s` on these clusters, topic `t` on each.
fn stream(clusters: &[&MockKafkaCluster]) -> [KafkaStream; 1] {
    let mut s = KafkaStream::new("s");
    for c in clusters {
        let meta = meta_at(c.bootstrap_servers(), &["t"]);
        s = s.with_cluster(c.logical_id(), meta);
    }
    [s]
}

/// Reads for `ms` (so the readers apply what the enumerator sends).
async fn idle(s: &mut KafkaSourceStream<Utf8>, ms: u64) {
    let until = tokio::time::Instant::now() + Duration::from_millis(ms);
    while tokio::time::Instant::now() < until {
        let _ = tokio::time::timeout(Duration::from_millis(100), s.next()).await;
    }
}

/// Reads (so the readers apply what the enumerator sends) until `done`, for at most
/// 30 s.
async fn read_until(s: &mut KafkaSourceStream<Utf8>, what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not in 30 s"
        );
        let _ = tokio::time::timeout(Duration::from_millis(100), s.next()).await;
    }
}

rusty_fork_test! {
#[test]
fn each_applied_change_is_one_line_and_failing_reads_are_not_warned_at_every_read() {
    let capture = Capture::under("multicluster_kafka");
    tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber");
    let a = MockKafkaCluster::start("lines-a", 1).unwrap();
    let b = MockKafkaCluster::start("lines-b", 1).unwrap();
    let c = MockKafkaCluster::start("lines-c", 1).unwrap();
    c.create_topic("t", 1).unwrap();
    a.create_topic("t", 1).unwrap();
    b.create_topic("t", 3).unwrap();
    let svc = Arc::new(Flaky {
        inner: StaticMetadataService::new(stream(&[&a])).unwrap(),
        failing: AtomicBool::new(false),
    });
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut s = shared_source(svc.clone())
            // Reads the metadata often: a failing service meets many reads.
            .metadata_discovery_interval(Duration::from_millis(100))
            .metadata_failure_threshold(1000)
            // Discovers often: a missing topic meets many discoveries.
            .partition_discovery_interval(Duration::from_millis(100))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        idle(&mut s, 500).await;
        assert_eq!(
            changes(&capture),
            Vec::<String>::new(),
            "nothing changed yet"
        );

        svc.inner.replace(stream(&[&a, &b])).unwrap();
        read_until(&mut s, "B added", || !changes(&capture).is_empty()).await;
        idle(&mut s, 500).await;
        assert_eq!(
            changes(&capture),
            ["stream s: + cluster lines-b (3 splits)"]
        );

        // Failing for a while (below the threshold): many reads fail, the source
        // warns about none of them.
        svc.failing.store(true, Ordering::Relaxed);
        idle(&mut s, 1500).await;
        assert_eq!(enumerator_warnings(&capture), Vec::<String>::new());
        let failed_reads = capture
            .messages(|_, l| l == Level::DEBUG)
            .iter()
            .filter(|m| m.starts_with("metadata service failed"))
            .count();
        assert!(failed_reads >= 5, "the reads did fail ({failed_reads})");
        svc.failing.store(false, Ordering::Relaxed);

        // B removed: one more line, and only one.
        svc.inner.replace(stream(&[&a])).unwrap();
        read_until(&mut s, "B removed", || changes(&capture).len() == 2).await;
        idle(&mut s, 500).await;
        assert_eq!(
            changes(&capture),
            [
                "stream s: + cluster lines-b (3 splits)",
                "stream s: - cluster lines-b"
            ]
        );

        // A topic the cluster lacks: said once, not at every discovery.
        let with_absent = KafkaStream::new("s").with_cluster(
            a.logical_id(),
            ClusterMetadata::builder(a.bootstrap_servers())
                .topics(["t", "absent"])
                .build()
                .unwrap(),
        );
        svc.inner.replace([with_absent]).unwrap();
        read_until(&mut s, "the topic added", || changes(&capture).len() == 3).await;
        idle(&mut s, 1500).await;
        let missing = enumerator_warnings(&capture)
            .into_iter()
            .filter(|m| m.starts_with("topics not found"))
            .count();
        assert_eq!(missing, 1, "{:?}", enumerator_warnings(&capture));

        // A standby mirror comes, then takes over when its source leaves.
        let mut mirror = meta_at(c.bootstrap_servers(), &["t"]);
        mirror.mirror_of = Some(MirrorOf::new(a.logical_id(), Translate::Identical));
        let pair = KafkaStream::new("s")
            .with_cluster(a.logical_id(), meta_at(a.bootstrap_servers(), &["t"]))
            .with_cluster(c.logical_id(), mirror.clone());
        svc.inner.replace([pair]).unwrap();
        read_until(&mut s, "the mirror added", || changes(&capture).len() == 4).await;
        svc.inner
            .replace([KafkaStream::new("s").with_cluster(c.logical_id(), mirror)])
            .unwrap();
        read_until(&mut s, "the source removed", || {
            changes(&capture).len() == 5
        })
        .await;
        // The mirror, now connected and read, is not said to come again.
        idle(&mut s, 1500).await;
        assert_eq!(
            changes(&capture)[3..],
            [
                "stream s: + cluster lines-c (standby), - topic absent on lines-a",
                "stream s: - cluster lines-a, ~ cluster lines-c takes over from lines-a"
            ]
        );
        s.close().await;
    });
}
}
