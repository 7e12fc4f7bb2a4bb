//! A short fuzzing run inside the tests: arbitrary bytes and mutated valid documents
//! through the metadata parser and the checkpoint decoder, checked by the same
//! functions the cargo-fuzz targets of `fuzz/` use (`fuzz_inputs/checks.rs`): no
//! panic, and every error located.
//!
//! Each property runs `PROPTEST_CASES` cases (default 256, a few seconds in all); a
//! longer run is `PROPTEST_CASES=100000 cargo test --release -p multicluster-kafka
//! --test fuzz_inputs`.

#[path = "../fuzz_inputs/checks.rs"]
mod checks;

use std::path::Path;

use multicluster_kafka::checkpoint::{
    Checkpoint, CheckpointError, ClusterCheckpoint, SplitCheckpoint,
};
use multicluster_kafka::metadata::file::parse_metadata_with;
use multicluster_kafka::metadata::{MetadataError, SourceLocation};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use checks::{
    Scratch, check_checkpoint, check_fetch_response, check_metadata, check_record_batches, env,
};

/// Valid metadata files: both layouts, YAML and JSON, with references, offsets,
/// anchors and flow collections.
const METADATA_SEEDS: &[&str] = &[
    "- streamId: orders
  clusterMetadataList:
    - clusterId: east
      bootstrapServers: east-1:9092,east-2:9092
      topics: [orders, orders-v2]
      properties:
        sasl.password: \"${env:PW}\"
        client.id: a
    - { clusterId: west, bootstrapServers: 'west-1:9092', topics: [orders] }
- streamId: payments
  clusterMetadataList:
    - clusterId: east
      bootstrapServers: east-1:9092,east-2:9092
      topics:
        - payments
      startingOffsets: earliest
",
    "version: 1
clusters:
  east:
    bootstrapServers: east-1:9092
    properties:
      sasl.username: reader
      sasl.password: \"${file:pw}\"
    startingOffsets: {committed: {reset: earliest}}
  west:
    properties:
      bootstrap.servers: ${env:WEST}
      client.rack: a
    startingOffsets: latest
  archive:
    bootstrapServers: archive-1:9092
    stoppingOffsets: {timestamp: 1700000000000}
streams:
  orders:
    clusters:
      east: {topics: [orders]}
      west:
        topics: [orders, orders-v2]
        properties: {client.id: orders-west}
  history:
    clusters:
      archive:
        topics: [orders]
        startingOffsets:
          specific:
            offsets:
              - {topic: orders, partition: 0, offset: 1000}
            default: earliest
",
    "{\"version\": 1,
 \"clusters\": {
  \"east\": {\"bootstrapServers\": \"east-1:9092\",
            \"properties\": {\"sasl.password\": \"${env:PW}\", \"acks\": \"all\"}},
  \"west\": {\"bootstrapServers\": \"west-1:9092\", \"startingOffsets\": \"earliest\"}},
 \"streams\": {
  \"orders\": {\"clusters\": {\"east\": {\"topics\": [\"orders\"]},
                             \"west\": {\"topics\": [\"orders\"], \"stoppingOffsets\": \"latest\"}}}}}
",
    "clusters:
  east: &east
    bootstrapServers: east-1:9092
  west:
    <<: *east
streams:
  a: {clusters: {east: {topics: [t]}, west: {topics: [t, u]}}}
  b:
    clusters:
      west: {topics: [v], properties: {x: \"$${literal} ${env:XY}\"}}
",
];

/// Tokens inserted into documents and used as replacement values: the layouts' keys,
/// YAML indicators, references, and awkward scalars.
const TOKENS: &[&str] = &[
    "streamId: ",
    "clusterMetadataList:",
    "clusterId: ",
    "bootstrapServers: ",
    "bootstrap.servers: ",
    "topics: ",
    "properties: ",
    "startingOffsets: ",
    "stoppingOffsets: ",
    "clusters:",
    "streams:",
    "version: ",
    "\n",
    "\r\n",
    "\r",
    "\n  ",
    "\n    - ",
    "- ",
    ": ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "'",
    "\"",
    "\t",
    "#",
    "---\n",
    "...\n",
    "&a ",
    "*a",
    "<<: ",
    "!!str ",
    "!!binary ",
    "!x ",
    "? ",
    "|\n",
    ">-\n",
    "%YAML 1.2\n",
    "\u{feff}",
    "${env:PW}",
    "${env:P}",
    "${env:",
    "${file:pw}",
    "${file:",
    "${file:missing}",
    "$${",
    "${",
    "}",
    "~",
    "null",
    "true",
    "-1",
    "0",
    "4294967296",
    "9223372036854775808",
    "1e400",
    "0x1F",
    ".nan",
    "\"\\u0000\"",
    "\"a\\nb\"",
    "\"\\ud800\"",
    "\"  padded  \"",
    "\"\"",
    "[]",
    "{}",
    "é",
    "\u{2028}",
    "\u{0}",
    "earliest",
    "latest",
    "committed",
    "timestamp",
    "specific",
];

/// Valid checkpoints: whatever the encoder writes for arbitrary contents.
fn checkpoints() -> impl Strategy<Value = Checkpoint> {
    let split = (
        "[a-z.]{1,6}",
        any::<i32>(),
        any::<i64>(),
        any::<Option<i64>>(),
    )
        .prop_map(
            |(topic, partition, next_offset, retained)| SplitCheckpoint {
                topic,
                partition,
                next_offset,
                retained_until_ms: retained,
                last: None,
            },
        );
    let cluster = (
        any::<Option<String>>(),
        any::<bool>(),
        prop::collection::vec(split, 0..4),
    )
        .prop_map(
            |(kafka_cluster_id, initial_discovery_done, splits)| ClusterCheckpoint {
                kafka_cluster_id,
                initial_discovery_done,
                splits,
            },
        );
    (
        prop::collection::btree_map(".{0,6}", cluster, 0..3),
        prop::collection::btree_map(".{0,6}", ".{0,6}", 0..2),
    )
        .prop_map(|(clusters, user_data)| {
            let mut cp = Checkpoint {
                clusters,
                user_data,
                shard: None,
                watermark_ms: None,
            };
            cp.normalize();
            cp
        })
}

/// Values and keys a checkpoint field is replaced with.
const CHECKPOINT_TOKENS: &[&str] = &[
    "null",
    "true",
    "-1",
    "0",
    "1.5",
    "2147483648",
    "-9223372036854775809",
    "18446744073709551616",
    "1e400",
    "\"\"",
    "\"x\"",
    "\"\\ud800\"",
    "\"a\\nb\"",
    "[]",
    "{}",
    "[{}]",
    "{\"\":{}}",
    "\"multicluster-kafka/checkpoint\"",
    "\"format\"",
    "\"version\"",
    "\"checkpoint\"",
    "\"clusters\"",
    "\"splits\"",
    "\"userData\"",
    "\"nextOffset\"",
    "\"stopOffset\"",
    "\"retainedUntilMs\"",
    "\"kafkaClusterId\"",
];

/// One change to a document.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flips one bit of the byte at this fraction of the length.
    Flip(f64, u8),
    /// Keeps only this fraction of the bytes.
    Truncate(f64),
    /// Inserts a token at this fraction of the length.
    Insert(f64, usize),
    /// Removes up to this many bytes from this fraction of the length.
    Delete(f64, usize),
    /// Replaces the value after the n-th `:` (up to the next `,`, `}`, `]` or line
    /// break) with a token.
    ReplaceValue(usize, usize),
    /// Copies a stretch of the document to another place (repeats keys and entries).
    Duplicate(f64, usize, f64),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let fraction = 0.0..1.0f64;
    let mutation = prop_oneof![
        (fraction.clone(), 0..8u8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        fraction.clone().prop_map(Mutation::Truncate),
        (fraction.clone(), any::<usize>()).prop_map(|(at, t)| Mutation::Insert(at, t)),
        (fraction.clone(), 1..40usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(n, t)| Mutation::ReplaceValue(n, t)),
        (fraction.clone(), 1..80usize, fraction)
            .prop_map(|(from, n, to)| Mutation::Duplicate(from, n, to)),
    ];
    prop::collection::vec(mutation, 1..4)
}

fn position(bytes: &[u8], fraction: f64) -> usize {
    ((bytes.len() as f64 * fraction) as usize).min(bytes.len())
}

fn mutate(mut bytes: Vec<u8>, changes: &[Mutation], tokens: &[&str]) -> Vec<u8> {
    for change in changes {
        match *change {
            Mutation::Flip(at, bit) => {
                if !bytes.is_empty() {
                    let i = position(&bytes, at).min(bytes.len() - 1);
                    bytes[i] ^= 1 << bit;
                }
            }
            Mutation::Truncate(at) => bytes.truncate(position(&bytes, at)),
            Mutation::Insert(at, token) => {
                let i = position(&bytes, at);
                let token = tokens[token % tokens.len()].as_bytes();
                bytes.splice(i..i, token.iter().copied());
            }
            Mutation::Delete(at, n) => {
                let i = position(&bytes, at);
                bytes.drain(i..(i + n).min(bytes.len()));
            }
            Mutation::ReplaceValue(n, token) => {
                let colons: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == b':').collect();
                if !colons.is_empty() {
                    let start = colons[n % colons.len()] + 1;
                    let end = bytes[start..]
                        .iter()
                        .position(|b| matches!(b, b',' | b'}' | b']' | b'\n'))
                        .map_or(bytes.len(), |e| start + e);
                    let token = tokens[token % tokens.len()];
                    let value = format!(" {token}");
                    bytes.splice(start..end, value.bytes());
                }
            }
            Mutation::Duplicate(from, n, to) => {
                let start = position(&bytes, from);
                let copy = bytes[start..(start + n).min(bytes.len())].to_vec();
                let i = position(&bytes, to);
                bytes.splice(i..i, copy);
            }
        }
    }
    bytes
}

/// `PROPTEST_CASES` cases (default 256), without writing regression files into the
/// source tree.
fn runner() -> TestRunner {
    TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    })
}

