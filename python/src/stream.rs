//! A running source as a Python iterator: records one by one, batches, checkpoints
//! and commits. The stream connects when it is first used (`with`, `async with`,
//! the first record), so that `async with` connects without blocking the event loop.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use futures_util::FutureExt;
use multicluster_kafka::checkpoint::Checkpoint as RustCheckpoint;
use multicluster_kafka::deserializer::NullableValue;
use multicluster_kafka::record::{Record as RustRecord, RecordBatch};
use multicluster_kafka::{KafkaSourceStream, MultiClusterKafkaSource};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::arrow::Batches;
use crate::errors;
use crate::runtime::{self, handle};

type Source = MultiClusterKafkaSource<NullableValue>;
type Inner = KafkaSourceStream<NullableValue>;

enum State {
    /// Built, not connected yet.
    Built(Box<Source>),
    Open(Box<Inner>),
    Closed,
}

/// A stream of records from a `Source`; see `Source.open()`.
#[pyclass(module = "multicluster_kafka")]
pub struct Stream {
    state: Mutex<State>,
}

impl Stream {
    pub(crate) fn new(source: Source) -> Self {
        Self {
            state: Mutex::new(State::Built(Box::new(source))),
        }
    }

    /// The state, waited for without the GIL when another thread holds it (a thread
    /// waiting for records for an event loop), so that thread may log meanwhile.
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, State> {
        loop {
            match self.state.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    py.detach(|| drop(self.state.lock()));
                }
            }
        }
    }

    /// The open stream, connecting it first if it is not yet.
    fn opened<'a>(py: Python<'_>, state: &'a mut State) -> PyResult<&'a mut Inner> {
        if let State::Built(_) = state {
            let State::Built(source) = std::mem::replace(state, State::Closed) else {
                unreachable!("matched above")
            };
            crate::logging::refresh();
            let open = runtime::wait(py, source.open())?;
            *state = State::Open(Box::new(open.map_err(errors::from_source)?));
        }
        match state {
            State::Open(inner) => Ok(inner),
            _ => Err(errors::closed()),
        }
    }

    /// The next record: `Ok(None)` at the end of a bounded read.
    fn next_record(&self, py: Python<'_>) -> PyResult<Option<RustRecord<Option<Bytes>>>> {
        let mut state = self.lock(py);
        let inner = Self::opened(py, &mut state)?;
        let ready = {
            let _runtime = handle().enter();
            inner.next().now_or_never()
        };
        let item = match ready {
            Some(item) => item,
            None => runtime::wait(py, inner.next())?,
        };
        item.transpose().map_err(errors::from_source)
    }

    /// The next batch of at most `max` records: `Ok(None)` at the end.
    pub(crate) fn next_batch(
        &self,
        py: Python<'_>,
        max: usize,
    ) -> PyResult<Option<RecordBatch<Option<Bytes>>>> {
        let mut state = self.lock(py);
        let inner = Self::opened(py, &mut state)?;
        let item = runtime::wait(py, inner.next_batch_up_to(max.max(1)))?;
        item.transpose().map_err(errors::from_source)
    }

    fn close_now(&self, py: Python<'_>) {
        let mut state = self.lock(py);
        if let State::Open(inner) = std::mem::replace(&mut *state, State::Closed) {
            runtime::finish(py, inner.close());
        }
    }
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Record>> {
        Ok(self.next_record(py)?.map(Record))
    }

    fn __enter__<'py>(slf: PyRef<'py, Self>, py: Python<'py>) -> PyResult<PyRef<'py, Self>> {
        slf._open(py)?;
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close_now(py);
        false
    }

    fn __aenter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
        let py = slf.py();
        py.import("multicluster_kafka._aio")?
            .call_method1("enter", (slf,))
    }

    #[pyo3(signature = (*_args))]
    fn __aexit__<'py>(
        slf: Bound<'py, Self>,
        _args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("multicluster_kafka._aio")?
            .call_method1("exit", (slf,))
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
        let py = slf.py();
        py.import("multicluster_kafka._aio")?
            .call_method1("next", (slf,))
    }

    /// Connects now (the first use does otherwise).
    fn _open(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.lock(py);
        Self::opened(py, &mut state).map(|_| ())
    }

    /// For `async for`: the next record if one is there without waiting, `None` if
    /// it would wait, `False` at the end, `True` when not connected yet (the event
    /// loop then connects on its executor rather than here).
    fn _try_next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut state = self.lock(py);
        if let State::Built(_) = *state {
            return Ok(true.into_pyobject(py)?.to_owned().into_any().unbind());
        }
        let inner = Self::opened(py, &mut state)?;
        let ready = {
            let _runtime = handle().enter();
            inner.next().now_or_never()
        };
        match ready {
            None => Ok(py.None()),
            Some(None) => Ok(false.into_pyobject(py)?.to_owned().into_any().unbind()),
            Some(Some(Ok(record))) => Ok(Py::new(py, Record(record))?.into_any()),
            Some(Some(Err(e))) => Err(errors::from_source(e)),
        }
    }

    /// For `async for`, on an executor thread: waits up to `timeout` seconds until
    /// a record (or the end, or an error) is there, taking nothing.
    fn _wait(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let mut state = self.lock(py);
        let inner = Self::opened(py, &mut state)?;
        let limit = std::time::Duration::from_secs_f64(timeout.max(0.0));
        runtime::wait(py, async {
            let _ = tokio::time::timeout(limit, inner.ready()).await;
        })
    }

    /// A checkpoint of exactly the records handed out so far (by iteration and by
    /// `batches()`); store it with what the program made of them.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<Checkpoint> {
        let mut state = self.lock(py);
        let inner = Self::opened(py, &mut state)?;
        inner
            .checkpoint()
            .map(Checkpoint)
            .map_err(errors::from_source)
    }

    /// Commits a checkpoint's offsets to each cluster under the source's group.
    fn commit(&self, py: Python<'_>, checkpoint: PyRef<'_, Checkpoint>) -> PyResult<()> {
        let checkpoint = checkpoint.0.clone();
        let committer = {
            let mut state = self.lock(py);
            Self::opened(py, &mut state)?.committer()
        };
        runtime::finish(py, async move { committer.commit(&checkpoint).await })
            .map_err(errors::from_source)
    }

    /// The records as `pyarrow.RecordBatch`es of at most `max_records` rows.
    #[pyo3(signature = (max_records = 10_000))]
    fn batches(slf: Bound<'_, Self>, max_records: usize) -> PyResult<Batches> {
        if max_records == 0 {
            return Err(errors::config("batches: max_records must be at least 1"));
        }
        // pyarrow is needed for batches only: say so here, not at the first batch.
        slf.py().import("pyarrow").map_err(|_| {
            errors::config(
                "Stream.batches() needs pyarrow: pip install 'multicluster-kafka[arrow]'",
            )
        })?;
        Ok(Batches {
            stream: slf.unbind(),
            max_records,
        })
    }

    /// The watermark of what was handed out (ms since the epoch), with watermarks on.
    #[getter]
    fn watermark(&self, py: Python<'_>) -> Option<i64> {
        match &mut *self.lock(py) {
            State::Open(inner) => inner.watermark(),
            _ => None,
        }
    }

    /// True once closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        matches!(*self.lock(py), State::Closed)
    }

    /// Stops reading and lets every connection and thread of the stream go.
    fn close(&self, py: Python<'_>) {
        self.close_now(py);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Dropped without close(): the library's handles stop in the background.
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|p| p.into_inner()),
            State::Closed,
        );
        if let State::Open(inner) = state {
            handle().spawn(inner.close());
        }
    }
}

