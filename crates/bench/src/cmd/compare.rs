//! `mck-bench compare`: every measure in one run. Two clusters from the test kit,
//! pre-filled once, then each measure on those brokers, side by side with its peer:
//! throughput (this project, the plain rdkafka consumer, Kafka's `ConsumerPerformance`,
//! Flink's `DynamicKafkaSource`), handover latency (this project, Flink), isolation,
//! peak RSS (this project and the plain consumer, each in a child process of this
//! binary), and checkpoint cost. Prints one markdown table with ratios and targets.

use std::process::Command;
use std::time::{Duration, Instant};

use mck_bench::peers::{self, PeerCluster, StreamTarget};
use mck_testkit::TestCluster;
use multicluster_kafka::checkpoint::Checkpoint;
use multicluster_kafka::split::{KafkaSplit, SplitId};

use super::handover::handover_latencies;
use super::isolation::isolation_run;
use super::median;
use super::throughput::{Api, Pass, Peer, Side, ours, plain};

/// Options of `mck-bench compare`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct CompareArgs {
    /// Records per cluster with 100 B values (default 2 000 000; 20 000 with --quick).
    #[arg(long)]
    records: Option<usize>,
    /// Records per cluster with 1 KiB values (default 500 000; 5 000 with --quick).
    #[arg(long)]
    records_1k: Option<usize>,
    /// Measured rounds per throughput figure and RSS child (default 5; 1 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Handover rounds, for this project and for Flink (default 10; 2 with --quick).
    #[arg(long)]
    handover_rounds: Option<usize>,
    /// Tiny sizes and one round: checks the harness, not the targets (CI).
    #[arg(long)]
    quick: bool,
    /// Leave out the Java peers (ConsumerPerformance, Flink); the table says so.
    #[arg(long)]
    skip_java: bool,
}

/// Options of the hidden `rss-child` command: read a topic to its end with one side,
/// in a process of its own, so that the parent reads this process's peak RSS.
#[derive(clap::Args, Clone, Debug)]
pub struct RssChildArgs {
    /// `ours` or `plain`.
    #[arg(long, value_enum)]
    side: Side,
    /// The topic, on every cluster.
    #[arg(long)]
    topic: String,
    /// Partitions of the topic.
    #[arg(long)]
    partitions: i32,
    /// `id=host:port`, once per cluster.
    #[arg(long = "cluster", required = true)]
    clusters: Vec<String>,
    /// Records expected over all clusters.
    #[arg(long)]
    expected: u64,
}

const PARTITIONS: i32 = 8;
const TOPIC_100: &str = "bench-100b";
const TOPIC_1K: &str = "bench-1k";
const ISOLATION_TOPIC: &str = "isolation";
const FLINK_HANDOVER_TOPIC: &str = "handover-flink";

/// The resolved sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    records_100: usize,
    records_1k: usize,
    rounds: usize,
    handover_rounds: usize,
    isolation_records: usize,
    checkpoint_budget: Duration,
}

impl CompareArgs {
    fn sizes(&self) -> Sizes {
        let q = |quick: usize, full: usize| if self.quick { quick } else { full };
        Sizes {
            records_100: self.records.unwrap_or(q(20_000, 2_000_000)),
            records_1k: self.records_1k.unwrap_or(q(5_000, 500_000)),
            rounds: self.rounds.unwrap_or(q(1, 5)).max(1),
            handover_rounds: self.handover_rounds.unwrap_or(q(2, 10)).max(1),
            isolation_records: q(1_500_000, 30_000_000),
            checkpoint_budget: Duration::from_millis(q(200, 2_000) as u64),
        }
    }
}

/// Which way a ratio has to go to meet its target.
#[derive(Clone, Copy)]
enum Target {
    /// ours / peer at least this.
    RatioAtLeast(f64),
    /// ours / peer at most this.
    RatioAtMost(f64),
    /// ours at most this (in the row's unit).
    OursAtMost(f64),
    /// No target (a figure reported for context).
    None,
}

/// One line of the table.
struct Row {
    measure: String,
    ours: f64,
    peer: Option<f64>,
    unit: &'static str,
    target: Target,
    /// Why there is no peer figure, when there is none.
    no_peer: &'static str,
}

impl Row {
    fn new(
        measure: String,
        (ours, peer): (f64, Option<f64>),
        unit: &'static str,
        target: Target,
        no_peer: &'static str,
    ) -> Self {
        Self {
            measure,
            ours,
            peer,
            unit,
            target,
            no_peer,
        }
    }

    fn ratio(&self) -> Option<f64> {
        self.peer.map(|p| self.ours / p)
    }

