//! Shard mode's decisions: a sharded source hands out only its shard's splits, from
//! every path (restore, discovery, retained positions), and a restore under the same
//! shard layout keeps its checkpointed positions without asking the cluster.

use super::*;
use crate::base::shard::Shard;

fn sharded(index: u32, count: u32) -> SourceConfig {
    let mut cfg = config();
    cfg.group_id = Some("g".into());
    cfg.shard = Some(Shard::new(index, count).unwrap());
    cfg
}

#[tokio::test]
async fn only_the_shards_splits_are_handed_out_and_together_the_shards_cover_each_once() {
    let all: Vec<KafkaSplit> = ["east", "west"]
        .iter()
        .flat_map(|c| (0..12).map(move |p| split(c, "t", p, 0)))
        .collect();
    let mut seen: BTreeMap<SplitId, u32> = BTreeMap::new();
    for i in 0..3 {
        let md = stream(vec![
            ("east", meta("east", &["t"])),
            ("west", meta("west", &["t"])),
        ]);
        let mut h = Harness::new(sharded(i, 3), md);
        h.read("east", "K1");
        h.read("west", "K2");
        h.e.hand_out(all.clone());
        let mine: Vec<KafkaSplit> = (0..2).flat_map(|r| h.assigned(r)).collect();
        assert_eq!(mine.len(), 8, "shard {i}/3 gets a third of 24 splits");
        for s in mine {
            assert_eq!(Shard::owner_of(&s.id, 3), i);
            assert!(seen.insert(s.id.clone(), i).is_none(), "{:?} twice", s.id);
        }
    }
    assert_eq!(seen.len(), all.len());
}

#[tokio::test]
async fn retained_positions_of_other_shards_are_not_handed_out() {
    let mut h = Harness::new(sharded(0, 2), stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    for p in 0..4 {
        h.retained.keep(
            &split("east", "t", p, 10 + i64::from(p)),
            far(),
            Some("K1".into()),
        );
    }
    let resumed = h.e.resume_retained();
    h.e.hand_out(resumed);
    let got: Vec<KafkaSplit> = (0..2).flat_map(|r| h.assigned(r)).collect();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|s| Shard::owner_of(&s.id, 2) == 0));
}

#[tokio::test]
async fn a_restore_under_the_same_layout_keeps_the_checkpointed_positions() {
    let shard = Shard::new(1, 2).unwrap();
    let mut cfg = sharded(1, 2);
    let mut cp = Checkpoint::from_splits((0..4).map(|p| split("east", "t", p, 100)));
    cp.shard = Some(shard);
    cfg.restore = Some(cp);
    let mut h = Harness::new(cfg, stream(vec![("east", meta("east", &["t"]))]));
    h.read("east", "K1");
    let restored = h.e.restore().unwrap();
    // The cluster's client points nowhere: a lookup here would fail the call.
    let kept = h.e.resharded(restored.clone()).await.unwrap();
    assert_eq!(kept, restored);
}
