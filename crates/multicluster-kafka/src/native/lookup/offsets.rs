//! Offsets: the earliest and latest of partitions, and those of a time (ListOffsets,
//! one request per leader).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::time::Instant;

use crate::error::SourceError;
use crate::lookups::{Bounds, EndEarly};

use super::metadata::leader_of;
use super::pool::stale;
use super::{BACKOFF_MAX, BACKOFF_MIN, Lookup};
use crate::error::KafkaErrorKind;
use crate::native::reported::{leader_moving, retriable_code};
use multicluster_kafka_client::error::NativeError;

impl Lookup {
    /// The earliest and latest offsets of `partitions` (the latest: the last stable
    /// offset under `read_committed`), asking their leaders again while leadership
    /// moves, within the timeout.
    pub fn bounds(self: &Arc<Self>, partitions: &[(String, i32)]) -> Result<Bounds, SourceError> {
        let me = self.clone();
        let partitions = partitions.to_vec();
        self.block(async move {
            let deadline = Instant::now() + me.timeout;
            me.bounds_until(&partitions, deadline).await
        })
    }

    async fn bounds_until(
        self: &Arc<Self>,
        partitions: &[(String, i32)],
        deadline: Instant,
    ) -> Result<Bounds, SourceError> {
        let earliest: Vec<_> = partitions
            .iter()
            .map(|(t, p)| (t.clone(), *p, -2))
            .collect();
        let latest: Vec<_> = partitions
            .iter()
            .map(|(t, p)| (t.clone(), *p, -1))
            .collect();
        let low = self
            .offsets_until(&earliest, "earliest offsets", deadline)
            .await?;
        let high = self
            .offsets_until(&latest, "latest offsets", deadline)
            .await?;
        let mut out = Bounds::new();
        for key in partitions {
            match (low.get(key), high.get(key)) {
                (Some(&l), Some(&h)) if l >= 0 && h >= 0 => {
                    out.insert(key.clone(), (l, h));
                }
                _ => {
                    return Err(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!(
                            "offsets of {}/{}: missing from the broker's answer",
                            key.0, key.1
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The first offset at or after each partition's timestamp (`None` where no
    /// record is that late).
    pub fn offsets_at_times(
        self: &Arc<Self>,
        queries: &[(String, i32, i64)],
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, SourceError> {
        let me = self.clone();
        let queries = queries.to_vec();
        self.block(async move {
            let deadline = Instant::now() + me.timeout;
            let found = me
                .offsets_until(&queries, "timestamp lookup", deadline)
                .await?;
            Ok(queries
                .iter()
                .map(|(t, p, _)| {
                    let key = (t.clone(), *p);
                    let at = found.get(&key).copied().filter(|o| *o >= 0);
                    (key, at)
                })
                .collect())
        })
    }

    /// ListOffsets for `queries` (topic, partition, timestamp: −2 earliest, −1
    /// latest), one request per leader, asked again while a leader moves.
    async fn offsets_until(
        self: &Arc<Self>,
        queries: &[(String, i32, i64)],
        what: &str,
        deadline: Instant,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let mut out = BTreeMap::new();
        let mut left: Vec<(String, i32, i64)> = queries.to_vec();
        let mut backoff = BACKOFF_MIN;
        while !left.is_empty() {
            let topics: BTreeSet<String> = left.iter().map(|q| q.0.clone()).collect();
            let md = self
                .metadata_until(
                    Some(&topics.into_iter().collect::<Vec<_>>()),
                    EndEarly::OnRefusal,
                    deadline,
                )
                .await?;
            let mut by_leader: BTreeMap<i32, Vec<(String, i32, i64)>> = BTreeMap::new();
            let mut again: Vec<(String, i32, i64)> = Vec::new();
            let mut last_moving: Option<String> = None;
            for q in left.drain(..) {
                match leader_of(&md, &q.0, q.1) {
                    Ok(leader) => by_leader.entry(leader).or_default().push(q),
                    Err(code) if leader_moving(code) => {
                        last_moving = Some(format!("{}/{}: no leader", q.0, q.1));
                        again.push(q);
                    }
                    Err(code) => {
                        return Err(self.broker_code(what, &q.0, q.1, code));
                    }
                }
            }
            for (leader, wanted) in by_leader {
                let Some(addr) = self.address_of(leader) else {
                    last_moving = Some(format!("broker {leader} not in the metadata"));
                    again.extend(wanted);
                    continue;
                };
                let asked: Vec<(&str, i32, i64)> = wanted
                    .iter()
                    .map(|(t, p, ts)| (t.as_str(), *p, *ts))
                    .collect();
                let asking = tokio::time::timeout_at(deadline, self.list_offsets_on(&addr, &asked));
                let answered = asking
                    .await
                    .unwrap_or_else(|_| Err(self.late(&addr, "ListOffsets answer")));
                let answers = match answered {
                    Ok(answers) => answers,
                    Err(e) if retriable(&e) && Instant::now() + backoff < deadline => {
                        last_moving = Some(e.to_string());
                        again.extend(wanted);
                        continue;
                    }
                    Err(e) => return Err(self.error(what, &e)),
                };
                for q in wanted {
                    let answer = answers
                        .iter()
                        .find(|a| a.topic == q.0 && a.partition == q.1);
                    match answer {
                        Some(a) if a.error_code == 0 => {
                            out.insert((q.0.clone(), q.1), a.offset);
                        }
                        Some(a) if leader_moving(a.error_code) => {
                            last_moving = Some(format!("{}/{}: code {}", q.0, q.1, a.error_code));
                            again.push(q);
                        }
                        Some(a) => return Err(self.broker_code(what, &q.0, q.1, a.error_code)),
                        None => {
                            return Err(SourceError::Cluster {
                                cluster: self.cluster.to_string(),
                                message: format!(
                                    "{what} of {}/{}: missing from the broker's answer",
                                    q.0, q.1
                                ),
                            });
                        }
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            if Instant::now() + backoff >= deadline {
                return Err(SourceError::Kafka {
                    cluster: self.cluster.to_string(),
                    message: format!(
                        "{what}: leaders still moving after {:?}: {}",
                        self.timeout,
                        last_moving.unwrap_or_default()
                    ),
                    kind: KafkaErrorKind::LeaderMoving,
                    retriable: true,
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            left = again;
        }
        Ok(out)
    }

    async fn list_offsets_on(
        &self,
        addr: &str,
        asked: &[(&str, i32, i64)],
    ) -> Result<Vec<multicluster_kafka_client::responses::OffsetAnswer>, NativeError> {
        let committed = self.settings.partition.read_committed;
        let (mut conn, reused) = self.take(addr, false).await?;
        let answer = match conn.list_offsets_of(asked, committed).await {
            Err(e) if reused && stale(&e) => {
                conn = self.take(addr, true).await?.0;
                conn.list_offsets_of(asked, committed).await
            }
            other => other,
        }?;
        self.give(conn);
        Ok(answer)
    }
}

/// Whether a failed request may succeed on another try.
fn retriable(e: &NativeError) -> bool {
    match e {
        NativeError::Connect { .. }
        | NativeError::Io { .. }
        | NativeError::Closed { .. }
        | NativeError::Timeout { .. }
        | NativeError::Token { .. } => true,
        NativeError::Broker { code, .. } => retriable_code(*code),
        _ => false,
    }
}