    fn met(&self) -> Option<bool> {
        match self.target {
            Target::RatioAtLeast(t) => self.ratio().map(|r| r >= t),
            Target::RatioAtMost(t) => self.ratio().map(|r| r <= t),
            Target::OursAtMost(t) => Some(self.ours <= t),
            Target::None => None,
        }
    }

    fn render(&self) -> String {
        let num = |v: f64| {
            if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.4}")
            }
        };
        let target = match self.target {
            Target::RatioAtLeast(t) => format!("≥ {t}×"),
            Target::RatioAtMost(t) => format!("≤ {t}×"),
            Target::OursAtMost(t) => format!("≤ {} {}", num(t), self.unit),
            Target::None => "-".into(),
        };
        format!(
            "| {} | {} {} | {} | {} | {} | {} |",
            self.measure,
            num(self.ours),
            self.unit,
            self.peer.map_or_else(
                || self.no_peer.to_string(),
                |p| format!("{} {}", num(p), self.unit)
            ),
            self.ratio()
                .map_or_else(|| "-".into(), |r| format!("{r:.2}")),
            target,
            match self.met() {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            }
        )
    }
}

/// Throughput figures of one side, round by round, over two windows: from its start
/// (creating its clients; for this project also discovering the stream's partitions)
/// to its last record, and from its first record to its last.
#[derive(Default)]
struct Rates {
    /// (records/s, MB/s) from the side's start.
    from_start: Vec<(f64, f64)>,
    /// (records/s, MB/s) from its first record.
    reading: Vec<(f64, f64)>,
}

impl Rates {
    fn push(&mut self, pass: &Pass, started: Instant) {
        self.from_start.push(pass.rate_since(started));
        self.reading.push(pass.reading_rate());
    }

    /// Records/s of the latest round: from the start, and from the first record.
    fn last(&self) -> String {
        match (self.from_start.last(), self.reading.last()) {
            (Some(s), Some(r)) => format!("{:.0} ({:.0})", s.0, r.0),
            _ => "-".into(),
        }
    }

    /// The round with the median records/s from the first record: (records/s, MB/s).
    fn reading_median(&self) -> (f64, f64) {
        median_rate(&self.reading)
    }

    /// The round with the median records/s from the start.
    fn start_median(&self) -> (f64, f64) {
        median_rate(&self.from_start)
    }
}

fn median_rate(rounds: &[(f64, f64)]) -> (f64, f64) {
    let mut v = rounds.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v[v.len() / 2]
}

/// The records/s and MB/s rows of one comparison: `ours` and `peer` are (records/s,
/// MB/s); the target is a ratio of at least `target`.
fn rate_rows(
    what: &str,
    ours: (f64, f64),
    peer: Option<(f64, f64)>,
    target: f64,
    no_peer: &'static str,
) -> [Row; 2] {
    let target = Target::RatioAtLeast(target);
    [
        Row::new(
            format!("throughput {what} (records/s)"),
            (ours.0, peer.map(|p| p.0)),
            "rec/s",
            target,
            no_peer,
        ),
        Row::new(
            format!("throughput {what} (MB/s)"),
            (ours.1, peer.map(|p| p.1)),
            "MB/s",
            target,
            no_peer,
        ),
    ]
}

