use super::entry::*;
use super::*;

fn entry(
    topic: u32,
    partition: i32,
    offset: i64,
    raw: RawSpans,
    value: &str,
) -> BatchEntry<String> {
    BatchEntry::new(
        (topic, partition, offset),
        (Some(offset * 10), Some(0)),
        raw,
        Some(7),
        EntryHeaders::default(),
        value.to_string(),
    )
}

/// Two topics; keys "k1" and "k2" and raw values "X" and "Z" in the shared data,
/// one record without either.
fn batch() -> RecordBatch<String> {
    let mut b = RecordBatch::new(Arc::from("east"));
    let (a, t) = (Arc::from("a"), Arc::from("b"));
    assert_eq!(b.topic_index(&a), 0);
    assert_eq!(b.topic_index(&t), 1);
    assert_eq!(b.topic_index(&a), 0, "a topic is added once");
    b.data = Bytes::from_static(b"k1k2XZ");
    let spans = |key, value| RawSpans { key, value };
    b.entries = vec![
        entry(0, 0, 5, spans(Some((0, 2)), Some((4, 1))), "x"),
        entry(1, 3, 9, spans(None, None), "y"),
        entry(0, 0, 6, spans(Some((2, 2)), Some((5, 1))), "z"),
    ];
    b
}

#[test]
fn borrowed_and_owned_records_agree() {
    let b = batch();
    assert_eq!((b.len(), b.is_empty(), &**b.cluster()), (3, false, "east"));
    let borrowed: Vec<Record<String>> = b.iter().map(|r| r.to_record()).collect();
    let owned: Vec<Record<String>> = b.clone().into_iter().collect();
    assert_eq!(borrowed, owned);
    let r = &owned[2];
    assert_eq!(
        (&*r.cluster, &*r.topic, r.partition, r.offset, r.timestamp),
        ("east", "a", 0, 6, Some(60))
    );
    assert_eq!(r.key.as_deref(), Some(&b"k2"[..]));
    assert_eq!(owned[1].key, None);
    assert_eq!(&*owned[1].topic, "b");
}

#[test]
fn a_borrowed_record_shares_its_key_and_names_its_split() {
    let b = batch();
    let first = b.get(0).unwrap();
    assert_eq!(first.key, Some(&b"k1"[..]));
    assert_eq!(first.key_bytes().as_deref(), Some(&b"k1"[..]));
    assert_eq!(first.raw_value(), Some(&b"X"[..]));
    assert_eq!(first.raw_value_bytes().as_deref(), Some(&b"X"[..]));
    assert_eq!(b.get(1).unwrap().raw_value(), None, "a null value");
    assert_eq!(
        first.split_id().to_string(),
        b.iter().next().unwrap().split_id().to_string()
    );
    assert!(b.get(3).is_none());
    assert_eq!(
        b.iter().rev().map(|r| r.offset).collect::<Vec<_>>(),
        [6, 9, 5]
    );
    assert_eq!(b.iter().len(), 3);
}

