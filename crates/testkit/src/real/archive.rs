//! A class-data archive of a broker's classes (the JVM's dynamic CDS archive), made
//! once per jar cache and Java installation and then mapped by every broker the kit
//! starts.
//!
//! Loading and verifying Kafka's classes is most of what a broker spends to start: on
//! the 2-core CI machine a broker took about 2.1 s of CPU until it answered, and 1.2 s
//! with the archive (a single-broker cluster, `--example startup_time`: 2.4 s to 1.3 s).
//! The tests start brokers by the hundred, most of them while other tests run: `mck`'s
//! integration tests went from 259 to 219 s. The archive is made by a one-broker
//! cluster started with `-XX:ArchiveClassesAtExit` and stopped with SIGTERM (the JVM
//! writes it on a normal exit); if that fails, brokers start without it, as before,
//! and a warning says why.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::{ClusterOptions, KafkaCluster, small_jvm_options};
use crate::TestkitError;

/// The JVM option that writes the archive at exit.
const DUMP: &str = "-XX:ArchiveClassesAtExit=";

/// The JVM option that maps an archive.
const MAP: &str = "-XX:SharedArchiveFile=";

/// How long the archive's broker may take to exit once asked to.
const EXIT_WITHIN: Duration = Duration::from_secs(30);

/// Whether `jvm_options` already name an archive (to map or to write): the archive
/// is then not added.
pub(super) fn names_an_archive(jvm_options: &[String]) -> bool {
    jvm_options
        .iter()
        .any(|o| o.starts_with(DUMP) || o.starts_with(MAP))
}

/// The option mapping the brokers' archive, made on first use (once per process; a
/// failure is remembered and warned about once). `None`: start without one.
pub(super) fn map_option(libs: &Path) -> Option<&'static str> {
    static OPTION: OnceLock<Option<String>> = OnceLock::new();
    OPTION
        .get_or_init(|| match archive(libs) {
            Ok(path) => Some(format!("{MAP}{}", path.display())),
            Err(e) => {
                tracing::warn!(error = %e, "brokers start without a class-data archive");
                None
            }
        })
        .as_deref()
}

/// The archive for the jars in `libs` and this `java`, made if missing.
fn archive(libs: &Path) -> Result<PathBuf, TestkitError> {
    let dir = libs.parent().unwrap_or(libs);
    let path = dir.join(format!("broker-{:016x}.jsa", java_identity()));
    // One that a killed process was writing is removed.
    sweep_partials(dir);
    if path.is_file() {
        return Ok(path);
    }
    // Written under a name of this process's and renamed when whole: two processes
    // that make it at once each write their own.
    let partial = dir.join(format!("broker-{}{PARTIAL}", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    let mut options = small_jvm_options();
    options.push(format!("{DUMP}{}", partial.display()));
    let cluster = KafkaCluster::start(ClusterOptions::new("class-archive").jvm_options(options))?;
    // The JVM that formatted the log dir wrote one at its exit too: only the broker's
    // is wanted.
    let _ = std::fs::remove_file(&partial);
    cluster.terminate(EXIT_WITHIN);
    drop(cluster);
    if !partial.is_file() {
        return Err(TestkitError::Java(format!(
            "the broker started to make a class-data archive exited without writing {}",
            partial.display()
        )));
    }
    std::fs::rename(&partial, &path).map_err(|e| {
        TestkitError::Java(format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            path.display()
        ))
    })?;
    tracing::info!(archive = %path.display(), "made the brokers' class-data archive");
    Ok(path)
}

/// How an archive being written is named: `broker-<pid of its maker>` and this.
const PARTIAL: &str = ".jsa.partial";

/// Removes the archives being written in `dir` by processes that no longer exist.
fn sweep_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("broker-")
            .and_then(|rest| rest.strip_suffix(PARTIAL))
            .and_then(|pid| pid.parse::<i32>().ok());
        if pid.is_some_and(|pid| !crate::process::is_alive(pid)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Names the Java installation: an archive only maps into the JVM that made it (another
/// one ignores it, which would leave every start slow without saying so).
fn java_identity() -> u64 {
    let java = super::java_binary();
    let resolved = if java.components().count() > 1 {
        Some(java)
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&java))
                .find(|candidate| candidate.is_file())
        })
    };
    let resolved = resolved.and_then(|p| p.canonicalize().ok());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    resolved.hash(&mut hasher);
    if let Some(meta) = resolved.as_ref().and_then(|p| p.metadata().ok()) {
        meta.len().hash(&mut hasher);
        meta.modified().ok().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker started by the kit maps the archive, which lies in the jar cache: a JVM
    /// that rejected it (another Java, a broken file) would not have it in its maps.
    #[test]
    fn a_broker_maps_the_class_data_archive_made_in_the_jar_cache() {
        let cluster = KafkaCluster::start(ClusterOptions::new("maps-archive"))
            .expect("a single-broker cluster starts");
        let pid = {
            let nodes = cluster.nodes.lock().unwrap_or_else(|p| p.into_inner());
            nodes[0].child.as_ref().expect("the broker runs").id()
        };
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .expect("the broker's memory maps can be read");
        let archive = archive(&cluster.libs).expect("the archive was made");
        assert!(
            archive.starts_with(cluster.libs.parent().unwrap()),
            "{} is beside the jars",
            archive.display()
        );
        assert!(
            maps.contains(&*archive.to_string_lossy()),
            "the broker does not map {}",
            archive.display()
        );
    }
}
