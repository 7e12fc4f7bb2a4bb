//! The Kafka jars, fetched once from Maven Central with `mvn` into a cache directory
//! that survives `cargo clean`.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::TestkitError;

/// The Apache Kafka version the test kit runs.
pub const KAFKA_VERSION: &str = "4.1.1";

/// One set of jars the test kit fetches: the pom naming them (relative to this crate)
/// and the cache folder they land in.
struct JarSet {
    /// The pom, relative to the crate's directory.
    pom: &'static str,
    /// The folder under [`cache_root`], without the version.
    folder: &'static str,
}

/// The broker and the Kafka tools.
const KAFKA: JarSet = JarSet {
    pom: "maven/kafka/pom.xml",
    folder: "kafka",
};

/// MirrorMaker 2 (`connect-mirror`) and the Connect runtime it runs on.
const MIRROR: JarSet = JarSet {
    pom: "maven/mirror/pom.xml",
    folder: "kafka-mirror",
};

/// Root of the cache: `$MCK_CACHE_DIR`, else `$XDG_CACHE_HOME/multicluster-kafka`, else
/// `~/.cache/multicluster-kafka`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("MCK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("multicluster-kafka");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/multicluster-kafka"),
        None => std::env::temp_dir().join("multicluster-kafka-cache"),
    }
}

/// The folder holding every jar the broker and the Kafka tools need, fetching it with
/// `mvn dependency:copy-dependencies` on first use. Later calls (and later runs) reuse
/// it. Concurrent test binaries serialize on a lock file.
pub fn kafka_libs() -> Result<PathBuf, TestkitError> {
    static LIBS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    libs_of(&KAFKA, &LIBS)
}

/// The folder holding MirrorMaker 2 (`org.apache.kafka:connect-mirror` of
/// [`KAFKA_VERSION`]) with the Connect runtime and everything else it needs, fetched
/// and cached like [`kafka_libs`] but into a folder of its own.
pub fn mirror_libs() -> Result<PathBuf, TestkitError> {
    static LIBS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    libs_of(&MIRROR, &LIBS)
}

/// The cached folder of `set`, fetched once per process (a failure too is remembered).
fn libs_of(
    set: &JarSet,
    once: &OnceLock<Result<PathBuf, String>>,
) -> Result<PathBuf, TestkitError> {
    once.get_or_init(|| fetch(&cache_root(), set).map_err(|e| e.to_string()))
        .clone()
        .map_err(|output| TestkitError::Maven {
            command: "mvn dependency:copy-dependencies".into(),
            output,
        })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestkitError + '_ {
    move |source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Fetches `set` into `<root>/<folder>-<version>/libs` unless a `complete` marker says
/// an earlier fetch finished; the jars land in a staging folder renamed into place.
fn fetch(root: &Path, set: &JarSet) -> Result<PathBuf, TestkitError> {
    let dir = root.join(format!("{}-{KAFKA_VERSION}", set.folder));
    let libs = dir.join("libs");
    let marker = dir.join("complete");
    if marker.exists() {
        return Ok(libs);
    }
    fs::create_dir_all(&dir).map_err(io(&dir))?;
    let lock_path = dir.join("lock");
    let lock = File::create(&lock_path).map_err(io(&lock_path))?;
    // SAFETY: flock on a file descriptor we own; released when `lock` is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io(&lock_path)(std::io::Error::last_os_error()));
    }
    if marker.exists() {
        return Ok(libs);
    }
    let staging = dir.join("libs.partial");
    let _ = fs::remove_dir_all(&staging);
    let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join(set.pom);
    let mut cmd = Command::new("mvn");
    cmd.arg("-q")
        .arg("-B")
        .arg("-f")
        .arg(&pom)
        .arg(format!("-Dkafka.version={KAFKA_VERSION}"))
        .arg("dependency:copy-dependencies")
        .arg(format!("-DoutputDirectory={}", staging.display()));
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| TestkitError::Maven {
        command: shown.clone(),
        output: format!("cannot start mvn: {e}"),
    })?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        return Err(TestkitError::Maven {
            command: shown,
            output: crate::util::tail_lines(&text, 30),
        });
    }
    let _ = fs::remove_dir_all(&libs);
    fs::rename(&staging, &libs).map_err(io(&libs))?;
    let mut m = File::create(&marker).map_err(io(&marker))?;
    writeln!(m, "{} {KAFKA_VERSION}", set.folder).map_err(io(&marker))?;
    Ok(libs)
}
