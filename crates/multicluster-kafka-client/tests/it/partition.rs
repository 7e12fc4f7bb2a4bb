//! One partition read forward through fetch answers by the native path's
//! `PartitionReader`: on answers built byte by byte (positions inside batches,
//! control batches, aborted transactions, error codes, corrupt and bad-CRC batches),
//! and on a real broker (the test kit's Kafka 4.1) where transactions were committed
//! and aborted by librdkafka's transactional producer, read `read_committed` and
//! `read_uncommitted` with the native connection.

use std::time::Duration;

use bytes::Bytes;
use mck_testkit::record_batch::{TestRecord, marker, record_batch, with_producer};
use mck_testkit::{TestCluster, TransactionEnd, produce_transaction, shared_cluster};
use multicluster_kafka_client::{
    AbortedTransaction, ConnectOptions, Connection, DecodeError, DivergingEpoch,
    FetchPartitionData, LeaderHint, PartitionIssue, PartitionOptions, PartitionReader,
};

fn answer(records: Vec<u8>) -> FetchPartitionData {
    FetchPartitionData {
        high_watermark: 100,
        records: Bytes::from(records),
        ..FetchPartitionData::default()
    }
}

fn values(n: i32, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::plain(i, format!("{tag}{i}").as_bytes()))
        .collect()
}

/// (offset, value) of what `reader` hands out of `a`.
fn absorb(reader: &mut PartitionReader, a: &FetchPartitionData) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    reader
        .absorb(a, |r| {
            out.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ))
        })
        .unwrap();
    out
}

#[test]
fn records_below_the_position_and_control_batches_are_skipped_and_passed() {
    let mut bytes = record_batch(10, 0, &values(3, "a"));
    bytes.extend(marker(13, 7, true));
    bytes.extend(record_batch(14, 0, &values(2, "b")));
    let mut reader = PartitionReader::new(11, PartitionOptions::default());
    let got = absorb(&mut reader, &answer(bytes.clone()));
    assert_eq!(
        got,
        [
            (11, "a1".into()),
            (12, "a2".into()),
            (14, "b0".into()),
            (15, "b1".into())
        ]
    );
    assert_eq!(reader.next_offset(), 16);
    // The same answer again hands out nothing: all of it is behind.
    assert!(absorb(&mut reader, &answer(bytes)).is_empty());
    assert_eq!(reader.next_offset(), 16);
}

#[test]
fn a_batch_cut_off_at_the_end_is_fetched_again() {
    let mut bytes = record_batch(0, 0, &values(2, "a"));
    let second = record_batch(2, 0, &values(2, "b"));
    bytes.extend_from_slice(&second[..second.len() - 3]);
    let mut reader = PartitionReader::new(0, PartitionOptions::default());
    assert_eq!(absorb(&mut reader, &answer(bytes)).len(), 2);
    assert_eq!(reader.next_offset(), 2, "the cut batch is asked for again");
}

/// Producer 5 aborts offsets 0-1 (marker 2), producer 6 commits 3-4 (marker 5),
/// producer 5 writes again, transactionally, 6-7 and commits (marker 8); plain 9.
fn transactions() -> FetchPartitionData {
    let txn = |base, tag| with_producer(record_batch(base, 0x10, &values(2, tag)), 5);
    let mut bytes = txn(0, "aborted");
    bytes.extend(marker(2, 5, false));
    bytes.extend(with_producer(record_batch(3, 0x10, &values(2, "c")), 6));
    bytes.extend(marker(5, 6, true));
    bytes.extend(txn(6, "later"));
    bytes.extend(marker(8, 5, true));
    bytes.extend(record_batch(9, 0, &values(1, "plain")));
    let mut a = answer(bytes);
    a.aborted_transactions = Some(vec![AbortedTransaction {
        producer_id: 5,
        first_offset: 0,
    }]);
    a
}

#[test]
fn read_committed_skips_aborted_transactions_up_to_their_markers() {
    let a = transactions();

    let committed = PartitionOptions {
        read_committed: true,
        ..PartitionOptions::default()
    };
    let mut reader = PartitionReader::new(0, committed);
    let got: Vec<String> = absorb(&mut reader, &a)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(got, ["c0", "c1", "later0", "later1", "plain0"]);
    assert_eq!(reader.next_offset(), 10);

    let mut reader = PartitionReader::new(0, PartitionOptions::default());
    assert_eq!(
        absorb(&mut reader, &a).len(),
        7,
        "read_uncommitted sees all data"
    );
}

