//! The native path's own Fetch response decoder against the `kafka-protocol` crate's
//! encoder at every version from 4 to 18 (each field as the crate wrote it, records a
//! slice of the response), and on answers no broker should send: counts far beyond
//! the bytes there are (refused before anything is allocated), truncations, unknown
//! versions. Real brokers' answers go through it in `conn.rs` and
//! `codecs.rs`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use multicluster_kafka_client::{
    DecodeError, FETCH_RESPONSE_MAX, FETCH_RESPONSE_MIN, decode_fetch_response,
};
use uuid::Uuid;

fn partition(index: i32, records: &[u8], version: i16) -> PartitionData {
    let fields_of = |since: i16| version >= since;
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(if index == 2 { 6 } else { 0 })
        .with_high_watermark(1000 + i64::from(index))
        .with_last_stable_offset(990)
        .with_log_start_offset(if fields_of(5) { 7 } else { -1 })
        .with_aborted_transactions(if index == 1 {
            Some(vec![
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(5))
                    .with_first_offset(10),
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(6))
                    .with_first_offset(20),
            ])
        } else {
            None
        })
        .with_preferred_read_replica(BrokerId(if index == 1 && fields_of(11) { 3 } else { -1 }))
        .with_diverging_epoch(if index == 2 && fields_of(12) {
            EpochEndOffset::default().with_epoch(4).with_end_offset(500)
        } else {
            EpochEndOffset::default()
        })
        .with_current_leader(if index == 2 && fields_of(12) {
            LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(2))
                .with_leader_epoch(9)
        } else {
            LeaderIdAndEpoch::default()
        })
        .with_records((!records.is_empty()).then(|| Bytes::copy_from_slice(records)))
}

/// A response with every field the version has.
fn response(id: Uuid, version: i16) -> FetchResponse {
    let (name, id) = if version >= 13 {
        (TopicName(StrBytes::from_static_str("")), id)
    } else {
        (TopicName(StrBytes::from_static_str("orders")), Uuid::nil())
    };
    let (empty_name, empty_id) = if version >= 13 {
        (TopicName(StrBytes::from_static_str("")), Uuid::from_u128(9))
    } else {
        (TopicName(StrBytes::from_static_str("empty")), Uuid::nil())
    };
    let endpoints = if version >= 16 {
        vec![
            NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("broker-2.example"))
                .with_port(9093)
                .with_rack(Some(StrBytes::from_static_str("rack-b"))),
        ]
    } else {
        Vec::new()
    };
    FetchResponse::default()
        .with_throttle_time_ms(25)
        .with_error_code(0)
        .with_session_id(if version >= 7 { 77 } else { 0 })
        .with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(name)
                .with_topic_id(id)
                .with_partitions(vec![
                    partition(0, b"batch-bytes-of-partition-0", version),
                    partition(1, b"p1", version),
                    partition(2, b"", version),
                ]),
            FetchableTopicResponse::default()
                .with_topic(empty_name)
                .with_topic_id(empty_id),
        ])
        .with_node_endpoints(endpoints)
}

fn encoded(r: &FetchResponse, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    r.encode(&mut b, version).unwrap();
    b.freeze()
}

#[test]
fn every_version_decodes_as_the_crate_encoded_it() {
    let id = Uuid::from_u128(0x1234_5678_9abc_def0);
    for version in FETCH_RESPONSE_MIN..=FETCH_RESPONSE_MAX {
        let body = encoded(&response(id, version), version);
        let got =
            decode_fetch_response(&body, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(got.throttle_time_ms, 25, "v{version}");
        let (error_code, session_id) = if version >= 7 { (0, 77) } else { (0, 0) };
        assert_eq!((got.error_code, got.session_id), (error_code, session_id));
        assert_eq!(got.topics.len(), 2, "v{version}");
        let t = &got.topics[0];
        if version >= 13 {
            assert_eq!((t.topic_id, t.name.as_deref()), (id, None), "v{version}");
        } else {
            assert_eq!(
                (t.topic_id, t.name.as_deref()),
                (Uuid::nil(), Some("orders")),
                "v{version}"
            );
        }
        assert!(got.topics[1].partitions.is_empty());
        let p = &t.partitions;
        assert_eq!(p.len(), 3);
        assert_eq!(
            (p[0].partition, p[0].error_code, p[0].high_watermark),
            (0, 0, 1000)
        );
        assert_eq!(p[0].last_stable_offset, 990);
        assert_eq!(p[0].log_start_offset, if version >= 5 { 7 } else { -1 });
        assert_eq!(&p[0].records[..], b"batch-bytes-of-partition-0");
        // The records are a slice of the response, not a copy.
        let start = body.as_ptr() as usize;
        let at = p[0].records.as_ptr() as usize;
        assert!(at >= start && at < start + body.len(), "v{version}: a copy");
        assert!(p[0].aborted_transactions.is_none());
        let aborted: Vec<_> = p[1]
            .aborted_transactions
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| (a.producer_id, a.first_offset))
            .collect();
        assert_eq!(aborted, [(5, 10), (6, 20)], "v{version}");
        assert_eq!(
            p[1].preferred_read_replica,
            if version >= 11 { 3 } else { -1 }
        );
        assert!(p[2].records.is_empty());
        assert_eq!(p[2].error_code, 6);
        if version >= 12 {
            let d = p[2].diverging_epoch.unwrap();
            assert_eq!((d.epoch, d.end_offset), (4, 500));
            let l = p[2].current_leader.unwrap();
            assert_eq!((l.leader_id, l.leader_epoch), (2, 9));
        } else {
            assert!(p[2].diverging_epoch.is_none() && p[2].current_leader.is_none());
        }
        assert!(p[0].diverging_epoch.is_none() && p[0].current_leader.is_none());
        if version >= 16 {
            assert_eq!(got.node_endpoints.len(), 1);
            let n = &got.node_endpoints[0];
            assert_eq!(
                (n.node_id, n.host.as_str(), n.port, n.rack.as_deref()),
                (2, "broker-2.example", 9093, Some("rack-b"))
            );
        } else {
            assert!(got.node_endpoints.is_empty());
        }
        // Every truncation is an error, never a panic.
        for cut in 0..body.len() {
            assert!(
                decode_fetch_response(&body.slice(..cut), version).is_err(),
                "v{version} cut at {cut}"
            );
        }
    }
}

#[test]
fn counts_beyond_the_bytes_there_are_are_refused_before_allocating() {
    // v11: throttle, error, session, then the topic count: i32::MAX topics in 4 bytes.
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    body.extend_from_slice(&[0; 4]);
    let err = decode_fetch_response(&Bytes::from(body), 11).unwrap_err();
    assert_eq!(err, DecodeError::Length(i64::from(i32::MAX)));

    // v17: one topic whose partition count (a varint) claims 2^31 partitions.
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.push(2); // one topic
    body.extend_from_slice(&[7; 16]); // its id
    body.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x08]); // 2^31 + 1
    body.extend_from_slice(&[0; 64]);
    let err = decode_fetch_response(&Bytes::from(body), 17).unwrap_err();
    assert!(
        matches!(err, DecodeError::Length(n) if n >= 1 << 31),
        "{err}"
    );
}

#[test]
fn versions_outside_the_decoder_are_refused() {
    let body = encoded(&response(Uuid::nil(), 4), 4);
    for version in [-1, 0, 3, 19] {
        assert_eq!(
            decode_fetch_response(&body, version).unwrap_err(),
            DecodeError::Version(version)
        );
    }
}