/// One record; its fields are read when asked for.
#[pyclass(module = "multicluster_kafka", frozen)]
pub struct Record(RustRecord<Option<Bytes>>);

#[pymethods]
impl Record {
    /// The first subscribed stream the record belongs to.
    #[getter]
    fn stream(&self) -> Option<&str> {
        self.0.streams.first().map(|s| &**s)
    }

    /// Every subscribed stream the record belongs to.
    #[getter]
    fn streams(&self) -> Vec<&str> {
        self.0.streams.iter().map(|s| &**s).collect()
    }

    #[getter]
    fn cluster(&self) -> &str {
        &self.0.cluster
    }

    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    #[getter]
    fn offset(&self) -> i64 {
        self.0.offset
    }

    /// Milliseconds since the epoch, or None.
    #[getter]
    fn timestamp(&self) -> Option<i64> {
        self.0.timestamp
    }

    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.0.key.as_deref().map(|k| PyBytes::new(py, k))
    }

    /// The value, None for a tombstone.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.0.value.as_deref().map(|v| PyBytes::new(py, v))
    }

    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .0
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref().map(|v| PyBytes::new(py, v))));
        PyList::new(py, items)
    }

    fn __repr__(&self) -> String {
        format!(
            "Record(cluster={:?}, topic={:?}, partition={}, offset={})",
            &*self.0.cluster, &*self.0.topic, self.0.partition, self.0.offset
        )
    }
}

/// Where a source is in every split: restore from it with `Source(restore=...)`.
#[pyclass(module = "multicluster_kafka", frozen)]
pub struct Checkpoint(pub(crate) RustCheckpoint);

#[pymethods]
impl Checkpoint {
    /// The checkpoint as bytes, to store with the program's output.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.encode())
    }

    /// A checkpoint from `to_bytes()`'s bytes.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Checkpoint> {
        RustCheckpoint::decode(data)
            .map(Checkpoint)
            .map_err(|e| errors::from_source(e.into()))
    }

    /// How many splits (partitions of a cluster's topic) it holds a position for.
    #[getter]
    fn split_count(&self) -> usize {
        self.0.split_count()
    }

    fn __repr__(&self) -> String {
        format!("Checkpoint(splits={})", self.0.split_count())
    }
}
