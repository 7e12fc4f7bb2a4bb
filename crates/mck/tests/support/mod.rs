//! Helpers shared by the `mck` command's integration tests (`mod support;` in each).
//!
//! Each test file is its own binary and uses only some of these, so the rest would be
//! reported as dead code there.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a run may take to do what a test waits for: a guard against hangs, not a
/// timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The `mck` binary under test.
pub fn mck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mck"))
}

/// A path as a command-line argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// The last lines of a run's stderr, enough to see why it failed.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Waits until the file at `path` holds at least `n` lines. Fails if `child` exits
/// first or patience runs out (then `child` is killed); either failure shows the end
/// of `stderr`, when the run's stderr goes to a file.
pub fn wait_for_lines(path: &Path, n: usize, child: &mut Child, stderr: Option<&Path>) {
    let until = Instant::now() + PATIENCE;
    let log = || {
        stderr.map_or_else(String::new, |p| {
            tail(&std::fs::read_to_string(p).unwrap_or_default())
        })
    };
    loop {
        let have = std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if have >= n {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("mck exited ({status}) at {have} of {n} lines:\n{}", log());
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("{have} of {n} lines after {PATIENCE:?}:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to exit and returns its status; kills it and fails if patience
/// runs out, showing the end of `stderr` when the run's stderr goes to a file.
pub fn wait_exit(child: &mut Child, stderr: Option<&Path>) -> ExitStatus {
    let until = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let log = stderr.map_or_else(String::new, |p| {
                tail(&std::fs::read_to_string(p).unwrap_or_default())
            });
            panic!("mck did not exit within {PATIENCE:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The checkpoint files in a checkpoint directory (not its lock file nor a checkpoint
/// being written), oldest first.
pub fn checkpoint_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("checkpoint-") && name.ends_with(".json")
        })
        .collect();
    files.sort();
    files
}

/// Fetches `/metrics` from the Prometheus endpoint at `addr`.
pub fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics endpoint answers");
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body
}