#[test]
fn a_shared_value_is_read_from_its_buffer_and_moves_and_hashes_like_a_copied_one() {
    // Record 0's value is copied into the data, record 1's and 2's are shared
    // from two answers.
    let answers = [
        Bytes::from_static(b"..header..LARGE-ONE.."),
        Bytes::from_static(b"LARGE-TWO"),
    ];
    let mut b = batch();
    b.shared = answers.to_vec();
    let at = |index, offset, len| shared_span(index, offset, len).expect("it fits");
    b.entries[1] = entry(
        1,
        3,
        9,
        RawSpans {
            key: None,
            value: Some(at(0, 10, 9)),
        },
        "y",
    );
    b.entries[2] = entry(
        0,
        0,
        6,
        RawSpans {
            key: Some((2, 2)),
            value: Some(at(1, 0, 9)),
        },
        "z",
    );
    let raw: Vec<Option<&[u8]>> = b.iter().map(|r| r.raw_value()).collect();
    assert_eq!(
        raw,
        [
            Some(&b"X"[..]),
            Some(&b"LARGE-ONE"[..]),
            Some(&b"LARGE-TWO"[..])
        ]
    );
    // The spans name the same bytes: the data first, then the shared buffers.
    let buffers: Vec<&Bytes> = b.byte_buffers().collect();
    assert_eq!(buffers.len(), 3);
    let at_span = |(i, range): (usize, std::ops::Range<usize>)| &buffers[i][range];
    for (i, want) in raw.iter().enumerate() {
        assert_eq!(b.value_span(i).map(at_span), *want, "value {i}");
        assert_eq!(b.key_span(i).map(at_span), b.get(i).unwrap().key, "key {i}");
    }
    assert_eq!(b.value_span(3), None);
    let second = b.get(1).unwrap();
    let shared = second.raw_value_bytes().unwrap();
    assert_eq!(shared.as_ptr(), answers[0][10..].as_ptr(), "no copy");
    assert_eq!(
        b.get(2).unwrap().key,
        Some(&b"k2"[..]),
        "keys stay in the data"
    );
    // A hash from the shared bytes is the hash of the same bytes copied.
    let copied = |e: &BatchEntry<String>, value: &'static [u8]| {
        let mut plain = RecordBatch::<String>::new(Arc::from("east"));
        plain.data = Bytes::from_static(value);
        let mut e = e.clone();
        (e.value_start, e.value_len) = (0, value.len() as u32);
        e.hash(plain.buffers())
    };
    let mut unhashed = b.entries[1].clone();
    unhashed.hashed = false;
    assert_eq!(unhashed.hash(b.buffers()), copied(&unhashed, b"LARGE-ONE"));
    // Split off and moved, the values come along.
    let rest = b.split_off(1).unwrap();
    assert_eq!(rest.get(1).unwrap().raw_value(), Some(&b"LARGE-TWO"[..]));
    let (bytes, entries) = rest.into_parts();
    let mut moved = RecordBatch::<String>::new(Arc::from("east"));
    let mut data = Vec::new();
    moved.extend_from(&bytes, entries.into_iter().rev(), &mut data);
    moved.set_data(data);
    let values: Vec<Option<Bytes>> = moved.iter().map(|r| r.raw_value_bytes()).collect();
    assert_eq!(
        values,
        [Some(answers[1].clone()), Some(answers[0].slice(10..19))]
    );
    assert_eq!(
        moved.shared.len(),
        3,
        "each answer once and the keys' data, nothing copied"
    );
    assert!(moved.data.is_empty());
    assert_eq!(moved.get(0).unwrap().key, Some(&b"k2"[..]));
    assert_eq!(moved.get(0).unwrap().key_bytes().unwrap(), &b"k2"[..]);
    // What does not fit is refused (the value is then copied).
    assert_eq!(shared_span(0, OFFSET_MASK + 1, 1), None);
    assert_eq!(shared_span(SHARED >> INDEX_SHIFT, 0, 1), None);
    assert_eq!(shared_span(0, 0, NO_KEY), None);
    assert!(shared_span(0, OFFSET_MASK, 1).is_some());
}

#[test]
fn a_partly_iterated_batch_gives_back_the_rest() {
    let mut it = batch().into_iter();
    let (first, _) = it.next_counted().unwrap();
    assert_eq!(first.value, "x");
    let rest = it.into_batch();
    assert_eq!(
        rest.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(),
        ["y", "z"]
    );
    assert_eq!(rest.get(1).unwrap().key, Some(&b"k2"[..]));
    assert_eq!(rest.get(1).unwrap().raw_value(), Some(&b"Z"[..]));
}

#[test]
fn an_entry_of_a_shared_value_stays_small_and_keeps_keys_and_headers() {
    // 136 bytes with the key and value spans as `Option<(usize, u32)>` and
    // headers as a `Vec`.
    let size = std::mem::size_of::<BatchEntry<Bytes>>();
    assert!(size <= 104, "{size} bytes");
    let with_key = |key| {
        BatchEntry::new(
            (0, 0, 0),
            (None, Some(0)),
            RawSpans { key, value: None },
            None,
            EntryHeaders::default(),
            Bytes::new(),
        )
    };
    // The epoch took the room of the key + value size, which is added up now.
    let sized = BatchEntry::new(
        (0, 0, 0),
        (None, None),
        RawSpans {
            key: Some((0, 3)),
            value: Some((3, 40)),
        },
        Some(12),
        EntryHeaders::default(),
        (),
    );
    assert_eq!((sized.bytes(), sized.epoch()), (43, Some(12)));
    assert_eq!((with_key(None).bytes(), with_key(None).epoch()), (0, None));
    assert_eq!(with_key(Some((7, 5))).bytes(), 5);
    assert_eq!(with_key(Some((7, 0))).key(), Some((7, 0)));
    assert_eq!(with_key(Some((usize::MAX, 3))).key(), Some((usize::MAX, 3)));
    assert_eq!(with_key(None).key(), None);
    let h = vec![
        ("h".to_string(), Some(b"v".to_vec())),
        ("n".to_string(), None),
    ];
    let e = EntryHeaders::from(h.clone());
    assert_eq!(e.as_slice(), &h[..]);
    assert_eq!(e.into_vec(), h);
    assert!(EntryHeaders::from(Vec::new()).as_slice().is_empty());
}
