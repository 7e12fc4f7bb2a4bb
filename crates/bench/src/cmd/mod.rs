//! One module per measurement, each with the entry point its subcommand runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub mod blackhole;
pub mod compare;
pub mod decode;
pub mod group;
pub mod handover;
pub mod isolation;
pub mod load;
pub mod mirror;
pub mod output;
pub mod plot;
pub mod scale;
pub mod shards;
pub mod soak;
pub mod throughput;
pub mod tls;

/// The topic the throughput and isolation measures read.
pub const TOPIC: &str = "bench";

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The time now, to the minute, in UTC (`2026-12-01 03:23 UTC`), for a run's header.
pub fn utc_minute() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The machine's load averages over 1, 5 and 15 minutes, for a run's header.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// How to install kcat when it is missing.
const KCAT_HINT: &str = "install it: apt-get update && apt-get install -y kcat (Debian/Ubuntu), \
     or pass --kcat PATH";

/// Fails loudly, before any broker starts, when kcat cannot be run.
pub fn check_kcat(kcat: &Path) {
    match Command::new(kcat)
        .arg("-V")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => {
            let v = String::from_utf8_lossy(&out.stdout);
            let version = v.lines().find(|l| l.starts_with("Version"));
            eprintln!("kcat: {}", version.unwrap_or("?").trim());
        }
        Ok(out) => panic!(
            "`{} -V` failed ({}): {}",
            kcat.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!("kcat (`{}`) cannot run: {e}; {KCAT_HINT}", kcat.display()),
    }
}

/// The `mck` binary: `--mck`, or `mck` in the directory of this binary.
/// Builds the franz-go peer (`crates/bench/franz-go`, franz-go from the Go module
/// proxy) next to this binary, and returns its path. Panics with Go's own words if
/// Go is missing or the build fails.
pub fn franz_peer() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("franz-go");
    let out = std::env::current_exe()
        .expect("the bench binary's path")
        .with_file_name("franz-peer");
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&source)
        .output()
        .unwrap_or_else(|e| panic!("the franz-go peer needs Go (`go` on the path): {e}"));
    assert!(
        built.status.success(),
        "building the franz-go peer in {} failed: {}",
        source.display(),
        String::from_utf8_lossy(&built.stderr).trim()
    );
    out
}

pub fn mck_binary(arg: Option<&Path>) -> PathBuf {
    let path = arg.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::current_exe()
            .expect("the bench binary's path")
            .with_file_name("mck")
    });
    assert!(
        path.is_file(),
        "no mck binary at {}: build it first (`cargo build --release -p mck`) or pass --mck PATH",
        path.display()
    );
    path
}
