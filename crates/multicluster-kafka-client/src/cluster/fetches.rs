//! The source's fetches of its clusters ([`ClusterFetches`]): one per cluster (and
//! properties and runtime), joined by the readers that fetch there, its tasks running
//! while one of them holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::ClusterOptions;
use super::metadata::keep_leaders;
use super::reader::ClusterFetch;
use super::state::{Shared, State};

/// The fetching of one cluster, shared by the readers that fetch there: its tasks
/// run while one of them holds it.
pub(super) struct Core {
    pub(super) shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Core {
    pub(super) fn start(runtime: &tokio::runtime::Handle, options: ClusterOptions) -> Arc<Self> {
        options.shared_budget.raise_to(options.budget);
        let shared = Arc::new(Shared {
            options,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        });
        let task = runtime.spawn(keep_leaders(shared.clone()));
        Arc::new(Self { shared, task })
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.closed = true;
        // What is still queued leaves the source's budget with it.
        let queued = std::mem::take(&mut state.buffered);
        drop(state);
        self.shared.options.shared_budget.release(queued);
        self.shared.changed.notify_waiters();
        self.task.abort();
    }
}

/// What makes two readers' fetching of a cluster the same: the cluster, its
/// properties (sorted), and the runtime its tasks run on.
pub type FetchKey = (Arc<str>, Vec<(String, String)>, tokio::runtime::Id);

/// The native fetching of a source's clusters, one per cluster (and properties and
/// runtime), shared by its readers while one of them fetches there: one connection
/// per broker per source, one fetch session, one metadata task.
#[derive(Default)]
pub struct ClusterFetches {
    cores: Mutex<HashMap<FetchKey, std::sync::Weak<Core>>>,
}

impl ClusterFetches {
    /// A reader's fetching of `options.cluster`: joins the source's running fetch of
    /// the cluster with the same properties on `runtime`, or starts one. `wake` is
    /// called (from a task) whenever something arrives for this reader.
    pub fn join(
        &self,
        runtime: &tokio::runtime::Handle,
        properties: Vec<(String, String)>,
        options: ClusterOptions,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> ClusterFetch {
        let key = (options.cluster.clone(), properties, runtime.id());
        let mut cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.retain(|_, c| c.strong_count() > 0);
        // A runtime shut down ends the tasks: its fetch is not joined again.
        let core = match cores.get(&key).and_then(std::sync::Weak::upgrade) {
            Some(core) if !core.task.is_finished() => core,
            _ => {
                let core = Core::start(runtime, options);
                cores.insert(key, Arc::downgrade(&core));
                core
            }
        };
        drop(cores);
        ClusterFetch::on(core, wake)
    }

    /// How many clusters are fetched now.
    #[cfg(test)]
    pub(super) fn running(&self) -> usize {
        let cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.values().filter(|c| c.strong_count() > 0).count()
    }
}
