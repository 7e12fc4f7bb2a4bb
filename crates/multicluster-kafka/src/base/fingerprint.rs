//! Fingerprints: what identifies a record across copies of its topic (a mirror keeps
//! key, value, headers and timestamp, not the offset), and the search for the last
//! record handed out from a source cluster on its mirror.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::metadata::OnMismatch;

/// A record as a mirror keeps it: its timestamp and a hash of its key, value and
/// headers, with the offset it had where it was handed out. Its comparisons take
/// every field, the leader epoch too: whether two records are the same record is
/// [`Fingerprint::matches`].
///
/// ```
/// use multicluster_kafka::split::{Fingerprint, record_hash};
/// let a = record_hash(Some(b"k"), Some(b"v"), &[]);
/// assert_eq!(a, record_hash(Some(b"k"), Some(b"v"), &[]));
/// assert_ne!(a, record_hash(None, Some(b"kv"), &[]));
/// let f = Fingerprint { offset: 41, timestamp: Some(1_700_000_000_000), hash: a, leader_epoch: None };
/// assert!(f.matches(Some(1_700_000_000_000), a));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fingerprint {
    /// The record's offset on the cluster it was handed out from.
    pub offset: i64,
    /// Its timestamp (ms since the epoch), if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// [`record_hash`] of its key, value and headers (hex in checkpoints).
    #[serde(serialize_with = "write_hex", deserialize_with = "read_hex")]
    pub hash: u64,
    /// The leader epoch of the record batch it came in, when known (checkpoint
    /// version 5). Not part of the record's identity (a mirror's epochs are its
    /// own): either fetch path resumes after the record with it, so a log
    /// truncated below the position while the source was down is found (KIP-320).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,
}

impl Fingerprint {
    /// Whether a record with this timestamp and hash is the same record.
    pub fn matches(&self, timestamp: Option<i64>, hash: u64) -> bool {
        self.timestamp == timestamp && self.hash == hash
    }
}

/// The hash of a record's key, value and headers (XXH3, 64 bits; stable across
/// versions and processes, since checkpoints hold it). A missing key or value hashes
/// apart from an empty one.
pub fn record_hash(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(String, Option<Vec<u8>>)],
) -> u64 {
    hash_parts(
        key,
        value,
        headers.iter().map(|(n, v)| (n.as_bytes(), v.as_deref())),
    )
}

/// [`record_hash`] of a record whose header names are still bytes (the native
/// path's, decoded in place): the same hash for the same record.
pub(crate) fn hash_parts<'h>(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
) -> u64 {
    use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};
    let mut seed = match key {
        Some(k) => xxh3_64_with_seed(k, 0x006b_6579),
        None => 0x006e_6f6b_6579,
    };
    for (name, value) in headers {
        seed = xxh3_64_with_seed(name, seed.rotate_left(5));
        seed = match value {
            Some(v) => xxh3_64_with_seed(v, seed ^ 0x68),
            None => seed.rotate_left(17) ^ 0x6e75_6c6c,
        };
    }
    match value {
        Some(v) => xxh3_64_with_seed(v, seed),
        None => xxh3_64(&seed.to_le_bytes()) ^ 0x746f_6d62,
    }
}

/// The last record handed out for a split's place in the stream, and, on a mirror
/// that has not found it yet, the search for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LastRecord {
    /// The record. Its offset is on this split's cluster, or on `search.cluster`
    /// while a search is pending.
    pub fingerprint: Fingerprint,
    /// Set while the split (on a mirror) reads forward from a translated lower bound
    /// to this record: records up to and including it are not handed out again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
}

impl LastRecord {
    /// The last record handed out on this split's own cluster.
    pub fn at(fingerprint: Fingerprint) -> Self {
        Self {
            fingerprint,
            search: None,
        }
    }
}

/// A search on a mirror for the last record handed out from its source.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Search {
    /// The logical cluster the record was handed out from.
    pub cluster: String,
    /// Its topic there (the partition is the same).
    pub topic: String,
    /// The translated lower bound the search started at, on the mirror.
    pub lower_bound: i64,
    /// How it was found (`identical`, `sync`, `checkpoint`, `timestamp`), for
    /// messages and `mck plan`.
    pub found_by: String,
    /// Where the record can still be: past this, the mirror diverged.
    pub within: Within,
    /// What a mirror that diverged does.
    #[serde(default)]
    pub on_mismatch: OnMismatch,
    /// Records looked at so far.
    #[serde(default)]
    pub looked_at: u64,
}

/// How far a search on a mirror may go before the mirror counts as diverged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Within {
    /// At most this many records from the lower bound (the record is the last of
    /// them at the latest).
    Records(u64),
    /// Records whose timestamp is at most this (ms since the epoch): a record later
    /// than that means the one looked for is not there.
    UntilTimestamp(i64),
}

