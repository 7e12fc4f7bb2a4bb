//! The one tokio runtime of the process, and waiting on it from Python's threads.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};

/// How often a wait looks at Python's signals (Ctrl-C ends it within this).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mck-runtime")
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

/// The runtime's handle: futures of the library need its timers and tasks even when
/// only polled once.
pub(crate) fn handle() -> &'static Handle {
    runtime().handle()
}

/// Runs `future` to its end without the GIL, looking at Python's signals every
/// [`SIGNAL_CHECK`]: a KeyboardInterrupt ends the wait and drops the future (so it
/// must be cancel-safe).
pub(crate) fn wait<T: Send>(py: Python<'_>, future: impl Future<Output = T> + Send) -> PyResult<T> {
    let mut future = std::pin::pin!(future);
    loop {
        let done = py.detach(|| {
            handle().block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut future).await.ok() })
        });
        if let Some(out) = done {
            return Ok(out);
        }
        py.check_signals()?;
    }
}

/// Runs a future that ends on its own (closing, committing) without the GIL.
pub(crate) fn finish<T: Send>(py: Python<'_>, future: impl Future<Output = T> + Send) -> T {
    py.detach(|| handle().block_on(future))
}
