//! Exactly-once checks over what a test read back, shared by the library's and the
//! command line's tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::{Duration, Instant};

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

/// Asserts that the records of `seen` are in partition order (see
/// [`assert_in_partition_order`]): no position twice, none out of order.
pub fn assert_seen_in_order(seen: &[Seen]) {
    assert_in_partition_order(
        seen.iter()
            .map(|(c, t, p, o, _)| (c.as_str(), t.as_str(), *p, *o)),
    );
}

/// Asserts that `seen` is in partition order (see [`assert_seen_in_order`]) and
/// holds each value of `want` exactly once and nothing else.
pub fn assert_exactly_once(seen: &[Seen], want: &BTreeSet<String>) {
    assert_seen_in_order(seen);
    assert_each_once(seen.iter().map(|s| &s.4), want);
}

/// Asserts that a healthy cluster kept flowing during another one's fault from
/// `start` to `end`: of the records `produced` (value, when it was acknowledged) in
/// `[start, end - max_lag)`, of which there must be more than 20, each was seen
/// (`seen_at`, when it first came out) within `max_lag`. A failure names up to five
/// late records, then `context`.
pub fn assert_flowed_during<'a>(
    produced: impl IntoIterator<Item = (&'a str, Instant)>,
    seen_at: impl Fn(&str) -> Option<Instant>,
    (start, end): (Instant, Instant),
    max_lag: Duration,
    context: &str,
) {
    let window: Vec<(&str, Instant)> = produced
        .into_iter()
        .filter(|(_, at)| *at >= start && *at < end - max_lag)
        .collect();
    assert!(
        window.len() > 20,
        "too few records in the window: {}",
        window.len()
    );
    let late: Vec<String> = window
        .iter()
        .filter(|(v, at)| seen_at(v).is_none_or(|s| s - *at > max_lag))
        .map(|(v, at)| {
            format!(
                "{v} (produced {:?} into the fault, {})",
                *at - start,
                match seen_at(v) {
                    Some(s) => format!("out {:?} later", s - *at),
                    None => "not out before the fault ended".to_string(),
                }
            )
        })
        .collect();
    let worst = window
        .iter()
        .filter_map(|(v, at)| seen_at(v).map(|s| s - *at))
        .max()
        .unwrap_or_default();
    eprintln!(
        "during the fault: {} records, {} late, worst lag of those out {worst:?}",
        window.len(),
        late.len()
    );
    assert!(
        late.is_empty(),
        "stalled during the fault: {} of {} records produced during it did not come out \
         within {max_lag:?}, e.g. {:#?}\n{context}",
        late.len(),
        window.len(),
        &late[..late.len().min(5)]
    );
}
