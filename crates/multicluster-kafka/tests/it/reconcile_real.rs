//! Metadata changes applied while reading, against real Kafka clusters, with producers
//! running during each test.

use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mck_testkit::{
    KafkaCluster, TestCluster, TestRecord, assert_exactly_once, produce_until_stopped,
};
use multicluster_kafka::prelude::*;
use support::{PATIENCE, cluster, meta, read_until, shared_source, stream};

/// Opens a source of UTF-8 values reading stream `s` from `svc`, with the defaults.
async fn open_on(svc: Arc<StaticMetadataService>) -> KafkaSourceStream<Utf8> {
    shared_source(svc).build().unwrap().open().await.unwrap()
}

#[test]
fn a_stream_migrates_from_one_cluster_to_another_without_restart() {
    let (a, b) = (cluster("mig-a"), cluster("mig-b"));
    a.create_topic("events", 2).unwrap();
    b.create_topic("events", 2).unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([stream("s", vec![("a", meta(a, &["events"]))])]).unwrap(),
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = shared_source(svc.clone())
            .metadata_discovery_interval(Duration::from_secs(60))
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let stop_a = Arc::new(AtomicBool::new(false));
        let pa = produce_until_stopped(a, "events", "on-a", false, stop_a.clone());
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= 100).await;

        // Step 1: the stream is on A and B; producers move to B.
        svc.replace([stream(
            "s",
            vec![("a", meta(a, &["events"])), ("b", meta(b, &["events"]))],
        )])
        .unwrap();
        let stop_b = Arc::new(AtomicBool::new(false));
        let pb = produce_until_stopped(b, "events", "on-b", false, stop_b.clone());
        stop_a.store(true, Ordering::Relaxed);
        let from_a: BTreeSet<String> = tokio::task::spawn_blocking(move || pa.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_a = from_a.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.0 == "a").count() >= n_a && s.iter().any(|r| r.0 == "b")
        })
        .await;

        // Step 2: the stream is on B only.
        svc.replace([stream("s", vec![("b", meta(b, &["events"]))])])
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop_b.store(true, Ordering::Relaxed);
        let from_b: BTreeSet<String> = tokio::task::spawn_blocking(move || pb.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_b = from_b.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.0 == "b").count() >= n_b
        })
        .await;

        let mut produced = from_a;
        produced.extend(from_b);
        assert_exactly_once(&seen, &produced);
        let cp = source.checkpoint().unwrap();
        let retained: Vec<bool> = cp.clusters["a"]
            .splits
            .iter()
            .map(|s| s.retained_until_ms.is_some())
            .collect();
        assert!(
            !retained.is_empty() && retained.iter().all(|r| *r),
            "A left the metadata: its positions stay in the checkpoint only as retained ones"
        );
        assert!(
            cp.clusters["b"]
                .splits
                .iter()
                .all(|s| s.retained_until_ms.is_none())
        );
        source.close().await;
    });
}

#[test]
fn a_topic_migrates_on_one_cluster_without_restart() {
    let a = cluster("topic-mig");
    a.create_topic("orders", 2).unwrap();
    a.create_topic("orders-v2", 3).unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([stream("s", vec![("a", meta(a, &["orders"]))])]).unwrap(),
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open_on(svc.clone()).await;
        let stop_old = Arc::new(AtomicBool::new(false));
        let p_old = produce_until_stopped(a, "orders", "v1", false, stop_old.clone());
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= 60).await;
        // Both topics, producers switch, then the new topic only.
        svc.replace([stream("s", vec![("a", meta(a, &["orders", "orders-v2"]))])])
            .unwrap();
        let stop_new = Arc::new(AtomicBool::new(false));
        let p_new = produce_until_stopped(a, "orders-v2", "v2", false, stop_new.clone());
        stop_old.store(true, Ordering::Relaxed);
        let old: BTreeSet<String> = tokio::task::spawn_blocking(move || p_old.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_old = old.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.1 == "orders").count() >= n_old
                && s.iter().any(|r| r.1 == "orders-v2")
        })
        .await;
        svc.replace([stream("s", vec![("a", meta(a, &["orders-v2"]))])])
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop_new.store(true, Ordering::Relaxed);
        let new: BTreeSet<String> = tokio::task::spawn_blocking(move || p_new.join().unwrap())
            .await
            .unwrap()
            .into_iter()
            .collect();
        let n_new = new.len();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.1 == "orders-v2").count() >= n_new
        })
        .await;
        let mut produced = old;
        produced.extend(new);
        assert_exactly_once(&seen, &produced);
        let cp = source.checkpoint().unwrap();
        let splits = &cp.clusters["a"].splits;
        assert!(splits.iter().any(|s| s.topic == "orders-v2"));
        assert!(
            splits
                .iter()
                .all(|s| (s.topic == "orders") == s.retained_until_ms.is_some()),
            "the old topic's positions are retained, the new topic's are live"
        );
        source.close().await;
    });
}

