//! `mck-bench scale clusters`: cost against the number of clusters, on librdkafka mock
//! clusters (or, with `--real`, single-broker Kafka clusters of the test kit) at the
//! same total record rate. One fresh `scale point` process per count
//! (see [`super::point`]); the mock clusters and their producers run in one `scale
//! mock` process for the whole curve (see [`super::mock`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

pub use super::point::{PointArgs, point};

use super::{PlotArgs, command_line, header, verdict};
use crate::cmd::median;
use crate::cmd::plot::{self, Axis, Chart, Legend, Series};

/// Options of `scale clusters`.
#[derive(clap::Args, Debug)]
pub struct ClustersArgs {
    /// Cluster counts, one point each (default 1,2,4,8,16,32,64; with `--real`
    /// 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    counts: Vec<usize>,
    /// Real single-broker Kafka clusters (child JVMs of the test kit, 256 MiB heap
    /// each) instead of librdkafka mock clusters: as many as fit on the machine.
    #[arg(long)]
    real: bool,
    /// Total records/s over the measured clusters, the same at every point.
    #[arg(long, default_value_t = 10_000.0)]
    rate: f64,
    /// Seconds of the CPU window at each point.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Seconds of reading before the window.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Readers of the source (`parallelism`).
    #[arg(long, default_value_t = 1)]
    readers: usize,
    /// Partitions of the topic on each cluster.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// Reconciliation and handover rounds at each point (the median is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Records/s on the topics and clusters the rounds add (the first record after a
    /// change waits at most 1 / this).
    #[arg(long, default_value_t = 500.0)]
    side_rate: f64,
    /// `fetch.wait.max.ms` in every cluster's properties (0: librdkafka's default of
    /// 500). Default 10 on mock clusters, 0 on real ones: a librdkafka mock broker
    /// answers a fetch that finds no data only after this wait, even when records
    /// arrive meanwhile (a real broker answers at once), which made first-record times
    /// jump by 500 ms at random.
    #[arg(long)]
    fetch_wait_ms: Option<u64>,
    /// `fetch.min.bytes` in every cluster's properties (0: librdkafka's default of 1).
    /// A real broker holds a fetch until this much is there or `fetch.wait.max.ms`
    /// passed; the mock broker ignores it.
    #[arg(long, default_value_t = 0)]
    fetch_min_bytes: u64,
    #[command(flatten)]
    plots: PlotArgs,
}

impl ClustersArgs {
    fn counts(&self) -> Vec<usize> {
        let mut counts = match (self.counts.is_empty(), self.real) {
            (false, _) => self.counts.clone(),
            (true, false) => vec![1, 2, 4, 8, 16, 32, 64],
            (true, true) => vec![1, 2, 4, 8],
        };
        counts.sort_unstable();
        counts.dedup();
        counts
    }

    fn fetch_wait_ms(&self) -> u64 {
        self.fetch_wait_ms.unwrap_or(if self.real { 0 } else { 10 })
    }

    /// What the clusters are, for the tables and the plot.
    fn kind(&self) -> &'static str {
        if self.real {
            "single-broker Kafka clusters (test kit, one JVM each)"
        } else {
            "librdkafka mock clusters (1 broker each)"
        }
    }
}

/// The figures of one point, parsed from its `RESULT` line.
struct Point {
    clusters: usize,
    f: BTreeMap<String, String>,
}

