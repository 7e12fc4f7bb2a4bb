//! The library's errors as Python exceptions: one class per kind of
//! [`SourceError`], defined in `multicluster_kafka/errors.py` and looked up here by
//! name, each raised with the library's one-line message.

use multicluster_kafka::error::SourceError;
use multicluster_kafka::metadata::MetadataError;
use pyo3::prelude::*;

/// An exception of `multicluster_kafka.errors` by class name, with `message` and
/// these attributes.
pub(crate) fn raise(class: &str, message: impl Into<String>, attrs: &[(&str, Attr)]) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let made = (|| -> PyResult<PyErr> {
            let cls = py.import("multicluster_kafka.errors")?.getattr(class)?;
            let exc = cls.call1((message.clone(),))?;
            for (name, value) in attrs {
                match value {
                    Attr::Str(s) => exc.setattr(*name, s)?,
                    Attr::Bool(b) => exc.setattr(*name, *b)?,
                    Attr::None => exc.setattr(*name, py.None())?,
                }
            }
            Ok(PyErr::from_value(exc))
        })();
        // Without the package's Python half (a broken install), still one line.
        made.unwrap_or_else(|_| pyo3::exceptions::PyRuntimeError::new_err(message))
    })
}

/// An attribute value of an exception.
pub(crate) enum Attr {
    Str(String),
    Bool(bool),
    None,
}

/// A configuration error: a bad argument of `Source`.
pub(crate) fn config(message: impl Into<String>) -> PyErr {
    raise("ConfigError", message, &[])
}

/// Using a stream that was closed.
pub(crate) fn closed() -> PyErr {
    raise("ClosedError", "the stream is closed", &[])
}

/// The exception of one of the library's errors.
pub(crate) fn from_source(e: SourceError) -> PyErr {
    let message = e.to_string();
    let cluster = |c: Option<&str>| match c {
        Some(c) => Attr::Str(c.to_string()),
        None => Attr::None,
    };
    match &e {
        SourceError::Config(_) | SourceError::Metadata(MetadataError::RefusedProperty { .. }) => {
            raise("ConfigError", message, &[])
        }
        SourceError::Metadata(m) => {
            let retriable = matches!(
                m,
                MetadataError::Service {
                    retriable: true,
                    ..
                }
            ) || matches!(m, MetadataError::Io { .. });
            raise(
                "MetadataError",
                message,
                &[("retriable", Attr::Bool(retriable))],
            )
        }
        SourceError::UnknownStreams(_) => raise(
            "UnknownStreamError",
            message,
            &[("retriable", Attr::Bool(false))],
        ),
        SourceError::Kafka {
            cluster: c,
            kind,
            retriable,
            ..
        } => {
            let class = match kind.as_str() {
                "transport" | "timeout" => "UnreachableClusterError",
                "authentication" | "tls" | "authorization" => "AccessError",
                _ => "ClusterError",
            };
            raise(
                class,
                message,
                &[
                    ("cluster", Attr::Str(c.clone())),
                    ("kind", Attr::Str(kind.as_str().to_string())),
                    ("retriable", Attr::Bool(*retriable)),
                ],
            )
        }
        SourceError::Cluster { cluster: c, .. } => raise(
            "UnreachableClusterError",
            message,
            &[
                ("cluster", Attr::Str(c.clone())),
                ("kind", Attr::Str("timeout".into())),
                ("retriable", Attr::Bool(true)),
            ],
        ),
        SourceError::ClusterIdentity { cluster: c, .. } => raise(
            "ClusterIdentityError",
            message,
            &[
                ("cluster", Attr::Str(c.clone())),
                ("kind", Attr::Str("other".into())),
                ("retriable", Attr::Bool(false)),
            ],
        ),
        SourceError::MirrorDiverged(_) => raise(
            "MirrorDivergedError",
            message,
            &[("cluster", cluster(e.cluster_id()))],
        ),
        SourceError::Offset(_) => raise("OffsetError", message, &[]),
        SourceError::OffsetOutOfRange { split, .. } => raise(
            "OffsetOutOfRangeError",
            message,
            &[("split", Attr::Str(split.clone()))],
        ),
        SourceError::TopicGone { split, .. } | SourceError::TopicNotAuthorized { split, .. } => {
            raise(
                "TopicError",
                message,
                &[("split", Attr::Str(split.clone()))],
            )
        }
        SourceError::Commit { .. } => raise("CommitError", message, &[]),
        SourceError::Checkpoint(_) => raise("CheckpointError", message, &[]),
        SourceError::ShardTaken { cluster: c, .. } => raise(
            "ShardTakenError",
            message,
            &[("cluster", Attr::Str(c.clone()))],
        ),
        SourceError::Closed => raise("ClosedError", message, &[]),
        SourceError::Internal { .. } => raise("InternalError", message, &[]),
        _ => raise("SourceError", message, &[]),
    }
}