/// The source's lookups on a cluster share a client with the reader that fetches from
/// it, and a broker answers one connection's requests in order: behind an idle fetch,
/// held for up to `fetch.wait.max.ms`, each lookup would wait that long. A topic added
/// to an idle cluster being read is looked up with a client of its own, so its first
/// record waits for at most the fetch already under way, not one wait per lookup.
#[test]
fn a_topic_added_to_an_idle_read_cluster_does_not_wait_behind_its_fetches() {
    const FETCH_WAIT: Duration = Duration::from_secs(10);
    let a = cluster("idle-add");
    a.create_topic("quiet", 1).unwrap();
    a.create_topic("added", 1).unwrap();
    a.produce("quiet", &[TestRecord::value("q")]).unwrap();
    a.produce("added", &[TestRecord::value("new")]).unwrap();
    let meta = |topics: &[&str]| {
        ClusterMetadata::builder(a.bootstrap_servers())
            .topics(topics.iter().copied())
            .property("fetch.wait.max.ms", FETCH_WAIT.as_millis().to_string())
            .build()
            .unwrap()
    };
    let svc =
        Arc::new(StaticMetadataService::new([stream("s", vec![("a", meta(&["quiet"]))])]).unwrap());
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open_on(svc.clone()).await;
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() == 1).await;
        // The reader's next fetch is now held by the broker: nothing more comes.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let changed = std::time::Instant::now();
        svc.replace([stream("s", vec![("a", meta(&["quiet", "added"]))])])
            .unwrap();
        read_until(&mut source, &mut seen, |s| s.iter().any(|r| r.1 == "added")).await;
        let took = changed.elapsed();
        // At most the fetch under way (10 s), and a little: the metadata, offset and
        // committed-offset lookups behind fetches would take another 10 s each.
        assert!(
            took < FETCH_WAIT + Duration::from_secs(5),
            "the added topic's first record came {took:?} after the change"
        );
        assert_eq!(seen.len(), 2, "{seen:?}");
        source.close().await;
    });
}

#[test]
fn a_property_change_on_one_cluster_is_applied_without_loss_or_repeat() {
    let (a, b) = (cluster("prop-a"), cluster("prop-b"));
    a.create_topic("p", 2).unwrap();
    b.create_topic("p", 2).unwrap();
    let with_client_id = |c: &dyn TestCluster, id: &str| {
        ClusterMetadata::builder(c.bootstrap_servers())
            .topic("p")
            .property("client.id", id)
            .build()
            .unwrap()
    };
    let svc = Arc::new(
        StaticMetadataService::new([stream(
            "s",
            vec![("a", with_client_id(a, "one")), ("b", meta(b, &["p"]))],
        )])
        .unwrap(),
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open_on(svc.clone()).await;
        let (stop_a, stop_b) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let pa = produce_until_stopped(a, "p", "pa", false, stop_a.clone());
        let pb = produce_until_stopped(b, "p", "pb", false, stop_b.clone());
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| {
            s.iter().filter(|r| r.0 == "a").count() >= 100
        })
        .await;
        // A rotated setting on A only (a credential would be the same kind of change).
        svc.replace([stream(
            "s",
            vec![("a", with_client_id(a, "two")), ("b", meta(b, &["p"]))],
        )])
        .unwrap();
        let before = seen.len();
        read_until(&mut source, &mut seen, |s| s.len() >= before + 200).await;
        stop_a.store(true, Ordering::Relaxed);
        stop_b.store(true, Ordering::Relaxed);
        let mut produced: BTreeSet<String> =
            tokio::task::spawn_blocking(move || pa.join().unwrap())
                .await
                .unwrap()
                .into_iter()
                .collect();
        produced.extend(
            tokio::task::spawn_blocking(move || pb.join().unwrap())
                .await
                .unwrap(),
        );
        let n = produced.len();
        read_until(&mut source, &mut seen, |s| s.len() >= n).await;
        assert_exactly_once(&seen, &produced);
        source.close().await;
    });
}

