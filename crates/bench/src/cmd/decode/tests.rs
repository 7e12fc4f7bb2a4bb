//! Unit tests of the Fetch v4 codec and the passes (the record-batch decoder is the
//! library's, tested there).

use super::fetch::*;
use super::passes::*;
use super::*;
use mck_testkit::record_batch::{TestRecord, record_batch};

fn batch(base_offset: i64, attributes: i16, records: &[TestRecord]) -> Vec<u8> {
    record_batch(base_offset, attributes, records)
}

fn plain_record(od: i32, value: &[u8]) -> TestRecord {
    TestRecord::plain(od, value)
}

#[test]
fn control_batches_are_reported_and_skipped_by_the_walk() {
    // A commit marker: control key (version 0, type 1), value (version, epoch).
    let marker = batch(
        1,
        0x30,
        &[TestRecord {
            key: Some(vec![0, 0, 0, 1]),
            value: Some(vec![0, 0, 0, 0, 0, 0]),
            ..TestRecord::default()
        }],
    );
    let mut records = batch(0, 0x10, &[plain_record(0, b"data")]);
    records.extend_from_slice(&marker);
    records.extend_from_slice(&batch(2, 0, &[plain_record(0, b"after")]));
    let frame = Bytes::from(response(&[("t", vec![(0, 0, Some(records.clone()))])]));
    let mut seen = Vec::new();
    let n = walk(&[frame], true, |_, r| {
        seen.push((r.offset, r.value.map(<[u8]>::to_vec)))
    });
    assert_eq!(n, 2);
    assert_eq!(
        seen,
        [(0, Some(b"data".to_vec())), (2, Some(b"after".to_vec()))]
    );
}

/// A Fetch v4 response frame (without its size) with one topic per entry:
/// (partition, error code, records).
#[allow(clippy::type_complexity)]
fn response(topics: &[(&str, Vec<(i32, i16, Option<Vec<u8>>)>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&42i32.to_be_bytes());
    b.extend_from_slice(&9i32.to_be_bytes()); // throttle
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (name, partitions) in topics {
        put_string(&mut b, name);
        b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for (p, err, records) in partitions {
            b.extend_from_slice(&p.to_be_bytes());
            b.extend_from_slice(&err.to_be_bytes());
            b.extend_from_slice(&1000i64.to_be_bytes()); // high watermark
            b.extend_from_slice(&990i64.to_be_bytes()); // last stable offset
            if *p == 1 {
                // Two aborted transactions.
                b.extend_from_slice(&2i32.to_be_bytes());
                for (pid, first) in [(5i64, 10i64), (6, 20)] {
                    b.extend_from_slice(&pid.to_be_bytes());
                    b.extend_from_slice(&first.to_be_bytes());
                }
            } else {
                b.extend_from_slice(&(-1i32).to_be_bytes());
            }
            match records {
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(r) => {
                    b.extend_from_slice(&(r.len() as i32).to_be_bytes());
                    b.extend_from_slice(r);
                }
            }
        }
    }
    b
}

#[test]
fn a_fetch_v4_response_parses() {
    let records = batch(0, 0, &[plain_record(0, b"a")]);
    let frame = response(&[
        (
            "orders",
            vec![(0, 0, Some(records.clone())), (1, 0, None), (2, 6, None)],
        ),
        ("empty", vec![]),
    ]);
    let r = parse_fetch_v4(&frame).unwrap();
    assert_eq!((r.correlation_id, r.throttle_time_ms), (42, 9));
    assert_eq!(r.topics.len(), 2);
    assert_eq!(r.topics[0].name, "orders");
    let p = &r.topics[0].partitions;
    assert_eq!(
        p[0],
        FetchPartition {
            partition: 0,
            error_code: 0,
            high_watermark: 1000,
            last_stable_offset: 990,
            aborted_transactions: None,
            records: Some(records.as_slice()),
        }
    );
    assert_eq!(p[1].aborted_transactions, Some(vec![(5, 10), (6, 20)]));
    assert_eq!(p[1].records, None);
    assert_eq!(p[2].error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    assert!(r.topics[1].partitions.is_empty());
    // Every truncation is an error, never a panic.
    for cut in 0..frame.len() {
        assert!(parse_fetch_v4(&frame[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_fetch_v4_request_encodes_the_schema_fields_in_order() {
    let req = FetchV4 {
        correlation_id: 7,
        topic: "t",
        partition: 2,
        fetch_offset: 300,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1024,
        partition_max_bytes: 512,
        isolation_level: 1,
    }
    .encode();
    let mut want = Vec::new();
    let client = CLIENT_ID.as_bytes();
    let size = 2 + 2 + 4 + 2 + client.len() + 4 + 4 + 4 + 4 + 1 + 4 + 3 + 4 + 4 + 8 + 4;
    want.extend_from_slice(&(size as i32).to_be_bytes());
    want.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 7]);
    want.extend_from_slice(&(client.len() as i16).to_be_bytes());
    want.extend_from_slice(client);
    want.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // replica id -1
    want.extend_from_slice(&500i32.to_be_bytes());
    want.extend_from_slice(&1i32.to_be_bytes());
    want.extend_from_slice(&1024i32.to_be_bytes());
    want.push(1);
    want.extend_from_slice(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2]);
    want.extend_from_slice(&300i64.to_be_bytes());
    want.extend_from_slice(&512i32.to_be_bytes());
    assert_eq!(req, want);
}

#[test]
fn the_variants_see_the_same_records() {
    let mut records = batch(0, 0, &[plain_record(0, b"aa"), plain_record(1, b"bbb")]);
    records.extend_from_slice(&batch(2, 0, &[plain_record(0, b"c")]));
    let frame = Bytes::from(response(&[("t", vec![(0, 0, Some(records))])]));
    let mut scratch = Vec::new();
    for v in Variant::ALL {
        assert_eq!(pass(std::slice::from_ref(&frame), v, &mut scratch), 3);
    }
    assert_eq!(scratch, b"kc", "the last record's key and value");
}
