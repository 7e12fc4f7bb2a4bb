//! The native path's record-batch decoder on batches built byte by byte (the test
//! kit's `record_batch`): fields, varints at their edges, headers, log append time,
//! cut-off and control batches, every codec in every form producers write, the bound
//! on decompressed bytes and CRC-32C.
//! Batches from real brokers and Kafka's Java producer: `codecs.rs`.

use mck_testkit::record_batch::{
    BASE_TIMESTAMP, SnappyForm, TestRecord, compress, encode_records, put_varlong, record_batch,
    record_batch_with,
};
use multicluster_kafka_client::{Batch, Batches, Cursor, DecodeError, Record};

fn rec(
    ts: i64,
    od: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&[u8], Option<&[u8]>)],
) -> TestRecord {
    TestRecord {
        timestamp_delta: ts,
        offset_delta: od,
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect(),
    }
}

fn decode_all(buf: &[u8]) -> Vec<(Batch<'_>, Vec<Record<'_>>)> {
    Batches::new(buf)
        .map(|b| {
            let b = b.unwrap();
            (b, b.records().unwrap().map(|r| r.unwrap()).collect())
        })
        .collect()
}

/// (offset, timestamp, key, value, headers) of every record, decompressing as needed.
type Owned = (
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
);

fn owned(buf: &[u8], limit: usize) -> Result<Vec<Owned>, DecodeError> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for b in Batches::new(buf) {
        let b = b?;
        for r in b.records_in(&mut scratch, limit)? {
            let r = r?;
            let headers = r
                .headers()
                .map(|h| h.map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))))
                .collect::<Result<_, _>>()?;
            out.push((
                r.offset,
                r.timestamp,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                headers,
            ));
        }
    }
    Ok(out)
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
    let buf = record_batch(
        100,
        0,
        &[
            rec(0, 0, Some(b"a"), Some(b"x"), &[]),
            rec(-5, 1, None, Some(&big), &[]),
            rec(
                70,
                2,
                Some(b""),
                None,
                &[(b"h1", Some(b"one")), (b"h2", None), (b"", Some(b""))],
            ),
        ],
    );
    let all = decode_all(&buf);
    assert_eq!(all.len(), 1);
    let (b, records) = &all[0];
    b.check_crc().unwrap();
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
    assert_eq!(records[2].header_count(), 3);
    assert_eq!(records[0].headers().count(), 0);
}

#[test]
fn log_append_time_gives_every_record_the_max_timestamp() {
    let buf = record_batch(
        0,
        0x08,
        &[TestRecord::plain(0, b"a"), TestRecord::plain(1, b"b")],
    );
    let all = decode_all(&buf);
    let ts: Vec<_> = all[0].1.iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, [5000, 5000]);
}

