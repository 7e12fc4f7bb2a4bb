//! Who reads which split: pure functions over plain data.
//!
//! Two strategies:
//!
//! - [`AssignmentStrategy::PerCluster`]: the owner depends only on the split id and the
//!   number of readers, so every run picks the same owner. Each cluster is balanced on
//!   its own; the same topic on several clusters lands on the same readers.
//! - [`AssignmentStrategy::Global`] (default): balanced over all clusters. Each reader
//!   ends with the split count a least-loaded-first deal would give it, so counts differ
//!   by at most one across readers as long as assignment only adds splits (removals can
//!   leave holes; new splits fill them first). Within that, splits stay with readers
//!   that already read their cluster, and readers are filled in split order: every
//!   cluster a reader has splits on costs it a librdkafka client (four threads), so with
//!   2 readers and 2 clusters of 8 partitions each reader reads one cluster (2
//!   consumers, not 4), and a fresh assignment gives at most
//!   `readers + clusters - 1` (reader, cluster) pairs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::split::SplitId;

/// How splits are spread over readers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssignmentStrategy {
    /// Deterministic per cluster: `(hash(cluster, topic) + partition) mod readers`.
    PerCluster,
    /// Balanced over all clusters (split counts within one), each reader on as few
    /// clusters as that allows.
    #[default]
    Global,
}

/// A stable 64-bit FNV-1a hash (the same in every run and on every platform).
fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.as_bytes().iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The per-cluster owner of `id` among `readers` readers (`readers > 0`).
///
/// ```
/// use multicluster_kafka::unstable::per_cluster_owner;
/// use multicluster_kafka::split::SplitId;
/// let a = per_cluster_owner(&SplitId::new("east", "orders", 0), 4);
/// let b = per_cluster_owner(&SplitId::new("east", "orders", 1), 4);
/// assert_eq!((a + 1) % 4, b);
/// ```
pub fn per_cluster_owner(id: &SplitId, readers: usize) -> usize {
    let readers = readers.max(1) as u64;
    let start = stable_hash(&[&id.cluster, &id.topic]) % readers;
    ((start + id.partition.max(0) as u64) % readers) as usize
}

