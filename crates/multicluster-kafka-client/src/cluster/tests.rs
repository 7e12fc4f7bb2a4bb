use super::*;
use mck_testkit::TestCluster;

/// Options to fetch `cluster` from the broker of `kafka`.
fn options_for(kafka: &dyn TestCluster, cluster: &str, budget: Arc<Budget>) -> ClusterOptions {
    ClusterOptions {
        cluster: Arc::from(cluster),
        bootstrap: vec![kafka.bootstrap_servers()],
        connect: ConnectOptions::default(),
        fetch: FetchSettings::default(),
        partition_max_bytes: 1 << 20,
        budget: 1 << 20,
        shared_budget: budget,
        out_of_range: OutOfRange::Fail,
        lanes: 2,
        errors: Listener::default(),
    }
}

/// Partitions of every arrival `fetch` has now, after waiting up to 30 s for one.
fn arrived(fetch: &ClusterFetch) -> Vec<i32> {
    let patience = std::time::Instant::now();
    let mut partitions = Vec::new();
    while partitions.is_empty() && patience.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        while let Some(arrival) = fetch.take() {
            if let Arrival::Records { key, .. } = arrival {
                partitions.push(key.1);
            }
        }
    }
    partitions.sort_unstable();
    partitions.dedup();
    partitions
}

/// Two readers joining a cluster share one fetch, on two connections to its
/// broker; each gets only its own partitions' answers; a partition moved to the other reader is answered to
/// it, and the first can no longer remove it; the fetch ends with its last reader.
#[test]
fn readers_of_a_cluster_share_one_fetch_and_get_their_own_answers() {
    let kafka = mck_testkit::shared_cluster("native-budget")
        .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
    let topic: Arc<str> = Arc::from("share-readers");
    kafka.create_topic(&topic, 3).unwrap();
    mck_testkit::fill_values(kafka, &topic, 3, 10, "v");
    let rt = mck_testkit::runtime();
    let fetches = ClusterFetches::default();
    let budget = Arc::new(Budget::default());
    let join = || {
        fetches.join(
            rt.handle(),
            vec![("bootstrap.servers".into(), kafka.bootstrap_servers())],
            options_for(kafka, "c", budget.clone()),
            Box::new(|| {}),
        )
    };
    let one = join();
    let two = join();
    assert_eq!(fetches.running(), 1, "the two readers share one fetch");
    one.add((topic.clone(), 0), 0, None);
    two.add((topic.clone(), 1), 0, None);
    two.add((topic.clone(), 2), 0, None);
    assert_eq!(arrived(&one), vec![0]);
    assert_eq!(arrived(&two), vec![1, 2]);
    // The broker's three partitions are fetched on two connections (lanes).
    let mut lanes: Vec<usize> = one.shared().state().fetching.iter().map(|f| f.1).collect();
    lanes.sort_unstable();
    assert_eq!(lanes, vec![0, 1], "a fetch in flight per lane");
    // Partition 0 moves to the second reader, which reads it again from 0; the
    // first reader's late removal leaves it alone.
    two.add((topic.clone(), 0), 0, None);
    one.remove(&[(topic.clone(), 0)]);
    assert_eq!(arrived(&two), vec![0]);
    assert!(
        one.take().is_none(),
        "an answer went to the reader it moved from"
    );
    // Other properties: a fetch of their own.
    let other = fetches.join(
        rt.handle(),
        Vec::new(),
        options_for(kafka, "c", budget.clone()),
        Box::new(|| {}),
    );
    assert_eq!(fetches.running(), 2);
    drop(other);
    drop(one);
    assert_eq!(fetches.running(), 1, "the second reader still fetches");
    two.seek(&(topic.clone(), 1), 0);
    assert_eq!(arrived(&two), vec![1]);
    drop(two);
    assert_eq!(fetches.running(), 0);
    assert_eq!(budget.used(), 0, "what was queued left the budget");
}

