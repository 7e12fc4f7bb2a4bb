//! Group mode's revocations: what is committed when a cluster's group takes
//! partitions back, as the coordinator moves them between instances.

use super::*;
use crate::base::offsets::PartitionFacts;
use crate::kafka::group_member::MemberEvent;
use std::sync::mpsc as std_mpsc;

const T0: (&str, i32) = ("t", 0);

fn t0() -> SplitId {
    SplitId::new("east", "t", 0)
}

/// A group-mode harness reading east (topic `t`).
fn in_group() -> Harness {
    let mut cfg = config();
    cfg.group_mode = true;
    cfg.group_id = Some("g".into());
    let mut h = Harness::new(cfg, stream(vec![("east", meta("east", &["t"]))]));
    h.e.group = Some(group::GroupState::new(Default::default()));
    h.read("east", "K1");
    h
}

/// The coordinator gives east/t/0 to this instance and its lookup finds `committed`.
fn assign(h: &mut Harness, committed: i64) {
    let no = h.e.group.as_mut().unwrap().expect_lookup(&t0());
    let facts = PartitionFacts {
        earliest: 0,
        latest: 1_000,
        committed: Some(committed),
        at_timestamp: None,
    };
    h.e.assigned((
        no,
        key("east"),
        vec![(T0.0.to_string(), T0.1)],
        Ok(BTreeMap::from([((T0.0.to_string(), T0.1), facts)])),
    ));
}

/// [`assign`]; returns the reader it was handed to, at its committed offset.
fn given(h: &mut Harness, committed: i64) -> usize {
    assign(h, committed);
    (0..h.readers.len())
        .find(|r| {
            h.assigned(*r)
                .iter()
                .any(|s| s.id == t0() && s.next_offset == committed)
        })
        .expect("the partition is handed out at its committed offset")
}

/// The coordinator gives east/t/0 to this instance again with `committed` still
/// behind where it was handed out here (`from`): it is handed out from there.
fn given_from(h: &mut Harness, committed: i64, from: i64) {
    assign(h, committed);
    let handed: Vec<KafkaSplit> = (0..h.readers.len()).flat_map(|r| h.assigned(r)).collect();
    assert_eq!(handed, vec![split("east", "t", 0, from)]);
}

/// The program's checkpoint with east/t/0 at `at`.
fn checkpoint_at(at: i64) -> Checkpoint {
    let mut cp = Checkpoint::default();
    cp.clusters.insert(
        "east".into(),
        ClusterCheckpoint {
            splits: vec![SplitCheckpoint {
                topic: T0.0.into(),
                partition: T0.1,
                next_offset: at,
                retained_until_ms: None,
                last: None,
            }],
            ..Default::default()
        },
    );
    cp
}

/// The coordinator takes east/t/0 back; its reader (if it has it) says it let it go
/// at `released_at`. Returns where the revocation's answer comes.
async fn taken_back(
    h: &mut Harness,
    reader: Option<usize>,
    released_at: i64,
) -> std_mpsc::Receiver<Vec<(String, i32, i64)>> {
    revoked(h, reader, released_at, false).await
}

/// [`taken_back`], or lost (the coordinator fenced the member) with `lost`.
async fn revoked(
    h: &mut Harness,
    reader: Option<usize>,
    released_at: i64,
    lost: bool,
) -> std_mpsc::Receiver<Vec<(String, i32, i64)>> {
    let (reply, answer) = std_mpsc::channel();
    h.e.member_event(MemberEvent::Revoking {
        cluster: key("east"),
        partitions: vec![(T0.0.to_string(), T0.1)],
        reply,
        lost,
    })
    .await;
    if let Some(r) = reader {
        for ev in h.events(r) {
            if let ReaderEvent::Remove {
                confirm: Some(confirm),
                ..
            } = ev
            {
                let _ = confirm.send(vec![split("east", "t", 0, released_at)]);
            }
        }
    }
    answer
}

#[tokio::test(start_paused = true)]
async fn a_revocation_commits_where_the_program_acknowledged() {
    let mut h = in_group();
    let r = given(&mut h, 100);
    let answer = taken_back(&mut h, Some(r), 150).await;
    h.e.revocations_due();
    assert!(answer.try_recv().is_err(), "waits for the acknowledgement");
    h.e.acknowledged(&checkpoint_at(150));
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 150)]);
}

