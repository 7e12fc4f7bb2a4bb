//! Discovery bookkeeping: what an answer of a cluster's partition discovery changes.

use super::*;

/// What a discovery of the topics t, a and b found absent.
fn absent(missing: &[&str], unauthorized: &[&str]) -> Absent {
    Absent {
        missing: missing.iter().map(|t| t.to_string()).collect(),
        unauthorized: unauthorized.iter().map(|t| t.to_string()).collect(),
        asked: ["t", "a", "b"].iter().map(|t| t.to_string()).collect(),
    }
}

#[tokio::test]
async fn discovery_hands_out_new_partitions_of_topics_read_once_then_says_the_cluster_discovered() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    h.e.clusters
        .get_mut("east")
        .unwrap()
        .know("t".to_string(), 0);
    let found = || {
        vec![
            split("east", "t", 0, 0),
            split("east", "t", 1, 0),
            split("east", "t", 2, 0),
            split("east", "removed", 0, 0),
        ]
    };

    let out =
        h.e.take_discovery(key("east"), Ok((found(), Absent::default())), false)
            .await
            .unwrap();
    assert!(out.is_empty(), "handed out, not returned");
    let mut handed = Vec::new();
    for r in 0..2 {
        let events = h.events(r);
        // The cluster counts as discovered only after its splits were handed out.
        let info = events
            .iter()
            .position(|ev| {
                matches!(ev, ReaderEvent::ClusterInfo { cluster, initial_discovery_done: true, kafka_cluster_id: Some(id) } if &**cluster == "east" && id == "K1")
            })
            .unwrap_or_else(|| panic!("reader {r}: {events:?}"));
        assert_eq!(info, events.len() - 1, "reader {r}: {events:?}");
        for ev in events {
            if let ReaderEvent::Assign { splits, .. } = ev {
                handed.extend(splits.into_iter().map(|s| s.id));
            }
        }
    }
    handed.sort();
    assert_eq!(
        handed,
        [SplitId::new("east", "t", 1), SplitId::new("east", "t", 2)]
    );
    assert!(h.e.clusters[&key("east")].initial_discovery_done());
    assert!(
        !h.e.clusters[&key("east")]
            .known()
            .contains(&("removed".to_string(), 0))
    );

    // The same answer again: nothing new, and the cluster is not said again.
    h.e.take_discovery(key("east"), Ok((found(), Absent::default())), false)
        .await
        .unwrap();
    assert!(h.events(0).is_empty() && h.events(1).is_empty());
}

#[tokio::test]
async fn discovery_at_start_returns_the_splits_and_tells_no_reader() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    let found = vec![split("east", "t", 0, 5), split("east", "t", 0, 5)];
    let out =
        h.e.take_discovery(key("east"), Ok((found, Absent::default())), true)
            .await
            .unwrap();
    assert_eq!(out, [split("east", "t", 0, 5)], "a partition found twice");
    assert!(h.e.clusters[&key("east")].initial_discovery_done());
    assert!(h.events(0).is_empty() && h.events(1).is_empty());

    // A cluster no longer read: its answer is dropped.
    let late = vec![split("west", "t", 0, 0)];
    let out =
        h.e.take_discovery(key("west"), Ok((late, Absent::default())), true)
            .await
            .unwrap();
    assert!(out.is_empty());

    // A failure fails the start.
    let failed =
        h.e.take_discovery(key("east"), Err(err("east", "no answer")), true)
            .await;
    assert!(matches!(failed, Err(SourceError::Cluster { .. })));
}

/// Takes a discovery answer of east with no new partition and these topics absent.
async fn answer(h: &mut Harness, a: Absent) {
    h.e.take_discovery(key("east"), Ok((Vec::new(), a)), false)
        .await
        .unwrap();
}

