//! The run's metadata service, and source errors located in its file.

use super::*;

/// The metadata service of the run: the file (followed), or quick mode's one cluster.
pub(super) enum Service {
    File(Arc<FileMetadataService>),
    Quick(Arc<SingleClusterMetadataService>),
}

impl Service {
    pub(super) fn open(args: &ConsumeArgs) -> Result<Self, String> {
        if let Some(brokers) = &args.brokers {
            // The metadata client needs the same properties as the readers (TLS, SASL).
            let props: ClientProperties = std::iter::once((BOOTSTRAP_SERVERS, brokers.as_str()))
                .chain(
                    args.properties
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str())),
                )
                .collect();
            // A property librdkafka refuses is named by its key, never its value.
            props.check().map_err(|r| format!("-b {brokers} -X: {r}"))?;
            return SingleClusterMetadataService::new(QUICK_CLUSTER, props)
                .map(|s| Service::Quick(Arc::new(s)))
                .map_err(|e| format!("-b {brokers}: {e}"));
        }
        let path = args.metadata.path().unwrap_or_else(|| {
            args::usage_error(
                "nothing to read: give a metadata file (FILE or --metadata FILE) with --stream, \
                 or brokers and topics (-b HOST:PORT -t TOPIC)",
            )
        });
        if !args.topics.is_empty() {
            // `mck consume HOST:PORT -t TOPIC`, kcat's habit, takes the brokers for a file.
            args::usage_error(format!(
                "-t reads topics of brokers given with -b HOST:PORT; `{}` was taken for a \
                 metadata file (did you mean -b {0}?)",
                path.display()
            ));
        }
        if args.streams.is_empty() && args.stream_pattern.is_none() {
            args::usage_error(format!(
                "which streams of {}? give --stream ID (repeatable) or --stream-pattern REGEX",
                path.display()
            ));
        }
        // Every property of the streams read, checked offline first (as `mck validate`
        // does): a refusal names the file, line and column, not only the cluster.
        let named = |stream: &str| {
            args.stream_pattern.is_some() || args.streams.iter().any(|s| s == stream)
        };
        check_metadata(path, named).map_err(|e| e.to_string())?;
        FileMetadataService::watch(path)
            .map(|s| Service::File(Arc::new(s)))
            .map_err(|e| e.to_string())
    }

    pub(super) fn shared(&self) -> Arc<dyn KafkaMetadataService> {
        match self {
            Service::File(s) => s.clone(),
            Service::Quick(s) => s.clone(),
        }
    }

    pub(super) fn last_error(&self) -> Option<String> {
        match self {
            Service::File(s) => s.last_error().map(|e| e.to_string()),
            Service::Quick(_) => None,
        }
    }
}

/// How long one of quick mode's listings waits for the cluster.
const QUICK_LISTING_TIMEOUT: Duration = SingleClusterMetadataService::DEFAULT_METADATA_TIMEOUT;

