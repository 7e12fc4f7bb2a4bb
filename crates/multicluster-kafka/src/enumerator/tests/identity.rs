//! Identity checks when positions come back: retained positions and checkpoints resume
//! only on the Kafka `cluster.id` they were read from.

use super::*;

#[tokio::test]
async fn retained_positions_resume_on_the_same_kafka_cluster() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    h.retained
        .keep(&split("east", "t", 0, 42), far(), Some("K1".into()));
    h.retained.keep(&split("east", "t", 1, 7), far(), None);
    h.retained
        .keep(&split("east", "gone", 0, 5), far(), Some("K1".into()));
    h.retained
        .keep(&split("west", "t", 0, 9), far(), Some("K1".into()));
    h.retained
        .keep(&split("east", "t", 2, 3), now_ms() - 1, Some("K1".into()));

    let mut resumed = h.e.resume_retained();
    resumed.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        resumed,
        [split("east", "t", 0, 42), split("east", "t", 1, 7)]
    );
    let known = &h.e.clusters[&key("east")].known();
    assert!(known.contains(&("t".to_string(), 0)) && known.contains(&("t".to_string(), 1)));
    assert!(
        !known.contains(&("t".to_string(), 2)),
        "an expired position"
    );
    // Topics and clusters not read stay retained.
    let left: BTreeSet<SplitId> = h.retained.live().into_iter().map(|(id, _)| id).collect();
    assert_eq!(
        left,
        BTreeSet::from([
            SplitId::new("east", "gone", 0),
            SplitId::new("west", "t", 0)
        ])
    );
    assert!(h.events(0).is_empty() && h.events(1).is_empty());
}

#[tokio::test]
async fn positions_of_another_kafka_cluster_are_refused_and_every_reader_is_told_once() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K2");
    h.retained
        .keep(&split("east", "t", 0, 42), far(), Some("K1".into()));
    h.retained
        .keep(&split("east", "t", 1, 7), far(), Some("K1".into()));

    assert!(h.e.resume_retained().is_empty());
    assert!(h.e.clusters[&key("east")].known().is_empty());
    for r in 0..2 {
        let events = h.events(r);
        assert!(
            matches!(
                &events[..],
                [ReaderEvent::IdentityMismatch { cluster, expected, actual }]
                    if &**cluster == "east" && expected == "K1" && actual == "K2"
            ),
            "reader {r}: {events:?}"
        );
    }
}

#[tokio::test]
async fn positions_of_a_replaced_or_discarded_cluster_are_dropped_silently() {
    for discard in [false, true] {
        let mut cfg = config();
        cfg.discard_mismatched_positions = discard;
        let mut east = meta("east", &["t"]);
        if !discard {
            east = ClusterMetadata::builder(bootstrap("east"))
                .topic("t")
                .replaces("K1")
                .build()
                .unwrap();
        }
        let mut h = Harness::new(cfg, stream(vec![("east", east)]));
        h.read("east", "K2");
        h.retained
            .keep(&split("east", "t", 0, 42), far(), Some("K1".into()));

        assert!(h.e.resume_retained().is_empty(), "discard: {discard}");
        assert!(
            h.events(0).is_empty() && h.events(1).is_empty(),
            "discard: {discard}"
        );
        assert!(h.retained.live().is_empty(), "discard: {discard}");
    }
}

/// A checkpoint of east (Kafka cluster.id `K1`: topics t and gone) and west.
fn checkpoint() -> Checkpoint {
    let sc = |topic: &str, partition, next_offset| SplitCheckpoint {
        topic: topic.to_string(),
        partition,
        next_offset,
        retained_until_ms: None,
        last: None,
    };
    let mut cp = Checkpoint::default();
    cp.clusters.insert(
        "east".into(),
        ClusterCheckpoint {
            kafka_cluster_id: Some("K1".into()),
            initial_discovery_done: true,
            splits: vec![sc("gone", 0, 3), sc("t", 0, 10)],
        },
    );
    cp.clusters.insert(
        "west".into(),
        ClusterCheckpoint {
            kafka_cluster_id: Some("K9".into()),
            initial_discovery_done: true,
            splits: vec![sc("t", 0, 4)],
        },
    );
    cp
}

