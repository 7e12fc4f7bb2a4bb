//! Removals in flight: splits added back before their reader confirmed, and removed
//! clusters waiting for their last commit.

use super::*;

/// A harness reading east (Kafka cluster.id `K1`), with east/t/0 handed out; and the
/// reader that owns it.
fn reading_east(cfg: SourceConfig) -> (Harness, usize) {
    let mut h = Harness::new(
        cfg,
        stream(vec![
            ("east", meta("east", &["t"])),
            ("west", meta("west", &["t"])),
        ]),
    );
    h.read("east", "K1");
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    let owner = if h.assigned(0).is_empty() { 1 } else { 0 };
    (h, owner)
}

/// Removes east/t/0 (its topic left) and returns the confirmation its reader got.
fn remove_t0(h: &mut Harness, owner: usize) -> tokio::sync::oneshot::Sender<Vec<KafkaSplit>> {
    h.e.remove_splits(|id| &*id.topic == "t", true);
    let events = h.events(owner);
    match <[ReaderEvent; 1]>::try_from(events) {
        Ok(
            [
                ReaderEvent::Remove {
                    ids,
                    retain_until_ms: Some(_),
                    confirm: Some(confirm),
                },
            ],
        ) if ids == [SplitId::new("east", "t", 0)] => confirm,
        other => panic!("{other:?}"),
    }
}

/// Waits for the next confirmation and records it, as the run loop does.
async fn take_confirmation(h: &mut Harness) {
    let (ids, handed_out) = h.e.removals.next_confirmation().await.unwrap();
    h.e.removal_confirmed(ids, handed_out);
}

#[tokio::test]
async fn a_split_added_back_before_its_reader_confirmed_waits_then_resumes_where_it_was() {
    let (mut h, owner) = reading_east(config());
    let confirm = remove_t0(&mut h, owner);
    assert!(h.e.readers.owners().is_empty());
    assert!(h.e.removals.waiting());

    // Added back (discovered again at its starting offset) before the confirmation.
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    assert!(h.assigned(0).is_empty() && h.assigned(1).is_empty());

    // The reader retains the position it handed out, then confirms.
    h.retained
        .keep(&split("east", "t", 0, 42), far(), Some("K1".into()));
    confirm.send(vec![split("east", "t", 0, 42)]).unwrap();
    take_confirmation(&mut h).await;
    let mut handed = h.assigned(0);
    handed.extend(h.assigned(1));
    assert_eq!(handed, [split("east", "t", 0, 42)]);
    assert!(h.retained.live().is_empty(), "the position was taken back");
}

#[tokio::test]
async fn a_split_added_back_does_not_resume_a_position_of_another_kafka_cluster() {
    let (mut h, owner) = reading_east(config());
    let confirm = remove_t0(&mut h, owner);
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    h.retained
        .keep(&split("east", "t", 0, 42), far(), Some("K0".into()));
    confirm.send(vec![split("east", "t", 0, 42)]).unwrap();
    take_confirmation(&mut h).await;
    let mut handed = h.assigned(0);
    handed.extend(h.assigned(1));
    assert_eq!(handed, [split("east", "t", 0, 0)]);
}

#[tokio::test]
async fn a_split_removed_again_while_it_waited_is_not_handed_out() {
    let (mut h, owner) = reading_east(config());
    let confirm = remove_t0(&mut h, owner);
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    h.e.remove_splits(|id| &*id.topic == "t", true);
    confirm.send(vec![split("east", "t", 0, 42)]).unwrap();
    take_confirmation(&mut h).await;
    assert!(h.events(0).is_empty() && h.events(1).is_empty());
    assert!(h.e.readers.owners().is_empty());
}

#[tokio::test]
async fn a_reader_gone_before_confirming_lets_the_waiting_split_go() {
    let (mut h, owner) = reading_east(config());
    let confirm = remove_t0(&mut h, owner);
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    drop(confirm);
    take_confirmation(&mut h).await;
    let mut handed = h.assigned(0);
    handed.extend(h.assigned(1));
    assert_eq!(handed, [split("east", "t", 0, 0)]);
}

#[tokio::test(start_paused = true)]
async fn a_removed_cluster_keeps_its_client_until_committed_or_thirty_seconds_passed() {
    let mut cfg = config();
    cfg.group_id = Some("g".to_string());
    let (mut h, owner) = reading_east(cfg);
    h.read("west", "K-west");

    h.service
        .replace([stream(vec![("west", meta("west", &["t"]))])])
        .unwrap();
    h.e.refresh_metadata().await;
    let events = h.events(owner);
    let confirm = match <[ReaderEvent; 2]>::try_from(events) {
        Ok(
            [
                ReaderEvent::Remove {
                    confirm: Some(c), ..
                },
                ReaderEvent::ForgetCluster { cluster },
            ],
        ) if &*cluster == "east" => c,
        other => panic!("{other:?}"),
    };
    assert!(!h.e.clusters.contains_key("east") && !h.e.applied.views().contains_key("east"));
    let removed_at = Instant::now();
    assert_eq!(
        h.e.removals.next_close(),
        Some(removed_at + Duration::from_secs(30))
    );
    assert!(!h.e.confirmed("east"));

    confirm.send(vec![split("east", "t", 0, 42)]).unwrap();
    take_confirmation(&mut h).await;
    assert!(h.e.confirmed("east"));
    assert_eq!(
        *h.e.removals.leaving_positions("east").unwrap(),
        BTreeMap::from([(("t".to_string(), 0), 42)])
    );

    advance(Duration::from_millis(29_999)).await;
    h.e.close_overdue();
    assert!(h.e.removals.is_leaving("east"), "not yet");
    advance(Duration::from_millis(1)).await;
    h.e.close_overdue();
    assert!(h.e.removals.none_leaving());
    assert_eq!(h.e.removals.next_close(), None);
}

#[tokio::test]
async fn a_removed_cluster_is_closed_at_once_without_a_group_and_at_the_next_commit_with_one() {
    let (mut h, _) = reading_east(config());
    let state = h.e.clusters.remove("east").unwrap();
    h.e.leave(key("east"), state);
    assert!(h.e.removals.none_leaving());

    let mut cfg = config();
    cfg.group_id = Some("g".to_string());
    let (mut h, owner) = reading_east(cfg);
    let confirm = remove_t0(&mut h, owner);
    let state = h.e.clusters.remove("east").unwrap();
    h.e.leave(key("east"), state);
    // Not confirmed yet: a commit leaves it waiting.
    drop(h.e.commit(&Checkpoint::default()));
    assert!(h.e.removals.is_leaving("east"));
    confirm.send(vec![split("east", "t", 0, 42)]).unwrap();
    take_confirmation(&mut h).await;
    drop(h.e.commit(&Checkpoint::default()));
    assert!(h.e.removals.none_leaving());
}