/// Chooses owners for `new` splits, given the current owners of the splits already
/// assigned and the readers that are alive (reader ids, not necessarily contiguous).
///
/// Returns `(split, owner)` pairs in split order. Splits already in `current` are
/// skipped, so calling it twice never assigns a split twice. With no alive reader
/// nothing is assigned.
///
/// ```
/// use std::collections::BTreeMap;
/// use multicluster_kafka::AssignmentStrategy;
/// use multicluster_kafka::unstable::assign;
/// use multicluster_kafka::split::SplitId;
/// let new: Vec<SplitId> = (0..5).map(|p| SplitId::new("east", "t", p)).collect();
/// let got = assign(&BTreeMap::new(), &new, &[0, 1], AssignmentStrategy::Global);
/// let on_0 = got.iter().filter(|(_, r)| *r == 0).count();
/// assert!(on_0 == 2 || on_0 == 3);
/// ```
pub fn assign(
    current: &BTreeMap<SplitId, usize>,
    new: &[SplitId],
    alive: &[usize],
    strategy: AssignmentStrategy,
) -> Vec<(SplitId, usize)> {
    if alive.is_empty() {
        return Vec::new();
    }
    let mut alive: Vec<usize> = alive.to_vec();
    alive.sort_unstable();
    alive.dedup();
    let mut todo: Vec<&SplitId> = new.iter().filter(|s| !current.contains_key(*s)).collect();
    todo.sort();
    todo.dedup();
    let mut out = Vec::with_capacity(todo.len());
    match strategy {
        AssignmentStrategy::PerCluster => {
            for s in todo {
                out.push((s.clone(), alive[per_cluster_owner(s, alive.len())]));
            }
        }
        AssignmentStrategy::Global => {
            let mut load: BTreeMap<usize, usize> = alive.iter().map(|r| (*r, 0)).collect();
            // Clusters each reader already reads.
            let mut reads: std::collections::BTreeSet<(usize, &str)> = Default::default();
            for (s, owner) in current {
                if let Some(n) = load.get_mut(owner) {
                    *n += 1;
                    reads.insert((*owner, &*s.cluster));
                }
            }
            // How many new splits each reader takes: what a least-loaded-first deal of
            // them would give it.
            let mut wants: BTreeMap<usize, usize> = alive.iter().map(|r| (*r, 0)).collect();
            for _ in &todo {
                let (&r, _) = load
                    .iter()
                    .min_by_key(|(r, n)| (**n, **r))
                    .expect("alive is not empty");
                *load.get_mut(&r).expect("a key") += 1;
                *wants.get_mut(&r).expect("a key") += 1;
            }
            // Which reader takes which, among those still wanting splits: one that reads
            // the split's cluster already, then the one that took the previous split,
            // then the one wanting most (the lowest id on a tie).
            let mut previous: Option<usize> = None;
            for s in todo {
                let owner = alive
                    .iter()
                    .copied()
                    .filter(|r| wants[r] > 0)
                    .max_by_key(|r| {
                        (
                            reads.contains(&(*r, &*s.cluster)),
                            previous == Some(*r),
                            wants[r],
                            std::cmp::Reverse(*r),
                        )
                    })
                    .expect("the wants add up to the splits");
                *wants.get_mut(&owner).expect("a key") -= 1;
                reads.insert((owner, &*s.cluster));
                previous = Some(owner);
                out.push((s.clone(), owner));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn shape() -> impl Strategy<Value = Vec<SplitId>> {
        // clusters × topics × partitions, with the same topic names on several clusters.
        prop::collection::vec((0usize..4, 0usize..4, 1i32..12), 1..8).prop_map(|entries| {
            let mut ids = BTreeSet::new();
            for (c, t, parts) in entries {
                for p in 0..parts {
                    ids.insert(SplitId::new(
                        format!("cluster-{c}"),
                        format!("topic-{t}"),
                        p,
                    ));
                }
            }
            ids.into_iter().collect()
        })
    }

    fn counts(owners: &BTreeMap<SplitId, usize>, alive: &[usize]) -> Vec<usize> {
        alive
            .iter()
            .map(|r| owners.values().filter(|o| *o == r).count())
            .collect()
    }

    proptest! {
        #[test]
        fn every_split_gets_exactly_one_live_owner(
            splits in shape(),
            readers in 1usize..9,
            global in any::<bool>(),
            batches in 1usize..5,
        ) {
            let strategy = if global { AssignmentStrategy::Global } else { AssignmentStrategy::PerCluster };
            let alive: Vec<usize> = (0..readers).collect();
            let mut owners = BTreeMap::new();
            let chunk = splits.len().div_ceil(batches);
            for batch in splits.chunks(chunk.max(1)) {
                for (s, r) in assign(&owners, batch, &alive, strategy) {
                    prop_assert!(alive.contains(&r));
                    prop_assert!(owners.insert(s, r).is_none(), "assigned twice");
                }
            }
            // Re-offering everything assigns nothing new.
            prop_assert!(assign(&owners, &splits, &alive, strategy).is_empty());
            prop_assert_eq!(owners.len(), splits.len());
            if global {
                let c = counts(&owners, &alive);
                prop_assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "{:?}", c);
            }
        }

        #[test]
        fn splits_of_a_failed_reader_are_spread_without_loss(
            splits in shape(),
            readers in 2usize..9,
            failed_pick in any::<prop::sample::Index>(),
        ) {
            let alive: Vec<usize> = (0..readers).collect();
            let mut owners: BTreeMap<SplitId, usize> =
                assign(&BTreeMap::new(), &splits, &alive, AssignmentStrategy::Global).into_iter().collect();
            let failed = failed_pick.get(&alive);
            let returned: Vec<SplitId> = owners.iter().filter(|(_, r)| *r == failed).map(|(s, _)| s.clone()).collect();
            owners.retain(|_, r| r != failed);
            let survivors: Vec<usize> = alive.iter().copied().filter(|r| r != failed).collect();
            for (s, r) in assign(&owners, &returned, &survivors, AssignmentStrategy::Global) {
                prop_assert!(r != *failed);
                prop_assert!(owners.insert(s, r).is_none());
            }
            prop_assert_eq!(owners.len(), splits.len());
            let c = counts(&owners, &survivors);
            prop_assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "{:?}", c);
        }

        #[test]
        fn a_fresh_global_assignment_puts_each_reader_on_few_clusters(
            splits in shape(),
            readers in 1usize..9,
        ) {
            let alive: Vec<usize> = (0..readers).collect();
            let got = assign(&BTreeMap::new(), &splits, &alive, AssignmentStrategy::Global);
            let pairs: BTreeSet<(usize, &str)> = got.iter().map(|(s, r)| (*r, &*s.cluster)).collect();
            let clusters: BTreeSet<&str> = splits.iter().map(|s| &*s.cluster).collect();
            prop_assert!(
                pairs.len() < readers + clusters.len(),
                "{} (reader, cluster) pairs for {} readers and {} clusters",
                pairs.len(), readers, clusters.len()
            );
        }

        #[test]
        fn per_cluster_owners_do_not_depend_on_other_splits(
            splits in shape(),
            readers in 1usize..9,
        ) {
            let alive: Vec<usize> = (0..readers).collect();
            let all: BTreeMap<_, _> = assign(&BTreeMap::new(), &splits, &alive, AssignmentStrategy::PerCluster).into_iter().collect();
            for s in splits.iter().take(5) {
                let alone = assign(&BTreeMap::new(), std::slice::from_ref(s), &alive, AssignmentStrategy::PerCluster);
                prop_assert_eq!(alone[0].1, all[s]);
            }
        }
    }

    #[test]
    fn two_readers_and_two_equal_clusters_read_one_cluster_each() {
        let splits: Vec<SplitId> = ["a", "b"]
            .iter()
            .flat_map(|c| (0..8).map(move |p| SplitId::new(*c, "t", p)))
            .collect();
        let got = assign(
            &BTreeMap::new(),
            &splits,
            &[0, 1],
            AssignmentStrategy::Global,
        );
        for (s, r) in &got {
            assert_eq!(*r, usize::from(&*s.cluster == "b"), "{s}");
        }
        // A partition added later goes to a reader of its cluster when that is balanced.
        let owners: BTreeMap<SplitId, usize> = got.into_iter().collect();
        let added = [SplitId::new("b", "t", 8)];
        let mut fewer = owners.clone();
        fewer.remove(&SplitId::new("b", "t", 0));
        assert_eq!(
            assign(&fewer, &added, &[0, 1], AssignmentStrategy::Global),
            vec![(added[0].clone(), 1)]
        );
    }

    #[test]
    fn new_splits_go_to_readers_of_their_cluster_when_the_balance_allows() {
        // Reader 0 reads cluster b, reader 1 cluster a; a least-loaded deal alone would
        // give a's new split to reader 0 (the lower id) and b's to reader 1.
        let mut owners = BTreeMap::new();
        for p in 0..4 {
            owners.insert(SplitId::new("b", "t", p), 0);
            owners.insert(SplitId::new("a", "t", p), 1);
        }
        let new = [SplitId::new("a", "t", 4), SplitId::new("b", "t", 4)];
        assert_eq!(
            assign(&owners, &new, &[0, 1], AssignmentStrategy::Global),
            vec![(new[0].clone(), 1), (new[1].clone(), 0)]
        );
    }

    #[test]
    fn no_live_reader_means_no_assignment() {
        let s = [SplitId::new("a", "t", 0)];
        assert!(assign(&BTreeMap::new(), &s, &[], AssignmentStrategy::Global).is_empty());
    }
}