fn run<S: Strategy>(strategy: S, check: impl Fn(S::Value)) {
    let outcome = runner().run(&strategy, |value| {
        check(value);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[test]
fn the_metadata_seeds_are_valid_in_both_syntaxes() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    for (i, seed) in METADATA_SEEDS.iter().enumerate() {
        let yaml = parse_metadata_with(seed, &scratch.dir().join("seed.yaml"), &env);
        assert!(yaml.is_ok(), "seed {i}: {yaml:?}");
    }
    let json = parse_metadata_with(METADATA_SEEDS[2], &scratch.dir().join("seed.json"), &env);
    assert_eq!(json.unwrap()["orders"].clusters.len(), 2);
}

#[test]
fn metadata_of_arbitrary_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    run(prop::collection::vec(any::<u8>(), 0..400), |data| {
        check_metadata(&data, &scratch)
    });
}

#[test]
fn metadata_of_arbitrary_token_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    let tokens = prop::collection::vec((any::<prop::sample::Index>(), "[a-z0-9 -]{0,4}"), 0..40);
    run(tokens, |tokens| {
        let text: String = tokens
            .iter()
            .map(|(i, word)| format!("{}{word}", i.get(TOKENS)))
            .collect();
        check_metadata(text.as_bytes(), &scratch)
    });
}

