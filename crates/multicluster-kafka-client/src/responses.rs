//! The answers the client asks for besides Fetch (ApiVersions, Metadata,
//! ListOffsets), decoded here with every count bounded by the bytes left (the
//! crate's own wire reader): a hostile or corrupt answer is a decode error, never a
//! huge allocation. Only the fields the client uses are kept.

use bytes::Bytes;
use uuid::Uuid;

use crate::cursor::{DecodeError, Result};
use crate::wire::{PREALLOCATED, Reader};

/// The ApiVersions versions this decoder reads (the path asks in v3, then v0).
pub const API_VERSIONS: std::ops::RangeInclusive<i16> = 0..=3;
/// The Metadata versions this decoder reads.
pub const METADATA: std::ops::RangeInclusive<i16> = 1..=12;
/// The ListOffsets versions this decoder reads.
pub const LIST_OFFSETS: std::ops::RangeInclusive<i16> = 1..=9;

fn check(version: i16, range: &std::ops::RangeInclusive<i16>) -> Result<()> {
    if range.contains(&version) {
        Ok(())
    } else {
        Err(DecodeError::Version(version))
    }
}

fn reader(body: &Bytes, flexible: bool) -> Reader<'_> {
    Reader {
        c: crate::cursor::Cursor::new(body),
        body,
        flexible,
    }
}

/// An ApiVersions answer: its error code and each API's (key, lowest, highest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiVersionsAnswer {
    pub error_code: i16,
    pub keys: Vec<(i16, i16, i16)>,
}

/// Decodes an ApiVersions response body of `version`.
pub fn api_versions(body: &Bytes, version: i16) -> Result<ApiVersionsAnswer> {
    check(version, &API_VERSIONS)?;
    let mut r = reader(body, version >= 3);
    let error_code = r.c.i16()?;
    let n = r.count(6)?.unwrap_or(0);
    let mut keys = Vec::with_capacity(n.min(PREALLOCATED));
    for _ in 0..n {
        keys.push((r.c.i16()?, r.c.i16()?, r.c.i16()?));
        r.tagged(|_, _| Ok(()))?;
    }
    if version >= 1 {
        let _throttle = r.c.i32()?;
    }
    r.tagged(|_, _| Ok(()))?;
    Ok(ApiVersionsAnswer { error_code, keys })
}

/// A broker of a Metadata answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

/// A topic of a Metadata answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaTopic {
    pub error_code: i16,
    pub name: Option<String>,
    pub topic_id: Uuid,
    /// (partition, error code, leader id, leader epoch)
    pub partitions: Vec<(i32, i16, i32, i32)>,
}

/// A Metadata answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataAnswer {
    pub brokers: Vec<MetaBroker>,
    /// The cluster's id (from v2; a broker may give none).
    pub cluster_id: Option<String>,
    pub topics: Vec<MetaTopic>,
}

/// Decodes a Metadata response body of `version`.
pub fn metadata(body: &Bytes, version: i16) -> Result<MetadataAnswer> {
    check(version, &METADATA)?;
    let mut r = reader(body, version >= 9);
    if version >= 3 {
        let _throttle = r.c.i32()?;
    }
    // node id, host, port (rack, tagged fields)
    let n = r.count(10)?.unwrap_or(0);
    let mut brokers = Vec::with_capacity(n.min(PREALLOCATED));
    for _ in 0..n {
        let node_id = r.c.i32()?;
        let host = r.string()?.ok_or(DecodeError::Length(-1))?;
        let port = r.c.i32()?;
        let _rack = r.string()?;
        r.tagged(|_, _| Ok(()))?;
        brokers.push(MetaBroker {
            node_id,
            host,
            port,
        });
    }
    let cluster_id = if version >= 2 { r.string()? } else { None };
    let _controller = r.c.i32()?;
    // error code, name, (id), internal, partitions
    let n = r.count(6)?.unwrap_or(0);
    let mut topics = Vec::with_capacity(n.min(PREALLOCATED));
    for _ in 0..n {
        let error_code = r.c.i16()?;
        let name = r.string()?;
        let topic_id = if version >= 10 {
            Uuid::from_bytes(r.c.take(16)?.try_into().expect("16 bytes"))
        } else {
            Uuid::nil()
        };
        let _internal = r.c.i8()?;
        // error code, index, leader, (epoch), replicas, isr
        let m = r.count(12)?.unwrap_or(0);
        let mut partitions = Vec::with_capacity(m.min(PREALLOCATED));
        for _ in 0..m {
            let error_code = r.c.i16()?;
            let index = r.c.i32()?;
            let leader = r.c.i32()?;
            let epoch = if version >= 7 { r.c.i32()? } else { -1 };
            let arrays = if version >= 5 { 3 } else { 2 };
            for _ in 0..arrays {
                let k = r.count(4)?.unwrap_or(0);
                r.c.take(k * 4)?;
            }
            r.tagged(|_, _| Ok(()))?;
            partitions.push((index, error_code, leader, epoch));
        }
        if version >= 8 {
            let _authorized = r.c.i32()?;
        }
        r.tagged(|_, _| Ok(()))?;
        topics.push(MetaTopic {
            error_code,
            name,
            topic_id,
            partitions,
        });
    }
    if (8..=10).contains(&version) {
        let _cluster_authorized = r.c.i32()?;
    }
    r.tagged(|_, _| Ok(()))?;
    Ok(MetadataAnswer {
        brokers,
        cluster_id,
        topics,
    })
}

