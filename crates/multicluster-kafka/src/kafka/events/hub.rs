//! One thread (`mck-events`) that serves the events of every librdkafka client of the
//! process whose program set no hooks: log lines, errors and statistics.
//!
//! Each client's events go to a queue of ours ([`super::hooks::ClientEvents`]);
//! librdkafka calls [`wake`] when such a queue gets an event while it was empty, which
//! notes the queue as ready and wakes this thread, which takes what the queue has
//! without waiting. A thread per client did the same at the cost of one thread for
//! each client, most of them idle. Serving takes microseconds (a line to `tracing`, a
//! reason kept); clients with hooks keep a thread of their own, because the hooks are
//! the program's code and may take their time (an OAUTHBEARER token provider asking
//! an identity provider), which must not hold the other clusters' events.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use rdkafka::bindings as rd;

use super::SourceContext;

/// How often every registered queue is looked at even without a wake-up: a safety
/// net only (librdkafka wakes us for each queue that gets an event while empty).
const SWEEP: Duration = Duration::from_secs(1);

/// Events served from one queue before the others get their turn.
const FAIR_SHARE: usize = 256;

/// A registered client's queue.
struct Entry {
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: Arc<SourceContext>,
    dispatch: tracing::Dispatch,
    /// False once the owner unregistered: the handles may be gone. Held while
    /// serving, so unregistering waits for a serve in progress.
    live: Mutex<bool>,
}

// SAFETY: librdkafka handles are thread safe; the owner keeps them alive until it
// has unregistered (which waits for a serve in progress, see `live`).
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

impl Entry {
    /// Serves up to [`FAIR_SHARE`] events; true when the queue may have more.
    fn serve(&self) -> bool {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if !*live {
            return false;
        }
        crate::base::dispatch::within(&self.dispatch, || {
            for _ in 0..FAIR_SHARE {
                // SAFETY: live handles (checked above, held while serving).
                let event = unsafe { rd::rd_kafka_queue_poll(self.queue, 0) };
                if event.is_null() {
                    return false;
                }
                // SAFETY: a live event of this live client.
                unsafe { super::handle(self.client, event, &self.context) };
            }
            true
        })
    }
}

struct Hub {
    entries: Mutex<HashMap<u64, Arc<Entry>>>,
    ready: Mutex<Vec<u64>>,
    next: AtomicU64,
    thread: Thread,
}

/// The hub, started at the first registration; `None` when its thread could not be
/// started (clients then get threads of their own).
fn hub() -> Option<&'static Hub> {
    static HUB: OnceLock<Option<Hub>> = OnceLock::new();
    HUB.get_or_init(|| {
        let join = std::thread::Builder::new()
            .name("mck-events".into())
            .spawn(run)
            .map_err(|e| tracing::warn!(error = %e, "cannot start the client event thread"))
            .ok()?;
        Some(Hub {
            entries: Mutex::default(),
            ready: Mutex::default(),
            next: AtomicU64::new(1),
            thread: join.thread().clone(),
        })
    })
    .as_ref()
}

fn run() {
    // Waits until the spawning thread has stored the hub.
    let Some(hub) = hub() else {
        return;
    };
    loop {
        let ready = std::mem::take(&mut *hub.ready.lock().unwrap_or_else(|p| p.into_inner()));
        let ids: Vec<u64> = if ready.is_empty() {
            std::thread::park_timeout(SWEEP);
            let ready = std::mem::take(&mut *hub.ready.lock().unwrap_or_else(|p| p.into_inner()));
            if ready.is_empty() {
                let entries = hub.entries.lock().unwrap_or_else(|p| p.into_inner());
                entries.keys().copied().collect()
            } else {
                ready
            }
        } else {
            ready
        };
        for id in ids {
            let entry = hub
                .entries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&id)
                .cloned();
            if let Some(entry) = entry
                && entry.serve()
            {
                hub.ready.lock().unwrap_or_else(|p| p.into_inner()).push(id);
            }
        }
    }
}

/// librdkafka's call when a registered queue got an event while empty (on one of its
/// threads: no librdkafka call may be made here).
unsafe extern "C" fn wake(_rk: *mut rd::rd_kafka_t, opaque: *mut c_void) {
    if let Some(hub) = hub() {
        hub.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(opaque as u64);
        hub.thread.unpark();
    }
}

/// A queue served by the hub until this is dropped.
pub(crate) struct Registration {
    id: u64,
    entry: Arc<Entry>,
}

/// Has the hub serve `queue` of `client`, or gives the arguments back when there is
/// no hub.
///
/// # Safety
/// `client` and `queue` stay alive until the returned registration is dropped.
pub(crate) unsafe fn register(
    client: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    context: Arc<SourceContext>,
    dispatch: tracing::Dispatch,
) -> Result<Registration, Arc<SourceContext>> {
    let Some(hub) = hub() else {
        return Err(context);
    };
    let id = hub.next.fetch_add(1, Ordering::Relaxed);
    let entry = Arc::new(Entry {
        client,
        queue,
        context,
        dispatch,
        live: Mutex::new(true),
    });
    hub.entries
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, entry.clone());
    // SAFETY: a live queue (the caller's guarantee); the opaque is a number, not a
    // pointer.
    unsafe { rd::rd_kafka_queue_cb_event_enable(queue, Some(wake), id as *mut c_void) };
    // Events that came before the callback was set.
    hub.ready.lock().unwrap_or_else(|p| p.into_inner()).push(id);
    hub.thread.unpark();
    Ok(Registration { id, entry })
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the queue is live until the owner destroys it after this drop.
        unsafe { rd::rd_kafka_queue_cb_event_enable(self.entry.queue, None, std::ptr::null_mut()) };
        if let Some(hub) = hub() {
            hub.entries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.id);
        }
        // Waits for a serve in progress; none starts after this.
        *self.entry.live.lock().unwrap_or_else(|p| p.into_inner()) = false;
    }
}