#[test]
fn metadata_of_mutated_valid_files() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    let inputs = (any::<prop::sample::Index>(), mutations());
    run(inputs, |(seed, changes)| {
        let seed = seed.get(METADATA_SEEDS).as_bytes().to_vec();
        check_metadata(&mutate(seed, &changes, TOKENS), &scratch)
    });
}

#[test]
fn checkpoints_of_arbitrary_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    run(prop::collection::vec(any::<u8>(), 0..200), |data| {
        check_checkpoint(&data, &scratch)
    });
}

#[test]
fn checkpoints_round_trip_and_survive_mutations() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(dir.path());
    run((checkpoints(), mutations()), |(cp, changes)| {
        let bytes = cp.encode();
        assert_eq!(Checkpoint::decode(&bytes).unwrap(), cp);
        check_checkpoint(&bytes, &scratch);
        check_checkpoint(&mutate(bytes, &changes, CHECKPOINT_TOKENS), &scratch)
    });
}

/// The checks are not vacuous: an error without a usable location fails them.
#[test]
fn the_checks_reject_unlocated_errors() {
    let path = Path::new("streams.yaml");
    let text = b"a: 1\nb: 2\n";
    let cases = [
        MetadataError::Invalid {
            location: None,
            message: "bad".into(),
        },
        MetadataError::Invalid {
            location: Some(SourceLocation::new(path, 0, 0)),
            message: "bad".into(),
        },
        MetadataError::Invalid {
            location: Some(SourceLocation::new(path, 9, 1)),
            message: "past the end".into(),
        },
        MetadataError::Invalid {
            location: Some(SourceLocation::new(path, 1, 1)),
            message: "two\nlines".into(),
        },
        MetadataError::Invalid {
            location: Some(SourceLocation::new("other.yaml", 1, 1)),
            message: "elsewhere".into(),
        },
    ];
    for e in cases {
        let failed = std::panic::catch_unwind(|| checks::check_metadata_error(&e, path, text));
        assert!(failed.is_err(), "accepted {e:?}");
    }
    let located = MetadataError::Invalid {
        location: Some(SourceLocation::new(path, 2, 3)),
        message: "bad".into(),
    };
    checks::check_metadata_error(&located, path, text);

    let checkpoint_cases = [
        (
            CheckpointError::Decode {
                origin: "<bytes>".into(),
                reason: "bad".into(),
            },
            "checkpoint-1.json",
        ),
        (
            CheckpointError::Decode {
                origin: "<bytes>".into(),
                reason: "two\nlines".into(),
            },
            "<bytes>",
        ),
        (
            CheckpointError::Io {
                path: "<bytes>".into(),
                source: std::io::Error::other("disk"),
            },
            "<bytes>",
        ),
    ];
    for (e, origin) in &checkpoint_cases {
        let check = std::panic::AssertUnwindSafe(|| checks::check_checkpoint_error(e, origin));
        let failed = std::panic::catch_unwind(check);
        assert!(failed.is_err(), "accepted {e:?} for {origin}");
    }
    let e = Checkpoint::decode(b"{").unwrap_err();
    checks::check_checkpoint_error(&e, "<bytes>");
}

