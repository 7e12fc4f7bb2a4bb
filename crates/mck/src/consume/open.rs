//! The source of a run: built from the arguments, restored from the checkpoint, and
//! opened (Kafka alone, or history files then Kafka with `--backfill`).

use super::*;

/// The source builder the arguments describe, before any restore.
pub(super) fn source_builder(
    args: &ConsumeArgs,
    service: &Service,
    layout: &Layout,
) -> Result<SourceBuilder<NullableValue>, String> {
    let mut builder = MultiClusterKafkaSource::builder()
        .shared_metadata_service(service.shared())
        .deserializer(NullableValue)
        .starting_offsets(args.from.clone());
    builder = match (&args.stream_pattern, args.brokers.is_some()) {
        (_, true) => builder.stream_ids(args.topics.iter().cloned()),
        (Some(p), false) => builder.stream_pattern(p),
        (None, false) => builder.stream_ids(args.streams.iter().cloned()),
    };
    if let Some(g) = &args.group {
        builder = builder.group_id(g);
    }
    if matches!(args.scale_out, ScaleOut::KafkaGroup) {
        if args.group.is_none() {
            return Err(
                "--scale-out group needs --group: the instances share the stream through it".into(),
            );
        }
        builder = builder.scale_out(args.scale_out);
    }
    if let ScaleOut::Shard(shard) = args.scale_out {
        if args.group.is_none() {
            return Err(format!(
                "--scale-out shard:{shard} needs --group: each shard commits its positions to the group, and a run with another number of shards starts from them"
            ));
        }
        builder = builder
            .scale_out(args.scale_out)
            .shard_lock_wait(args.shard_lock_wait);
    }
    if let Some(until) = args.stop() {
        builder = builder.stopping_offsets(until);
    }
    for (k, v) in &args.properties {
        builder = builder.property(k, v);
    }
    if let Some(t) = args.startup_timeout {
        builder = builder.startup_timeout(t.0);
    }
    builder = builder
        .allow_missing_topics(args.allow_missing_topics)
        .max_batch_size(if args.align.is_some() {
            ALIGNED_BATCH
        } else {
            MAX_BATCH
        })
        .include_headers(layout.shows_headers())
        .watermarks(args.watermark_strategy())
        .order(if args.order == "time" {
            ReadOrder::Time
        } else {
            ReadOrder::Fetch
        });
    builder = builder.on_offset_out_of_range(match args.on_missing_offset.as_str() {
        "earliest" => OffsetReset::Earliest,
        "latest" => OffsetReset::Latest,
        _ => OffsetReset::None,
    });
    Ok(builder)
}

/// Restores `builder` from `restored` and opens it: Kafka alone, or with `--backfill`
/// history files then Kafka. `None` when a signal came first.
pub(super) async fn open_input(
    mut builder: SourceBuilder<NullableValue>,
    restored: Option<Checkpoint>,
    service: &Service,
    args: &ConsumeArgs,
    sigint: &mut tokio::signal::unix::Signal,
    sigterm: &mut tokio::signal::unix::Signal,
) -> Result<Option<Input>, String> {
    let Some(dir) = &args.backfill else {
        if let Some(cp) = restored {
            if cp.user_data.contains_key(HYBRID_KEY) {
                return Err(
                    "the checkpoint was written by a --backfill run; run with the same --backfill"
                        .into(),
                );
            }
            builder = builder.restore_from(cp);
        }
        let source = builder
            .deserializer(InBatch)
            .build()
            .map_err(|e| in_words(&e))?;
        let open = async {
            if let Service::Quick(quick) = service {
                wait_for_quick_cluster(quick, args).await?;
            }
            match source.open().await {
                Ok(stream) => Ok(stream),
                Err(e) => Err(located(e, service, args).await),
            }
        };
        let stream = or_signal(open, sigint, sigterm).await?;
        return Ok(stream.map(|s| Input::Kafka(Box::new(s))));
    };
    let files = FileSource::builder(dir)
        .timestamp_field(args.backfill_timestamp_field.clone().unwrap_or_default())
        .parallelism(args.backfill_threads)
        .malformed_lines(if args.backfill_skip_malformed {
            MalformedLines::Skip
        } else {
            MalformedLines::Fail
        });
    let mut hybrid = HybridSource::new(files, builder);
    if let Some(cp) = restored {
        match HybridCheckpoint::from_checkpoint(cp).map_err(|e| e.to_string())? {
            Some(h) => hybrid = hybrid.restore_from(h),
            None => {
                return Err(
                    "the checkpoint was written without --backfill; use a new --checkpoint-dir"
                        .into(),
                );
            }
        }
    }
    let open = async {
        match hybrid.open().await {
            Ok(stream) => Ok(stream),
            Err(e) => Err(located(e, service, args).await),
        }
    };
    let stream = or_signal(open, sigint, sigterm).await?;
    Ok(stream.map(|s| Input::Hybrid(Box::new(s))))
}
