//! Rebuild hold-back: at most one rebuild of a cluster's clients per `rebuild_interval`, later
//! property changes held back and merged, a metadata read scheduled for when they are due.

use super::*;

/// `views` with a property set on `cluster`.
fn with_property(
    views: &BTreeMap<String, ClusterView>,
    cluster: &str,
    k: &str,
    v: &str,
) -> BTreeMap<String, ClusterView> {
    let mut new = views.clone();
    new.get_mut(cluster).unwrap().properties.set(k, v);
    new
}

#[tokio::test(start_paused = true)]
async fn a_property_change_goes_through_unless_the_cluster_was_rebuilt_within_the_interval() {
    let mut h = Harness::new(
        config(),
        stream(vec![
            ("east", meta("east", &["t"])),
            ("west", meta("west", &["t"])),
        ]),
    );
    h.read("east", "K-east");
    h.read("west", "K-west");

    // Never rebuilt: the change is applied at once.
    let mut new = with_property(h.e.applied.views(), "east", "client.id", "a");
    let mut p = plan(h.e.applied.views(), &new);
    assert!(h.e.hold_back(&mut p, &mut new).is_empty());
    assert!(p.clusters_changed["east"].properties_changed);
    assert_eq!(new["east"].properties.get("client.id"), Some("a"));
    assert_eq!(h.e.applied.held_back_until(), None);

    // Rebuilt 400 ms ago: held back, the old properties kept as applied, a read
    // scheduled for when the interval is up.
    let rebuilt = Instant::now();
    h.e.applied.rebuilt_at(key("east"), rebuilt);
    advance(Duration::from_millis(400)).await;
    let mut new = with_property(h.e.applied.views(), "east", "client.id", "a");
    let mut p = plan(h.e.applied.views(), &new);
    let held = h.e.hold_back(&mut p, &mut new);
    assert_eq!(held, BTreeSet::from(["east".to_string()]));
    assert!(
        p.is_empty(),
        "a property change alone leaves nothing to apply"
    );
    assert_eq!(
        new["east"].properties,
        h.e.applied.views()["east"].properties
    );
    assert_eq!(
        h.e.applied.held_back_until(),
        Some(rebuilt + Duration::from_secs(1))
    );

    // The rest of the cluster's change is applied; only its properties wait.
    let mut new = with_property(h.e.applied.views(), "east", "client.id", "b");
    new.get_mut("east").unwrap().topics.insert("u".to_string());
    let mut p = plan(h.e.applied.views(), &new);
    h.e.hold_back(&mut p, &mut new);
    let change = &p.clusters_changed["east"];
    assert!(!change.properties_changed);
    assert_eq!(change.topics_added, BTreeSet::from(["u".to_string()]));
    assert!(new["east"].topics.contains("u"));
    assert_eq!(new["east"].properties.get("client.id"), None);

    // A cluster rebuilt later does not put the scheduled read off.
    h.e.applied.rebuilt_at(key("west"), Instant::now());
    let mut new = with_property(h.e.applied.views(), "west", "client.id", "w");
    let mut p = plan(h.e.applied.views(), &new);
    assert_eq!(h.e.hold_back(&mut p, &mut new).len(), 1);
    assert_eq!(
        h.e.applied.held_back_until(),
        Some(rebuilt + Duration::from_secs(1))
    );

    // Once the interval is up, the change goes through.
    advance(Duration::from_millis(599)).await;
    let mut new = with_property(h.e.applied.views(), "east", "client.id", "a");
    let mut p = plan(h.e.applied.views(), &new);
    assert_eq!(h.e.hold_back(&mut p, &mut new).len(), 1, "1 ms early");
    advance(Duration::from_millis(1)).await;
    let mut new = with_property(h.e.applied.views(), "east", "client.id", "a");
    let mut p = plan(h.e.applied.views(), &new);
    assert!(h.e.hold_back(&mut p, &mut new).is_empty());
    assert!(p.clusters_changed["east"].properties_changed);
}

#[tokio::test(start_paused = true)]
async fn refused_properties_are_not_tried_again_until_they_change() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K-east");
    let mut refused = with_property(h.e.applied.views(), "east", "client.id", "bad");
    h.e.applied
        .refuse_only(key("east"), refused["east"].clone());

    let mut p = plan(h.e.applied.views(), &refused);
    assert_eq!(h.e.hold_back(&mut p, &mut refused).len(), 1);
    assert!(p.is_empty());
    assert_eq!(
        refused["east"].properties,
        h.e.applied.views()["east"].properties
    );
    assert_eq!(
        h.e.applied.held_back_until(),
        None,
        "no read is scheduled for them"
    );

    let mut other = with_property(h.e.applied.views(), "east", "client.id", "other");
    let mut p = plan(h.e.applied.views(), &other);
    assert!(h.e.hold_back(&mut p, &mut other).is_empty());
    assert!(p.clusters_changed["east"].properties_changed);
}