/// Valid partitions' records: batches of every codec, with headers, nulls, control
/// batches and a batch cut off at the end.
fn record_batch_seeds() -> Vec<Vec<u8>> {
    use mck_testkit::record_batch::{SnappyForm, TestRecord, record_batch_with};
    let records: Vec<TestRecord> = (0..20)
        .map(|i| {
            let mut r = TestRecord::plain(i, format!("v{i}").as_bytes());
            if i % 4 == 0 {
                r.headers
                    .push((b"h".to_vec(), (i % 8 == 0).then(|| b"x".to_vec())));
            }
            if i % 5 == 0 {
                r.key = None;
            }
            r
        })
        .collect();
    let mut seeds = Vec::new();
    for (codec, form) in [
        (0, SnappyForm::Raw),
        (1, SnappyForm::Raw),
        (2, SnappyForm::Raw),
        (2, SnappyForm::Xerial { block: 64 }),
        (3, SnappyForm::Raw),
        (4, SnappyForm::Raw),
    ] {
        let mut data = record_batch_with(100, codec, form, &records);
        data.extend(record_batch_with(120, 0x30, form, &records[..1]));
        let next = record_batch_with(121, codec | 0x08, form, &records[..3]);
        data.extend_from_slice(&next[..next.len() / 2]);
        seeds.push(data);
    }
    seeds
}

