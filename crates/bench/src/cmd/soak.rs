//! `mck-bench soak`: `mck consume`'s memory over a long follow run with one dead cluster
//! and librdkafka's debug logs on.
//!
//! One real cluster gets a slow trickle of records (10 a second by default); a second
//! cluster in the same stream points at a loopback port nothing listens on. `mck
//! consume` follows the stream (no `-e`) with `-X debug=all`, its output going to
//! `/dev/null`, so librdkafka logs every connection attempt to the dead cluster and
//! everything it does with the live one. Those logs travel through mck's log handling
//! (off by default); what matters here is that the clients' queues are served, so
//! nothing piles up: mck's resident set (`VmRSS` in `/proc/<pid>/status`) is sampled
//! every 10 s and must stay flat. The samples are printed with mck's CPU time and its
//! `mck_records_total` (scraped from `--metrics-addr`, to show the live cluster's
//! records keep coming out), then the first and the last minute's averages, their
//! ratio and the least-squares slope. At the end mck gets SIGINT and must exit 0; its
//! stderr is kept and its size printed (the debug logs must not reach it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;

use super::mck_binary;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::{ClusterOptions, KafkaCluster, TestCluster};

use crate::cpu::pids_cpu;

/// The topic the trickle goes to.
const TOPIC: &str = "bench-soak";

/// How often mck's memory is sampled.
const EVERY: Duration = Duration::from_secs(10);

/// Options of `mck-bench soak`.
#[derive(clap::Args, Clone, Debug)]
pub struct SoakArgs {
    /// How long mck runs, in minutes.
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    /// Records a second produced to the live cluster.
    #[arg(long, default_value_t = 10)]
    rate: u64,
    /// librdkafka's `debug` property for every cluster (`-X debug=…`); empty: none.
    #[arg(long, default_value = "all")]
    debug: String,
    /// The `mck` binary (default: `mck` next to this binary; build it with
    /// `cargo build --release -p mck`).
    #[arg(long)]
    mck: Option<PathBuf>,
}

/// A loopback address nothing listens on (bound once to find a free port, then let go).
pub fn dead_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// `VmRSS` of `pid` in KiB, or `None` once it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `name`'s value in a Prometheus text exposition at `addr` (summed over labels).
fn scrape(addr: SocketAddr, name: &str) -> Option<f64> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let values: Vec<f64> = body
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// A thread producing `rate` records a second of 100 B to [`TOPIC`] until `stop`.
fn trickle(
    cluster: &KafkaCluster,
    rate: u64,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("linger.ms", "5")
        .create()
        .expect("the trickle's producer");
    std::thread::spawn(move || {
        let value = vec![b'x'; 100];
        let gap = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
        let start = Instant::now();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("{n:08}");
            let record = BaseRecord::to(TOPIC)
                .key(key.as_bytes())
                .payload(value.as_slice());
            if producer.send(record).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
            n += 1;
            producer.poll(Duration::ZERO);
            let due = start + gap * n as u32;
            while Instant::now() < due {
                producer.poll(due.saturating_duration_since(Instant::now()));
            }
        }
        let _ = producer.flush(Duration::from_secs(10));
    })
}

/// One sample of mck.
struct Sample {
    secs: f64,
    rss_kib: u64,
    cpu: f64,
    records: Option<f64>,
}

/// The least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx.max(1e-12)
}