/// What a record read during a search means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not it; keep reading (the record is not handed out: it was, from the source).
    Before,
    /// The record: the search is over, and the next record is handed out.
    Found,
    /// The record is not where it must be: the mirror diverged.
    Diverged,
}

impl Search {
    /// Judges the next record read on the mirror (`timestamp`, `hash`) against
    /// `looking_for`, counting it.
    pub fn step(&mut self, looking_for: &Fingerprint, timestamp: Option<i64>, hash: u64) -> Step {
        self.looked_at += 1;
        if looking_for.matches(timestamp, hash) {
            return Step::Found;
        }
        let beyond = match self.within {
            Within::Records(n) => self.looked_at >= n,
            Within::UntilTimestamp(until) => timestamp.is_some_and(|t| t > until),
        };
        if beyond { Step::Diverged } else { Step::Before }
    }
}

fn write_hex<S: Serializer>(hash: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{hash:016x}"))
}

fn read_hex<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let text = String::deserialize(d)?;
    u64::from_str_radix(&text, 16).map_err(|_| {
        serde::de::Error::custom(format!(
            "`{}` is not a 64-bit hex hash",
            text.escape_debug()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(offset: i64, ts: i64, value: &[u8]) -> Fingerprint {
        Fingerprint {
            offset,
            timestamp: Some(ts),
            hash: record_hash(None, Some(value), &[]),
            leader_epoch: None,
        }
    }

    #[test]
    fn the_hash_tells_key_value_and_headers_apart() {
        let h = |k: Option<&[u8]>, v: Option<&[u8]>, hs: &[(String, Option<Vec<u8>>)]| {
            record_hash(k, v, hs)
        };
        let base = h(Some(b"k"), Some(b"v"), &[]);
        assert_ne!(base, h(Some(b"k"), Some(b"w"), &[]));
        assert_ne!(base, h(Some(b"kv"), Some(b""), &[]));
        assert_ne!(base, h(None, Some(b"v"), &[]));
        assert_ne!(h(Some(b"k"), None, &[]), h(Some(b"k"), Some(b""), &[]));
        let with = [("a".to_string(), Some(b"1".to_vec()))];
        let null = [("a".to_string(), None)];
        assert_ne!(base, h(Some(b"k"), Some(b"v"), &with));
        assert_ne!(
            h(Some(b"k"), Some(b"v"), &null),
            h(Some(b"k"), Some(b"v"), &with)
        );
        // Stable across versions: checkpoints hold it.
        assert_eq!(h(Some(b"k"), Some(b"v"), &[]), base);
    }

    #[test]
    fn a_search_finds_the_record_or_says_the_mirror_diverged() {
        let want = fp(41, 1000, b"x");
        let mut s = Search {
            cluster: "east".into(),
            topic: "orders".into(),
            lower_bound: 7,
            found_by: "sync".into(),
            within: Within::Records(3),
            on_mismatch: OnMismatch::Fail,
            looked_at: 0,
        };
        let other = record_hash(None, Some(b"y"), &[]);
        assert_eq!(s.step(&want, Some(1000), other), Step::Before);
        assert_eq!(s.step(&want, Some(1000), want.hash), Step::Found);
        s.looked_at = 0;
        assert_eq!(s.step(&want, Some(999), other), Step::Before);
        assert_eq!(s.step(&want, Some(999), other), Step::Before);
        assert_eq!(s.step(&want, Some(999), other), Step::Diverged);
        s.within = Within::UntilTimestamp(1000);
        assert_eq!(s.step(&want, Some(1000), other), Step::Before);
        assert_eq!(s.step(&want, Some(1001), other), Step::Diverged);
        // Same value, other timestamp: not the record.
        assert_eq!(s.step(&want, Some(999), want.hash), Step::Before);
    }

    #[test]
    fn a_last_record_round_trips_with_its_hash_in_hex() {
        let last = LastRecord {
            fingerprint: fp(3, 5, b"v"),
            search: Some(Search {
                cluster: "east".into(),
                topic: "orders".into(),
                lower_bound: 1,
                found_by: "timestamp".into(),
                within: Within::UntilTimestamp(60_005),
                on_mismatch: OnMismatch::LowerBound,
                looked_at: 2,
            }),
        };
        let json = serde_json::to_string(&last).unwrap();
        assert!(
            json.contains(&format!("\"{:016x}\"", last.fingerprint.hash)),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<LastRecord>(&json).unwrap(), last);
        let bad = json.replace(&format!("{:016x}", last.fingerprint.hash), "zz");
        assert!(serde_json::from_str::<LastRecord>(&bad).is_err());
    }
}