/// Bytes inserted into batches: lengths and counts at their edges.
const BATCH_TOKENS: &[&str] = &["\0\0\0\0", "\x7f\x7f\x7f\x7f", "\x01", "\0\0\x10\0"];

#[test]
fn record_batches_of_valid_partitions_decode() {
    for seed in record_batch_seeds() {
        check_record_batches(&seed);
        let batches: Vec<_> = multicluster_kafka_client::Batches::new(&seed)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(batches.len(), 2);
    }
}

/// Arbitrary bytes, then the seeds mutated, through `check`.
fn arbitrary_and_mutated(seeds: Vec<Vec<u8>>, check: fn(&[u8])) {
    run(proptest::collection::vec(any::<u8>(), 0..400), |data| {
        check(&data)
    });
    run((0..seeds.len(), mutations()), |(i, changes)| {
        check(&mutate(seeds[i].clone(), &changes, BATCH_TOKENS))
    });
}

#[test]
fn record_batches_of_arbitrary_and_mutated_bytes() {
    arbitrary_and_mutated(record_batch_seeds(), check_record_batches);
}

/// Fetch responses the `kafka-protocol` crate encoded at each version, whose
/// partitions hold the record-batch seeds.
fn fetch_response_seeds() -> Vec<Vec<u8>> {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let batches = record_batch_seeds();
    (4..=18)
        .map(|version: i16| {
            let partitions = batches
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    PartitionData::default()
                        .with_partition_index(i as i32)
                        .with_high_watermark(200)
                        .with_records(Some(bytes::Bytes::copy_from_slice(b)))
                })
                .collect();
            let mut topic = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                topic = topic.with_topic_id(multicluster_kafka_client::Uuid::from_u128(7));
            } else {
                topic = topic.with_topic(TopicName(StrBytes::from_static_str("orders")));
            }
            let mut b = bytes::BytesMut::new();
            FetchResponse::default()
                .with_responses(vec![topic])
                .encode(&mut b, version)
                .unwrap();
            b.to_vec()
        })
        .collect()
}

#[test]
fn fetch_responses_of_arbitrary_and_mutated_bytes() {
    arbitrary_and_mutated(fetch_response_seeds(), check_fetch_response);
}

/// The seeds of the cargo-fuzz targets `record_batch` and `fetch_response`
/// (`fuzz/seeds/<target>/<n>.bin`) are the seeds above, byte for byte, so a libFuzzer
/// run starts from valid input of every codec and version. After a change of the
/// seeds, `MCK_WRITE_FUZZ_SEEDS=1 cargo test -p multicluster-kafka --test fuzz_inputs
/// committed_fuzz_seeds` writes them again.
#[test]
fn committed_fuzz_seeds_are_the_generated_ones() {
    let write = std::env::var_os("MCK_WRITE_FUZZ_SEEDS").is_some();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    for (target, seeds) in [
        ("record_batch", record_batch_seeds()),
        ("fetch_response", fetch_response_seeds()),
    ] {
        let dir = root.join(target);
        if write {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (i, seed) in seeds.iter().enumerate() {
                std::fs::write(dir.join(format!("{i:02}.bin")), seed).unwrap();
            }
        }
        let mut committed: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        committed.sort();
        let committed: Vec<Vec<u8>> = committed
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        assert_eq!(
            committed.len(),
            seeds.len(),
            "{target}: write the seeds again (see this test's comment)"
        );
        for (i, (c, s)) in committed.iter().zip(&seeds).enumerate() {
            assert!(c == s, "{target} seed {i} differs: write the seeds again");
        }
    }
}
