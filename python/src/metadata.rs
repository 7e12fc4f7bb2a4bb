//! Where a Python source learns its streams: a metadata file (watched), a dict in
//! the file's layout, or a program's own `MetadataService` subclass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multicluster_kafka::metadata::file::{check_metadata, parse_metadata};
use multicluster_kafka::metadata::{
    FileMetadataService, KafkaMetadataService, KafkaStream, MetadataError, StaticMetadataService,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::watch;

use crate::errors;

/// Base class of a program's own metadata service: a subclass implements
/// `describe(self) -> dict` (the metadata file's layout) and calls
/// `self.changed()` when it has news.
#[pyclass(module = "multicluster_kafka", subclass)]
pub struct MetadataService {
    changes: watch::Sender<u64>,
}

#[pymethods]
impl MetadataService {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, pyo3::types::PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Self {
            changes: watch::Sender::new(0),
        }
    }

    /// Tells every source reading from this service to describe its streams again
    /// now (it also does every `metadata_discovery_interval`).
    fn changed(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// The streams, in the metadata file's layout (`{"clusters": ..., "streams": ...}`).
    fn describe(&self) -> PyResult<Py<PyAny>> {
        Err(pyo3::exceptions::PyNotImplementedError::new_err(
            "a MetadataService subclass implements describe(self) -> dict",
        ))
    }
}

/// What `Source(metadata=...)` was given.
pub(crate) enum Metadata {
    File(PathBuf),
    Dict(Arc<BTreeMap<String, KafkaStream>>),
    Service {
        object: Py<PyAny>,
        changes: watch::Receiver<u64>,
        name: String,
    },
}

/// Where `<dict>` errors point.
const DICT: &str = "<metadata dict>";

impl Metadata {
    pub(crate) fn from_py(value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(service) = value.cast::<MetadataService>() {
            let name = value.get_type().name()?.to_string();
            let changes = service.borrow().changes.subscribe();
            return Ok(Metadata::Service {
                object: value.clone().unbind(),
                changes,
                name,
            });
        }
        if value.is_instance_of::<PyDict>() {
            let streams =
                describe(value, Path::new(DICT)).map_err(|e| errors::from_source(e.into()))?;
            return Ok(Metadata::Dict(Arc::new(streams)));
        }
        if let Ok(path) = value.extract::<PathBuf>() {
            return Ok(Metadata::File(path));
        }
        Err(errors::config(format!(
            "metadata: expected a file path, a dict or a multicluster_kafka.MetadataService, got {}",
            value.get_type().name()?
        )))
    }

    /// The library's service for one opening of the source.
    pub(crate) fn service(&self, py: Python<'_>) -> PyResult<Arc<dyn KafkaMetadataService>> {
        Ok(match self {
            Metadata::File(path) => {
                // Every cluster's client properties, checked offline first: a refusal
                // names the file, line and column (as `mck validate`).
                check_metadata(path, |_| true).map_err(|e| errors::from_source(e.into()))?;
                Arc::new(
                    FileMetadataService::watch(path).map_err(|e| errors::from_source(e.into()))?,
                )
            }
            Metadata::Dict(streams) => Arc::new(
                StaticMetadataService::new(streams.values().cloned())
                    .map_err(|e| errors::from_source(e.into()))?,
            ),
            Metadata::Service {
                object,
                changes,
                name,
            } => Arc::new(PythonService {
                object: object.clone_ref(py),
                changes: changes.clone(),
                name: name.clone(),
            }),
        })
    }
}

/// A dict in the metadata file's layout, parsed as the file would be (JSON is YAML).
fn describe(
    value: &Bound<'_, PyAny>,
    path: &Path,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    let py = value.py();
    let text = py
        .import("json")
        .and_then(|json| {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("indent", 2)?;
            json.call_method("dumps", (value,), Some(&kwargs))
        })
        .and_then(|t| t.extract::<String>())
        .map_err(|e| MetadataError::Invalid {
            location: None,
            message: format!("{}: not JSON-like: {}", path.display(), one_line(py, &e)),
        })?;
    parse_metadata(&text, path)
}

fn one_line(py: Python<'_>, e: &PyErr) -> String {
    e.value(py).to_string().replace('\n', " ")
}

/// A program's `MetadataService` as the library's.
struct PythonService {
    object: Py<PyAny>,
    changes: watch::Receiver<u64>,
    name: String,
}

impl PythonService {
    fn all(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        Python::attach(|py| {
            let described = self.object.bind(py).call_method0("describe").map_err(|e| {
                MetadataError::Service {
                    service: self.name.clone(),
                    message: format!("describe() raised {}", one_line(py, &e)),
                    retriable: true,
                }
            })?;
            describe(&described, Path::new(&format!("{}.describe()", self.name)))
        })
    }
}

#[async_trait::async_trait]
impl KafkaMetadataService for PythonService {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        let mut all = self.all()?;
        Ok(stream_ids
            .iter()
            .filter_map(|id| all.remove_entry(id))
            .collect())
    }

    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.all()
    }

    async fn close(&self) -> Result<(), MetadataError> {
        Ok(())
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.changes.clone())
    }
}
