//! Parsers and argument groups shared by the subcommands: where to start and stop
//! (`-o`/`--from`, `--until`), durations, `KEY=VALUE` properties, and the metadata file
//! given either as a positional argument or with `--metadata`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use multicluster_kafka::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};

/// What `-o`/`--from` and `--until` accept, listed in their errors.
const POSITION_FORMS: &str = "beginning|earliest, end|latest, committed, an offset (42), \
N before the end of each partition (-10), a timestamp in ms (@1700000000000 or s@1700000000000), \
an RFC 3339 time (2026-11-30T10:00:00Z or @2026-11-30T10:00:00Z), or a time relative to now \
(-1h or @-1h)";

/// A position in every partition's log, as written on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// The start of the log.
    Earliest,
    /// The end of the log.
    Latest,
    /// The group's committed offset.
    Committed,
    /// The same offset in every partition.
    Offset(i64),
    /// This many records before the end.
    BeforeEnd(i64),
    /// The first record at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// Parses a position (keywords in any case); `now_ms` anchors relative times.
pub fn parse_position(text: &str, now_ms: i64) -> Result<Position, String> {
    let refuse = || format!("`{text}` is not a position; use {POSITION_FORMS}");
    let t = text.trim();
    match t.to_ascii_lowercase().as_str() {
        "beginning" | "earliest" | "start" => return Ok(Position::Earliest),
        "end" | "latest" => return Ok(Position::Latest),
        "committed" | "stored" => return Ok(Position::Committed),
        _ => {}
    }
    if let Some(time) = t.strip_prefix("s@").or_else(|| t.strip_prefix('@')) {
        return parse_time(time, now_ms)
            .map(Position::Timestamp)
            .ok_or_else(refuse);
    }
    if let Ok(n) = t.parse::<i64>() {
        return Ok(if n < 0 {
            Position::BeforeEnd(-n)
        } else {
            Position::Offset(n)
        });
    }
    parse_time(t, now_ms)
        .map(Position::Timestamp)
        .ok_or_else(refuse)
}

/// Milliseconds since the epoch, an RFC 3339 time, or `-<duration>` before `now_ms`.
fn parse_time(t: &str, now_ms: i64) -> Option<i64> {
    if let Ok(ms) = t.parse::<i64>() {
        return (ms >= 0).then_some(ms);
    }
    if let Some(ago) = t.strip_prefix('-') {
        let d = humantime::parse_duration(ago).ok()?;
        return Some(now_ms.saturating_sub(i64::try_from(d.as_millis()).ok()?));
    }
    let at = humantime::parse_rfc3339_weak(t).ok()?;
    i64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// Milliseconds since the epoch now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `-o`/`--from`: where splits without a checkpointed position start.
pub fn parse_from(text: &str) -> Result<StartingOffsets, String> {
    Ok(match parse_position(text, now_ms())? {
        Position::Earliest => StartingOffsets::Earliest,
        Position::Latest => StartingOffsets::Latest,
        Position::Committed => StartingOffsets::Committed {
            reset: OffsetReset::Earliest,
        },
        Position::Offset(o) => StartingOffsets::Offset(o),
        Position::BeforeEnd(n) => StartingOffsets::BeforeEnd(n),
        Position::Timestamp(ms) => StartingOffsets::Timestamp(ms),
    })
}

/// `--until`: where a bounded run stops.
pub fn parse_until(text: &str) -> Result<StoppingOffsets, String> {
    match parse_position(text, now_ms())? {
        Position::Latest => Ok(StoppingOffsets::Latest),
        Position::Committed => Ok(StoppingOffsets::Committed),
        Position::Timestamp(ms) => Ok(StoppingOffsets::Timestamp(ms)),
        other => Err(format!(
            "`{text}` ({other:?}) cannot end a run; use end|latest, committed, a timestamp in ms \
             (@1700000000000), an RFC 3339 time or a time relative to now (@-1h)"
        )),
    }
}

/// A duration, or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionalDuration(pub Option<Duration>);

/// `whole`, `group`, or `shard:I/N` (shard I, from 0, of N).
pub fn parse_scale_out(text: &str) -> Result<multicluster_kafka::ScaleOut, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("whole") {
        return Ok(multicluster_kafka::ScaleOut::Whole);
    }
    if t.eq_ignore_ascii_case("group") {
        return Ok(multicluster_kafka::ScaleOut::KafkaGroup);
    }
    match t.split_once(':') {
        Some((mode, shard)) if mode.trim().eq_ignore_ascii_case("shard") => shard
            .parse::<multicluster_kafka::Shard>()
            .map(multicluster_kafka::ScaleOut::Shard)
            .map_err(|e| e.message),
        _ => Err(format!(
            "`{text}` is not a scale-out mode: expected whole, group or shard:I/N (e.g. shard:0/3)"
        )),
    }
}

/// A positive duration as [`parse_duration`] reads it, or `none`.
pub fn parse_optional_duration(text: &str) -> Result<OptionalDuration, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(OptionalDuration(None));
    }
    parse_duration(text)
        .map(|d| OptionalDuration(Some(d)))
        .map_err(|e| format!("{e}, or none"))
}

/// A duration that may be zero (`0`, `500ms`, `10s`, `2m`, `1h 30m`); a bare number
/// means seconds.
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("`{text}` is not a duration ({e}); try 500ms, 10s, 2m")),
    }
}

