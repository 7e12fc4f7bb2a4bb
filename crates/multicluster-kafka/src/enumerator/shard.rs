//! Shard mode: the shard's membership, held before anything is read, and where the
//! splits of a resharded run start.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::Enumerator;
use super::lookups::{Lookup, key_of};
use crate::base::metadata::KafkaStream;
use crate::base::plan::clusters_of_streams;
use crate::base::protocol::ReaderEvent;
use crate::base::split::KafkaSplit;
use crate::error::SourceError;
use crate::kafka::client::detached;
use crate::kafka::shard_lock::{ShardKeeper, ShardLock, instance_id};

impl Enumerator {
    /// Takes the shard's membership on the first cluster of the stream (by id) before
    /// anything is read. Nothing to do for an unsharded source.
    pub(super) async fn hold_shard(
        &mut self,
        streams: &BTreeMap<String, KafkaStream>,
    ) -> Result<(), SourceError> {
        let Some(shard) = self.cfg.shard else {
            return Ok(());
        };
        let group = self
            .cfg
            .group_id
            .clone()
            .ok_or_else(|| SourceError::internal("shard mode", "no group id"))?;
        let Some((cluster, view)) = clusters_of_streams(streams.values()).into_iter().next() else {
            return Err(SourceError::ShardTaken {
                shard: shard.to_string(),
                instance: instance_id(&group, shard),
                cluster: String::new(),
                message: "the stream has no cluster to hold the shard's membership on".into(),
            });
        };
        let props = self.cfg.client_properties(&view.properties);
        let wait = self.cfg.shard_lock_wait;
        let setup =
            crate::kafka::config::ClientSetup::new(self.cfg.client_hooks.as_ref(), &cluster);
        let cluster: Arc<str> = Arc::from(cluster.as_str());
        let lock =
            detached(move || ShardLock::acquire(cluster, &props, &group, shard, wait, setup))
                .await?;
        self.shard = Some(ShardKeeper::start(lock));
        Ok(())
    }

    /// The handle that releases the shard's membership, for the source's coordinator.
    pub(crate) fn shard_keeper(&self) -> Option<ShardKeeper> {
        self.shard.as_ref().map(|(k, _)| k.clone())
    }

    /// The shard's membership ended: with `lost`'s error (another instance took the
    /// shard), every reader stops with it.
    pub(super) fn shard_ended(&mut self, lost: Result<SourceError, oneshot::error::RecvError>) {
        self.shard = None;
        if let Ok(e) = lost {
            self.shard_lost(e);
        }
    }

    /// Lets the shard's membership go, in the background (the enumerator stops).
    pub(super) fn release_shard(&mut self) {
        if let Some((keeper, _)) = self.shard.take() {
            keeper.release_in_background();
        }
    }

    /// Another instance took the shard: every reader stops with the error.
    fn shard_lost(&mut self, e: SourceError) {
        let SourceError::ShardTaken {
            shard,
            instance,
            cluster,
            message,
        } = e
        else {
            return;
        };
        self.readers.tell_all(|| ReaderEvent::ShardLost {
            shard: shard.clone(),
            instance: instance.clone(),
            cluster: cluster.clone(),
            message: message.clone(),
        });
    }

    /// After a change of the shard layout, a restored split starts at the later of
    /// its checkpointed position and the group's committed offset: another shard may
    /// have read it further since this checkpoint was written (all of them commit
    /// their last positions when they stop gracefully). With the same layout the
    /// checkpoint is the truth and nothing is looked up.
    pub(super) async fn resharded(
        &self,
        mut splits: Vec<KafkaSplit>,
    ) -> Result<Vec<KafkaSplit>, SourceError> {
        let (Some(shard), Some(cp)) = (self.cfg.shard, self.cfg.restore.as_ref()) else {
            return Ok(splits);
        };
        if cp.shard == Some(shard) {
            return Ok(splits);
        }
        splits.retain(|s| shard.owns(&s.id.cluster, &s.id.topic, s.id.partition));
        let committed = self
            .per_cluster(&splits, "a committed-offset lookup", |_, state| {
                let client = state.client().clone();
                Some(Box::new(move |partitions: &[(String, i32)]| {
                    let facts = client.facts(partitions, true, None)?;
                    Ok(facts
                        .into_iter()
                        .filter_map(|(partition, f)| f.committed.map(|c| (partition, c)))
                        .collect())
                }) as Lookup<i64>)
            })
            .await?;
        let mut moved = 0usize;
        for s in &mut splits {
            if let Some(&c) = committed.get(&key_of(s))
                && c > s.next_offset
            {
                s.next_offset = c;
                moved += 1;
            }
        }
        tracing::info!(
            from = %cp.shard.map_or_else(|| "unsharded".to_string(), |s| s.to_string()),
            to = %shard,
            splits = splits.len(),
            ahead_in_the_group = moved,
            "the shard layout changed since the checkpoint: each split resumes at the later of its checkpointed position and the group's committed offset"
        );
        Ok(splits)
    }
}