/// The Rebuild events reader `r` got since last asked, with their `client.id`.
fn rebuilds(h: &mut Harness, r: usize) -> Vec<(Option<String>, Option<String>)> {
    h.events(r)
        .into_iter()
        .filter_map(|ev| match ev {
            ReaderEvent::Rebuild { properties, .. } => Some((
                properties.get("client.id").map(str::to_string),
                properties.get("client.rack").map(str::to_string),
            )),
            _ => None,
        })
        .collect()
}

fn east_with(props: &[(&str, &str)]) -> KafkaStream {
    let m = props
        .iter()
        .fold(
            ClusterMetadata::builder(bootstrap("east")).topic("t"),
            |b, (k, v)| b.property(*k, *v),
        )
        .build()
        .unwrap();
    stream(vec![("east", m)])
}

#[tokio::test(start_paused = true)]
async fn the_first_property_change_is_applied_at_once_and_a_burst_after_it_costs_one_rebuild() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K-east");
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    let owner = if h.assigned(0).is_empty() { 1 } else { 0 };

    // The first change after a quiet interval: rebuilt at once.
    h.service
        .replace([east_with(&[("client.id", "a")])])
        .unwrap();
    h.e.refresh_metadata().await;
    assert_eq!(rebuilds(&mut h, owner), [(Some("a".into()), None)]);
    let rebuilt = h.e.applied.last_rebuild("east");
    assert_eq!(rebuilt, Instant::now());
    assert_eq!(
        h.e.applied.views()["east"].properties.get("client.id"),
        Some("a")
    );

    // Two more within the interval: held back, the old properties stay applied.
    advance(Duration::from_millis(300)).await;
    h.service
        .replace([east_with(&[("client.id", "b")])])
        .unwrap();
    h.e.refresh_metadata().await;
    advance(Duration::from_millis(300)).await;
    h.service
        .replace([east_with(&[("client.id", "b"), ("client.rack", "r1")])])
        .unwrap();
    h.e.refresh_metadata().await;
    assert!(rebuilds(&mut h, owner).is_empty());
    assert_eq!(
        h.e.applied.held_back_until(),
        Some(rebuilt + Duration::from_secs(1))
    );
    assert_eq!(
        h.e.applied.views()["east"].properties.get("client.id"),
        Some("a")
    );
    let applied = &h.e.applied.streams()[STREAM].clusters["east"].properties;
    assert_eq!(applied.get("client.id"), Some("a"));
    assert_eq!(h.e.applied.last_rebuild("east"), rebuilt);

    // When the interval is up, one rebuild with both changes.
    advance(Duration::from_millis(400)).await;
    h.e.applied.clear_held_back(); // as the run loop does before reading again
    h.e.refresh_metadata().await;
    assert_eq!(
        rebuilds(&mut h, owner),
        [(Some("b".into()), Some("r1".into()))]
    );
    assert_eq!(h.e.applied.last_rebuild("east"), Instant::now());
    assert_eq!(
        h.e.applied.views()["east"].properties.get("client.rack"),
        Some("r1")
    );
    assert_eq!(h.e.applied.held_back_until(), None);
    assert!(
        rebuilds(&mut h, 1 - owner).is_empty(),
        "only the owner rebuilds"
    );
}

#[tokio::test(start_paused = true)]
async fn the_run_loop_reads_the_metadata_again_when_a_held_back_change_is_due() {
    let mut h = Harness::new(config(), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K-east");
    h.e.hand_out(vec![split("east", "t", 0, 0)]);
    let owner = if h.assigned(0).is_empty() { 1 } else { 0 };
    let start = Instant::now();
    h.e.applied.rebuilt_at(key("east"), start);
    h.service
        .replace([east_with(&[("client.id", "a")])])
        .unwrap();
    h.e.refresh_metadata().await;
    assert_eq!(
        h.e.applied.held_back_until(),
        Some(start + Duration::from_secs(1))
    );

    let mut rx = std::mem::replace(&mut h.readers[owner], mpsc::unbounded_channel().1);
    let notices = h.notices.take();
    let run = tokio::spawn(h.e.run());
    tokio::time::sleep(Duration::from_millis(990)).await;
    assert!(rx.try_recv().is_err(), "nothing before the interval is up");
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The loop ends once the notices close, after what it was doing.
    drop(notices);
    run.await.unwrap();
    let mut got = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        got.push(ev);
    }
    assert!(
        matches!(&got[..], [ReaderEvent::Rebuild { properties, .. }] if properties.get("client.id") == Some("a")),
        "{got:?}"
    );
}