fn svc_streams(a: &KafkaCluster, with_flap: bool) -> [KafkaStream; 1] {
    let topics: &[&str] = if with_flap {
        &["keep", "flap"]
    } else {
        &["keep"]
    };
    [stream("s", vec![("a", meta(a, topics))])]
}

/// Reads 30 records of `flap`, removes it from the metadata, produces 10 more while it
/// is gone, re-adds it, and returns every `flap` value read once the stream has the
/// 10 new ones.
fn flap(name: &str, retention: Duration) -> Vec<String> {
    let a = cluster(name);
    a.create_topic("keep", 1).unwrap();
    a.create_topic("flap", 1).unwrap();
    let first: Vec<TestRecord> = (0..30)
        .map(|i| TestRecord::value(format!("flap-{i}")))
        .collect();
    a.produce("flap", &first).unwrap();
    let svc = Arc::new(StaticMetadataService::new(svc_streams(a, true)).unwrap());
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = shared_source(svc.clone())
            .removed_position_retention(retention)
            .build()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= 30).await;
        svc.replace(svc_streams(a, false)).unwrap();
        // A record on `keep` after the removal marks that the change was applied.
        tokio::time::sleep(Duration::from_millis(300)).await;
        a.produce("keep", &[TestRecord::value("marker")]).unwrap();
        read_until(&mut source, &mut seen, |s| {
            s.iter().any(|r| r.4 == "marker")
        })
        .await;
        let cp = source.checkpoint().unwrap();
        let flap_in_cp: Vec<_> = cp.clusters["a"]
            .splits
            .iter()
            .filter(|s| s.topic == "flap")
            .collect();
        if retention.is_zero() {
            assert!(
                flap_in_cp.is_empty(),
                "without retention the removed topic leaves the state"
            );
        } else {
            assert_eq!(
                flap_in_cp.len(),
                1,
                "the removed topic's position is retained"
            );
            assert_eq!(flap_in_cp[0].next_offset, 30);
            assert!(flap_in_cp[0].retained_until_ms.is_some());
        }
        let later: Vec<TestRecord> = (30..40)
            .map(|i| TestRecord::value(format!("flap-{i}")))
            .collect();
        a.produce("flap", &later).unwrap();
        svc.replace(svc_streams(a, true)).unwrap();
        read_until(&mut source, &mut seen, |s| {
            s.iter().any(|r| r.4 == "flap-39")
        })
        .await;
        // Anything still buffered for the topic comes right after.
        while let Ok(Some(Ok(r))) =
            tokio::time::timeout(Duration::from_millis(500), source.next()).await
        {
            seen.push((
                r.cluster.to_string(),
                r.topic.to_string(),
                r.partition,
                r.offset,
                r.value,
            ));
        }
        source.close().await;
        seen.into_iter()
            .filter(|r| r.1 == "flap")
            .map(|r| r.4)
            .collect()
    })
}

#[test]
fn a_removed_topic_readded_within_the_retention_window_resumes_where_it_was() {
    let flap = flap("readd-kept", Duration::from_secs(600));
    let want: Vec<String> = (0..40).map(|i| format!("flap-{i}")).collect();
    assert_eq!(flap, want, "no reset, no loss, no duplicate");
}

#[test]
fn without_retention_a_readded_topic_starts_over_at_earliest_as_documented() {
    let flap = flap("readd-dropped", Duration::ZERO);
    assert_eq!(flap.len(), 70, "30 before, then all 40 from earliest");
    assert_eq!(flap.iter().collect::<BTreeSet<_>>().len(), 40);
}

#[test]
fn a_cluster_removed_and_readded_within_the_window_resumes_without_loss_or_repeat() {
    let (a, b) = (cluster("flap-a"), cluster("flap-b"));
    a.create_topic("c", 2).unwrap();
    b.create_topic("c", 1).unwrap();
    let svc = Arc::new(
        StaticMetadataService::new([stream(
            "s",
            vec![("a", meta(a, &["c"])), ("b", meta(b, &["c"]))],
        )])
        .unwrap(),
    );
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = open_on(svc.clone()).await;
        let stop = Arc::new(AtomicBool::new(false));
        let pa = produce_until_stopped(a, "c", "fa", false, stop.clone());
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() >= 60).await;
        // The metadata service flaps: A disappears, then comes back.
        svc.replace([stream("s", vec![("b", meta(b, &["c"]))])])
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.produce("c", &[TestRecord::value("marker")]).unwrap();
        read_until(&mut source, &mut seen, |s| {
            s.iter().any(|r| r.4 == "marker")
        })
        .await;
        svc.replace([stream(
            "s",
            vec![("a", meta(a, &["c"])), ("b", meta(b, &["c"]))],
        )])
        .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let mut produced: BTreeSet<String> =
            tokio::task::spawn_blocking(move || pa.join().unwrap())
                .await
                .unwrap()
                .into_iter()
                .collect();
        produced.insert("marker".into());
        let n = produced.len();
        read_until(&mut source, &mut seen, |s| s.len() >= n).await;
        assert_exactly_once(&seen, &produced);
        source.close().await;
    });
}

