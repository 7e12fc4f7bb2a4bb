//! [`SourceBuilder::build`]: the builder's settings checked into a [`SourceConfig`].

use std::sync::Arc;
use std::time::Duration;

use super::SourceBuilder;
use crate::base::config::{
    DEFAULT_BOUNDED_STARTUP_TIMEOUT, DEFAULT_METADATA_DISCOVERY, DEFAULT_PARTITION_DISCOVERY,
    SourceConfig, Subscription,
};
use crate::base::offsets::StoppingOffsets;
use crate::base::shard::ScaleOut;
use crate::base::watermark::{EventTimestamps, ReadOrder};
use crate::deserializer::Deserializer;
use crate::error::{ConfigError, SourceError};
use crate::source::MultiClusterKafkaSource;

impl<D: Deserializer> SourceBuilder<D> {
    /// Checks the configuration.
    pub fn build(self) -> Result<MultiClusterKafkaSource<D>, SourceError> {
        let config =
            |setting: &'static str, m: &str| SourceError::Config(ConfigError::new(setting, m));
        let service = self
            .s
            .service
            .ok_or_else(|| config("metadata_service", "a metadata service is required"))?;
        let subscription = match (self.s.stream_ids.is_empty(), self.s.pattern) {
            (false, Some(_)) => {
                return Err(config(
                    "stream_ids",
                    "set stream ids or a stream pattern, not both",
                ));
            }
            (true, None) => {
                return Err(config("stream_ids", "set stream ids or a stream pattern"));
            }
            (false, None) => {
                if let Some(bad) = self.s.stream_ids.iter().find(|s| s.trim().is_empty()) {
                    return Err(config("stream_ids", &format!("stream id `{bad}` is empty")));
                }
                Subscription::Ids(self.s.stream_ids)
            }
            (true, Some(p)) => Subscription::Pattern(regex::Regex::new(&p).map_err(|e| {
                config(
                    "stream_pattern",
                    &format!("invalid stream pattern `{p}`: {}", one_line(&e.to_string())),
                )
            })?),
        };
        if self.s.parallelism == 0 {
            return Err(config("parallelism", "parallelism must be at least 1"));
        }
        if self.s.max_batch == 0 {
            return Err(config(
                "max_batch_size",
                "the batch size must be at least 1",
            ));
        }
        let group_id = self
            .s
            .group_id
            .or_else(|| self.s.properties.get("group.id").map(str::to_string));
        if group_id.is_none() && self.s.starting.needs_committed() {
            return Err(config(
                "group_id",
                "starting from committed offsets needs a group id",
            ));
        }
        if group_id.is_none()
            && self
                .s
                .stopping
                .as_ref()
                .is_some_and(StoppingOffsets::needs_committed)
        {
            return Err(config(
                "group_id",
                "stopping at committed offsets needs a group id",
            ));
        }
        let bounded = self.s.stopping.is_some();
        let partition_discovery = self.s.partition_discovery.resolve(
            "partition",
            bounded,
            DEFAULT_PARTITION_DISCOVERY,
        )?;
        let metadata_discovery =
            self.s
                .metadata_discovery
                .resolve("metadata", bounded, DEFAULT_METADATA_DISCOVERY)?;
        if self.s.new_partition_start.needs_committed() && group_id.is_none() {
            return Err(config(
                "group_id",
                "new partitions starting from committed offsets needs a group id",
            ));
        }
        let group_mode = matches!(self.s.scale_out, ScaleOut::KafkaGroup);
        if group_mode && group_id.is_none() {
            return Err(config(
                "scale_out",
                "group mode needs a group id: the instances share the stream through it",
            ));
        }
        let event_timestamps = self
            .s
            .event_timestamps
            .map(|any| {
                any.downcast_ref::<EventTimestamps<D::Value>>()
                    .cloned()
                    .ok_or_else(|| {
                        config(
                            "event_timestamps",
                            "it was set before the deserializer: set it after, as it takes that deserializer's values",
                        )
                    })
            })
            .transpose()?;
        if event_timestamps.is_some() && self.s.watermarks.is_none() {
            return Err(config(
                "event_timestamps",
                "event timestamps need watermarks: set `watermarks` too",
            ));
        }
        if self.s.order == ReadOrder::Time && self.s.watermarks.is_none() {
            return Err(config(
                "order",
                "time order needs watermarks (their out-of-orderness and idle timeout): set `watermarks` too",
            ));
        }
        let shard = match self.s.scale_out {
            ScaleOut::Whole | ScaleOut::KafkaGroup => None,
            ScaleOut::Shard(shard) => {
                if group_id.is_none() {
                    return Err(config(
                        "scale_out",
                        "shard mode needs a group id: each shard commits its positions under it, and a resharded run starts from them",
                    ));
                }
                Some(shard)
            }
        };
        Ok(MultiClusterKafkaSource {
            cfg: SourceConfig {
                subscription,
                group_id,
                starting: self.s.starting,
                stopping: self.s.stopping,
                properties: self.s.properties,
                parallelism: self.s.parallelism,
                partition_discovery,
                strategy: self.s.strategy,
                restore: self.s.restore,
                discard_mismatched_positions: self.s.discard_mismatched_positions,
                client_timeout: self.s.client_timeout,
                startup_timeout: self
                    .s
                    .startup_timeout
                    .unwrap_or(bounded.then_some(DEFAULT_BOUNDED_STARTUP_TIMEOUT)),
                max_batch: self.s.max_batch,
                poll_timeout: Duration::from_millis(100),
                include_headers: self.s.include_headers,
                policy: self.s.policy,
                metadata_discovery,
                metadata_failure_threshold: self.s.metadata_failure_threshold,
                new_partition_start: self.s.new_partition_start,
                retention: self.s.retention,
                rebuild_interval: self.s.rebuild_interval,
                client_hooks: self.s.client_hooks,
                shard,
                group_mode,
                shard_lock_wait: self.s.shard_lock_wait,
                watermarks: self.s.watermarks,
                order: self.s.order,
            },
            service,
            deserializer: Arc::new(self.deserializer),
            event_timestamps,
        })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
