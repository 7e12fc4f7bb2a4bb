//! The throughput rows of one value size: every side round by round, then the Java
//! peers, and the rows comparing them.

use std::time::Instant;

use mck_bench::peers::{self, PeerCluster, StreamTarget};

use super::super::throughput::{Peer, Reading, ours, plain};
use super::table::{Rates, Row, Target, peer_rates, rate_rows};
use super::{CompareArgs, JAVA_NOTE, PARTITIONS, Sizes};

/// (records/s, MB/s) of a side.
type Rate = (f64, f64);

/// The throughput rows of `topic` (`records` per cluster of `value_size` B).
pub(super) fn throughput_rows(
    args: &CompareArgs,
    sizes: &Sizes,
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster; 2],
    (topic, value_size, records): (&str, usize, usize),
) -> Vec<Row> {
    let mut rows = Vec::new();
    let java_note = JAVA_NOTE;
    let label = if value_size == 100 { "100 B" } else { "1 KiB" };
    // Warm the brokers' page cache once before measuring.
    plain(clusters, topic, PARTITIONS, Peer::Poll);
    let target = StreamTarget {
        clusters: clusters.to_vec(),
        topic: topic.into(),
        partitions: PARTITIONS,
        records_per_cluster: records as u64,
    };
    let (rates, cp_rounds) = measure_rounds(args, sizes, rt, clusters, &target, label);
    // Steady-state throughput (first record to last) for the comparisons with
    // librdkafka and with ConsumerPerformance, whose window also starts once its
    // consumer is ready (group joined); from the start for Flink, whose window
    // includes its source's start-up too.
    let ours_by_readers = [rates[1].reading_median(), rates[2].reading_median()];
    let ours_from_start = [rates[1].start_median(), rates[2].start_median()];
    let plain_m = rates[0].reading_median();
    for (i, &o) in ours_by_readers.iter().enumerate() {
        let what = format!("{label}, {} reader(s), vs plain rdkafka", i + 1);
        rows.extend(rate_rows(&what, o, Some(plain_m), 0.95, ""));
    }
    let (cp, flink) = java_peer_rates(args, sizes, &target, &cp_rounds);
    // librdkafka's own ceiling (a bare `rd_kafka_consume_batch_queue` loop, no
    // per-record work beyond touching the bytes) against the Java tool: what any
    // librdkafka-based reader can reach on this machine.
    let ceiling = rates[3].reading_median();
    rows.push(Row::new(
        format!(
            "context: {label}, librdkafka batch loop (1 consumer per cluster) vs ConsumerPerformance (records/s)"
        ),
        (ceiling.0, cp.map(|c| c.0)),
        "rec/s",
        Target::None,
        java_note,
    ));
    rows.push(Row::new(
        format!("context: {label}, ours with 2 readers vs the librdkafka batch loop (records/s)"),
        (ours_by_readers[1].0, Some(ceiling.0)),
        "rec/s",
        Target::None,
        "",
    ));
    let mut cp_mbps = None;
    for (i, &o) in ours_by_readers.iter().enumerate() {
        let readers = i + 1;
        let what = format!(
            "{label}, {readers} reader(s), vs ConsumerPerformance (1 consumer per cluster)"
        );
        let [rps, mbps] = rate_rows(&what, o, cp, 1.0, java_note);
        rows.push(rps);
        // MB/s once per size, beside our 2 readers.
        cp_mbps = Some(mbps);
        let what = format!(
            "{label}, {readers} reader(s), vs Flink DynamicKafkaSource parallelism {readers}"
        );
        rows.extend(rate_rows(
            &what,
            ours_from_start[i],
            flink[i],
            1.0,
            java_note,
        ));
    }
    rows.extend(cp_mbps);
    rows
}

/// The measured rounds of every side on `target`: `[plain, ours with 1 reader, ours
/// with 2 readers, librdkafka batch loop]`, and ConsumerPerformance's rounds.
fn measure_rounds(
    args: &CompareArgs,
    sizes: &Sizes,
    rt: &tokio::runtime::Runtime,
    clusters: &[PeerCluster; 2],
    target: &StreamTarget,
    label: &str,
) -> ([Rates; 4], Vec<peers::Figures>) {
    let topic = target.topic.as_str();
    let expected = 2 * target.records_per_cluster;
    // [plain, ours with 1 reader, ours with 2 readers, librdkafka batch loop]
    let mut rates: [Rates; 4] = Default::default();
    // ConsumerPerformance takes its turn in every round too (a JVM per round, one
    // warm-up pass, then the measured one), so that a slow spell of the machine
    // falls on all sides alike rather than on whichever ran in it.
    let mut cp_rounds: Vec<peers::Figures> = Vec::new();
    const CP: usize = 4;
    for round in 0..sizes.rounds {
        // Alternate the order so no reader always gets the warmer broker.
        let mut order = vec![0, 1, 2, 3];
        if !args.skip_java {
            order.push(CP);
        }
        if round % 2 == 1 {
            order.reverse();
        }
        for side in order {
            if side == CP {
                cp_rounds.push(consumer_perf_round(target));
                continue;
            }
            let t = Instant::now();
            let pass = match side {
                0 => plain(clusters, topic, PARTITIONS, Peer::Poll),
                3 => plain(clusters, topic, PARTITIONS, Peer::Batch),
                r => ours(rt, clusters, topic, Reading::batches(r)).0,
            };
            assert_eq!(pass.records, expected, "every record read");
            rates[side].push(&pass, t);
        }
        eprintln!(
            "{label} round {round}, rec/s from the start (from the first record): plain {}, ours 1 reader {}, ours 2 readers {}, batch loop {}, ConsumerPerformance {}",
            rates[0].last(),
            rates[1].last(),
            rates[2].last(),
            rates[3].last(),
            cp_rounds
                .last()
                .map_or_else(|| "-".into(), |f| format!("({:.0})", f.records_per_sec()))
        );
    }
    (rates, cp_rounds)
}

/// ConsumerPerformance's median of `cp_rounds`, and Flink's figures with parallelism 1
/// and 2 (measured here); none with `--skip-java`.
fn java_peer_rates(
    args: &CompareArgs,
    sizes: &Sizes,
    target: &StreamTarget,
    cp_rounds: &[peers::Figures],
) -> (Option<Rate>, [Option<Rate>; 2]) {
    if args.skip_java {
        return (None, [None, None]);
    }
    let cp = peer_rates(peers::median(cp_rounds.iter().copied()));
    let flink = [1, 2].map(|parallelism| {
        let f = peers::flink_throughput(
            target,
            &peers::FlinkOptions {
                parallelism,
                rounds: sizes.rounds,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("Java peer failed: {e}"));
        Some(peer_rates(peers::median(
            f.iter().filter(|r| !r.warmup).map(|r| r.from_task_start),
        )))
    });
    (Some(cp), flink)
}

/// One measured round of ConsumerPerformance on `target`: a JVM of its own, one
/// warm-up pass, then the measured pass (its `fetch` window).
fn consumer_perf_round(target: &StreamTarget) -> peers::Figures {
    let rounds = peers::consumer_perf(
        target,
        &peers::ConsumerPerfOptions {
            warmup_rounds: 1,
            rounds: 1,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("Java peer failed: {e}"));
    rounds
        .iter()
        .find(|r| !r.warmup)
        .map(|r| r.fetch)
        .expect("one measured round")
}
