//! Reading the metadata again: failures kept below the threshold, topics leaving, and
//! readers closing.

use super::*;

fn metadata_failed(events: &[ReaderEvent]) -> usize {
    events
        .iter()
        .filter(|ev| matches!(ev, ReaderEvent::MetadataFailed(_)))
        .count()
}

#[tokio::test]
async fn metadata_failures_reach_the_readers_past_the_threshold_once_per_read() {
    let mut cfg = config();
    cfg.metadata_failure_threshold = 2;
    let mut h = Harness::new(cfg, stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    let views = h.e.applied.views().clone();

    h.service.fail(true);
    for _ in 0..2 {
        h.e.refresh_metadata().await;
    }
    assert_eq!(metadata_failed(&h.events(0)), 0, "within the threshold");
    h.e.refresh_metadata().await;
    h.e.refresh_metadata().await;
    for r in 0..2 {
        let events = h.events(r);
        assert_eq!(metadata_failed(&events), 2, "reader {r}: {events:?}");
        assert_eq!(events.len(), 2, "nothing else: {events:?}");
    }
    assert_eq!(
        h.e.applied.views(),
        &views,
        "the last good metadata stays in force"
    );
    assert!(h.e.clusters.contains_key("east"));

    // A good answer resets the count.
    h.service.fail(false);
    h.e.refresh_metadata().await;
    h.service.fail(true);
    for _ in 0..2 {
        h.e.refresh_metadata().await;
    }
    assert_eq!(metadata_failed(&h.events(0)), 0);
}

#[tokio::test]
async fn a_topic_leaving_is_removed_from_its_owner_with_its_position_retained() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t", "u"]))]));
    h.read("east", "K1");
    {
        let east = h.e.clusters.get_mut("east").unwrap();
        for (t, p) in [("t", 0), ("u", 0)] {
            east.know(t.to_string(), p);
        }
    }
    h.e.hand_out(vec![split("east", "t", 0, 0), split("east", "u", 0, 0)]);
    let owner_of_t = h.e.readers.owners()[&SplitId::new("east", "t", 0)];
    h.events(0);
    h.events(1);

    h.service
        .replace([stream(vec![("east", meta("east", &["u"]))])])
        .unwrap();
    h.e.refresh_metadata().await;
    let events = h.events(owner_of_t);
    assert!(
        matches!(&events[..], [ReaderEvent::Remove { ids, retain_until_ms: Some(_), confirm: Some(_) }] if ids == &[SplitId::new("east", "t", 0)]),
        "{events:?}"
    );
    assert!(h.events(1 - owner_of_t).is_empty());
    let east = &h.e.clusters[&key("east")];
    assert_eq!(*east.known(), BTreeSet::from([("u".to_string(), 0)]));
    assert_eq!(*east.topics(), BTreeSet::from(["u".to_string()]));
    assert_eq!(
        h.e.readers.owners().keys().cloned().collect::<Vec<_>>(),
        [SplitId::new("east", "u", 0)]
    );
    let applied = &h.e.applied.streams()[STREAM].clusters["east"].topics;
    assert_eq!(applied, &BTreeSet::from(["u".to_string()]));
}

#[tokio::test]
async fn a_closed_readers_splits_go_to_the_others_at_the_positions_it_handed_out() {
    let mut h = Harness::new(
        config(),
        stream(vec![
            ("east", meta("east", &["t"])),
            ("west", meta("west", &["t"])),
        ]),
    );
    h.read("east", "K1");
    h.e.hand_out(vec![split("east", "t", 0, 0), split("east", "t", 1, 0)]);
    let owners = h.e.readers.owners().clone();
    assert_eq!(owners.values().collect::<BTreeSet<_>>().len(), 2);
    h.events(0);
    h.events(1);
    let closed = owners[&SplitId::new("east", "t", 0)];
    let other = 1 - closed;

    // West is not read (any more): its split is dropped.
    h.e.reader_closed(
        closed,
        vec![split("east", "t", 0, 42), split("west", "t", 0, 5)],
    );
    assert_eq!(h.assigned(other), [split("east", "t", 0, 42)]);
    assert!(!h.e.readers.is_live(closed));
    assert!(h.e.readers.owners().values().all(|r| *r == other));
    assert_eq!(h.e.readers.owners().len(), 2);
}