/// The `soak` command.
pub fn soak(args: &SoakArgs) {
    let mck = mck_binary(args.mck.as_deref());
    eprintln!("mck: {}", mck.display());
    let cluster = KafkaCluster::start(ClusterOptions::new("bench-soak").jvm_options([
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
    ]))
    .expect("cluster bench-soak starts");
    cluster.create_topic(TOPIC, 4).expect("create the topic");
    let dead = dead_address();
    let dir = std::env::temp_dir().join(format!("mck-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let metadata = dir.join("metadata.yaml");
    std::fs::write(
        &metadata,
        format!(
            "clusters:\n  live:\n    properties:\n      bootstrap.servers: \"{}\"\n  \
             dead:\n    properties:\n      bootstrap.servers: \"{dead}\"\n\
             streams:\n  s:\n    clusters:\n      live: {{ topics: [{TOPIC}] }}\n      \
             dead: {{ topics: [{TOPIC}] }}\n",
            cluster.bootstrap_servers()
        ),
    )
    .expect("writing the metadata file");
    let metrics = dead_address();
    let stderr_path = dir.join("mck.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("mck's stderr file");

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = trickle(&cluster, args.rate, stop.clone(), sent.clone());

    let mut cmd = Command::new(&mck);
    cmd.arg("consume")
        .arg("--metadata")
        .arg(&metadata)
        .args(["--stream", "s", "--format", "value"])
        .arg("--metrics-addr")
        .arg(metrics.to_string());
    if !args.debug.is_empty() {
        cmd.arg("-X").arg(format!("debug={}", args.debug));
    }
    // MCK_LOG would switch mck's log handling; measure its default.
    cmd.env_remove("MCK_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    eprintln!("running: {cmd:?}");
    let mut child = cmd.spawn().expect("mck starts");
    let pid = child.id();
    let start = Instant::now();
    let total = Duration::from_secs(args.minutes.max(1) * 60);
    let mut samples = Vec::new();
    let mut k = 0u32;
    loop {
        let due = start + EVERY * k;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!(
                "mck exited early ({status}); its stderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        let s = Sample {
            secs: start.elapsed().as_secs_f64(),
            rss_kib: rss_kib(pid).expect("mck's VmRSS"),
            cpu: pids_cpu(&[pid]),
            records: scrape(metrics, "mck_records_total"),
        };
        eprintln!(
            "t={:>4.0} s RSS {:>7} KiB, CPU {:>6.2} s, records out {} of {} sent",
            s.secs,
            s.rss_kib,
            s.cpu,
            s.records.map_or("?".into(), |r| format!("{r:.0}")),
            sent.load(Ordering::Relaxed)
        );
        samples.push(s);
        if start + EVERY * k >= start + total {
            break;
        }
        k += 1;
    }
    let errors_at_end = scrape(metrics, "mck_cluster_errors_total");
    // SAFETY: `pid` is our child, not yet reaped.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let t = Instant::now();
    let status = child.wait().expect("wait for mck");
    let exit = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("the trickle");
    let stderr_text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);

    let avg = |range: &[Sample]| {
        range.iter().map(|s| s.rss_kib as f64).sum::<f64>() / range.len().max(1) as f64
    };
    // The first minute: the samples at 10..=60 s (the one at 0 s is start-up); the
    // last: the final six.
    let per_minute = (60 / EVERY.as_secs()) as usize;
    let first = avg(&samples[1.min(samples.len() - 1)..(per_minute + 1).min(samples.len())]);
    let last = avg(&samples[samples.len().saturating_sub(per_minute)..]);
    let points: Vec<(f64, f64)> = samples[1..]
        .iter()
        .map(|s| (s.secs / 60.0, s.rss_kib as f64))
        .collect();
    let after_first: Vec<(f64, f64)> = points.iter().copied().skip(per_minute).collect();

    let date = super::utc_minute();
    let load = super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "soak, {date}, {cores} cores, load average at the end {load}; mck consume (follow, \
         --format value, stdout /dev/null, -X debug={}) over cluster `live` ({} records/s of \
         100 B, 4 partitions) and cluster `dead` ({dead}, nothing listens), {} min",
        args.debug, args.rate, args.minutes
    );
    println!();
    println!("| t (s) | VmRSS (KiB) | mck CPU (s) | mck_records_total |");
    println!("|---|---|---|---|");
    for s in &samples {
        println!(
            "| {:.0} | {} | {:.2} | {} |",
            s.secs,
            s.rss_kib,
            s.cpu,
            s.records.map_or("?".into(), |r| format!("{r:.0}"))
        );
    }
    println!();
    println!("| figure | value |");
    println!("|---|---|");
    println!("| first-minute average RSS (10–60 s) | {first:.0} KiB |");
    println!("| last-minute average RSS | {last:.0} KiB |");
    println!("| last / first | **{:.3}** |", last / first);
    println!(
        "| slope, all samples after start-up | **{:+.1} KiB/min** |",
        slope(&points)
    );
    if after_first.len() >= 2 {
        println!(
            "| slope, after the first minute | {:+.1} KiB/min |",
            slope(&after_first)
        );
    }
    println!(
        "| records sent / read by mck | {} / {} |",
        sent.load(Ordering::Relaxed),
        samples
            .last()
            .and_then(|s| s.records)
            .map_or("?".into(), |r| format!("{r:.0}"))
    );
    println!(
        "| mck CPU over the run | {:.2} s |",
        samples.last().map_or(0.0, |s| s.cpu)
    );
    println!(
        "| mck_cluster_errors_total at the end | {} |",
        errors_at_end.map_or("?".into(), |e| format!("{e:.0}"))
    );
    println!(
        "| SIGINT to exit | {:.0} ms ({status}) |",
        exit.as_secs_f64() * 1e3
    );
    println!(
        "| mck's stderr over the run | {} bytes, {} lines |",
        stderr_text.len(),
        stderr_text.lines().count()
    );
    if !stderr_text.is_empty() {
        println!();
        println!("mck's stderr (first 10 lines):");
        for l in stderr_text.lines().take(10) {
            println!("    {l}");
        }
    }
}
