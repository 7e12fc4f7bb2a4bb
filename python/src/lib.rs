//! `multicluster_kafka._native`: the multi-cluster source for Python programs.
//!
//! The Python package (`multicluster_kafka/`) re-exports these classes and adds what
//! is plainer in Python: the exception classes (`errors.py`, looked up from here by
//! name) and `async for` over a stream (an executor thread waits in
//! [`stream::Stream::wait`], the event loop takes the records).

mod arrow;
mod errors;
mod hooks;
mod logging;
mod metadata;
mod options;
mod runtime;
mod stream;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::install();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<options::Source>()?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<stream::Record>()?;
    m.add_class::<stream::Checkpoint>()?;
    m.add_class::<arrow::Batches>()?;
    m.add_class::<metadata::MetadataService>()?;
    Ok(())
}
