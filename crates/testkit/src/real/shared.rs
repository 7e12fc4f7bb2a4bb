//! Clusters shared by the tests of one test binary, killed when the process exits.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{ClusterOptions, KafkaCluster};
use crate::TestkitError;

/// One slot per name; a slot is locked only while its cluster starts, so clusters of
/// different names start at the same time.
type Slot = std::sync::Arc<Mutex<Option<&'static KafkaCluster>>>;
type Registry = HashMap<String, Slot>;

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();

extern "C" fn shutdown_shared() {
    if let Some(reg) = REGISTRY.get() {
        let reg = reg.lock().unwrap_or_else(|p| p.into_inner());
        for slot in reg.values() {
            // A slot still locked is a cluster still starting: its JVMs die with
            // this process all the same.
            if let Ok(Some(c)) = slot.try_lock().as_deref() {
                c.shutdown();
            }
        }
    }
}

/// A single-broker cluster shared by every test of this test binary that asks for the
/// same `name`. Started on first use; killed and deleted when the process exits.
///
/// Share a cluster only between tests that use their own topics and never kill its
/// broker.
pub fn shared_cluster(name: &str) -> Result<&'static KafkaCluster, TestkitError> {
    shared_cluster_with(ClusterOptions::new(name))
}

/// Like [`shared_cluster`], started with `options` on first use; shared by every test
/// of this test binary that asks for the same `options.logical_id` (later callers'
/// other options are ignored). For example one secured cluster
/// (`ClusterOptions::new("secure").secured()`) for every test of a binary.
pub fn shared_cluster_with(options: ClusterOptions) -> Result<&'static KafkaCluster, TestkitError> {
    let name = options.logical_id.clone();
    let reg = REGISTRY.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function that captures nothing.
        unsafe {
            libc::atexit(shutdown_shared);
        }
        Mutex::new(HashMap::new())
    });
    let slot = reg
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name)
        .or_default()
        .clone();
    let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = *guard {
        return Ok(c);
    }
    // A failed start leaves the slot empty: the next caller tries again.
    let cluster: &'static KafkaCluster = Box::leak(Box::new(KafkaCluster::start(options)?));
    *guard = Some(cluster);
    Ok(cluster)
}

/// The shared secured cluster `secure` ([`ClusterOptions::secured`]: a broker with every
/// [`Listener`](crate::Listener)), as [`shared_cluster_with`] gives it.
pub fn shared_secured_cluster() -> Result<&'static KafkaCluster, TestkitError> {
    shared_cluster_with(ClusterOptions::new("secure").secured())
}

/// The shared plaintext cluster `plain` and [`shared_secured_cluster`], started at the
/// same time.
pub fn shared_plain_and_secured()
-> Result<(&'static KafkaCluster, &'static KafkaCluster), TestkitError> {
    std::thread::scope(|s| {
        let plain = s.spawn(|| shared_cluster("plain"));
        let secure = shared_secured_cluster();
        let plain = plain.join().expect("the thread starting `plain` panicked");
        Ok((plain?, secure?))
    })
}
