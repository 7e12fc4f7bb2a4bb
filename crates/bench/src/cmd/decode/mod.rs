//! `mck-bench decode`: what decoding Kafka record batches in place costs per record,
//! beside librdkafka's whole read path, on the same topic in the same run.
//!
//! One single-broker cluster from the test kit; for each value size one topic of one
//! partition, pre-filled uncompressed with the bench's usual records (8 B keys). Then,
//! in rounds:
//!
//! - **capture**: hand-written Fetch v4 requests over a plain [`TcpStream`] read the
//!   whole partition from offset 0, keeping every response's raw bytes in memory (the
//!   "captured Fetch responses"), a new buffer per response;
//! - the **native path** end to end: the same requests reading every response into one
//!   reused buffer, once without and once with each response decoded as it arrives and
//!   the bench's per-record work done (the socket read a native path would pay, and its
//!   whole cost while the response is still in cache);
//! - **decode** the captured responses in place ([`parse_fetch_v4`](fetch::parse_fetch_v4), then
//!   the library's native decoder, `Batches` and `Records`): the response, its record batches (magic 2) and their records,
//!   yielding borrowed key and value slices with offset and timestamp, four ways: no
//!   per-record work beyond the decode, one `Bytes` per key and value
//!   ([`Bytes::slice_ref`], what a library owning the buffer would hand out), the
//!   bench's usual per-record work (timestamp read, key and value copied into one
//!   reused buffer), and that with each batch's CRC-32C checked;
//! - the **bare librdkafka loop** (`throughput`'s `rd_kafka_consume_batch_queue` side)
//!   reads the same topic with the same per-record work; its CPU is the whole process's
//!   (librdkafka's threads included).
//!
//! Everything is CPU time per record: the decode, the capture and the native path run
//! on this thread (`CLOCK_THREAD_CPUTIME_ID`, user + system), librdkafka's side is the
//! process's (`getrusage`). The order of the measures rotates from round to round;
//! medians over the rounds. The design note built on these figures is
//! `docs/native-fetch.md`.

use std::time::Instant;

use bytes::Bytes;
use mck_bench::peers::{self, PeerCluster};
use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use crate::cmd::median;
use crate::cmd::scale::{command_line, header};
use crate::cmd::throughput::{Peer, plain};
use crate::cpu::process_cpu;

/// Options of `mck-bench decode`.
#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// Value sizes in bytes, one topic each.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1024,10240")]
    sizes: Vec<usize>,
    /// Records per size; by default `--bytes` / size within `--min-records` and
    /// `--max-records`.
    #[arg(long)]
    records: Option<usize>,
    /// Value bytes per size when `--records` is not given.
    #[arg(long, default_value_t = 200_000_000)]
    bytes: usize,
    /// Most records at a size when `--records` is not given.
    #[arg(long, default_value_t = 1_000_000)]
    max_records: usize,
    /// Fewest records at a size when `--records` is not given.
    #[arg(long, default_value_t = 10_000)]
    min_records: usize,
    /// Rounds (each captures once, decodes each way and runs the librdkafka loop once).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// CPU ms each decode variant runs per round, in whole passes over the capture.
    #[arg(long, default_value_t = 200)]
    decode_ms: u64,
    /// The Fetch requests' per-partition byte limit (librdkafka's
    /// `max.partition.fetch.bytes` default).
    #[arg(long, default_value_t = 1_048_576)]
    partition_max_bytes: i32,
}

mod fetch;
mod passes;
#[cfg(test)]
mod tests;

use passes::{Buffers, Variant, fetch_all, native_pass, pass, thread_cpu, verify};

/// What a round measures, in an order that rotates from round to round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The bare librdkafka loop over the topic.
    Librdkafka,
    /// A new capture (a new buffer per response, all kept), then the decode variants
    /// over it.
    CaptureAndDecode,
    /// The native path reading into one reused buffer, without and with the decode.
    Native,
}

impl Step {
    const ALL: [Step; 3] = [Step::Librdkafka, Step::CaptureAndDecode, Step::Native];
}

/// Per-size figures over the rounds, CPU ns per record.
#[derive(Default)]
struct Figures {
    responses: usize,
    /// Responses ending in a cut batch.
    cut: usize,
    captured_mib: f64,
    /// Reading the responses, a new buffer each, all kept.
    capture: Vec<f64>,
    /// Reading the responses into one reused buffer.
    read: Vec<f64>,
    /// Reading into one reused buffer, each response decoded at once with the bench's
    /// per-record work.
    native: Vec<f64>,
    /// The decode variants over the captured responses.
    decode: [Vec<f64>; 4],
    librdkafka: Vec<f64>,
}