/// A partition fetched up to its stop is not fetched again: a fetch of it would
/// wait out `fetch.wait.max.ms` at the log's end, and a partition resumed
/// meanwhile on the same connection would wait with it.
#[test]
fn a_partition_at_its_stop_does_not_hold_back_one_resumed_beside_it() {
    let kafka = mck_testkit::shared_cluster("native-budget")
        .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
    let topic: Arc<str> = Arc::from("stop-resume");
    kafka.create_topic(&topic, 2).unwrap();
    mck_testkit::fill_values(kafka, &topic, 2, 10, "v");
    let rt = mck_testkit::runtime();
    let fetches = ClusterFetches::default();
    let mut options = options_for(kafka, "c", Arc::new(Budget::default()));
    // One connection, and a long wait at the log's end.
    options.lanes = 1;
    options.fetch.max_wait_ms = 5_000;
    let fetch = fetches.join(
        rt.handle(),
        vec![("bootstrap.servers".into(), kafka.bootstrap_servers())],
        options,
        Box::new(|| {}),
    );
    let (p0, p1) = ((topic.clone(), 0), (topic.clone(), 1));
    fetch.add(p1.clone(), 0, None);
    fetch.pause(std::slice::from_ref(&p1), true);
    // Ten records a partition: partition 0's log ends at 10, its stop.
    fetch.add(p0.clone(), 0, None);
    fetch.stop_at(&p0, 10);
    assert_eq!(arrived(&fetch), vec![0]);
    // Partition 0 is at its stop; partition 1 resumes and comes at once, not
    // after a fetch of partition 0 waited 5 s at the log's end.
    std::thread::sleep(Duration::from_millis(300));
    let resumed = std::time::Instant::now();
    fetch.pause(std::slice::from_ref(&p1), false);
    assert_eq!(arrived(&fetch), vec![1]);
    assert!(
        resumed.elapsed() < Duration::from_secs(2),
        "partition 1 waited {:?}",
        resumed.elapsed()
    );
}

