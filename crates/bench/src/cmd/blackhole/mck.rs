//! The `mck consume` rounds: the time from SIGINT to the exit, B's proxy passing or
//! blackholed.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mck_testkit::proxy::ProxiedCluster;

use super::PATIENCE;

/// A `mck consume` child whose stdout lines are counted.
struct Mck {
    child: Child,
    lines: Arc<AtomicU64>,
    counter: std::thread::JoinHandle<()>,
    stderr: std::thread::JoinHandle<String>,
}

fn spawn_mck(mck: &Path, metadata: &Path) -> Mck {
    let mut child = Command::new(mck)
        .arg("consume")
        .arg("--metadata")
        .arg(metadata)
        .args(["--stream", "s", "--format", "value"])
        .env_remove("MCK_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mck starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let lines = Arc::new(AtomicU64::new(0));
    let l = lines.clone();
    let counter = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    let c = buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                    l.fetch_add(c, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("reading mck's stdout: {e}"),
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    Mck {
        child,
        lines,
        counter,
        stderr,
    }
}

/// One `mck consume` round: read everything, blackhole B (or not), wait `hold`, then
/// SIGINT; returns seconds from the signal to the exit.
pub(super) fn mck_round(
    mck: &Path,
    metadata: &Path,
    b: &ProxiedCluster,
    expected: u64,
    blackhole: bool,
    hold: Duration,
) -> f64 {
    let mut m = spawn_mck(mck, metadata);
    let t = Instant::now();
    while m.lines.load(Ordering::Relaxed) < expected {
        if let Some(status) = m.child.try_wait().expect("try_wait") {
            panic!(
                "mck exited early ({status}); its stderr:\n{}",
                m.stderr.join().unwrap_or_default()
            );
        }
        assert!(
            t.elapsed() < PATIENCE,
            "mck read {} of {expected} records in {PATIENCE:?}",
            m.lines.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if blackhole {
        b.proxy().blackhole();
    }
    std::thread::sleep(hold);
    let pid = m.child.id() as libc::pid_t;
    let t = Instant::now();
    // SAFETY: `pid` is our child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = loop {
        if let Some(s) = m.child.try_wait().expect("try_wait") {
            break s;
        }
        if t.elapsed() > PATIENCE {
            let _ = m.child.kill();
            panic!("mck did not exit within {PATIENCE:?} of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let exit = t.elapsed().as_secs_f64();
    b.proxy().pass();
    m.counter.join().expect("the line counter");
    let stderr = m.stderr.join().expect("the stderr reader");
    assert!(
        status.success(),
        "mck exited with {status} after SIGINT; its stderr:\n{stderr}"
    );
    let lines = m.lines.load(Ordering::Relaxed);
    assert_eq!(lines, expected, "mck's records");
    exit
}
