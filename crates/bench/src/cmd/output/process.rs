//! One side's process, run to its exit: its wall time, CPU and peak RSS, the
//! broker's CPU meanwhile, and the lines it printed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::Side;
use crate::cpu::pids_cpu;

/// Where a side's standard output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sink {
    /// A pipe into this process, which counts the lines.
    Count,
    /// `/dev/null`.
    Null,
    /// A pipe into this process, which keeps what was printed (a report).
    Report,
}

/// What one process did.
#[derive(Clone, Debug)]
pub(super) struct Run {
    /// Spawn to exit, seconds.
    pub(super) secs: f64,
    /// The child's user + system CPU seconds (its threads included).
    pub(super) cpu: f64,
    /// The broker's CPU seconds while the child ran.
    pub(super) broker_cpu: f64,
    /// Lines the child printed (counted only into a pipe).
    pub(super) lines: Option<u64>,
    /// What the child printed, with [`Sink::Report`].
    pub(super) report: Option<String>,
    /// The child's peak resident set size, MiB (its `VmHWM`, read every 5 ms while
    /// it runs).
    pub(super) rss_mib: f64,
}

/// Runs one side to its exit.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its rusage"
)]
pub(super) fn run(side: Side, mut cmd: Command, sink: Sink, broker: &[u32]) -> Run {
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    match sink {
        Sink::Count | Sink::Report => cmd.stdout(Stdio::piped()),
        Sink::Null => cmd.stdout(Stdio::null()),
    };
    let broker_before = pids_cpu(broker);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{} cannot start: {e}", side.name()));
    let keep = sink == Sink::Report;
    let counter = child.stdout.take().map(|mut stdout| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let (mut lines, mut kept) = (0u64, Vec::new());
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) => return (lines, keep.then(|| String::from_utf8_lossy(&kept).into())),
                    Ok(n) => {
                        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                        if keep {
                            kept.extend_from_slice(&buf[..n]);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => panic!("reading the child's stdout: {e}"),
                }
            }
        })
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    // The peak RSS from the child's own /proc entry while it runs: wait4's
    // ru_maxrss also counts the memory of this process it was spawned from.
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || {
            let mut peak_kb = 0u64;
            while watching.load(Ordering::Relaxed) {
                if let Some(kb) = vm_hwm_kb(pid) {
                    peak_kb = peak_kb.max(kb);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak_kb
        })
    };
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (std reaps only in wait/try_wait).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    let broker_cpu = pids_cpu(broker) - broker_before;
    watching.store(false, Ordering::Relaxed);
    let peak_kb = watcher.join().expect("the RSS watcher");
    assert_eq!(r, pid, "wait4 on {}", side.name());
    let (lines, report) = counter
        .map(|c| c.join().expect("the line counter"))
        .map_or((None, None), |(lines, report)| (Some(lines), report));
    let errors = errors.join().expect("the stderr reader");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} failed (wait status {status}); its stderr:\n{errors}",
        side.name()
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        secs,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        broker_cpu,
        lines,
        report,
        rss_mib: peak_kb as f64 / 1024.0,
    }
}

/// `VmHWM` (peak resident set size, KiB) of a running process.
fn vm_hwm_kb(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
