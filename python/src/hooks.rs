//! Client hooks written in Python (`multicluster_kafka.ClientHooks`): OAUTHBEARER
//! tokens, client errors and librdkafka's statistics, called on the clients' threads
//! with the GIL taken for the call.

use std::error::Error;
use std::sync::Arc;

use multicluster_kafka::hooks::{ClientHooks, KafkaErrorKind, OAuthToken};
use pyo3::prelude::*;

use crate::errors;

/// `Source(client_hooks=...)`: one `ClientHooks` for every cluster, or a callable of
/// the logical cluster id that gives one (or None).
pub(crate) struct Hooks(Py<PyAny>);

impl Hooks {
    pub(crate) fn from_py(value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let base = value
            .py()
            .import("multicluster_kafka.hooks")?
            .getattr("ClientHooks")?;
        if !value.is_instance(&base)? && !value.is_callable() {
            return Err(errors::config(
                "client_hooks: expected a multicluster_kafka.ClientHooks or a callable of the cluster id",
            ));
        }
        Ok(Hooks(value.clone().unbind()))
    }

    /// The library's factory: asks Python for each cluster's hooks.
    pub(crate) fn factory(
        &self,
        py: Python<'_>,
    ) -> impl Fn(&str) -> Option<Arc<dyn ClientHooks>> + Send + Sync + 'static {
        let given = self.0.clone_ref(py);
        move |cluster: &str| {
            Python::attach(|py| {
                let given = given.bind(py);
                let base = py
                    .import("multicluster_kafka.hooks")
                    .and_then(|m| m.getattr("ClientHooks"))
                    .ok()?;
                let hooks = if given.is_instance(&base).unwrap_or(false) {
                    given.clone()
                } else {
                    match given.call1((cluster,)) {
                        Ok(h) if h.is_none() => return None,
                        Ok(h) => h,
                        Err(e) => {
                            e.write_unraisable(py, Some(given));
                            return None;
                        }
                    }
                };
                let refresh = hooks
                    .call_method0("enable_token_refresh")
                    .and_then(|r| r.is_truthy())
                    .unwrap_or(false);
                Some(Arc::new(PythonHooks {
                    object: hooks.unbind(),
                    cluster: cluster.to_string(),
                    refresh,
                }) as Arc<dyn ClientHooks>)
            })
        }
    }
}

struct PythonHooks {
    object: Py<PyAny>,
    cluster: String,
    refresh: bool,
}

impl PythonHooks {
    /// Calls a method whose failure the source cannot act on: Python reports it as
    /// unraisable (on stderr, or to `sys.unraisablehook`).
    fn call(&self, name: &str, args: impl for<'py> FnOnce(Python<'py>) -> Vec<Bound<'py, PyAny>>) {
        Python::attach(|py| {
            let object = self.object.bind(py);
            let args = pyo3::types::PyTuple::new(py, args(py));
            if let Err(e) = args.and_then(|a| object.call_method1(name, a)) {
                e.write_unraisable(py, Some(object));
            }
        });
    }
}

impl ClientHooks for PythonHooks {
    fn enable_token_refresh(&self) -> bool {
        self.refresh
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        Python::attach(|py| {
            let object = self.object.bind(py);
            let made = object
                .call_method1(
                    "generate_oauth_token",
                    (self.cluster.as_str(), oauthbearer_config),
                )
                .and_then(|t| {
                    Ok(OAuthToken {
                        token: t.getattr("token")?.extract()?,
                        principal_name: t.getattr("principal_name")?.extract()?,
                        lifetime_ms: t.getattr("lifetime_ms")?.extract()?,
                    })
                });
            // The exception's type and message, on one line (never the token: a
            // token that was made is not in an error).
            made.map_err(|e| {
                let text = format!("generate_oauth_token raised {}", e.value(py))
                    .replace(['\n', '\0'], " ");
                text.into()
            })
        })
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.call("stats_raw", |py| {
            vec![
                pyo3::types::PyString::new(py, &self.cluster).into_any(),
                pyo3::types::PyBytes::new(py, statistics).into_any(),
            ]
        });
    }

    fn error(&self, kind: KafkaErrorKind, reason: &str) {
        self.call("error", |py| {
            vec![
                pyo3::types::PyString::new(py, &self.cluster).into_any(),
                pyo3::types::PyString::new(py, kind.as_str()).into_any(),
                pyo3::types::PyString::new(py, reason).into_any(),
            ]
        });
    }
}