fn peer_rates(f: Option<peers::Figures>) -> (f64, f64) {
    let f = f.expect("at least one measured round");
    (f.records_per_sec(), f.mb_per_sec())
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

/// Runs every measure and prints the table.
pub fn compare(args: &CompareArgs) {
    let sizes = args.sizes();
    let load_before = loadavg();
    let started = Instant::now();
    let (a, b) = mck_bench::start_clusters();
    let clusters = [PeerCluster::of(&a), PeerCluster::of(&b)];
    std::thread::scope(|s| {
        for c in [&a, &b] {
            s.spawn(move || {
                peers::prefill(c, TOPIC_100, PARTITIONS, sizes.records_100, 100)
                    .expect("fill 100 B");
                peers::prefill(c, TOPIC_1K, PARTITIONS, sizes.records_1k, 1024)
                    .expect("fill 1 KiB");
            });
        }
    });
    eprintln!(
        "clusters started and filled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rt = mck_testkit::runtime();
    let mut rows = Vec::new();
    let java_note = "skipped (--skip-java)";
    for (topic, value_size, records) in [
        (TOPIC_100, 100usize, sizes.records_100),
        (TOPIC_1K, 1024, sizes.records_1k),
    ] {
        let label = if value_size == 100 { "100 B" } else { "1 KiB" };
        let expected = 2 * records as u64;
        // Warm the brokers' page cache once before measuring.
        plain(&clusters, topic, PARTITIONS, Peer::Poll);
        let target = StreamTarget {
            clusters: clusters.to_vec(),
            topic: topic.into(),
            partitions: PARTITIONS,
            records_per_cluster: records as u64,
        };
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
                    cp_rounds.push(consumer_perf_round(&target));
                    continue;
                }
                let t = Instant::now();
                let pass = match side {
                    0 => plain(&clusters, topic, PARTITIONS, Peer::Poll),
                    3 => plain(&clusters, topic, PARTITIONS, Peer::Batch),
                    r => ours(&rt, &clusters, topic, r, Api::Batch, None).0,
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
        let (cp, flink) = if args.skip_java {
            (None, [None, None])
        } else {
            let cp = peer_rates(peers::median(cp_rounds.iter().copied()));
            let flink = [1, 2].map(|parallelism| {
                let f = peers::flink_throughput(
                    &target,
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
        };
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
            format!(
                "context: {label}, ours with 2 readers vs the librdkafka batch loop (records/s)"
            ),
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
    }

    // Memory: the 1 KiB topic is the larger backlog.
    let expected_1k = 2 * sizes.records_1k as u64;
    let rss = |side: &str| {
        let v: Vec<f64> = (0..sizes.rounds)
            .map(|_| peak_rss_mib(side, &clusters, TOPIC_1K, expected_1k))
            .collect();
        median(v)
    };
    let (rss_ours, rss_plain) = (rss("ours"), rss("plain"));
    rows.push(Row::new(format!(
            "peak RSS reading a backlog of 2 × {} records of 1 KiB (child process, librdkafka default queue limits on both)",
            sizes.records_1k
        ), (rss_ours, Some(rss_plain)), "MiB", Target::RatioAtMost(1.2), ""));

    // Handover.
    let ours_handover = handover_latencies(&a, &b, sizes.handover_rounds);
    let flink_handover = if args.skip_java {
        None
    } else {
        a.create_topic(FLINK_HANDOVER_TOPIC, 1).expect("topic on a");
        b.create_topic(FLINK_HANDOVER_TOPIC, 1).expect("topic on b");
        let l = peers::flink_handover(
            &clusters[0],
            &clusters[1],
            FLINK_HANDOVER_TOPIC,
            &peers::FlinkHandoverOptions {
                rounds: sizes.handover_rounds,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("Java peer failed: {e}"));
        Some(median(l.iter().map(|d| d.as_secs_f64() * 1e3).collect()))
    };
    rows.push(Row::new(format!(
            "handover: metadata change to first record of the added cluster, median of {} (peer: Flink DynamicKafkaSource, 1 ms discovery interval)",
            sizes.handover_rounds
        ), (median(ours_handover), flink_handover), "ms", Target::OursAtMost(500.0), java_note));

    // Isolation.
    let iso = isolation_run(
        &a,
        &b,
        ISOLATION_TOPIC,
        sizes.isolation_records,
        multicluster_kafka::DEFAULT_REBUILD_INTERVAL,
    );
    rows.push(Row::new(format!(
            "isolation: cluster A's records/s while B's properties change every 100 ms ({} changes, {} rebuilds of B's clients) (peer: the same reader, steady)",
            iso.changes, iso.rebuilds
        ), (iso.changing, Some(iso.steady)), "rec/s", Target::RatioAtLeast(0.95), ""));
    rows.push(Row::new(
        "context: isolation, this process's CPU per record of A while B's properties change (peer: while steady)".to_string(),
        (iso.cpu_ns[1], Some(iso.cpu_ns[0])),
        "ns",
        Target::None,
        "",
    ));

    // Checkpoint cost.
    for n in [10, 1_000, 10_000] {
        let (ms, bytes) = checkpoint_cost(n, sizes.checkpoint_budget);
        rows.push(Row::new(
            format!("checkpoint of {n} splits: from splits + encode, median time"),
            (ms, None),
            "ms",
            if n == 10_000 {
                Target::OursAtMost(10.0)
            } else {
                Target::None
            },
            "-",
        ));
        rows.push(Row::new(
            format!("checkpoint of {n} splits: encoded size"),
            (bytes as f64, None),
            "B",
            Target::None,
            "-",
        ));
    }
    rt.shutdown_timeout(Duration::from_secs(5));
    drop((a, b));

    println!("## mck-bench compare\n");
    println!("| measure | ours | peer | ratio (ours/peer) | target | met? |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!("{}", r.render());
    }
    println!();
    println!("- machine: {}", machine());
    println!(
        "- load average before / after: {load_before} / {} (other runs may share this machine)",
        loadavg()
    );
    println!(
        "- versions: Kafka {} (KRaft, test kit), Flink {} with flink-connector-kafka {}, Java {}, {}",
        mck_testkit::KAFKA_VERSION,
        peers::FLINK_VERSION,
        peers::FLINK_KAFKA_CONNECTOR_VERSION,
        command_line("java", &["-version"]),
        command_line("rustc", &["--version"]),
    );
    println!(
        "- settings: 2 clusters × {PARTITIONS} partitions, {} records/cluster of 100 B and {} of 1 KiB (8 B keys), {} measured round(s) per figure (median), brokers `-Xms1g -Xmx1g -XX:+UseG1GC`; ours = `next_batch`, plain = `BaseConsumer::poll`, librdkafka batch loop = `rd_kafka_consume_batch_queue`, one consumer per cluster; ConsumerPerformance in every round, in turn with the other sides (a JVM per round, 1 warm-up pass first); Flink after 1 warm-up round in the same JVM; windows: beside plain rdkafka and ConsumerPerformance, every side from its first record to its last (ConsumerPerformance: from group joined, its `fetch` window), beside Flink, ours from building the source and Flink from task start, both to the end of input{}",
        sizes.records_100,
        sizes.records_1k,
        sizes.rounds,
        if args.skip_java {
            "; **Java peers skipped (--skip-java)**"
        } else {
            ""
        }
    );
    println!("- total time: {:.0} s", started.elapsed().as_secs_f64());
}

/// Runs `mck-bench rss-child` for `side` and returns its peak RSS (`ru_maxrss`, read
/// with `wait4`) in MiB.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
fn peak_rss_mib(side: &str, clusters: &[PeerCluster], topic: &str, expected: u64) -> f64 {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["rss-child", "--side", side, "--topic", topic])
        .args(["--partitions", &PARTITIONS.to_string()])
        .args(["--expected", &expected.to_string()]);
    for c in clusters {
        cmd.arg("--cluster")
            .arg(format!("{}={}", c.id, c.bootstrap_servers));
    }
    let child = cmd.spawn().expect("the rss child starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 on the rss child");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the rss child ({side}) failed: status {status}"
    );
    usage.ru_maxrss as f64 / 1024.0
}

/// The hidden `rss-child` command.
pub fn rss_child(args: &RssChildArgs) {
    let clusters: Vec<PeerCluster> = args
        .clusters
        .iter()
        .map(|c| {
            let (id, servers) = c.split_once('=').expect("--cluster id=host:port");
            PeerCluster::new(id, servers)
        })
        .collect();
    let pass = match args.side {
        Side::Plain => plain(&clusters, &args.topic, args.partitions, Peer::Poll),
        Side::Ours => {
            let rt = mck_testkit::runtime();
            ours(&rt, &clusters, &args.topic, 1, Api::Batch, None).0
        }
    };
    assert_eq!(pass.records, args.expected, "every record read");
}

/// Median time (ms) of `Checkpoint::from_splits` + `encode` for `n` splits (over 2
/// clusters, 64 partitions per topic), over as many iterations as fit in `budget`
/// (at least 11), and the encoded size in bytes.
fn checkpoint_cost(n: usize, budget: Duration) -> (f64, usize) {
    let splits: Vec<KafkaSplit> = (0..n)
        .map(|i| KafkaSplit {
            id: SplitId::new(
                format!("cluster-{}", i % 2),
                format!("topic-{:04}", i / 128),
                (i / 2 % 64) as i32,
            ),
            next_offset: 1_000_000_000 + i as i64,
            stop_offset: None,
        })
        .collect();
    let mut times = Vec::new();
    let mut bytes = 0;
    let start = Instant::now();
    while times.len() < 11 || (start.elapsed() < budget && times.len() < 100_000) {
        let t = Instant::now();
        let encoded = Checkpoint::from_splits(splits.iter().cloned()).encode();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = std::hint::black_box(encoded).len();
    }
    (median(times), bytes)
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// CPU model, cores, memory and kernel of this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or_else(|| "? GiB".into(), |kb| format!("{:.1} GiB", kb / 1048576.0));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores, {mem} RAM, {}",
        command_line("uname", &["-sr"])
    )
}

/// The first line a command prints (stdout, else stderr), or "unknown".
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            let out = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&out)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("{program}: unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_a_ratio_target_is_met_only_at_or_above_it() {
        let row = |ours| Row {
            measure: "m".into(),
            ours,
            peer: Some(100.0),
            unit: "rec/s",
            target: Target::RatioAtLeast(0.95),
            no_peer: "",
        };
        assert_eq!(row(95.0).met(), Some(true));
        assert_eq!(row(94.0).met(), Some(false));
        assert!(row(94.0).render().contains("| 0.94 |"));
    }

    #[test]
    fn a_checkpoint_of_ten_splits_encodes_to_some_bytes() {
        let (ms, bytes) = checkpoint_cost(10, Duration::from_millis(1));
        assert!(ms >= 0.0);
        assert!(bytes > 0);
    }
}
