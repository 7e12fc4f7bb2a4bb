//! Building `crates/bench/flink-dynamic` with Maven, and running JVMs with their output
//! kept.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{FLINK_KAFKA_CONNECTOR_VERSION, FLINK_VERSION, PeerError};

/// JVM options of every peer JVM: a fixed 1 GiB heap with G1, and a fixed locale so the
/// tools print `.` as the decimal separator.
const JVM_OPTIONS: &[&str] = &[
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-Djava.awt.headless=true",
    "-Duser.language=en",
    "-Duser.country=US",
];

/// Java 17 needs these for Flink's reflective access (Flink's own launch scripts pass
/// the same kind of list).
pub(super) const FLINK_JVM_OPENS: &[&str] = &[
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
];

/// The built Flink module: its jar and its runtime dependencies.
pub(super) struct FlinkJob {
    pub(super) jar: PathBuf,
    pub(super) libs: PathBuf,
}

fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("flink-dynamic")
}

/// Builds `crates/bench/flink-dynamic` once per content hash of its pom and sources, into
/// `<cache>/flink-dynamic-<hash>/` (the test kit's cache root), offline first and online
/// if that fails. Concurrent callers serialize on a lock file.
pub(super) fn flink_job(peer: &'static str) -> Result<FlinkJob, PeerError> {
    let module = module_dir();
    let hash = module_hash(&module).map_err(io(peer, &module))?;
    let kafka_libs = mck_testkit::kafka_libs().map_err(|e| PeerError::Failed {
        peer,
        reason: format!("cannot find the test kit's cache: {e}"),
        log: PathBuf::from("-"),
    })?;
    // `<root>/kafka-<version>/libs` -> `<root>`, so MCK_CACHE_DIR and XDG_CACHE_HOME apply.
    let root = kafka_libs
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let dir = root.join(format!("flink-dynamic-{hash:016x}"));
    let job = FlinkJob {
        jar: dir.join("mck-bench-flink-dynamic.jar"),
        libs: dir.join("libs"),
    };
    let marker = dir.join("complete");
    if marker.exists() {
        return Ok(job);
    }
    fs::create_dir_all(&dir).map_err(io(peer, &dir))?;
    let lock_path = dir.join("lock");
    let lock = File::create(&lock_path).map_err(io(peer, &lock_path))?;
    // SAFETY: flock on a descriptor we own; released when `lock` is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io(peer, &lock_path)(std::io::Error::last_os_error()));
    }
    if marker.exists() {
        return Ok(job);
    }
    let build = dir.join("build");
    let staging = dir.join("libs.partial");
    let log = dir.join("maven.log");
    let mut last = String::new();
    for offline in [true, false] {
        let _ = fs::remove_dir_all(&staging);
        let mut cmd = Command::new("mvn");
        cmd.args(["-q", "-B"]);
        if offline {
            cmd.arg("-o");
        }
        cmd.arg("-f")
            .arg(module.join("pom.xml"))
            .arg(format!("-Dmck.build.dir={}", build.display()))
            .arg("package")
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", staging.display()));
        let out = cmd.output().map_err(|source| PeerError::Spawn {
            peer,
            program: "mvn".into(),
            source,
        })?;
        let mut text = format!("$ {cmd:?}\n");
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let _ = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if out.status.success() {
            let built = build.join("mck-bench-flink-dynamic.jar");
            fs::copy(&built, &job.jar).map_err(io(peer, &built))?;
            let _ = fs::remove_dir_all(&job.libs);
            fs::rename(&staging, &job.libs).map_err(io(peer, &job.libs))?;
            fs::write(
                &marker,
                format!("flink {FLINK_VERSION}, connector {FLINK_KAFKA_CONNECTOR_VERSION}\n"),
            )
            .map_err(io(peer, &marker))?;
            return Ok(job);
        }
        last = telling_line(&text);
    }
    Err(PeerError::Maven {
        peer,
        reason: last,
        log,
    })
}

/// FNV-1a over the module's pom and sources (paths and contents, in path order).
fn module_hash(module: &Path) -> std::io::Result<u64> {
    let mut files = vec![module.join("pom.xml")];
    let mut stack = vec![module.join("src")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let rel = f
            .strip_prefix(module)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        for b in rel.bytes().chain([0]).chain(fs::read(&f)?) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(h)
}

/// A run's stdout, and where its full output is.
pub(super) struct JavaOutput {
    pub(super) stdout: String,
    pub(super) log: PathBuf,
}

/// Runs `java <JVM_OPTIONS> <extra_jvm> <args>`; stdout and stderr go to files (the log
/// is both, stdout first). Kills the JVM after `deadline`. A non-zero exit is an error
/// whose reason is the peer's own error line, else the most telling line of stderr.
pub(super) fn run_java(
    peer: &'static str,
    args: &[String],
    extra_jvm: &[&str],
    log: &Path,
    deadline: Duration,
) -> Result<JavaOutput, PeerError> {
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"));
    let out_path = log.with_extension("stdout");
    let err_path = log.with_extension("stderr");
    let stdout = File::create(&out_path).map_err(io(peer, &out_path))?;
    let stderr = File::create(&err_path).map_err(io(peer, &err_path))?;
    let mut child = Command::new(&java)
        .args(JVM_OPTIONS)
        .args(extra_jvm)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|source| PeerError::Spawn {
            peer,
            program: java.display().to_string(),
            source,
        })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(io(peer, &out_path)(e)),
        }
    };
    let stdout = fs::read_to_string(&out_path).map_err(io(peer, &out_path))?;
    let stderr = fs::read_to_string(&err_path).map_err(io(peer, &err_path))?;
    fs::write(
        log,
        format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"),
    )
    .map_err(io(peer, log))?;
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    let fail = |reason: String| PeerError::Failed {
        peer,
        reason,
        log: log.to_path_buf(),
    };
    match status {
        None => Err(fail(format!(
            "still running after {} s; killed",
            deadline.as_secs()
        ))),
        Some(s) if !s.success() => {
            let own = stdout
                .lines()
                .find_map(|l| {
                    l.strip_prefix("MCK-FLINK-ERROR ")
                        .or(l.strip_prefix("MCK-ERROR "))
                })
                .map(str::to_string);
            Err(fail(format!(
                "java exited with {s}: {}",
                own.unwrap_or_else(|| telling_line(&stderr))
            )))
        }
        Some(_) => Ok(JavaOutput {
            stdout,
            log: log.to_path_buf(),
        }),
    }
}

/// The line most likely to say what went wrong: the first error or exception line, else
/// the last non-empty one.
fn telling_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .find(|l| l.contains("[ERROR]") || l.contains("Exception") || l.starts_with("Error"))
        .or(lines.last())
        .map_or_else(|| "no output".to_string(), |l| l.to_string())
}

/// A fresh folder for one run's logs and configuration files.
pub(super) fn work_dir(peer: &'static str) -> Result<PathBuf, PeerError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir = std::env::temp_dir().join(format!("mck-peers-{}-{stamp}", std::process::id()));
    fs::create_dir_all(&dir).map_err(io(peer, &dir))?;
    Ok(dir)
}

pub(super) fn io(peer: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PeerError {
    let path = path.to_path_buf();
    move |source| PeerError::Io { peer, path, source }
}