#[tokio::test]
async fn missing_and_unauthorized_topics_are_said_once_per_change() {
    let mut h = Harness::new(
        config(),
        stream(vec![("east", meta("east", &["t", "a", "b"]))]),
    );
    h.read("east", "K1");
    let warnings = Warnings::default();
    let _guard = warnings.capture();

    answer(&mut h, absent(&["a", "b"], &["b"])).await;
    let said = warnings.said();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[0].contains("refuses to describe"), "{said:?}");
    assert!(said[1].contains("not found"), "{said:?}");
    answer(&mut h, absent(&["a", "b"], &["b"])).await;
    assert_eq!(warnings.count(), 2, "the same again is not said");

    answer(&mut h, absent(&["a"], &[])).await;
    assert_eq!(warnings.count(), 3);
    assert!(warnings.said()[2].contains("not found"));

    // An answer to a discovery started before a and b were read (it did not look
    // for them) says nothing of them: a still missing is not said again.
    let stale = Absent {
        asked: ["t".to_string()].into(),
        ..Absent::default()
    };
    answer(&mut h, stale).await;
    answer(&mut h, absent(&["a"], &[])).await;
    assert_eq!(warnings.count(), 3, "{:?}", warnings.said());

    // Found meanwhile, then missing again: said again.
    answer(&mut h, absent(&[], &[])).await;
    assert!(!h.e.discovery.said_missing("east"));
    answer(&mut h, absent(&["a"], &[])).await;
    assert_eq!(warnings.count(), 4);
}

#[tokio::test]
async fn a_failed_discovery_is_said_once_per_distinct_error() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    let warnings = Warnings::default();
    let _guard = warnings.capture();
    for message in ["timed out", "timed out", "refused", "refused"] {
        h.e.take_discovery(key("east"), Err(err("east", message)), false)
            .await
            .unwrap();
    }
    assert_eq!(warnings.count(), 2, "{:?}", warnings.said());
    // An answer clears it: the same error is said again afterwards.
    h.e.take_discovery(key("east"), Ok((Vec::new(), Absent::default())), false)
        .await
        .unwrap();
    h.e.take_discovery(key("east"), Err(err("east", "refused")), false)
        .await
        .unwrap();
    assert_eq!(warnings.count(), 3);
}

#[tokio::test]
async fn a_bounded_run_tells_the_owners_of_a_topic_gone_and_takes_no_new_split() {
    let mut cfg = config();
    cfg.stopping = Some(StoppingOffsets::Latest);
    let mut h = Harness::new(cfg, stream(vec![("east", meta("east", &["t", "u"]))]));
    h.read("east", "K1");
    {
        let east = h.e.clusters.get_mut("east").unwrap();
        for (t, p) in [("t", 0), ("t", 1), ("u", 0)] {
            east.know(t.to_string(), p);
        }
    }
    h.e.readers.set_owner(SplitId::new("east", "t", 0), 0);
    h.e.readers.set_owner(SplitId::new("east", "t", 1), 1);
    h.e.readers.set_owner(SplitId::new("east", "u", 0), 0);

    let new = vec![split("east", "t", 2, 0)];
    h.e.take_discovery(key("east"), Ok((new, absent(&["t", "x"], &[]))), false)
        .await
        .unwrap();
    for r in 0..2 {
        let events = h.events(r);
        assert!(
            matches!(&events[..], [ReaderEvent::TopicGone { cluster, topic, unauthorized: false }] if &**cluster == "east" && topic == "t"),
            "reader {r}: {events:?}"
        );
    }
    assert!(
        !h.e.clusters[&key("east")]
            .known()
            .contains(&("t".to_string(), 2))
    );
    assert!(
        !h.e.readers
            .owners()
            .contains_key(&SplitId::new("east", "t", 2))
    );

    h.e.take_discovery(key("east"), Ok((Vec::new(), absent(&["u"], &["u"]))), false)
        .await
        .unwrap();
    let events = h.events(0);
    assert!(
        matches!(&events[..], [ReaderEvent::TopicGone { topic, unauthorized: true, .. }] if topic == "u"),
        "{events:?}"
    );
    assert!(h.events(1).is_empty(), "reader 1 reads nothing of u");
}
