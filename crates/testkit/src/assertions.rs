//! Exactly-once checks over what a test read back, shared by the library's and the
//! command line's tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// One record as a test saw it: (cluster, topic, partition, offset, value).
pub type Seen = (String, String, i32, i64, String);

/// Asserts that offsets increase within each (cluster, topic, partition), so that no
/// position was handed out twice or out of order.
pub fn assert_in_partition_order<'a>(
    positions: impl IntoIterator<Item = (&'a str, &'a str, i32, i64)>,
) {
    let mut last: BTreeMap<(&str, &str, i32), i64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (c, t, p, o) in positions {
        if let Some(prev) = last.insert((c, t, p), o) {
            assert!(o > prev, "{c}/{t}/{p}: offset {o} after {prev}");
        }
        assert!(seen.insert((c, t, p, o)), "{c}/{t}/{p}: offset {o} twice");
    }
}

/// Asserts that `got` holds every item of `want` exactly once and nothing else; a
/// failure names up to five duplicates, missing and unexpected items.
pub fn assert_each_once<T: Ord + Debug>(
    got: impl IntoIterator<Item = T>,
    want: impl IntoIterator<Item = T>,
) {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for item in got {
        *counts.entry(item).or_default() += 1;
    }
    let dups: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(dups.is_empty(), "duplicates, e.g. {dups:?}");
    let got: BTreeSet<T> = counts.into_keys().collect();
    let want: BTreeSet<T> = want.into_iter().collect();
    let missing: Vec<_> = want.difference(&got).take(5).collect();
    let extra: Vec<_> = got.difference(&want).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {} (e.g. {missing:?}), unexpected {} (e.g. {extra:?})",
        want.difference(&got).count(),
        got.difference(&want).count()
    );
}

/// Asserts that `seen` is in partition order (see [`assert_in_partition_order`]) and
/// holds each value of `want` exactly once and nothing else.
pub fn assert_exactly_once(seen: &[Seen], want: &BTreeSet<String>) {
    assert_in_partition_order(
        seen.iter()
            .map(|(c, t, p, o, _)| (c.as_str(), t.as_str(), *p, *o)),
    );
    assert_each_once(seen.iter().map(|s| &s.4), want);
}