#[tokio::test]
async fn a_restore_applies_positions_of_the_same_cluster_and_retains_those_not_read() {
    let mut cfg = config();
    cfg.restore = Some(checkpoint());
    let mut h = Harness::new(cfg, stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");

    let restored = h.e.restore().unwrap();
    assert_eq!(restored, [split("east", "t", 0, 10)]);
    let east = &h.e.clusters[&key("east")];
    assert!(east.initial_discovery_done());
    assert_eq!(*east.known(), BTreeSet::from([("t".to_string(), 0)]));
    let retained: BTreeMap<SplitId, (i64, Option<String>)> = h
        .retained
        .live()
        .into_iter()
        .map(|(id, r)| (id, (r.next_offset, r.kafka_cluster_id)))
        .collect();
    assert_eq!(
        retained,
        BTreeMap::from([
            (SplitId::new("east", "gone", 0), (3, Some("K1".into()))),
            (SplitId::new("west", "t", 0), (4, Some("K9".into()))),
        ])
    );
}

#[tokio::test]
async fn a_restore_onto_another_cluster_fails_unless_replaced_or_discarded() {
    let restore = |cfg: SourceConfig, east: ClusterMetadata| {
        let mut h = Harness::new(cfg, stream(vec![("east", east)]));
        h.read("east", "K2");
        h.e.restore()
            .map(|splits| (splits, h.e.clusters[&key("east")].known().len()))
    };
    let mut cfg = config();
    cfg.restore = Some(checkpoint());

    match restore(cfg.clone(), meta("east", &["t"])) {
        Err(SourceError::ClusterIdentity {
            cluster,
            expected,
            actual,
        }) => assert_eq!((&*cluster, &*expected, &*actual), ("east", "K1", "K2")),
        other => panic!("{other:?}"),
    }
    let replacing = ClusterMetadata::builder(bootstrap("east"))
        .topic("t")
        .replaces("K1")
        .build()
        .unwrap();
    assert_eq!(restore(cfg.clone(), replacing).unwrap(), (vec![], 0));
    cfg.discard_mismatched_positions = true;
    assert_eq!(restore(cfg, meta("east", &["t"])).unwrap(), (vec![], 0));
}

#[test]
fn a_new_bootstrap_list_leading_to_another_cluster_is_read_afresh_only_when_the_metadata_says_so() {
    use super::super::reconcile::{AnotherKafkaCluster as A, on_another_kafka_cluster};
    let view = |replaces: Option<&str>, start: Option<StartingOffsets>| ClusterView {
        topics: BTreeSet::from(["t".to_string()]),
        properties: ClientProperties::new(),
        starting_offsets: start,
        stopping_offsets: None,
        replaces: replaces.map(str::to_string),
        mirror_of: None,
    };
    let latest = Some(StartingOffsets::Latest);
    assert_eq!(
        on_another_kafka_cluster(&view(Some("K1"), None), "K1"),
        A::Replaces
    );
    assert_eq!(
        on_another_kafka_cluster(&view(Some("K1"), latest.clone()), "K1"),
        A::Replaces
    );
    assert_eq!(
        on_another_kafka_cluster(&view(Some("K0"), latest.clone()), "K1"),
        A::StartsFresh
    );
    assert_eq!(
        on_another_kafka_cluster(&view(None, latest), "K1"),
        A::StartsFresh
    );
    assert_eq!(
        on_another_kafka_cluster(&view(Some("K0"), None), "K1"),
        A::Refused
    );
    assert_eq!(
        on_another_kafka_cluster(&view(None, None), "K1"),
        A::Refused
    );
}