/// A positive duration (`500ms`, `10s`, `2m`, `1h 30m`); a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration_or_zero(text)?;
    if d.is_zero() {
        return Err("the duration must be positive".into());
    }
    Ok(d)
}

/// `KEY=VALUE`, split at the first `=`.
pub fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".to_string()),
    }
}

/// The metadata file: a positional argument or `--metadata`, whichever the user writes.
#[derive(Debug, Clone, clap::Args)]
pub struct MetadataFile {
    /// The metadata file (YAML or JSON; Flink's layout or ours).
    #[arg(value_name = "FILE", conflicts_with = "metadata")]
    pub file: Option<PathBuf>,
    /// The metadata file, as an option (same as the positional FILE).
    #[arg(long, value_name = "FILE", env = "MCK_METADATA")]
    pub metadata: Option<PathBuf>,
}

impl MetadataFile {
    /// The file given, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        self.file.as_ref().or(self.metadata.as_ref())
    }

    /// The file given; without one, exits with clap's usage error (status 2).
    pub fn required(&self) -> &PathBuf {
        self.path().unwrap_or_else(|| {
            usage_error("no metadata file: give one as FILE or with --metadata FILE")
        })
    }
}

/// The whole command line's definition, for [`usage_error`]: given by `main` at start
/// (this module sits below it).
static COMMAND: std::sync::OnceLock<fn() -> clap::Command> = std::sync::OnceLock::new();

/// Gives [`usage_error`] the command line's definition.
pub fn set_command(command: fn() -> clap::Command) {
    let _ = COMMAND.set(command);
}

/// Ends the process as clap does for bad arguments: the message, a usage hint, exit 2.
pub fn usage_error(message: impl std::fmt::Display) -> ! {
    let mut command = COMMAND
        .get()
        .map_or_else(|| clap::Command::new("mck"), |f| f());
    command
        .error(clap::error::ErrorKind::MissingRequiredArgument, message)
        .exit()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_040_000_000;

    #[test]
    fn zero_is_a_duration_only_where_it_may_be() {
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration_or_zero("250ms"),
            Ok(Duration::from_millis(250))
        );
        assert!(parse_duration_or_zero("soon").is_err());
        assert_eq!(
            parse_duration("0"),
            Err("the duration must be positive".to_string())
        );
    }

    #[test]
    fn positions_take_kcat_and_rpk_forms_in_any_case() {
        let p = |t| parse_position(t, NOW).unwrap();
        assert_eq!(p("EARLIEST"), Position::Earliest);
        assert_eq!(p("beginning"), Position::Earliest);
        assert_eq!(p("End"), Position::Latest);
        assert_eq!(p("committed"), Position::Committed);
        assert_eq!(p("42"), Position::Offset(42));
        assert_eq!(p("-10"), Position::BeforeEnd(10));
        assert_eq!(p("@1700000000000"), Position::Timestamp(1_700_000_000_000));
        assert_eq!(p("s@1700000000000"), Position::Timestamp(1_700_000_000_000));
        assert_eq!(
            p("2026-11-30T10:00:00Z"),
            Position::Timestamp(1_796_032_800_000)
        );
        assert_eq!(
            p("@2026-11-30T10:00:00Z"),
            Position::Timestamp(1_796_032_800_000)
        );
        assert_eq!(p("-1h"), Position::Timestamp(NOW - 3_600_000));
        assert_eq!(p("@-90s"), Position::Timestamp(NOW - 90_000));
    }

    #[test]
    fn a_refused_position_lists_every_accepted_form() {
        for bad in ["yesterday", "@soon", "1h", "s@-x"] {
            let e = parse_position(bad, NOW).unwrap_err();
            assert!(e.contains(bad), "{e}");
            for form in [
                "earliest",
                "latest",
                "committed",
                "-10",
                "@1700000000000",
                "RFC 3339",
                "@-1h",
            ] {
                assert!(e.contains(form), "{bad}: {e} lacks {form}");
            }
        }
    }

    #[test]
    fn until_refuses_positions_that_cannot_end_a_run() {
        assert_eq!(parse_until("LATEST").unwrap(), StoppingOffsets::Latest);
        assert_eq!(parse_until("@5").unwrap(), StoppingOffsets::Timestamp(5));
        assert!(
            parse_until("earliest")
                .unwrap_err()
                .contains("cannot end a run")
        );
        assert!(parse_until("-3").is_err());
        assert_eq!(parse_from("-3").unwrap(), StartingOffsets::BeforeEnd(3));
    }

    #[test]
    fn durations_and_properties() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("soon"));
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(
            parse_optional_duration("None").unwrap(),
            OptionalDuration(None)
        );
        assert_eq!(
            parse_optional_duration("2m").unwrap(),
            OptionalDuration(Some(Duration::from_secs(120)))
        );
        assert!(
            parse_optional_duration("never")
                .unwrap_err()
                .contains("or none")
        );
        assert_eq!(
            parse_property("sasl.password=a=b").unwrap(),
            ("sasl.password".to_string(), "a=b".to_string())
        );
        assert!(parse_property("=x").is_err());
        assert!(parse_property("novalue").is_err());
    }
}