/// A partition of a ListOffsets answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAnswer {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub offset: i64,
}

/// Decodes a ListOffsets response body of `version`.
pub fn list_offsets(body: &Bytes, version: i16) -> Result<Vec<OffsetAnswer>> {
    check(version, &LIST_OFFSETS)?;
    let mut r = reader(body, version >= 6);
    if version >= 2 {
        let _throttle = r.c.i32()?;
    }
    let mut out = Vec::new();
    // name, partitions
    let n = r.count(2)?.unwrap_or(0);
    for _ in 0..n {
        let topic = r.string()?.ok_or(DecodeError::Length(-1))?;
        // index, error code, timestamp, offset
        let m = r.count(22)?.unwrap_or(0);
        out.reserve(m.min(PREALLOCATED));
        for _ in 0..m {
            let partition = r.c.i32()?;
            let error_code = r.c.i16()?;
            let _timestamp = r.c.i64()?;
            let offset = r.c.i64()?;
            if version >= 4 {
                let _epoch = r.c.i32()?;
            }
            r.tagged(|_, _| Ok(()))?;
            out.push(OffsetAnswer {
                topic: topic.clone(),
                partition,
                error_code,
                offset,
            });
        }
        r.tagged(|_, _| Ok(()))?;
    }
    r.tagged(|_, _| Ok(()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{
        ApiVersionsResponse, BrokerId, ListOffsetsResponse, MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    fn encoded(m: &impl Encodable, version: i16) -> Bytes {
        let mut b = BytesMut::new();
        m.encode(&mut b, version).unwrap();
        b.freeze()
    }

    /// Every strict prefix of `body` is an error, never a panic or a short answer.
    fn every_cut_fails<T: std::fmt::Debug>(body: &Bytes, decode: impl Fn(&Bytes) -> Result<T>) {
        for cut in 0..body.len() {
            let part = body.slice(..cut);
            assert!(
                decode(&part).is_err(),
                "a cut at {cut} of {} decoded",
                body.len()
            );
        }
    }

    #[test]
    fn api_versions_decode_as_kafka_protocol_encodes_them() {
        for version in API_VERSIONS {
            let keys = [(1, 4, 17), (3, 0, 12), (18, 0, 4)];
            let m = ApiVersionsResponse::default().with_api_keys(
                keys.iter()
                    .map(|(k, lo, hi)| {
                        ApiVersion::default()
                            .with_api_key(*k)
                            .with_min_version(*lo)
                            .with_max_version(*hi)
                    })
                    .collect(),
            );
            let body = encoded(&m, version);
            let got = api_versions(&body, version).unwrap();
            assert_eq!(got.error_code, 0);
            assert_eq!(got.keys, keys, "v{version}");
            every_cut_fails(&body, |b| api_versions(b, version));
        }
    }

    #[test]
    fn metadata_decodes_as_kafka_protocol_encodes_it_at_every_version() {
        let id = Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788);
        for version in METADATA {
            let brokers = vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("b1.example"))
                    .with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("b2.example"))
                    .with_port(9093),
            ];
            let partition = |i: i32| {
                let mut p = MetadataResponsePartition::default()
                    .with_partition_index(i)
                    .with_leader_id(BrokerId(1 + i % 2))
                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                    .with_isr_nodes(vec![BrokerId(1)]);
                if version >= 7 {
                    p = p.with_leader_epoch(10 + i);
                }
                if i == 2 {
                    p = p.with_error_code(5);
                }
                p
            };
            let mut topic = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))
                .with_partitions((0..3).map(partition).collect());
            if version >= 10 {
                topic = topic.with_topic_id(id);
            }
            let missing = MetadataResponseTopic::default()
                .with_error_code(3)
                .with_name(Some(TopicName(StrBytes::from_static_str("gone"))));
            let m = MetadataResponse::default()
                .with_brokers(brokers)
                .with_topics(vec![topic, missing]);
            let body = encoded(&m, version);
            let got = metadata(&body, version).unwrap();
            assert_eq!(
                got.brokers,
                vec![
                    MetaBroker {
                        node_id: 1,
                        host: "b1.example".into(),
                        port: 9092
                    },
                    MetaBroker {
                        node_id: 2,
                        host: "b2.example".into(),
                        port: 9093
                    },
                ],
                "v{version}"
            );
            let epoch = |i: i32| if version >= 7 { 10 + i } else { -1 };
            assert_eq!(
                got.topics,
                vec![
                    MetaTopic {
                        error_code: 0,
                        name: Some("orders".into()),
                        topic_id: if version >= 10 { id } else { Uuid::nil() },
                        partitions: vec![
                            (0, 0, 1, epoch(0)),
                            (1, 0, 2, epoch(1)),
                            (2, 5, 1, epoch(2)),
                        ],
                    },
                    MetaTopic {
                        error_code: 3,
                        name: Some("gone".into()),
                        topic_id: Uuid::nil(),
                        partitions: vec![],
                    },
                ],
                "v{version}"
            );
            every_cut_fails(&body, |b| metadata(b, version));
        }
    }

    #[test]
    fn list_offsets_decode_as_kafka_protocol_encodes_them_at_every_version() {
        for version in LIST_OFFSETS {
            let m = ListOffsetsResponse::default().with_topics(vec![
                ListOffsetsTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_static_str("orders")))
                    .with_partitions(vec![
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(0)
                            .with_offset(42),
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(1)
                            .with_error_code(6)
                            .with_offset(-1),
                    ]),
            ]);
            let body = encoded(&m, version);
            let got = list_offsets(&body, version).unwrap();
            let answer = |partition, error_code, offset| OffsetAnswer {
                topic: "orders".into(),
                partition,
                error_code,
                offset,
            };
            assert_eq!(got, vec![answer(0, 0, 42), answer(1, 6, -1)], "v{version}");
            every_cut_fails(&body, |b| list_offsets(b, version));
        }
    }

    #[test]
    fn counts_larger_than_the_answer_are_refused_before_allocating() {
        // Metadata v12: throttle, then a compact array of 2^31 brokers in 5 bytes.
        let mut body = vec![0, 0, 0, 0];
        body.extend([0xff, 0xff, 0xff, 0xff, 0x07]);
        let body = Bytes::from(body);
        assert!(matches!(metadata(&body, 12), Err(DecodeError::Length(_))));
        // ListOffsets v1: 2^31 - 1 topics.
        let body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(
            list_offsets(&body, 1),
            Err(DecodeError::Length(_))
        ));
        // ApiVersions v0: no error, 2^31 - 1 keys.
        let body = Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(
            api_versions(&body, 0),
            Err(DecodeError::Length(_))
        ));
        // Versions outside the decoders' ranges.
        assert!(matches!(metadata(&body, 13), Err(DecodeError::Version(13))));
        assert!(matches!(
            list_offsets(&body, 0),
            Err(DecodeError::Version(0))
        ));
    }

    proptest::proptest! {
        /// Arbitrary bytes at any version are an answer or an error, never a panic
        /// or an allocation beyond what the bytes can hold.
        #[test]
        fn arbitrary_answers_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512), version in 0i16..14) {
            let body = Bytes::from(bytes);
            let _ = api_versions(&body, version);
            let _ = metadata(&body, version);
            let _ = list_offsets(&body, version);
        }
    }
}
