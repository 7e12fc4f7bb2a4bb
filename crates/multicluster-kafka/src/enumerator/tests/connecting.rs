//! The per-cluster connect states: pending, retried with backoff, refused, read.

use super::*;

/// A harness with `east` in the metadata, pending with an attempt running.
fn connecting() -> Harness {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    let view = clusters_of_streams(h.e.applied.latest().values())["east"].clone();
    let tried = WantedCluster::new(&h.e.cfg, &view).props;
    h.e.connecting.attempt_as_if(key("east"), view, tried);
    h
}

fn no_answer() -> Connected {
    Connected::NoAnswer(err("east", "no answer"))
}

#[tokio::test(start_paused = true)]
async fn a_cluster_that_does_not_answer_is_tried_again_after_one_second_doubling_to_thirty() {
    let mut h = connecting();
    let mut waits = Vec::new();
    for round in 1..=7 {
        assert!(!h.e.connected(key("east"), no_answer(), |_| false).unwrap());
        let p = h.pending("east");
        assert!(!p.in_flight());
        assert_eq!(p.failures(), round);
        let at = p.retry_at().expect("a retry is scheduled");
        assert_eq!(h.e.next_retry(), Some(at));
        let wait = at - Instant::now();
        waits.push(wait.as_secs());

        // Not before it is due.
        advance(wait - Duration::from_millis(1)).await;
        h.e.retry_due();
        assert!(!h.pending("east").in_flight(), "round {round}: early");
        advance(Duration::from_millis(1)).await;
        if round == 1 {
            // Due: a new attempt starts (to an address where nothing listens).
            h.e.retry_due();
            let p = h.pending("east");
            assert!(p.in_flight() && p.retry_at().is_none());
            assert_eq!(h.e.next_retry(), None);
        } else {
            h.e.connecting.set_in_flight("east");
        }
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
    assert!(h.e.clusters.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_refused_client_is_tried_again_only_when_the_cluster_metadata_changes() {
    let mut h = connecting();
    let refused = Connected::Refused(err("east", "bad property"));
    assert!(!h.e.connected(key("east"), refused, |_| false).unwrap());
    let p = h.pending("east");
    assert!(!p.in_flight() && p.retry_at().is_none());
    assert_eq!(h.e.next_retry(), None);

    advance(Duration::from_secs(3600)).await;
    h.e.retry_due();
    let view = h.pending("east").view().clone();
    h.e.want_cluster(key("east"), view.clone());
    assert!(!h.pending("east").in_flight(), "same metadata: not tried");

    let mut changed = view;
    changed.topics.insert("u".to_string());
    h.e.want_cluster(key("east"), changed.clone());
    let p = h.pending("east");
    assert!(p.in_flight(), "new metadata: tried at once");
    assert_eq!(p.view(), &changed);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_client_fails_a_start_that_waits_for_all_else_is_retried_with_backoff() {
    let rejected = || Connected::Rejected(err("east", "SASL authentication failed"));
    let fatal = |c: &Connected| matches!(c, Connected::Rejected(_));

    let mut h = connecting();
    assert!(h.e.connected(key("east"), rejected(), fatal).is_err());
    assert!(h.e.clusters.is_empty());

    let mut h = connecting();
    assert!(!h.e.connected(key("east"), rejected(), |_| false).unwrap());
    assert_eq!(
        h.pending("east").retry_at(),
        Some(Instant::now() + Duration::from_secs(1))
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_cluster_is_said_once_per_distinct_error() {
    let mut h = connecting();
    let warnings = Warnings::default();
    let _guard = warnings.capture();
    for message in [
        "timed out",
        "timed out",
        "connection refused",
        "connection refused",
    ] {
        h.e.connecting.set_in_flight("east");
        let failed = Connected::NoAnswer(err("east", message));
        h.e.connected(key("east"), failed, |_| false).unwrap();
    }
    assert_eq!(warnings.count(), 2, "{:?}", warnings.said());
    assert_eq!(
        h.e.connecting.said_unreachable("east"),
        Some("cluster `east`: connection refused")
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_makes_the_cluster_read_and_tells_every_reader_its_cluster_id() {
    let mut h = connecting();
    h.e.connected(key("east"), no_answer(), |_| false).unwrap();
    h.e.connecting.set_in_flight("east");

    let answered = Connected::Answered(idle_client("east"), "K1".to_string());
    assert!(h.e.connected(key("east"), answered, |_| false).unwrap());
    assert!(h.e.connecting.is_empty());
    let east = &h.e.clusters[&key("east")];
    assert_eq!(east.kafka_cluster_id().as_deref(), Some("K1"));
    assert!(!east.initial_discovery_done());
    assert_eq!(*east.topics(), BTreeSet::from(["t".to_string()]));
    assert!(h.e.applied.views().contains_key("east"));
    for r in 0..2 {
        let events = h.events(r);
        assert!(
            matches!(&events[..], [ReaderEvent::ClusterInfo { cluster, kafka_cluster_id: Some(id), initial_discovery_done: false }] if &**cluster == "east" && id == "K1"),
            "reader {r}: {events:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_of_a_cluster_that_left_the_metadata_is_dropped() {
    let mut h = connecting();
    h.e.connecting.say_unreachable(key("east"), "earlier");
    h.e.unwant_clusters(|_| false);
    assert!(h.e.connecting.is_empty());

    let answered = Connected::Answered(idle_client("east"), "K1".to_string());
    assert!(!h.e.connected(key("east"), answered, |_| false).unwrap());
    assert!(h.e.clusters.is_empty() && h.e.applied.views().is_empty());
    assert!(h.events(0).is_empty());
    assert!(!h.e.connected(key("east"), no_answer(), |_| false).unwrap());
    assert!(h.e.connecting.is_empty(), "no retry for it either");
}

#[tokio::test(start_paused = true)]
async fn properties_changed_during_an_attempt_are_tried_at_once_whatever_it_answers() {
    let answers: [fn() -> Connected; 3] = [
        || Connected::Refused(err("east", "bad property")),
        || Connected::Answered(idle_client("east"), "K1".to_string()),
        no_answer,
    ];
    for answer in answers {
        let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
        let view = clusters_of_streams(h.e.applied.latest().values())["east"].clone();
        h.e.want_cluster(key("east"), view.clone());
        assert!(h.pending("east").in_flight());
        // The metadata changes the cluster's properties while the attempt runs.
        let mut fixed = view;
        fixed.properties.set("client.id", "fixed");
        h.e.want_cluster(key("east"), fixed.clone());

        // The answer to the old properties: neither read nor waited on.
        assert!(!h.e.connected(key("east"), answer(), |_| false).unwrap());
        assert!(h.e.clusters.is_empty(), "read with the old properties");
        let p = h.pending("east");
        assert!(p.in_flight(), "the new properties are tried at once");
        assert_eq!(p.view(), &fixed);
        assert_eq!(p.failures(), 0);
    }
}
