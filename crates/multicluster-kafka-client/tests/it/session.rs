//! Fetch sessions (KIP-227) of the native path against a real broker (the test kit's
//! Kafka 4.1): after a full fetch only what changed is asked for and answered,
//! partitions no longer wanted are forgotten, and a session the broker no longer
//! knows starts again without an error, by topic id and by name.

use std::time::Duration;

use mck_testkit::{TestCluster, TestRecord, shared_cluster};
use multicluster_kafka_client::{
    Batches, ConnectOptions, Connection, FetchResponseData, FetchSession, FetchSettings, FetchWant,
    Uuid,
};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

fn broker() -> (&'static mck_testkit::KafkaCluster, String) {
    let c = shared_cluster("native").unwrap_or_else(|e| panic!("cluster starts: {e:?}"));
    let first = c.bootstrap_servers().split(',').next().unwrap().to_string();
    (c, first)
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(PATIENCE, f)
            .await
            .expect("done within the patience")
    })
}

fn records(partition: i32, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::value(format!("p{partition}-{i}")).to_partition(partition))
        .collect()
}

/// Short waits: a fetch with nothing new answers after 100 ms.
fn settings() -> FetchSettings {
    FetchSettings {
        max_wait_ms: 100,
        ..FetchSettings::default()
    }
}

fn wants<'a>(topic: &'a str, id: Uuid, offsets: &[(i32, i64)]) -> Vec<FetchWant<'a>> {
    offsets
        .iter()
        .map(|(partition, offset)| FetchWant {
            topic,
            topic_id: id,
            partition: *partition,
            offset: *offset,
            leader_epoch: -1,
            max_bytes: 1 << 20,
            last_fetched_epoch: -1,
        })
        .collect()
}

/// The partitions an answer names, with the offset after their last record.
fn answered(response: &FetchResponseData) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}: {p:?}", p.partition);
            let end = Batches::new(&p.records)
                .map(|b| b.unwrap().next_offset())
                .max()
                .unwrap_or(-1);
            (p.partition, end)
        })
        .collect();
    out.sort_unstable();
    out
}

async fn topic_id(conn: &mut Connection, topic: &str) -> Uuid {
    let md = conn.metadata(Some(&[topic])).await.unwrap();
    md.topics[0].topic_id
}

/// By topic id (Fetch v13+) and by name (v12).
fn for_both_namings(topic: &str, test: impl AsyncFn(&mut Connection, Uuid)) {
    let (c, addr) = broker();
    for by_id in [true, false] {
        let topic = format!("{topic}-{}", if by_id { "id" } else { "name" });
        c.create_topic(&topic, 3).unwrap();
        c.produce(&topic, &records(0, 5)).unwrap();
        run(async {
            let mut conn = Connection::connect(&addr, &ConnectOptions::default())
                .await
                .unwrap();
            let id = if by_id {
                topic_id(&mut conn, &topic).await
            } else {
                Uuid::nil()
            };
            test(&mut conn, id).await;
        });
    }
}

#[test]
fn after_a_full_fetch_only_what_changed_is_asked_for_and_answered() {
    for_both_namings("session-incremental", async |conn, id| {
        let (c, _) = broker();
        let topic = if id.is_nil() {
            "session-incremental-name"
        } else {
            "session-incremental-id"
        };
        let mut session = FetchSession::new();
        let all = wants(topic, id, &[(0, 0), (1, 0), (2, 0)]);
        let (full, by_id) = conn
            .fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(by_id, !id.is_nil());
        // A full answer names every partition; p0 has its 5 records.
        assert_eq!(answered(&full), [(0, 5), (1, -1), (2, -1)]);
        assert_ne!(full.session_id, 0, "the broker opened a session");
        assert_eq!(session.id(), full.session_id);
        assert_eq!(session.epoch(), 1);

        // Nothing new: the incremental answer names no partition.
        let moved = wants(topic, id, &[(0, 5), (1, 0), (2, 0)]);
        let (quiet, _) = conn
            .fetch_in_session(&moved, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&quiet), []);
        assert_eq!(quiet.session_id, session.id());
        assert_eq!(session.incremental_requests(), 1);
        assert_eq!(session.epoch(), 2);

        // Records on p1: only p1 is answered, from the offset the session holds.
        c.produce(topic, &records(1, 3)).unwrap();
        let (news, _) = conn
            .fetch_in_session(&moved, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&news), [(1, 3)]);
        assert_eq!(session.restarts(), 0);
    });
}

