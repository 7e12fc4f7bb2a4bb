//! Unit tests of the decoder, the Fetch v4 codec and the passes.

use super::batch::*;
use super::fetch::*;
use super::passes::*;
use super::*;

/// Kafka's zigzag varint, for building test data.
fn put_varlong(b: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    while u >= 0x80 {
        b.push((u as u8) | 0x80);
        u >>= 7;
    }
    b.push(u as u8);
}

fn put_bytes(b: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        None => put_varlong(b, -1),
        Some(s) => {
            put_varlong(b, s.len() as i64);
            b.extend_from_slice(s);
        }
    }
}

/// A test record: timestamp delta, offset delta, key, value, headers.
type TestRecord<'a> = (
    i64,
    i32,
    Option<&'a [u8]>,
    Option<&'a [u8]>,
    Vec<(&'a [u8], Option<&'a [u8]>)>,
);

/// A record batch (magic 2) with a correct CRC-32C.
fn batch(base_offset: i64, attributes: i16, records: &[TestRecord<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for (ts, od, key, value, headers) in records {
        let mut r = vec![0u8]; // attributes
        put_varlong(&mut r, *ts);
        put_varlong(&mut r, (*od).into());
        put_bytes(&mut r, *key);
        put_bytes(&mut r, *value);
        put_varlong(&mut r, headers.len() as i64);
        for (k, v) in headers {
            put_bytes(&mut r, Some(k));
            put_bytes(&mut r, *v);
        }
        put_varlong(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let last = records.last().map_or(0, |r| r.1);
    let mut checked = Vec::new();
    checked.extend_from_slice(&attributes.to_be_bytes());
    checked.extend_from_slice(&last.to_be_bytes());
    checked.extend_from_slice(&1_000i64.to_be_bytes()); // base timestamp
    checked.extend_from_slice(&5_000i64.to_be_bytes()); // max timestamp
    checked.extend_from_slice(&7i64.to_be_bytes()); // producer id
    checked.extend_from_slice(&0i16.to_be_bytes());
    checked.extend_from_slice(&0i32.to_be_bytes());
    checked.extend_from_slice(&(records.len() as i32).to_be_bytes());
    checked.extend_from_slice(&body);
    let mut b = Vec::new();
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((4 + 1 + 4 + checked.len()) as i32).to_be_bytes());
    b.extend_from_slice(&3i32.to_be_bytes()); // partition leader epoch
    b.push(2);
    b.extend_from_slice(&crc32c::crc32c(&checked).to_be_bytes());
    b.extend_from_slice(&checked);
    b
}

fn plain_record(od: i32, value: &[u8]) -> TestRecord<'_> {
    (od.into(), od, s(b"k"), Some(value), vec![])
}

fn s(b: &[u8]) -> Option<&[u8]> {
    Some(b)
}

fn decode_all(buf: &[u8]) -> Vec<(Batch<'_>, Vec<Record<'_>>)> {
    Batches::new(buf)
        .map(|b| {
            let b = b.unwrap();
            (b, b.records().unwrap().map(|r| r.unwrap()).collect())
        })
        .collect()
}

#[test]
fn the_crc32c_crate_gives_the_castagnoli_check_value() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn varints_decode_at_their_edges() {
    let cases: &[(&[u8], i64)] = &[
        (&[0x00], 0),
        (&[0x01], -1),
        (&[0x02], 1),
        (&[0x7f], -64),
        (&[0x80, 0x01], 64),
        (&[0xd8, 0x04], 300),
        (&[0xfe, 0xff, 0xff, 0xff, 0x0f], i32::MAX.into()),
        (&[0xff, 0xff, 0xff, 0xff, 0x0f], i32::MIN.into()),
    ];
    for (bytes, v) in cases {
        let mut c = Cursor::new(bytes);
        assert_eq!(c.varint().map(i64::from), Ok(*v), "{bytes:02x?}");
        assert_eq!(c.pos, bytes.len());
        assert_eq!(
            Cursor::new(bytes).varlong(),
            Ok(*v),
            "{bytes:02x?} as varlong"
        );
    }
    for v in [i64::MIN, i64::MAX, i64::MIN + 1, 1 << 35, -(1 << 35)] {
        let mut b = Vec::new();
        put_varlong(&mut b, v);
        assert_eq!(Cursor::new(&b).varlong(), Ok(v));
    }
    let mut max = Vec::new();
    put_varlong(&mut max, i64::MAX);
    assert_eq!(max.len(), 10);
    // Truncated, too long, and bits beyond 32 / 64.
    assert_eq!(Cursor::new(&[0x80]).varint(), Err(DecodeError::Truncated));
    assert_eq!(Cursor::new(&[]).varint(), Err(DecodeError::Truncated));
    assert_eq!(
        Cursor::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).varint(),
        Err(DecodeError::Varint)
    );
    assert_eq!(
        Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0x1f]).varint(),
        Err(DecodeError::Varint)
    );
    assert_eq!(
        Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03]).varlong(),
        Err(DecodeError::Varint)
    );
}

