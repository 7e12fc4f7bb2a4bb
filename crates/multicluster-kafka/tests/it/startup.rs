//! Start-up with clusters that do not answer: a start-up timeout makes start-up wait
//! for every cluster, trying again with backoff, and fail naming the one that never
//! answered (in-process librdkafka mock clusters; a broker set down does not answer).

use crate::support;

use std::time::Duration;

use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::prelude::*;
use support::meta_at;

/// What to read on the cluster at `bootstrap`: topic `t`.
fn meta(bootstrap: &str) -> ClusterMetadata {
    meta_at(bootstrap, &["t"])
}

/// Opens a source whose start fails: its error and the warnings said meanwhile.
fn failed_start<D: Deserializer>(b: SourceBuilder<D>) -> (SourceError, Vec<String>) {
    let capture = support::Capture::default();
    // One thread: the enumerator's task runs where the subscriber is installed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = tracing::subscriber::with_default(capture.clone(), || {
        rt.block_on(async {
            match b.build().unwrap().open().await {
                Ok(_) => panic!("the start did not fail"),
                Err(e) => e,
            }
        })
    });
    let warnings = capture
        .events()
        .into_iter()
        .filter(|(_, level, _)| *level == tracing::Level::WARN)
        .map(|(_, _, text)| text)
        .collect();
    (err, warnings)
}

#[test]
fn a_bounded_start_waits_for_a_cluster_that_comes_back_within_the_startup_timeout() {
    let up = MockKafkaCluster::start("start-up", 1).unwrap();
    let late = MockKafkaCluster::start("start-late", 1).unwrap();
    for c in [&up, &late] {
        c.create_topic("t", 1).unwrap();
        c.produce("t", &[TestRecord::value(c.logical_id())])
            .unwrap();
    }
    late.broker_down(0).unwrap();
    let stream = KafkaStream::new("s")
        .with_cluster("up", meta(&up.bootstrap_servers()))
        .with_cluster("late", meta(&late.bootstrap_servers()));
    mck_testkit::runtime().block_on(async {
        let back = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            late.broker_up(0).unwrap();
            late
        });
        let mut s = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .deserializer(Utf8)
            .client_timeout(Duration::from_secs(1))
            .startup_timeout(Some(Duration::from_secs(30)))
            .stopping_offsets(StoppingOffsets::Latest)
            .build()
            .unwrap()
            .open()
            .await
            .expect("start-up waited for the cluster that came back");
        let mut got = Vec::new();
        while let Some(r) = s.next().await {
            got.push(r.unwrap().value);
        }
        got.sort();
        assert_eq!(got, ["start-late", "start-up"]);
        let _late = back.await.unwrap();
        s.close().await;
    });
}

#[test]
fn a_cluster_that_never_answers_fails_the_start_after_the_timeout_with_its_address() {
    let up = MockKafkaCluster::start("never-up", 1).unwrap();
    up.create_topic("t", 1).unwrap();
    let stream = KafkaStream::new("s")
        .with_cluster("up", meta(&up.bootstrap_servers()))
        .with_cluster("dead", meta("127.0.0.1:1"));
    for bounded in [true, false] {
        let began = std::time::Instant::now();
        let mut b = MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream.clone()]).unwrap())
            .stream_ids(["s"])
            // Longer than the start-up timeout: an attempt that waited for it would
            // leave the start nothing to say but "no answer yet".
            .client_timeout(Duration::from_secs(30))
            .startup_timeout(Some(Duration::from_secs(4)));
        if bounded {
            b = b.stopping_offsets(StoppingOffsets::Latest);
        }
        let (err, warnings) = failed_start(b);
        let took = began.elapsed();
        // While it waits, the warning says what the start does: it reads no cluster
        // before every one answers.
        let warnings: Vec<String> = warnings
            .into_iter()
            .filter(|text| text.contains("dead"))
            .collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("the run starts once every cluster answers")
                    && w.contains("start-up timeout of 4s")),
            "{warnings:?}"
        );
        assert!(
            !warnings.iter().any(|w| w.contains("reading the others")),
            "{warnings:?}"
        );
        let text = err.to_string();
        assert!(text.starts_with("cluster `dead`:"), "{text}");
        assert_eq!(text.matches("cluster `dead`").count(), 1, "{text}");
        assert!(text.contains("start-up timeout of 4s"), "{text}");
        assert!(text.contains("bootstrap 127.0.0.1:1"), "{text}");
        // Each attempt ends at librdkafka's first error, so the start knows why.
        assert!(text.contains("Connection refused"), "{text}");
        assert!(
            warnings.iter().any(|w| w.contains("Connection refused")),
            "{warnings:?}"
        );
        assert!(!text.contains('\n'), "{text}");
        assert!(
            took >= Duration::from_secs(4) && took < Duration::from_secs(15),
            "failed after the timeout, not before nor long after ({took:?})"
        );
    }
}

#[test]
fn a_bounded_start_says_which_cluster_it_waits_for_before_the_first_attempt_ends() {
    // A first attempt at a cluster that accepts connections and never answers (no
    // client error to end it early) ends only with the client timeout (30 s by
    // default): until then the start said nothing at all.
    let up = MockKafkaCluster::start("waited-up", 1).unwrap();
    up.create_topic("t", 1).unwrap();
    // The kernel completes connections to a listening socket nobody accepts from.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_at = silent.local_addr().unwrap().to_string();
    let stream = KafkaStream::new("s")
        .with_cluster("up", meta(&up.bootstrap_servers()))
        .with_cluster("silent", meta(&silent_at));
    let (err, warnings) = failed_start(
        MultiClusterKafkaSource::builder()
            .metadata_service(StaticMetadataService::new([stream]).unwrap())
            .stream_ids(["s"])
            .client_timeout(Duration::from_secs(30))
            .startup_timeout(Some(Duration::from_secs(7)))
            .stopping_offsets(StoppingOffsets::Latest),
    );
    assert!(err.to_string().starts_with("cluster `silent`:"), "{err}");
    let said: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("silent") && w.contains("no answer from a cluster yet"))
        .collect();
    assert_eq!(said.len(), 1, "{warnings:?}");
    assert!(
        said[0].contains("the run starts once every cluster answers")
            && said[0].contains("start-up timeout of 7s"),
        "{said:?}"
    );
    assert!(
        said[0].contains(&silent_at),
        "names the bootstrap list: {said:?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("\"up\"") || w.contains("cluster=up ")),
        "the cluster that answered is not named: {warnings:?}"
    );
    drop(silent);
}