pub fn decode(args: &DecodeArgs) {
    let started = Instant::now();
    header(&command_line());
    let cluster = KafkaCluster::start(ClusterOptions::new("bench-decode").jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .expect("the cluster starts");
    let bootstrap = cluster.bootstrap_servers();
    let addr = bootstrap.split(',').next().expect("a broker").to_string();
    let peer = [PeerCluster::of(&cluster)];
    let mut scratch: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut results: Vec<(usize, usize, Figures)> = Vec::new();
    let per_record = |secs: f64, n: u64| secs / n as f64 * 1e9;
    for &size in &args.sizes {
        let records = args.records.unwrap_or_else(|| {
            (args.bytes / size.max(1)).clamp(args.min_records, args.max_records)
        });
        let end = records as i64;
        let pmb = args.partition_max_bytes;
        let topic = format!("decode-{size}");
        let t = Instant::now();
        peers::prefill(&cluster, &topic, 1, records, size).expect("pre-fill");
        eprintln!(
            "{size} B: pre-filled {records} records in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // Warms the broker's page cache and checks the decoder on real data.
        let mut responses = fetch_all(&addr, &topic, end, pmb, Buffers::Keep, |_| {});
        let cut = verify(&responses, records, size);
        let mut figs = Figures {
            responses: responses.len(),
            cut,
            captured_mib: responses.iter().map(Bytes::len).sum::<usize>() as f64 / 1048576.0,
            ..Figures::default()
        };
        for round in 0..args.rounds {
            for k in 0..Step::ALL.len() {
                match Step::ALL[(k + round) % Step::ALL.len()] {
                    Step::Librdkafka => {
                        let cpu0 = process_cpu();
                        let pass = plain(&peer, &topic, 1, Peer::Batch);
                        let cpu = process_cpu() - cpu0;
                        assert_eq!(pass.records, records as u64, "the librdkafka loop read all");
                        figs.librdkafka.push(per_record(cpu, pass.records));
                    }
                    Step::CaptureAndDecode => {
                        drop(std::mem::take(&mut responses));
                        let cpu0 = thread_cpu();
                        responses = fetch_all(&addr, &topic, end, pmb, Buffers::Keep, |_| {});
                        figs.capture
                            .push(per_record(thread_cpu() - cpu0, records as u64));
                        for j in 0..Variant::ALL.len() {
                            let variant = Variant::ALL[(j + round) % Variant::ALL.len()];
                            let (mut n, mut passes) = (0u64, 0);
                            let cpu0 = thread_cpu();
                            while passes == 0 || thread_cpu() - cpu0 < args.decode_ms as f64 / 1e3 {
                                n += pass(&responses, variant, &mut scratch);
                                passes += 1;
                            }
                            figs.decode[variant as usize].push(per_record(thread_cpu() - cpu0, n));
                        }
                    }
                    Step::Native => {
                        let cpu0 = thread_cpu();
                        native_pass(&addr, &topic, end, pmb, false, &mut scratch);
                        figs.read
                            .push(per_record(thread_cpu() - cpu0, records as u64));
                        let cpu0 = thread_cpu();
                        let n = native_pass(&addr, &topic, end, pmb, true, &mut scratch);
                        assert_eq!(n, records as u64, "the native pass decoded all");
                        figs.native.push(per_record(thread_cpu() - cpu0, n));
                    }
                }
            }
            eprintln!(
                "{size} B round {round}: capture {:.0}, read {:.0}, native {:.0}, \
                 decode {:.0} / {:.0} / {:.0} / {:.0}, librdkafka loop {:.0} ns/record",
                figs.capture[round],
                figs.read[round],
                figs.native[round],
                figs.decode[0][round],
                figs.decode[1][round],
                figs.decode[2][round],
                figs.decode[3][round],
                figs.librdkafka[round],
            );
        }
        drop(responses);
        results.push((size, records, figs));
    }
    drop(cluster);

    println!(
        "- workload: 1 real single-broker cluster (Kafka {} from the test kit, JVM -Xms1g \
         -Xmx1g), one topic of 1 partition per value size, pre-filled uncompressed with 8 B keys \
         (idempotent producer, 1 MB batches); Fetch v4 requests of up to {} B per partition, one \
         TCP connection; each round, in an order that rotates: the bare librdkafka loop reads \
         the topic once; a capture fetches it with a new buffer per response, all kept, then \
         each decode variant runs over the capture for at least {} ms of CPU (whole passes); \
         the native path fetches it into one reused buffer, once without and once with the \
         decode and copy of each response as it arrives; medians of {} rounds; CPU ns per \
         record: ours on this thread, librdkafka's loop the whole process (its threads \
         included, the broker not)",
        mck_testkit::KAFKA_VERSION,
        args.partition_max_bytes,
        args.decode_ms,
        args.rounds
    );
    println!();
    println!(
        "| value size | records | Fetch responses (MiB; ending in a cut batch) | read, new buffer \
         per response | read, one reused buffer | native: read + decode + copy | decode only | \
         decode + `Bytes` per key and value | decode + copy | decode + CRC-32C + copy | bare \
         librdkafka loop | librdkafka ÷ native |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (size, records, f) in &results {
        let med = |v: &Vec<f64>| median(v.clone());
        let d = |v: Variant| med(&f.decode[v as usize]);
        let native = med(&f.native);
        let rd = med(&f.librdkafka);
        println!(
            "| {size} B | {records} | {} ({:.0}; {}) | {:.1} | {:.1} | {native:.1} | {:.1} | \
             {:.1} | {:.1} | {:.1} | {rd:.0} | {:.1}× |",
            f.responses,
            f.captured_mib,
            f.cut,
            med(&f.capture),
            med(&f.read),
            d(Variant::Bare),
            d(Variant::Owned),
            d(Variant::Copy),
            d(Variant::CrcCopy),
            rd / native,
        );
    }
    println!();
    println!(
        "- load average after: {}; total time {:.0} s",
        super::load_average(),
        started.elapsed().as_secs_f64()
    );
}
