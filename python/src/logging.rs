//! The library's log events to Python's `logging`, under the `multicluster_kafka`
//! logger (the library never logs a secret; its messages are the same as the CLI's).
//!
//! A global `tracing` subscriber, installed when the module is imported unless the
//! process has one already. Which levels reach Python is read from the logger's
//! effective level when a stream opens (and at import), so events Python would drop
//! cost no trip to the interpreter.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::prelude::*;

/// The most detailed level Python wants: 0 none, 1 error … 5 trace.
static WANTED: AtomicU8 = AtomicU8::new(3);

fn rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

/// Python's number of a level.
fn python_level(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// Installs the subscriber (once; not when the program has its own).
pub(crate) fn install() {
    refresh();
    let subscriber = tracing_subscriber::registry().with(ToPython);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Reads the logger's effective level again.
pub(crate) fn refresh() {
    let level = Python::attach(|py| -> PyResult<i64> {
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("multicluster_kafka",))?;
        logger.call_method0("getEffectiveLevel")?.extract()
    });
    let wanted = match level {
        Ok(l) if l <= 5 => 5,
        Ok(l) if l <= 10 => 4,
        Ok(l) if l <= 20 => 3,
        Ok(l) if l <= 30 => 2,
        Ok(l) if l <= 40 => 1,
        Ok(_) => 0,
        Err(_) => 3,
    };
    WANTED.store(wanted, Ordering::Relaxed);
}

struct ToPython;

impl<S: Subscriber> Layer<S> for ToPython {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        rank(metadata.level()) <= WANTED.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut line = Line::default();
        event.record(&mut line);
        let level = python_level(event.metadata().level());
        // Python may be finishing (interpreter exit): then the line is dropped.
        Python::try_attach(|py| {
            let sent = (|| -> PyResult<()> {
                let logger = py
                    .import("logging")?
                    .call_method1("getLogger", ("multicluster_kafka",))?;
                let text = if line.fields.is_empty() {
                    line.message
                } else {
                    format!("{}{}", line.message, line.fields)
                };
                logger.call_method1("log", (level, "%s", text))?;
                Ok(())
            })();
            if let Err(e) = sent {
                e.print(py);
            }
        });
    }
}

/// An event's message and its other fields as ` key=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}