#[test]
fn a_batch_cut_off_at_the_end_is_skipped_cleanly() {
    let first = record_batch(
        0,
        0,
        &[TestRecord::plain(0, b"a"), TestRecord::plain(1, b"b")],
    );
    let second = record_batch(2, 0, &[TestRecord::plain(0, b"c")]);
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
fn control_batches_are_marked() {
    // A commit marker: control key (version 0, type 1), value (version, epoch).
    let marker = record_batch(
        1,
        0x30,
        &[rec(
            0,
            0,
            Some(&[0, 0, 0, 1]),
            Some(&[0, 0, 0, 0, 0, 0]),
            &[],
        )],
    );
    let mut records = record_batch(0, 0x10, &[TestRecord::plain(0, b"data")]);
    records.extend_from_slice(&marker);
    let all = decode_all(&records);
    assert!(all[0].0.is_transactional() && !all[0].0.is_control());
    assert!(all[1].0.is_control() && all[1].0.is_transactional());
}

#[test]
fn bad_batches_are_errors() {
    let good = record_batch(0, 0, &[TestRecord::plain(0, b"a")]);
    let mut bad_crc = good.clone();
    let value_byte = bad_crc.len() - 2; // the value "a"; the last byte is the header count
    bad_crc[value_byte] ^= 1;
    let err = decode_all(&bad_crc)[0].0.check_crc().unwrap_err();
    assert!(matches!(err, DecodeError::Crc { .. }), "{err}");
    assert!(err.to_string().starts_with("CRC-32C 0x"), "{err}");
    let mut magic1 = good.clone();
    magic1[16] = 1;
    assert_eq!(
        Batches::new(&magic1).next().unwrap().unwrap_err(),
        DecodeError::Magic(1)
    );
    let mut codec7 = good.clone();
    codec7[22] |= 7;
    assert_eq!(
        Batches::new(&codec7).next().unwrap().unwrap_err(),
        DecodeError::Codec(7)
    );
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

fn mixed_records() -> Vec<TestRecord> {
    (0..200)
        .map(|i| {
            let mut r = TestRecord::plain(
                i,
                format!("value-{i}-{}", "x".repeat(i as usize)).as_bytes(),
            );
            if i % 3 == 0 {
                r.headers
                    .push((b"trace".to_vec(), Some(i.to_string().into_bytes())));
            }
            if i % 7 == 0 {
                r.key = None;
            }
            r
        })
        .collect()
}

#[test]
fn every_codec_in_every_form_gives_the_same_records() {
    let records = mixed_records();
    let plain = owned(&record_batch(50, 0, &records), usize::MAX).unwrap();
    assert_eq!(plain.len(), 200);
    assert_eq!(plain[3].4, [(b"trace".to_vec(), Some(b"3".to_vec()))]);
    assert_eq!(plain[7].2, None);
    assert_eq!(plain[199].0, 249);
    assert_eq!(plain[10].1, BASE_TIMESTAMP + 10);
    let forms = [
        (1, SnappyForm::Raw, "gzip"),
        (2, SnappyForm::Raw, "snappy"),
        (
            2,
            SnappyForm::Xerial { block: 1024 },
            "snappy (xerial, small blocks)",
        ),
        (
            2,
            SnappyForm::Xerial { block: 32 * 1024 },
            "snappy (xerial)",
        ),
        (3, SnappyForm::Raw, "lz4"),
        (4, SnappyForm::Raw, "zstd"),
    ];
    for (codec, form, what) in forms {
        let buf = record_batch_with(50, codec, form, &records);
        let b = Batches::new(&buf).next().unwrap().unwrap();
        assert_eq!(b.compression(), codec as u8, "{what}");
        b.check_crc().unwrap();
        assert!(
            buf.len() < encode_records(&records).len(),
            "{what} compressed"
        );
        assert_eq!(owned(&buf, usize::MAX).unwrap(), plain, "{what}");
        let err = b
            .records()
            .err()
            .expect("a compressed batch needs a buffer");
        assert!(
            matches!(err, DecodeError::Decompress { .. }),
            "{what}: {err}"
        );
    }
}

#[test]
fn decompressed_bytes_are_bounded_for_every_codec() {
    // 4 MiB of one byte compress to a few KiB: a bomb for a small limit.
    let records = vec![TestRecord {
        value: Some(vec![b'z'; 4 << 20]),
        ..TestRecord::default()
    }];
    let size = encode_records(&records).len();
    for (codec, form) in [
        (1, SnappyForm::Raw),
        (2, SnappyForm::Raw),
        (2, SnappyForm::Xerial { block: 32 * 1024 }),
        (3, SnappyForm::Raw),
        (4, SnappyForm::Raw),
    ] {
        let buf = record_batch_with(0, codec, form, &records);
        assert!(buf.len() < size / 10, "codec {codec}: {} bytes", buf.len());
        let b = Batches::new(&buf).next().unwrap().unwrap();
        let mut scratch = Vec::new();
        let err = b.records_in(&mut scratch, 1 << 20).err().unwrap();
        assert!(
            matches!(err, DecodeError::TooLarge { limit, .. } if limit == 1 << 20),
            "codec {codec}: {err}"
        );
        assert!(
            scratch.capacity() <= (2 << 20) + 64 * 1024,
            "codec {codec}: held {}",
            scratch.capacity()
        );
        // At exactly its size it decodes.
        assert_eq!(
            b.records_in(&mut scratch, size).unwrap().count(),
            1,
            "codec {codec}"
        );
    }
}

#[test]
fn corrupt_compressed_records_are_errors() {
    let records = mixed_records();
    for (codec, form) in [
        (1, SnappyForm::Raw),
        (2, SnappyForm::Raw),
        (2, SnappyForm::Xerial { block: 1024 }),
        (3, SnappyForm::Raw),
        (4, SnappyForm::Raw),
    ] {
        let body = compress(codec, form, &encode_records(&records));
        let whole = owned(&record_batch_with(0, codec, form, &records), 1 << 20).unwrap();
        for cut in [0, 1, body.len() / 2, body.len() - 1] {
            let mut buf = record_batch_with(0, codec, form, &records);
            let header = buf.len() - body.len();
            buf.truncate(header + cut);
            // The batch's length field still says the whole: set it to what is left.
            let len = (buf.len() - 12) as i32;
            buf[8..12].copy_from_slice(&len.to_be_bytes());
            // Without its last byte, a stream whose records are all there may still
            // decode (lz4's end mark); then to the same records. Else an error.
            match owned(&buf, 1 << 20) {
                Err(_) => {}
                Ok(got) if cut == body.len() - 1 && got == whole => {}
                Ok(got) => panic!("codec {codec} {form:?} cut at {cut}: {} records", got.len()),
            }
        }
    }
}

/// A record's header count is bounded by the bytes left in it (two at least per
/// header): a count it cannot hold is a decode error, never an allocation sized by it
/// (the `record_batch` fuzz target once made the mirror hash ask for 12 GB this way).
#[test]
fn a_header_count_beyond_the_record_bytes_is_refused() {
    let one = rec(0, 0, None, None, &[(b"", None)]);
    let mut buf = record_batch(0, 0, &[one]);
    // The record ends with its header count (1), the header's key length (0) and its
    // null value (-1): the smallest header there is.
    let n = buf.len();
    assert_eq!(&buf[n - 3..], &[0x02, 0x00, 0x01]);
    let all = decode_all(&buf);
    assert_eq!(all[0].1[0].header_count(), 1);
    assert_eq!(all[0].1[0].headers().count(), 1);
    assert!(all[0].1[0].headers().all(|h| h.is_ok()));

    buf[n - 3] = 0x04; // two headers in two bytes
    let batch = Batches::new(&buf).next().unwrap().unwrap();
    let records: Vec<_> = batch.records().unwrap().collect();
    assert!(
        matches!(records[..], [Err(DecodeError::Length(2))]),
        "{records:?}"
    );
}