/// The enumerator answers a revocation when its reader confirms, not on a timer:
/// the group wakes for the confirmation, with no time passing (the clock is paused
/// and only moves when every task waits on it), and the program is asked at once.
#[tokio::test(start_paused = true)]
async fn a_reader_s_confirmation_wakes_the_group_and_the_program_is_asked_at_once() {
    let mut h = in_group();
    let asks = h.e.group.as_ref().unwrap().ack_requests();
    let r = given(&mut h, 100);
    let (reply, answer) = std_mpsc::channel();
    h.e.member_event(MemberEvent::Revoking {
        cluster: key("east"),
        partitions: vec![(T0.0.to_string(), T0.1)],
        reply,
        lost: false,
    })
    .await;
    let start = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(1), asks.asked())
        .await
        .expect("the program is asked to acknowledge");
    let confirm = h
        .events(r)
        .into_iter()
        .find_map(|ev| match ev {
            ReaderEvent::Remove {
                confirm: Some(confirm),
                ..
            } => Some(confirm),
            _ => None,
        })
        .expect("the reader is asked to let the partition go");
    let group = h.e.group.as_mut().unwrap();
    assert!(group.revoking());
    let woke = tokio::spawn(async move {
        let _ = confirm.send(vec![split("east", "t", 0, 150)]);
    });
    let next = tokio::time::timeout(Duration::from_secs(1), group.next())
        .await
        .expect("woken by the confirmation");
    assert!(matches!(next, Some(group::Woke::Confirmed)));
    assert_eq!(start.elapsed(), Duration::ZERO, "no timer waited out");
    woke.await.unwrap();
    h.e.acknowledged(&checkpoint_at(150));
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 150)]);
}

/// A checkpoint taken while the partition was still here, acknowledged after the
/// revocation ended, must not speak for the partition when it comes back: it would
/// commit a position behind what the next owner committed meanwhile, and the owner
/// after that would read those records again.
#[tokio::test(start_paused = true)]
async fn an_acknowledgement_from_an_earlier_ownership_is_never_committed() {
    let mut h = in_group();
    let r = given(&mut h, 100);
    let answer = taken_back(&mut h, Some(r), 150).await;
    h.e.acknowledged(&checkpoint_at(150));
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 150)]);
    // An older checkpoint's commit, asked before the revocation, lands after it.
    h.e.acknowledged(&checkpoint_at(120));

    // Another instance read on to 300 and committed; the partition comes back and
    // is taken again before this instance hands out anything of it.
    let r = given(&mut h, 300);
    let answer = taken_back(&mut h, Some(r), 300).await;
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 300)]);

    // Taken back while its start is still being looked up: nothing is committed.
    h.e.acknowledged(&checkpoint_at(120));
    h.e.group.as_mut().unwrap().expect_lookup(&t0());
    let answer = taken_back(&mut h, None, 0).await;
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![]);
}

/// The program's commit of a checkpoint taken before the partition came back holds
/// an older position of it: that is not committed under the new ownership.
#[tokio::test(start_paused = true)]
async fn a_checkpoint_commit_never_moves_a_held_partition_back() {
    let mut h = in_group();
    given(&mut h, 300);
    let group = h.e.group.as_ref().unwrap();
    assert_eq!(group.committable(&t0(), 120), None);
    assert_eq!(group.committable(&t0(), 300), Some(300));
    assert_eq!(group.committable(&t0(), 340), Some(340));
    assert_eq!(
        group.committable(&SplitId::new("east", "t", 1), 340),
        None,
        "not held"
    );
}

/// Splits a metadata change removes are kept in checkpoints until the group's
/// revocation can see them acknowledged, even with retention off: else the program
/// could never acknowledge them, the revocation would wait its whole time and commit
/// an older position.
#[tokio::test(start_paused = true)]
async fn removed_splits_are_kept_for_their_revocation_with_retention_off() {
    let mut h = in_group();
    let mut cfg = (*h.e.cfg).clone();
    cfg.retention = Duration::ZERO;
    h.e.cfg = Arc::new(cfg);
    let r = given(&mut h, 100);
    h.e.remove_splits(|id| *id == t0(), true);
    let kept = h.events(r).into_iter().find_map(|ev| match ev {
        ReaderEvent::Remove {
            retain_until_ms, ..
        } => Some(retain_until_ms),
        _ => None,
    });
    let until = kept.expect("the reader is told").expect("kept");
    assert!(until >= now_ms() + group::ACK_WAIT.as_millis() as i64);
}