/// Four fetches (of four topics of a real broker: as four clusters would be)
/// with a backlog each, sharing one budget and never taken from: together they
/// stop near the budget (each may still queue one answer), where budgets of
/// their own would each fill theirs.
#[test]
fn clusters_sharing_a_budget_stop_at_it_together() {
    const BUDGET: usize = 64 * 1024;
    const ANSWER: i32 = 16 * 1024;
    let kafka = mck_testkit::shared_cluster("native-budget")
        .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
    let topics: Vec<String> = (0..4).map(|i| format!("budget{i}")).collect();
    // Batches of 10 KiB: a broker answers at least one whole batch.
    let producer: rdkafka::producer::BaseProducer = kafka
        .client_config()
        .set("batch.size", "10240")
        .create()
        .unwrap();
    let value = vec![b'x'; 1024];
    for t in &topics {
        kafka.create_topic(t, 1).unwrap();
        for _ in 0..500 {
            let record = rdkafka::producer::BaseRecord::<(), [u8]>::to(t).payload(&value);
            producer.send(record).map_err(|(e, _)| e).unwrap();
        }
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(60)).unwrap();
    let rt = mck_testkit::runtime();
    let shared_budget = Arc::new(Budget::default());
    let fetches: Vec<ClusterFetch> = topics
        .iter()
        .map(|topic| {
            let options = ClusterOptions {
                cluster: Arc::from(topic.as_str()),
                bootstrap: vec![kafka.bootstrap_servers()],
                connect: ConnectOptions::default(),
                fetch: FetchSettings {
                    max_bytes: ANSWER,
                    ..FetchSettings::default()
                },
                partition_max_bytes: ANSWER,
                budget: BUDGET,
                shared_budget: shared_budget.clone(),
                out_of_range: OutOfRange::Fail,
                lanes: 1,
                errors: Listener::default(),
            };
            let fetch = ClusterFetch::start(rt.handle(), options, Box::new(|| {}));
            fetch.add((Arc::from(topic.as_str()), 0), 0, None);
            fetch
        })
        .collect();
    // Until the queued bytes stay put for a second (a guard against hangs, not
    // a timing assertion).
    let patience = std::time::Instant::now();
    let mut last = (usize::MAX, std::time::Instant::now());
    loop {
        let used = shared_budget.used();
        if used != last.0 {
            last = (used, std::time::Instant::now());
        } else if used > 0 && last.1.elapsed() > Duration::from_secs(1) {
            break;
        }
        assert!(
            patience.elapsed() < Duration::from_secs(60),
            "still fetching: {used}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let used = shared_budget.used();
    assert!(used >= BUDGET, "stopped below the budget: {used}");
    // Budgets of their own: at least 4 × BUDGET.
    assert!(
        used <= BUDGET + topics.len() * 2 * ANSWER as usize,
        "{used} bytes queued, over the budget and an answer per cluster"
    );
    // Every cluster got its answers, and taking them gives the bytes back. Taking
    // frees the budget, so the fetches are paused first; an answer still on its
    // way (a fetch that started late on a busy machine) is taken in a second
    // round, once the queued bytes stay put again.
    let mut taken = 0;
    let mut fed = vec![false; fetches.len()];
    for (fetch, topic) in fetches.iter().zip(&topics) {
        fetch.pause(&[(Arc::from(topic.as_str()), 0)], true);
    }
    for round in 0..2 {
        if round > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        for (fetch, fed) in fetches.iter().zip(fed.iter_mut()) {
            while let Some(arrival) = fetch.take() {
                if let Arrival::Records { answer, .. } = arrival {
                    taken += answer.records.len();
                    *fed = true;
                }
            }
        }
    }
    assert!(fed.iter().all(|f| *f), "a cluster was starved: {fed:?}");
    assert!(taken >= used, "taken {taken} of the {used} queued");
    assert_eq!(shared_budget.used(), 0, "what was taken left the budget");
    drop(fetches);
}

/// Answers queued for an assignment the reader has since moved (sought here;
/// removed or added again alike) are dropped by `take`, and leave the budget: the
/// fetch thread only ever gets answers of its partitions as it reads them now.
#[test]
fn answers_of_an_assignment_moved_since_are_dropped_when_taken() {
    let kafka = mck_testkit::shared_cluster("native-budget")
        .unwrap_or_else(|e| panic!("the cluster starts: {e:?}"));
    let topic: Arc<str> = Arc::from("stale-take");
    kafka.create_topic(&topic, 1).unwrap();
    mck_testkit::fill_values(kafka, &topic, 1, 10, "v");
    let rt = mck_testkit::runtime();
    let fetches = ClusterFetches::default();
    let budget = Arc::new(Budget::default());
    let fetch = fetches.join(
        rt.handle(),
        vec![("bootstrap.servers".into(), kafka.bootstrap_servers())],
        options_for(kafka, "c", budget.clone()),
        Box::new(|| {}),
    );
    let key = (topic.clone(), 0);
    let first = fetch.add(key.clone(), 0, None);
    let patience = std::time::Instant::now();
    while fetch.shared().state().buffered == 0 {
        assert!(
            patience.elapsed() < Duration::from_secs(30),
            "no answer was queued"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = fetch.seek(&key, 5);
    assert_ne!(first, second);
    let mut taken = 0;
    let patience = std::time::Instant::now();
    while taken == 0 && patience.elapsed() < Duration::from_secs(30) {
        while let Some(arrival) = fetch.take() {
            assert_eq!(
                arrival.assignment().1,
                second,
                "an answer of the assignment before the seek was taken"
            );
            taken += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(taken > 0, "no answer came after the seek");
    drop(fetch);
    assert_eq!(budget.used(), 0, "what was dropped left the budget");
}