#[test]
fn records_give_offsets_timestamps_keys_values_and_headers() {
    let big = vec![b'v'; 300]; // a length of two varint bytes
    let buf = batch(
        100,
        0,
        &[
            (0, 0, s(b"a"), s(b"x"), vec![]),
            (-5, 1, None, s(&big), vec![]),
            (
                70,
                2,
                s(b""),
                None,
                vec![(&b"h1"[..], s(b"one")), (b"h2", None), (b"", s(b""))],
            ),
        ],
    );
    let all = decode_all(&buf);
    assert_eq!(all.len(), 1);
    let (b, records) = &all[0];
    assert!(b.crc_ok());
    assert_eq!(
        (b.base_offset, b.partition_leader_epoch, b.producer_id),
        (100, 3, 7)
    );
    assert_eq!(b.next_offset(), 103);
    assert!(!b.is_control() && !b.is_transactional() && !b.log_append_time());
    let offsets: Vec<_> = records.iter().map(|r| (r.offset, r.timestamp)).collect();
    assert_eq!(offsets, [(100, 1000), (101, 995), (102, 1070)]);
    assert_eq!(records[0].key, Some(b"a".as_slice()));
    assert_eq!(records[0].value, Some(b"x".as_slice()));
    assert_eq!(records[1].key, None, "null key (-1)");
    assert_eq!(records[1].value, Some(big.as_slice()));
    assert_eq!(records[2].key, Some(b"".as_slice()), "empty, not null");
    assert_eq!(records[2].value, None, "null value (-1)");
    let headers: Vec<_> = records[2].headers().map(|h| h.unwrap()).collect();
    assert_eq!(
        headers,
        [
            (b"h1".as_slice(), Some(b"one".as_slice())),
            (b"h2".as_slice(), None),
            (b"".as_slice(), Some(b"".as_slice())),
        ]
    );
    assert_eq!(records[0].headers().count(), 0);
}

#[test]
fn log_append_time_gives_every_record_the_max_timestamp() {
    let buf = batch(0, 0x08, &[plain_record(0, b"a"), plain_record(1, b"b")]);
    let all = decode_all(&buf);
    let ts: Vec<_> = all[0].1.iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, [5000, 5000]);
}

#[test]
fn a_batch_cut_off_at_the_end_is_skipped_cleanly() {
    let first = batch(0, 0, &[plain_record(0, b"a"), plain_record(1, b"b")]);
    let second = batch(2, 0, &[plain_record(0, b"c")]);
    for cut in [1, 11, 12, 30, second.len() - 1] {
        let mut buf = first.clone();
        buf.extend_from_slice(&second[..cut]);
        let mut batches = Batches::new(&buf);
        let b = batches.next().unwrap().unwrap();
        assert_eq!(b.records().unwrap().count(), 2);
        assert!(batches.next().is_none(), "cut at {cut}: no partial batch");
        assert_eq!(batches.partial(), cut);
    }
    let mut whole = first.clone();
    whole.extend_from_slice(&second);
    assert_eq!(decode_all(&whole).len(), 2);
    assert!(Batches::new(&[]).next().is_none());
}

#[test]
fn control_batches_are_reported_and_skipped_by_the_walk() {
    // A commit marker: control key (version 0, type 1), value (version, epoch).
    let marker = batch(
        1,
        0x30,
        &[(0, 0, s(&[0, 0, 0, 1]), s(&[0, 0, 0, 0, 0, 0]), vec![])],
    );
    let mut records = batch(0, 0x10, &[plain_record(0, b"data")]);
    records.extend_from_slice(&marker);
    records.extend_from_slice(&batch(2, 0, &[plain_record(0, b"after")]));
    let all = decode_all(&records);
    assert!(all[0].0.is_transactional() && !all[0].0.is_control());
    assert!(all[1].0.is_control() && all[1].0.is_transactional());
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

#[test]
fn bad_batches_are_errors() {
    let good = batch(0, 0, &[plain_record(0, b"a")]);
    let mut bad_crc = good.clone();
    let value_byte = bad_crc.len() - 2; // the value "a"; the last byte is the header count
    bad_crc[value_byte] ^= 1;
    assert!(!decode_all(&bad_crc)[0].0.crc_ok());
    let mut magic1 = good.clone();
    magic1[16] = 1;
    assert_eq!(
        Batches::new(&magic1).next().unwrap().unwrap_err(),
        DecodeError::Magic(1)
    );
    let mut gzip = good.clone();
    gzip[22] |= 1;
    let b = Batches::new(&gzip).next().unwrap().unwrap();
    assert_eq!(b.records().err(), Some(DecodeError::Compressed(1)));
    let mut short = good.clone();
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        Batches::new(&short).next(),
        Some(Err(DecodeError::Length(10)))
    ));
    // A record count above the records there are.
    let mut count = good.clone();
    count[57..61].copy_from_slice(&2i32.to_be_bytes());
    let b = Batches::new(&count).next().unwrap().unwrap();
    let r: Vec<_> = b.records().unwrap().collect();
    assert_eq!(r.len(), 2);
    assert_eq!(r[1], Err(DecodeError::Count));
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