#[test]
fn an_answer_absorbed_in_parts_hands_out_each_record_once() {
    // The answer of `transactions`, taken a record at a time (stops come after
    // whole batches): read_committed still skips producer 5's aborted records, and
    // not its later committed ones, though the abort marker was passed before a
    // stop.
    let a = transactions();
    for read_committed in [true, false] {
        let options = PartitionOptions {
            read_committed,
            ..PartitionOptions::default()
        };
        let mut reader = PartitionReader::new(0, options);
        let (mut got, mut parts) = (Vec::new(), Vec::new());
        loop {
            let (n, more) = reader
                .absorb_up_to(&a, 1, |r| {
                    got.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap())
                })
                .unwrap();
            parts.push(n);
            if !more {
                break;
            }
        }
        let want: &[&str] = if read_committed {
            &["c0", "c1", "later0", "later1", "plain0"]
        } else {
            &[
                "aborted0", "aborted1", "c0", "c1", "later0", "later1", "plain0",
            ]
        };
        assert_eq!(got, want, "read_committed {read_committed}");
        assert_eq!(reader.next_offset(), 10);
        assert!(parts.len() >= 3, "stopped between batches: {parts:?}");
        assert!(
            parts.iter().all(|&n| n <= 2),
            "a batch at most per part: {parts:?}"
        );
    }
}

#[test]
fn error_codes_say_what_to_do_next() {
    let mut reader = PartitionReader::new(42, PartitionOptions::default());
    let with_code = |code| FetchPartitionData {
        error_code: code,
        ..FetchPartitionData::default()
    };
    let cases = [
        (1, PartitionIssue::OutOfRange { offset: 42 }),
        (
            6,
            PartitionIssue::LeaderMoved {
                code: 6,
                hint: None,
            },
        ),
        (
            74,
            PartitionIssue::LeaderMoved {
                code: 74,
                hint: None,
            },
        ),
        (3, PartitionIssue::Unknown { code: 3 }),
        (100, PartitionIssue::Unknown { code: 100 }),
        (29, PartitionIssue::Failed { code: 29 }),
    ];
    for (code, want) in cases {
        assert_eq!(reader.absorb(&with_code(code), |_| {}), Err(want));
    }
    let mut moved = with_code(6);
    moved.current_leader = Some(LeaderHint {
        leader_id: 2,
        leader_epoch: 9,
    });
    assert!(matches!(
        reader.absorb(&moved, |_| {}),
        Err(PartitionIssue::LeaderMoved {
            hint: Some(LeaderHint { leader_id: 2, .. }),
            ..
        })
    ));
    let mut diverged = answer(record_batch(42, 0, &values(1, "x")));
    diverged.diverging_epoch = Some(DivergingEpoch {
        epoch: 3,
        end_offset: 40,
    });
    let err = reader
        .absorb(&diverged, |_| panic!("nothing handed out"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the log diverged at epoch 3 (its end offset 40)"
    );
    assert_eq!(reader.next_offset(), 42, "the position stays");
}

#[test]
fn a_corrupt_batch_ends_the_answer_after_the_records_before_it() {
    let mut bytes = record_batch(0, 0, &values(2, "a"));
    let mut bad = record_batch(2, 0, &values(2, "b"));
    let last = bad.len() - 2;
    bad[last] ^= 0x40; // a value byte: only the CRC notices
    bytes.extend(bad);
    let checked = PartitionOptions {
        check_crcs: true,
        ..PartitionOptions::default()
    };
    let mut reader = PartitionReader::new(0, checked);
    let mut got = 0;
    let err = reader
        .absorb(&answer(bytes.clone()), |_| got += 1)
        .unwrap_err();
    assert_eq!(got, 2);
    assert!(
        matches!(
            err,
            PartitionIssue::Corrupt {
                base_offset: 2,
                error: DecodeError::Crc { .. }
            }
        ),
        "{err}"
    );
    assert_eq!(reader.next_offset(), 2);
    // Without check.crcs the flipped byte is just data.
    let mut reader = PartitionReader::new(0, PartitionOptions::default());
    assert_eq!(absorb(&mut reader, &answer(bytes)).len(), 4);
}

/// Every record of partition 0 of `topic`, read natively from 0 to the high watermark.
fn read_all(addr: &str, topic: &str, read_committed: bool) -> Vec<(i64, String)> {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut conn = Connection::connect(addr, &ConnectOptions::default())
                .await
                .unwrap_or_else(|e| panic!("connects: {e}"));
            let id = conn.metadata(Some(&[topic])).await.unwrap().topics[0].topic_id;
            let options = PartitionOptions {
                read_committed,
                check_crcs: true,
                ..PartitionOptions::default()
            };
            let mut reader = PartitionReader::new(0, options);
            let mut out = Vec::new();
            loop {
                let a = conn
                    .fetch_once(
                        topic,
                        id,
                        0,
                        reader.next_offset(),
                        64 * 1024,
                        read_committed,
                    )
                    .await
                    .unwrap();
                reader
                    .absorb(&a, |r| {
                        out.push((
                            r.offset,
                            String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                        ))
                    })
                    .unwrap();
                if reader.next_offset() >= a.high_watermark {
                    break out;
                }
            }
        })
        .await
        .expect("read within a minute")
    })
}

