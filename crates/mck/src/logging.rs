//! Diagnostics on stderr. By default they read like a command line tool's: one plain
//! `mck: warning: …` line per event, `mck: metadata: …` for each metadata change the
//! source applied, no colours unless stderr is a terminal, and none of librdkafka's own
//! log lines (they repeat every connection failure; the commands report cluster errors
//! themselves). `MCK_LOG` (a tracing filter such as `debug` or
//! `warn,multicluster_kafka=debug`) switches to full tracing output;
//! `--log-format json` writes one JSON object per event for machines.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use clap::ValueEnum;

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Plain lines (colours only on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// The library's target for one line per applied metadata change.
const CHANGES: &str = "multicluster_kafka::changes";

/// The filter when `MCK_LOG` is not set.
const DEFAULT_FILTER: &str = "warn,librdkafka=off,rdkafka=off,multicluster_kafka::changes=info";

/// Installs the process's subscriber.
pub fn init(format: LogFormat, terminal: bool) {
    let custom = std::env::var_os("MCK_LOG").is_some();
    let filter =
        EnvFilter::try_from_env("MCK_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A failed write (a closed stderr) is dropped: tracing's report of it would
        // be written with `eprintln!`, which panics on the same closed stderr.
        .log_internal_errors(false)
        .with_ansi(terminal);
    match (format, custom) {
        (LogFormat::Json, _) => builder.json().init(),
        (LogFormat::Text, true) => builder.init(),
        (LogFormat::Text, false) => builder.event_format(Plain).init(),
    }
}

/// `mck: <kind>: <message> <fields>` on one line.
struct Plain;

impl Plain {
    fn kind(event: &Event<'_>) -> &'static str {
        let meta = event.metadata();
        if meta.target() == CHANGES {
            return "metadata: ";
        }
        match *meta.level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            _ => "",
        }
    }
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "mck: {}", Self::kind(event))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