#[test]
fn an_invalid_metadata_file_mid_run_keeps_the_last_good_metadata_and_shows_the_error() {
    let a = cluster("file-a");
    a.create_topic("f", 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    let good = format!(
        "clusters:\n  a:\n    bootstrapServers: {}\nstreams:\n  s:\n    clusters:\n      a: {{ topics: [f] }}\n",
        a.bootstrap_servers()
    );
    std::fs::write(&path, &good).unwrap();
    let file = Arc::new(FileMetadataService::watch(&path).unwrap());
    let shared: Arc<dyn KafkaMetadataService> = file.clone();
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let mut source = shared_source(shared).build().unwrap().open().await.unwrap();
        a.produce("f", &[TestRecord::value("before")]).unwrap();
        let mut seen = Vec::new();
        read_until(&mut source, &mut seen, |s| s.len() == 1).await;
        let mut reloads = file.reloads();
        std::fs::write(&path, "streams: [this is: not valid\n").unwrap();
        let error = tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some(e) = file.last_error() {
                    return e;
                }
                reloads.changed().await.unwrap();
            }
        })
        .await
        .expect("the bad file is noticed");
        assert!(
            error.to_string().contains("streams.yaml:1:"),
            "located: {error}"
        );
        a.produce("f", &[TestRecord::value("after")]).unwrap();
        read_until(&mut source, &mut seen, |s| s.len() == 2).await;
        assert_eq!(
            seen[1].4, "after",
            "reading goes on with the last good metadata"
        );
        source.close().await;
    });
}

#[test]
fn a_checkpoint_taken_during_a_migration_restores_to_exactly_once_output() {
    let (a, b) = (cluster("cpmig-a"), cluster("cpmig-b"));
    a.create_topic("m", 2).unwrap();
    b.create_topic("m", 2).unwrap();
    let fill = |c: &KafkaCluster, prefix: &str| -> Vec<String> {
        let recs: Vec<TestRecord> = (0..60)
            .map(|i| TestRecord::value(format!("{prefix}-{i}")))
            .collect();
        c.produce("m", &recs).unwrap();
        recs.into_iter()
            .map(|r| String::from_utf8(r.value).unwrap())
            .collect()
    };
    let mut produced: BTreeSet<String> = fill(a, "a").into_iter().collect();
    let both = || stream("s", vec![("a", meta(a, &["m"])), ("b", meta(b, &["m"]))]);
    let svc =
        Arc::new(StaticMetadataService::new([stream("s", vec![("a", meta(a, &["m"]))])]).unwrap());
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let open =
            |svc: Arc<StaticMetadataService>,
             restore: Option<multicluster_kafka::checkpoint::Checkpoint>| async move {
                let mut b = shared_source(svc);
                if let Some(cp) = restore {
                    b = b.restore_from(cp);
                }
                b.build().unwrap().open().await.unwrap()
            };
        let mut first = open(svc.clone(), None).await;
        let mut seen = Vec::new();
        read_until(&mut first, &mut seen, |s| s.len() >= 30).await;
        // Mid-migration: B joins while A is still being read.
        svc.replace([both()]).unwrap();
        produced.extend(fill(b, "b"));
        read_until(&mut first, &mut seen, |s| s.iter().any(|r| r.0 == "b")).await;
        let cp = first.checkpoint().unwrap();
        let before = seen.len();
        read_until(&mut first, &mut seen, |s| s.len() >= before + 10).await;
        seen.truncate(before); // a crash: what came after the checkpoint is lost
        drop(first);
        let mut second = open(
            Arc::new(StaticMetadataService::new([both()]).unwrap()),
            Some(cp),
        )
        .await;
        let n = produced.len();
        read_until(&mut second, &mut seen, |s| s.len() >= n).await;
        assert_exactly_once(&seen, &produced);
        second.close().await;
    });
}