#[test]
fn transactions_of_a_real_producer_read_committed_and_uncommitted() {
    let c = shared_cluster("native").unwrap_or_else(|e| panic!("cluster starts: {e:?}"));
    let addr = c.bootstrap_servers().split(',').next().unwrap().to_string();
    let topic = "native-transactions";
    c.create_topic(topic, 1).unwrap();
    let recs = |tag: &str, n: usize| -> Vec<mck_testkit::TestRecord> {
        (0..n)
            .map(|i| mck_testkit::TestRecord::value(format!("{tag}{i}")).to_partition(0))
            .collect()
    };
    c.produce(topic, &recs("plain", 3)).unwrap();
    produce_transaction(c, topic, &recs("aborted", 3), TransactionEnd::Abort).unwrap();
    produce_transaction(c, topic, &recs("committed", 2), TransactionEnd::Commit).unwrap();
    c.produce(topic, &recs("after", 2)).unwrap();

    let committed: Vec<String> = read_all(&addr, topic, true)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        committed,
        [
            "plain0",
            "plain1",
            "plain2",
            "committed0",
            "committed1",
            "after0",
            "after1"
        ]
    );
    let all = read_all(&addr, topic, false);
    let values: Vec<&str> = all.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(
        values,
        [
            "plain0",
            "plain1",
            "plain2",
            "aborted0",
            "aborted1",
            "aborted2",
            "committed0",
            "committed1",
            "after0",
            "after1"
        ]
    );
    // The markers take offsets: 6 after the aborted records, 9 after the committed.
    let offsets: Vec<i64> = all.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4, 5, 7, 8, 10, 11]);
}

#[test]
fn absorbed_to_be_shared_each_record_comes_with_the_buffer_its_bytes_are_in() {
    // A plain batch's records are in the answer; a compressed one's (lz4) in the
    // buffer it was decompressed into, which a part kept of outlives the reader's
    // next batches. Each comes with its batch's leader epoch (3 in the test kit's).
    let mut bytes = record_batch(0, 0, &values(3, "plain"));
    bytes.extend(record_batch(3, 3, &values(3, "lz4-")));
    bytes.extend(record_batch(6, 3, &values(2, "next")));
    let a = answer(bytes);
    let mut reader = PartitionReader::new(1, PartitionOptions::default());
    let mut kept: Vec<(i64, Bytes)> = Vec::new();
    let (handed, more) = reader
        .absorb_shared(&a, usize::MAX, |r, buffer, epoch| {
            assert_eq!(epoch, 3, "record {}", r.offset);
            let value = r.value.unwrap();
            if r.offset < 3 {
                assert_eq!(buffer.as_ptr(), a.records.as_ptr(), "the answer's records");
            } else {
                assert_ne!(buffer.as_ptr(), a.records.as_ptr(), "a buffer of their own");
            }
            kept.push((r.offset, buffer.slice_ref(value)));
        })
        .unwrap();
    assert_eq!((handed, more), (7, false));
    let kept: Vec<(i64, &[u8])> = kept.iter().map(|(o, b)| (*o, &b[..])).collect();
    assert_eq!(
        kept,
        [
            (1, &b"plain1"[..]),
            (2, b"plain2"),
            (3, b"lz4-0"),
            (4, b"lz4-1"),
            (5, b"lz4-2"),
            (6, b"next0"),
            (7, b"next1"),
        ]
    );
    assert_eq!(reader.next_offset(), 8);
}
