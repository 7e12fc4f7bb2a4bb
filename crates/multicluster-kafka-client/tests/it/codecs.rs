//! The native path's record-batch decoder on what real producers wrote to a real
//! broker (the test kit's Kafka 4.1): for each codec, a topic written by Kafka's Java
//! producer (snappy in xerial framing) and one by librdkafka's (raw snappy), fetched
//! with the native connection and decoded: every record once, in offset order, keys
//! and values as produced, every batch's CRC-32C right and its codec the one asked for.

use std::time::Duration;

use mck_testkit::{TestCluster, shared_cluster};
use multicluster_kafka_client::{Batches, ConnectOptions, Connection};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(120);
const RECORDS: usize = 400;
/// Decompressed bytes allowed per batch: far above what these batches hold.
const LIMIT: usize = 64 << 20;

/// Codec names as producers take them, with the batch attribute id.
const CODECS: [(&str, u8); 4] = [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)];

/// `(key, value)` of `n` records, the value 100 bytes and different for every
/// producer and codec.
fn records(tag: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("k{i}"),
                format!("{tag}-{i:05}-{}", "x".repeat(88 - tag.len())),
            )
        })
        .collect()
}

fn produce_with_librdkafka(bootstrap: &str, topic: &str, codec: &str, rows: &[(String, String)]) {
    let producer: ThreadedProducer<DefaultProducerContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.codec", codec)
        .set("linger.ms", "50")
        .set("acks", "all")
        .create()
        .expect("a librdkafka producer");
    for (k, v) in rows {
        producer
            .send(BaseRecord::to(topic).partition(0).key(k).payload(v))
            .map_err(|(e, _)| e)
            .expect("queued");
    }
    producer.flush(PATIENCE).expect("every record acknowledged");
}

/// Every record of partition 0 of `topic` read natively from offset 0 to the high
/// watermark: `(offset, key, value)`, and the codec ids of its data batches.
fn read_natively(addr: &str, topic: &str) -> (Vec<(i64, String, String)>, Vec<u8>) {
    mck_testkit::runtime().block_on(async {
        tokio::time::timeout(PATIENCE, async {
            let mut conn = Connection::connect(addr, &ConnectOptions::default())
                .await
                .unwrap_or_else(|e| panic!("connects: {e}"));
            let md = conn.metadata(Some(&[topic])).await.unwrap();
            let id = md.topics[0].topic_id;
            let mut offset = 0;
            let mut out = Vec::new();
            let mut codecs = Vec::new();
            let mut scratch = Vec::new();
            loop {
                let got = conn
                    .fetch_once(topic, id, 0, offset, 256 * 1024, false)
                    .await
                    .unwrap();
                assert_eq!(got.error_code, 0, "fetch at {offset}");
                if offset >= got.high_watermark {
                    break;
                }
                for batch in Batches::new(&got.records) {
                    let batch = batch.unwrap_or_else(|e| panic!("{topic} at {offset}: {e}"));
                    batch
                        .check_crc()
                        .unwrap_or_else(|e| panic!("{topic} batch {}: {e}", batch.base_offset));
                    if !batch.is_control() {
                        codecs.push(batch.compression());
                        for r in batch.records_in(&mut scratch, LIMIT).unwrap() {
                            let r = r.unwrap();
                            if r.offset >= offset {
                                out.push((
                                    r.offset,
                                    String::from_utf8(r.key.unwrap().to_vec()).unwrap(),
                                    String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                                ));
                            }
                        }
                    }
                    offset = offset.max(batch.next_offset());
                }
            }
            (out, codecs)
        })
        .await
        .expect("read within the patience")
    })
}

#[test]
fn records_of_every_codec_from_the_java_and_librdkafka_producers_decode_as_produced() {
    let c = shared_cluster("native").unwrap_or_else(|e| panic!("cluster starts: {e:?}"));
    let bootstrap = c.bootstrap_servers();
    let addr = bootstrap.split(',').next().unwrap().to_string();
    for (codec, id) in CODECS {
        for producer in ["java", "librdkafka"] {
            let topic = format!("native-codec-{codec}-{producer}");
            c.create_topic(&topic, 1).unwrap();
            let rows = records(&format!("{codec}-{producer}"), RECORDS);
            if producer == "java" {
                let values: Vec<String> = rows.iter().map(|(_, v)| v.clone()).collect();
                c.produce_with_java(&topic, &values, &[("compression.type", codec)])
                    .unwrap();
            } else {
                produce_with_librdkafka(&bootstrap, &topic, codec, &rows);
            }
            let written = c.batch_codecs(&topic).unwrap();
            assert_eq!(written.into_iter().collect::<Vec<_>>(), [codec], "{topic}");

            let (got, codecs) = read_natively(&addr, &topic);
            assert!(
                codecs.iter().all(|c| *c == id),
                "{topic}: codec ids {codecs:?}"
            );
            assert!(
                codecs.len() < RECORDS,
                "{topic}: batches of several records"
            );
            let offsets: Vec<i64> = got.iter().map(|(o, _, _)| *o).collect();
            assert_eq!(offsets, (0..RECORDS as i64).collect::<Vec<_>>(), "{topic}");
            let kv: Vec<(String, String)> = got.into_iter().map(|(_, k, v)| (k, v)).collect();
            assert_eq!(kv, rows, "{topic}");
        }
    }
}