#[test]
fn partitions_no_longer_wanted_are_forgotten() {
    for_both_namings("session-forget", async |conn, id| {
        let (c, _) = broker();
        let topic = if id.is_nil() {
            "session-forget-name"
        } else {
            "session-forget-id"
        };
        let mut session = FetchSession::new();
        conn.fetch_in_session(
            &wants(topic, id, &[(0, 5), (1, 0), (2, 0)]),
            &settings(),
            &mut session,
        )
        .await
        .unwrap();
        // p1 is no longer wanted; records then come to p1 and p2.
        let fewer = wants(topic, id, &[(0, 5), (2, 0)]);
        conn.fetch_in_session(&fewer, &settings(), &mut session)
            .await
            .unwrap();
        c.produce(topic, &records(1, 2)).unwrap();
        c.produce(topic, &records(2, 4)).unwrap();
        let (answer, _) = conn
            .fetch_in_session(&fewer, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&answer), [(2, 4)], "p1 was forgotten");
        // Wanted again: p1 is answered from where it is asked for.
        let again = wants(topic, id, &[(0, 5), (1, 1), (2, 4)]);
        let (answer, _) = conn
            .fetch_in_session(&again, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&answer), [(1, 2)]);
        assert_eq!(session.restarts(), 0);
    });
}

#[test]
fn a_session_out_of_step_with_the_broker_starts_again_without_an_error() {
    for_both_namings("session-lost", async |conn, id| {
        let topic = if id.is_nil() {
            "session-lost-name"
        } else {
            "session-lost-id"
        };
        let mut session = FetchSession::new();
        let all = wants(topic, id, &[(0, 0), (1, 0), (2, 0)]);
        conn.fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        let first = session.id();
        assert_ne!(first, 0);

        // An epoch the broker does not expect (INVALID_FETCH_SESSION_EPOCH): the call
        // starts a new session with a full fetch, so every partition is answered.
        session.set_epoch(session.epoch() + 7);
        let (answer, _) = conn
            .fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&answer), [(0, 5), (1, -1), (2, -1)]);
        assert_eq!(session.restarts(), 1);
        assert_ne!(session.id(), 0);
        assert_ne!(session.id(), first, "a new session");
        assert_eq!(session.epoch(), 1);

        // A session id the broker never gave (FETCH_SESSION_ID_NOT_FOUND) likewise.
        let bogus = if session.id() == 12345 { 54321 } else { 12345 };
        session.set_id(bogus);
        let (answer, _) = conn
            .fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&answer), [(0, 5), (1, -1), (2, -1)]);
        assert_eq!(session.restarts(), 2);
        assert_ne!(session.id(), bogus);

        // And the new session goes on incrementally: once p0 is read to its end,
        // nothing is answered.
        let caught_up = wants(topic, id, &[(0, 5), (1, 0), (2, 0)]);
        let (quiet, _) = conn
            .fetch_in_session(&caught_up, &settings(), &mut session)
            .await
            .unwrap();
        assert_eq!(answered(&quiet), []);
        assert_eq!(session.restarts(), 2);
    });
}

/// A session given up on this side (its connection lost, say) is closed on the
/// broker by the next full fetch, on a new connection: the broker no longer knows
/// it, where it would otherwise hold it until its cache evicted it.
#[test]
fn a_session_given_up_is_closed_on_the_broker_by_the_next_full_fetch() {
    let (c, addr) = broker();
    let topic = "session-closed";
    c.create_topic(topic, 1).unwrap();
    c.produce(topic, &records(0, 3)).unwrap();
    run(async {
        let options = ConnectOptions::default();
        let mut conn = Connection::connect(&addr, &options).await.unwrap();
        let id = topic_id(&mut conn, topic).await;
        let all = wants(topic, id, &[(0, 3)]);
        let mut session = FetchSession::new();
        conn.fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        let old = session.id();
        assert_ne!(old, 0, "the broker opened a session");
        // The connection goes; a new one starts a new session.
        drop(conn);
        session.reset();
        assert_eq!(session.to_close(), old);
        let mut conn = Connection::connect(&addr, &options).await.unwrap();
        conn.fetch_in_session(&all, &settings(), &mut session)
            .await
            .unwrap();
        assert_ne!(session.id(), old);
        assert_eq!(session.to_close(), 0, "named once");
        // The old session at its next epoch: the broker has closed it, so an
        // incremental fetch in it is refused and starts a new session. (The probe
        // opens a session of its own first, so it names topics as the old one did.)
        let mut probe = FetchSession::new();
        conn.fetch_in_session(&all, &settings(), &mut probe)
            .await
            .unwrap();
        probe.set_id(old);
        probe.set_epoch(1);
        conn.fetch_in_session(&all, &settings(), &mut probe)
            .await
            .unwrap();
        assert_eq!(probe.restarts(), 1, "the broker still knew session {old}");
    });
}