impl Point {
    fn num(&self, key: &str) -> f64 {
        self.f
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// The median of a comma-separated list of ms.
    fn med(&self, key: &str) -> f64 {
        let v: Vec<f64> = self
            .f
            .get(key)
            .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        if v.is_empty() { f64::NAN } else { median(v) }
    }

    /// (cluster, reader) pairs: one librdkafka client each (the enumerator's lookups
    /// share the first reader's client of a cluster), so one `rdk:main` thread each;
    /// clusters × readers when the thread list has none.
    fn pairs(&self, readers: usize) -> usize {
        let clients = self
            .f
            .get("groups")
            .and_then(|g| g.split(',').find_map(|kv| kv.strip_prefix("rdk:main:")))
            .and_then(|n| n.parse().ok());
        clients.unwrap_or(self.clusters * readers).max(1)
    }

    /// Threads the source added, per (cluster, reader) pair that reads.
    fn threads_per_pair(&self, readers: usize) -> f64 {
        (self.num("threads") - self.num("threads_base")) / self.pairs(readers) as f64
    }
}

/// Threads added from `prev` to `p`, over the (cluster, reader) pairs added.
fn marginal_threads(prev: &Point, p: &Point, readers: usize) -> f64 {
    let pairs = p.pairs(readers) as f64 - prev.pairs(readers) as f64;
    (p.num("threads") - prev.num("threads")) / pairs.max(1.0)
}

/// Starts `scale mock` and returns it with the bootstrap servers it printed.
fn start_mock(args: &ClustersArgs, max: usize) -> (std::process::Child, Vec<String>) {
    let exe = std::env::current_exe().expect("this binary");
    let mut child = Command::new(exe)
        .args(["scale", "mock"])
        .args(["--clusters", &max.to_string()])
        .args(["--extra", &args.rounds.to_string()])
        .args(["--partitions", &args.partitions.to_string()])
        .args(["--side-topics", &args.rounds.to_string()])
        .args(["--value-size", &args.value_size.to_string()])
        .args(["--side-rate", &args.side_rate.to_string()])
        .args(args.real.then_some("--real"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("scale mock starts");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("scale mock's ready line");
    let bootstraps: Vec<String> = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("scale mock did not start: {line:?}"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(
        bootstraps.len(),
        max + args.rounds,
        "one bootstrap per cluster"
    );
    (child, bootstraps)
}

/// Runs one `scale point` process over the first `n` clusters.
fn run_point(args: &ClustersArgs, n: usize, max: usize, bootstraps: &[String]) -> Point {
    let exe = std::env::current_exe().expect("this binary");
    let mut cmd = Command::new(exe);
    cmd.args(["scale", "point"])
        .args(["--readers", &args.readers.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .args(["--secs", &args.secs.to_string()])
        .args(["--rounds", &args.rounds.to_string()])
        .args(["--fetch-wait-ms", &args.fetch_wait_ms().to_string()])
        .args(["--fetch-min-bytes", &args.fetch_min_bytes.to_string()]);
    for b in &bootstraps[..n] {
        cmd.args(["--cluster", b]);
    }
    for b in &bootstraps[max..] {
        cmd.args(["--extra", b]);
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .expect("scale point runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("scale point with {n} clusters failed ({})", out.status));
    let f = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Point { clusters: n, f }
}

pub fn clusters(args: &ClustersArgs) {
    let counts = args.counts();
    let max = *counts.last().expect("at least one count");
    let (mut mock, bootstraps) = start_mock(args, max);
    let mut mock_in = mock.stdin.take().expect("stdin");
    let mut points = Vec::new();
    for &n in &counts {
        writeln!(mock_in, "rate {n} {}", args.rate).expect("scale mock takes commands");
        mock_in.flush().expect("flush");
        // Let the new rates settle before the source starts.
        std::thread::sleep(Duration::from_millis(500));
        let p = run_point(args, n, max, &bootstraps);
        eprintln!(
            "{n} clusters: {} threads, {:.1} MiB, {} ns CPU/record, reconcile {:.0} ms, handover {:.0} ms",
            p.num("threads"),
            p.num("rss_mib"),
            p.num("cpu_ns"),
            p.med("reconcile_ms"),
            p.med("handover_ms")
        );
        points.push(p);
    }
    let _ = writeln!(mock_in, "quit");
    drop(mock_in);
    let _ = mock.wait();
    report(args, &points);
}

fn report(args: &ClustersArgs, points: &[Point]) {
    let readers = args.readers;
    header(&command_line());
    println!(
        "- workload: {} in a separate process with their producers, \
         topic of {} partitions per cluster, {} B values, {:.0} records/s in total spread evenly over the clusters, \
         {readers} reader(s), starting offsets latest, fetch.wait.max.ms {} (see --fetch-wait-ms), fetch.min.bytes {} (see --fetch-min-bytes); CPU over a {} s window after {} s of reading; \
         reconciliation = add a topic to c0 only, until its first record; handover = add a cluster, until its first record \
         (both: median of {} rounds; the added topic and cluster get {:.0} records/s)",
        args.kind(),
        args.partitions,
        args.value_size,
        args.rate,
        match args.fetch_wait_ms() {
            0 => "500 (librdkafka's default)".to_string(),
            ms => ms.to_string(),
        },
        match args.fetch_min_bytes {
            0 => "1 (librdkafka's default)".to_string(),
            b => b.to_string(),
        },
        args.secs,
        args.warmup,
        args.rounds,
        args.side_rate
    );
    println!();
    println!(
        "| clusters | threads | threads added per (cluster, reader) pair | threads per pair added since the previous point | RSS MiB | CPU ns/record | records/s read | CPU cores | open: first record ms | open: every cluster ms | handover ms | reconciliation ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, p) in points.iter().enumerate() {
        let marginal = match i.checked_sub(1).map(|j| &points[j]) {
            Some(prev) => format!("{:.2}", marginal_threads(prev, p, readers)),
            None => "–".to_string(),
        };
        println!(
            "| {} | {} | {:.2} | {marginal} | {:.1} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} |",
            p.clusters,
            p.num("threads"),
            p.threads_per_pair(readers),
            p.num("rss_mib"),
            p.num("cpu_ns"),
            p.num("rate"),
            p.num("cpu_cores"),
            p.num("open_first_ms"),
            p.num("open_all_ms"),
            p.med("handover_ms"),
            p.med("reconcile_ms"),
        );
    }
    println!();
    println!(
        "Threads by name at each point (librdkafka names its threads rdk:main, rdk:broker<N>; the library's fetch threads are mck-fetch-<n>, at most one per core and reader, and its event thread mck-events):"
    );
    println!();
    for p in points {
        println!(
            "- {} cluster(s): {}",
            p.clusters,
            p.f.get("groups").map_or("?", String::as_str)
        );
    }
    println!();
    println!(
        "CPU ns per record by thread group over the window (from /proc/self/task/*/schedstat; the process total is getrusage's):"
    );
    println!();
    for p in points {
        println!(
            "- {} cluster(s): {}",
            p.clusters,
            p.f.get("cpu_groups").map_or("?", String::as_str)
        );
    }
    println!();
    println!(
        "Reconciliation by phase, median ms of the rounds (the source's mck_reconciliation_phase_seconds; \
         read + plan + apply + discover run in the enumerator; assign runs from splits sent to the reader's consumer having them, \
         overlapping the end of discover; after = the time to the first record after the enumerator's phases: \
         the reader's assignment, the consumer's next fetch and the hand-out):"
    );
    println!();
    println!("| clusters | read | plan | apply | discover | assign | after | to first record |");
    println!("|---|---|---|---|---|---|---|---|");
    for p in points {
        let phases: Vec<f64> = super::point::PHASES
            .iter()
            .map(|ph| p.med(&format!("phase_{ph}_ms")))
            .collect();
        let cells: Vec<String> = phases.iter().map(|ms| format!("{ms:.1}")).collect();
        println!(
            "| {} | {} | {:.1} | {:.1} |",
            p.clusters,
            cells.join(" | "),
            p.med("phase_rest_ms"),
            p.med("reconcile_ms")
        );
    }
    println!();
    println!("Times each thread group was scheduled in, per second of the window (wake-ups):");
    println!();
    for p in points {
        println!(
            "- {} cluster(s): {}",
            p.clusters,
            p.f.get("runs_groups").map_or("?", String::as_str)
        );
    }
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return;
    };
    if last.clusters == first.clusters {
        return;
    }
    let (n1, n2) = (first.clusters, last.clusters);
    let cpu = last.num("cpu_ns") / first.num("cpu_ns");
    let tpc = last.threads_per_pair(readers);
    let rss = (last.num("rss_mib") - first.num("rss_mib")) / (n2 - n1) as f64;
    let rec = last.med("reconcile_ms") / first.med("reconcile_ms");
    println!();
    println!("| target | measured | |");
    println!("|---|---|---|");
    println!(
        "| CPU per record at {n2} clusters ≤ 1.2× that at {n1} (same total rate) | {cpu:.2}× | {} |",
        verdict(cpu <= 1.2)
    );
    println!(
        "| threads ≤ 4 per cluster per reader (at {n2} clusters: threads above the process's {} before the source, over the {} (cluster, reader) pairs) | {tpc:.2} | {} |",
        last.num("threads_base"),
        last.pairs(readers),
        verdict(tpc <= 4.0)
    );
    if points.len() >= 2 {
        let prev = &points[points.len() - 2];
        let m = marginal_threads(prev, last, readers);
        println!(
            "| threads ≤ 4 per cluster per reader, as added: from {} to {n2} clusters, threads added over (cluster, reader) pairs added (the source's fixed threads left out) | {m:.2} | {} |",
            prev.clusters,
            verdict(m <= 4.0)
        );
    }
    println!(
        "| RSS per added (nearly idle) cluster ≤ 8 MiB, from {n1} to {n2} clusters | {rss:.2} MiB | {} |",
        verdict(rss <= 8.0)
    );
    println!(
        "| reconciliation of one changed cluster at {n2} clusters ≤ 1.1× that at {n1} | {rec:.2}× | {} |",
        verdict(rec <= 1.1)
    );
    let rel = |key: &str, med: bool| -> Series {
        let get = |p: &Point| if med { p.med(key) } else { p.num(key) };
        let base = get(first);
        Series::new(
            key,
            points
                .iter()
                .map(|p| (p.clusters as f64, get(p) / base))
                .collect(),
        )
    };
    let mut series = vec![
        rel("cpu_ns", false),
        rel("threads", false),
        rel("rss_mib", false),
        rel("open_all_ms", false),
        rel("handover_ms", true),
        rel("reconcile_ms", true),
    ];
    let names = [
        "CPU per record",
        "threads",
        "RSS",
        "open (every cluster)",
        "handover",
        "reconciliation",
    ];
    for (s, name) in series.iter_mut().zip(names) {
        s.name = name.to_string();
    }
    let file = if args.real {
        "scale-clusters-real.svg"
    } else {
        "scale-clusters.svg"
    };
    plot::write(
        &args.plots.plots.join(file),
        &Chart {
            title: &format!(
                "Cost against clusters ({:.0} records/s in total, {readers} reader(s)), relative to {n1} cluster(s)",
                args.rate
            ),
            x_label: if args.real {
                "clusters (real single-broker Kafka)"
            } else {
                "clusters (librdkafka mock)"
            },
            y_label: "× the figure at the first point",
            x: Axis::Log,
            y: Axis::Log,
            legend: Legend::UpperLeft,
        },
        &series,
    );
}