/// A fenced member's partitions are already another member's: the revocation waits
/// for the reader's last position only (not for the program, whose commit the
/// coordinator would refuse), commits nothing, and says so; the partition, given back
/// later, starts where it was handed out here, not at the older committed offset.
#[tokio::test(start_paused = true)]
async fn a_lost_partition_is_let_go_at_once_and_read_on_where_it_was_handed_out() {
    let warnings = Warnings::default();
    let _guard = warnings.capture();
    let mut h = in_group();
    let r = given(&mut h, 100);
    let answer = revoked(&mut h, Some(r), 150, true).await;
    let group = h.e.group.as_ref().unwrap();
    assert!(!group.ack_wanted(), "no acknowledgement asked");
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![], "nothing to commit");
    assert!(
        warnings
            .said()
            .iter()
            .any(|w| w.contains("fenced this instance")),
        "{:?}",
        warnings.said()
    );
    given_from(&mut h, 100, 150);
}

/// A topic removed and added back before the group took its partitions back: the
/// split reads on from where the removal let it go; its later revocation waits for
/// what was handed out since, not for the removal's older position.
#[tokio::test(start_paused = true)]
async fn a_split_removed_and_added_back_is_revoked_at_where_it_is_now() {
    let mut h = in_group();
    let r = given(&mut h, 100);
    h.e.remove_splits(|id| *id == t0(), true);
    for ev in h.events(r) {
        if let ReaderEvent::Remove {
            ids,
            confirm: Some(confirm),
            ..
        } = ev
        {
            let _ = confirm.send(vec![split("east", "t", 0, 150)]);
            h.e.removal_confirmed(ids, vec![split("east", "t", 0, 150)]);
        }
    }
    // Added back: handed out again where it was let go.
    h.e.hand_out(vec![split("east", "t", 0, 150)]);
    let r = (0..h.readers.len())
        .find(|r| !h.assigned(*r).is_empty())
        .expect("handed out again");
    // Read on to 200; the program has acknowledged 160 when the group takes it back.
    let answer = taken_back(&mut h, Some(r), 200).await;
    h.e.acknowledged(&checkpoint_at(160));
    h.e.revocations_due();
    assert!(
        answer.try_recv().is_err(),
        "waits for the records up to 200 to be acknowledged"
    );
    h.e.acknowledged(&checkpoint_at(200));
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 200)]);
}

/// The position a reader keeps of a partition taken back is how the program's
/// checkpoints carry it to the revocation (their acknowledgement) and to the group's
/// offsets (their commits). A metadata change, or a cluster answering, while the
/// revocation waits must leave it kept: taken, the program could never acknowledge
/// the partition, nothing would be committed for it, and its next owner would read
/// again what was handed out here.
#[tokio::test(start_paused = true)]
async fn a_revoked_partition_stays_in_checkpoints_through_a_metadata_change() {
    let mut h = in_group();
    let r = given(&mut h, 100);
    let answer = taken_back(&mut h, Some(r), 150).await;
    // The reader keeps where it let the partition go, as it does on a removal.
    let until = now_ms() + 60_000;
    h.e.links
        .retained()
        .keep(&split("east", "t", 0, 150), until, Some("K1".into()));
    assert!(h.e.resume_retained().is_empty(), "not the group's to read");
    let kept: Vec<(SplitId, i64)> =
        h.e.links
            .retained()
            .live()
            .into_iter()
            .map(|(id, r)| (id, r.next_offset))
            .collect();
    assert_eq!(kept, vec![(t0(), 150)]);
    h.e.acknowledged(&checkpoint_at(150));
    h.e.revocations_due();
    assert_eq!(answer.try_recv().unwrap(), vec![("t".into(), 0, 150)]);
}