/// Quick mode's wait for its cluster before the source opens, as a metadata file's
/// run waits for its clusters: the topics are listed again with backoff until the
/// cluster answers; within `--startup-timeout` (bounded runs: the library's default
/// of 60 s) or, in a follow run without one, for as long as it takes. Said once, and
/// again when the error changes. The source's own start then finds the cluster up.
pub(super) async fn wait_for_quick_cluster(
    service: &SingleClusterMetadataService,
    args: &ConsumeArgs,
) -> Result<(), String> {
    use tokio::time::{Instant, sleep, timeout};
    let limit = match args.startup_timeout {
        Some(t) => t.0,
        None => args
            .stop()
            .is_some()
            .then_some(multicluster_kafka::DEFAULT_BOUNDED_STARTUP_TIMEOUT),
    };
    let give_up = limit.map(|t| Instant::now() + t);
    let bootstrap = args.brokers.as_deref().unwrap_or_default();
    let mut backoff = Duration::from_millis(200);
    let mut said: Option<String> = None;
    loop {
        let began = Instant::now();
        let listing = service.describe_streams(&args.topics);
        // `None`: the start-up timeout ended the listing.
        let answer = match give_up {
            Some(at) => timeout(at.saturating_duration_since(Instant::now()), listing)
                .await
                .ok(),
            None => Some(listing.await),
        };
        let error = match answer {
            Some(Ok(_)) => return Ok(()),
            None => service
                .last_client_error()
                .or_else(|| said.clone())
                .unwrap_or_else(|| "no answer yet".into()),
            // A listing ends before its timeout only when the cluster refused the
            // client (credentials, certificates; an unreachable one is tried until
            // the timeout): that fails the start at once, as with a metadata file.
            Some(Err(e)) if began.elapsed() + Duration::from_secs(1) < QUICK_LISTING_TIMEOUT => {
                return Err(e.to_string());
            }
            Some(Err(multicluster_kafka::metadata::MetadataError::Cluster { message, .. })) => {
                message
            }
            // Anything else is the source's to say as it opens.
            Some(Err(_)) => return Ok(()),
        };
        if let (Some(at), Some(limit)) = (give_up, limit)
            && Instant::now() + backoff >= at
        {
            return Err(format!(
                "cluster `{QUICK_CLUSTER}`: did not answer within the start-up timeout of \
                 {limit:?} (bootstrap {bootstrap}): {error}"
            ));
        }
        if said.as_deref() != Some(error.as_str()) {
            let then = match limit {
                Some(limit) => {
                    format!("fails if it does not answer within the start-up timeout of {limit:?}")
                }
                None => "waits for as long as it takes (--startup-timeout bounds it)".into(),
            };
            tracing::warn!(
                cluster = QUICK_CLUSTER,
                bootstrap,
                error = %error,
                "cannot reach the cluster; the run starts once it answers, tries again with \
                 backoff, and {then} (said again only when the error changes)"
            );
            said = Some(error);
        }
        sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// The library's builder options that its errors name, as this command's flags.
const BUILDER_TO_FLAGS: &[(&str, &str)] = &[
    (
        "the builder's on_offset_out_of_range",
        "--on-missing-offset earliest|latest",
    ),
    (
        "the builder's allow_missing_topics",
        "--allow-missing-topics",
    ),
];

/// The library's builder settings that its configuration errors name, as this
/// command's flags.
const SETTINGS_TO_FLAGS: &[(&str, &str)] = &[
    ("group_id", "--group"),
    ("stream_ids", "--stream"),
    ("stream_pattern", "--stream-pattern"),
    ("scale_out", "--scale-out"),
    ("order", "--order"),
];

/// A source error as the run's words: a configuration error names the flag (or
/// `-X` property) for the builder setting it names; other errors as
/// [`in_flags`] says them.
pub(super) fn in_words(e: &SourceError) -> String {
    if let SourceError::Config(c) = e
        && let Some((_, flag)) = SETTINGS_TO_FLAGS.iter().find(|(s, _)| *s == c.setting)
    {
        return format!("{flag}: {}", c.message);
    }
    in_flags(&e.to_string())
}

/// An error line of the library with the builder options it names said as flags.
fn in_flags(line: &str) -> String {
    BUILDER_TO_FLAGS
        .iter()
        .fold(line.to_string(), |line, (builder, flag)| {
            line.replace(builder, flag)
        })
}

/// A source error as the run's error line. A cluster whose client could not be made
/// is checked again here ([`ClientProperties::check`]) so the line names the metadata
/// file, the cluster and the property librdkafka refuses (or `-X` when the property
/// came from the command line), with librdkafka's reason and never the value.
pub(super) async fn located(e: SourceError, service: &Service, args: &ConsumeArgs) -> String {
    if matches!(e, SourceError::Config(_)) {
        return in_words(&e);
    }
    if matches!(
        e,
        SourceError::OffsetOutOfRange { .. }
            | SourceError::TopicGone { .. }
            | SourceError::TopicNotAuthorized { .. }
    ) {
        return in_flags(&e.to_string());
    }
    let (SourceError::Cluster { cluster, message }
    | SourceError::Kafka {
        cluster, message, ..
    }) = &e
    else {
        return e.to_string();
    };
    let (Service::File(file), Some(path)) = (service, args.metadata.path()) else {
        return e.to_string();
    };
    let Ok(streams) = file.all_streams().await else {
        return e.to_string();
    };
    let Some(own) = streams
        .values()
        .find_map(|s| s.clusters.get(cluster.as_str()))
        .map(|m| m.properties.clone())
    else {
        return e.to_string();
    };
    let cli: ClientProperties = args
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut props = cli.merged_with(&own);
    if let Some(g) = &args.group {
        props.set("group.id", g.clone());
    }
    // Loading certificate files blocks.
    let checked = props.clone();
    let refused = match tokio::task::spawn_blocking(move || checked.check()).await {
        Ok(Err(r)) => r,
        // librdkafka takes the properties alone: a client refused for another reason
        // (reader settings, hooks) keeps the source's words, without any value.
        Ok(Ok(())) if message.starts_with("create client") => props.refusal(message),
        _ => return e.to_string(),
    };
    let from_cli = refused
        .key
        .as_deref()
        .is_some_and(|k| own.get(k).is_none() && cli.get(k).is_some());
    if from_cli {
        format!(
            "-X (for cluster `{cluster}` of {}): {refused}",
            path.display()
        )
    } else {
        crate::describe::refused_line(path, cluster, &refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_errors_that_name_a_builder_option_name_the_flag_instead() {
        let errors = [
            SourceError::OffsetOutOfRange {
                split: "east/orders/0".into(),
                offset: 5,
                log_start: Some(10),
                log_end: Some(20),
            },
            SourceError::TopicGone {
                split: "east/orders/0".into(),
                stop: 9,
                reason: "unknown topic".into(),
            },
            SourceError::TopicNotAuthorized {
                split: "east/orders/0".into(),
                stop: 9,
            },
        ];
        let flags = [
            "--on-missing-offset",
            "--allow-missing-topics",
            "--allow-missing-topics",
        ];
        for (e, flag) in errors.iter().zip(flags) {
            let library = e.to_string();
            assert!(library.contains("the builder's "), "{library}");
            assert!(!library.contains("--"), "{library}");
            let line = in_flags(&library);
            assert!(line.contains(flag), "{line}");
            assert!(!line.contains("builder"), "{line}");
        }
    }
}
