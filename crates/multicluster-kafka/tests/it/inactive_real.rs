//! Errors from clusters the metadata service reports inactive are ignored (a cluster on
//! its way out of the metadata, whose topics may already be deleted, must not fail the
//! source):
//! a fatal error (offset out of range) on an inactive cluster does not reach the
//! caller, while the same error on an active cluster does.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mck_testkit::{KafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::metadata::MetadataError;
use multicluster_kafka::prelude::*;
use multicluster_kafka::split::{KafkaSplit, SplitId};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::{Offset, TopicPartitionList};
use support::{cluster, meta, shared_source};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

/// The one cluster this test reads.
fn kafka() -> &'static KafkaCluster {
    cluster("one")
}

/// Static metadata whose `is_cluster_active` says no for one cluster id.
struct WithInactive {
    inner: StaticMetadataService,
    inactive: Option<&'static str>,
}

#[async_trait]
impl KafkaMetadataService for WithInactive {
    async fn describe_streams(
        &self,
        ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.inner.describe_streams(ids).await
    }
    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.inner.all_streams().await
    }
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        Ok(Some(cluster_id) != self.inactive)
    }
    async fn close(&self) -> Result<(), MetadataError> {
        self.inner.close().await
    }
}

fn produce(topic: &str, n: usize) -> Vec<String> {
    kafka().create_topic(topic, 1).unwrap();
    let values: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    let recs: Vec<TestRecord> = values
        .iter()
        .map(|v| TestRecord::value(v.clone()))
        .collect();
    kafka().produce(topic, &recs).unwrap();
    values
}

/// Moves the earliest offset of `topic`/0 to `offset`.
async fn delete_before(topic: &str, offset: i64) {
    let admin: AdminClient<DefaultClientContext> = kafka().client_config().create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for e in admin.delete_records(&tpl, &opts).await.unwrap().elements() {
        assert!(e.error().is_ok(), "delete records: {:?}", e.error());
    }
}

/// Two logical clusters on one broker: `gone` with a truncated topic and a checkpoint
/// before its log start (a fatal error when read), `live` with records to read.
async fn run(inactive: Option<&'static str>, tag: &str) -> (Vec<String>, Option<SourceError>) {
    let truncated = format!("inactive-truncated-{tag}");
    let live_topic = format!("inactive-live-{tag}");
    produce(&truncated, 10);
    delete_before(&truncated, 5).await;
    let want = produce(&live_topic, 20);
    let md = |t: &str| meta(kafka(), &[t]);
    let stream = KafkaStream::new("s")
        .with_cluster("gone", md(&truncated))
        .with_cluster("live", md(&live_topic));
    let svc = WithInactive {
        inner: StaticMetadataService::new([stream]).unwrap(),
        inactive,
    };
    let checkpoint = Checkpoint::from_splits([KafkaSplit {
        id: SplitId::new("gone", truncated.as_str(), 0),
        next_offset: 0,
        stop_offset: None,
        last: None,
    }]);
    let mut source = shared_source(Arc::new(svc))
        .restore_from(checkpoint)
        .build()
        .unwrap()
        .open()
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut error = None;
    let read = tokio::time::timeout(PATIENCE, async {
        while got.len() < want.len() {
            match source.next().await {
                Some(Ok(r)) => got.push(r.value),
                Some(Err(e)) => {
                    error = Some(e);
                    break;
                }
                None => break,
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "reading stalled; got {} of {}",
        got.len(),
        want.len()
    );
    if error.is_none() {
        // Give a late error of `gone` its chance to surface.
        if let Ok(Some(Err(e))) = tokio::time::timeout(Duration::from_secs(3), source.next()).await
        {
            error = Some(e);
        }
    }
    source.close().await;
    got.sort();
    let mut want = want;
    want.sort();
    if error.is_none() {
        assert_eq!(got, want);
    }
    (got, error)
}

#[test]
fn a_fatal_error_of_an_inactive_cluster_is_ignored_and_of_an_active_one_is_not() {
    let rt = mck_testkit::runtime();
    rt.block_on(async {
        let (_, error) = run(None, "active").await;
        let error = error.expect("the active cluster's offset-out-of-range error surfaces");
        assert!(
            matches!(error, SourceError::OffsetOutOfRange { .. }),
            "{error}"
        );

        let (got, error) = run(Some("gone"), "inactive").await;
        assert!(
            error.is_none(),
            "an inactive cluster's error surfaced: {error:?}"
        );
        assert_eq!(got.len(), 20);
    });
}
