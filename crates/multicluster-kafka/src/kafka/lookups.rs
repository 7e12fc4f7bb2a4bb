//! A cluster's lookups through a librdkafka client ([`Lookups`]): the client the
//! cluster's first reader fetches with, or one of the lookups' own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::error::SourceError;
use crate::kafka::events::SourceContext;
use crate::kafka::shared::SharedClient;
use crate::lookups::{Bounds, EachRecord, EndEarly, Lookups, PerPartition, TopicPartitions};

/// How often a metadata request waiting for a usable broker looks at the client's
/// errors ([`EndEarly`]).
const ERROR_CHECK: Duration = Duration::from_millis(100);

/// How long a metadata request still waits for a usable broker once it may end
/// early: a broker librdkafka re-bootstraps may still accept the client.
pub(crate) const ERROR_GRACE: Duration = Duration::from_secs(1);

/// The metadata of every topic, within `timeout`; ends early when the cluster
/// refuses the client (credentials, certificates), or with [`EndEarly::OnAnyError`]
/// when no broker can be reached. A token provider that failed does not end it
/// early: librdkafka asks the provider again meanwhile.
///
/// librdkafka first waits for a usable broker, for up to the whole timeout, and a
/// cluster that refused the client never has one: a wrong password was reported only
/// when the timeout (30 s by default) ran out, though librdkafka had said why after
/// ~100 ms. So the wait for a broker is taken in steps of [`ERROR_CHECK`], each
/// followed by a look at the client's state: once every broker failed since the
/// client's last answer ([`SourceContext::every_broker_failed`]) and the request may
/// end early, it ends [`ERROR_GRACE`] later if no broker became usable meanwhile. A
/// broker of the bootstrap list still connecting (a slow handshake) keeps it waiting.
/// What ends it is the client's state, not an error reported during the request:
/// librdkafka reports a broker's identical error again only after 30 s, so a request
/// on a client kept from an earlier attempt would see none, and requests sharing a
/// client do not reset anything for each other. Once a broker is usable, the request
/// itself gets all the time left (a step that ran out while the request was in
/// flight sends it again).
pub(crate) fn all_metadata(
    client: &rdkafka::client::Client<SourceContext>,
    timeout: Duration,
    end_early: EndEarly,
) -> rdkafka::error::KafkaResult<rdkafka::metadata::Metadata> {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};
    use std::time::Instant;
    // librdkafka takes milliseconds as an i32.
    let timeout = timeout.min(Duration::from_millis(i32::MAX as u64));
    let context = client.context();
    let end = Instant::now() + timeout;
    let mut broker_usable = false;
    let mut failing_since: Option<Instant> = None;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let step = if broker_usable {
            left
        } else {
            left.min(ERROR_CHECK)
        };
        match client.fetch_metadata(None, step) {
            Err(KafkaError::MetadataFetch(C::BrokerTransportFailure)) if step < left => {
                let may_end = context.every_broker_failed()
                    && match end_early {
                        EndEarly::OnRefusal => context.refused_since_answer(),
                        EndEarly::OnAnyError => !context.last_error_is_token(),
                    };
                if !may_end {
                    failing_since = None;
                } else if failing_since.get_or_insert_with(Instant::now).elapsed() >= ERROR_GRACE {
                    return Err(KafkaError::MetadataFetch(C::BrokerTransportFailure));
                }
            }
            Err(KafkaError::MetadataFetch(C::OperationTimedOut)) if step < left => {
                broker_usable = true;
            }
            Ok(metadata) => {
                context.answered(metadata.brokers().len());
                return Ok(metadata);
            }
            answer => return answer,
        }
    }
}

/// A cluster's lookups through a librdkafka client.
pub(crate) struct RdLookups {
    cluster: Arc<str>,
    client: Arc<SharedClient>,
    timeout: Duration,
}

impl RdLookups {
    /// The lookups of `cluster` through `client`, each within `timeout`.
    pub fn new(cluster: Arc<str>, client: Arc<SharedClient>, timeout: Duration) -> Self {
        Self {
            cluster,
            client,
            timeout,
        }
    }

    fn consumer(&self) -> &BaseConsumer<SourceContext> {
        self.client.consumer()
    }

    /// A failed request, with the client's last error as its cause.
    fn err(&self, what: &str, e: &rdkafka::error::KafkaError) -> SourceError {
        SourceError::kafka(&self.cluster, self.with_cause(format!("{what}: {e}")), e)
    }

    /// `message`, with the client's last error as its cause when there is one.
    fn with_cause(&self, message: String) -> String {
        match self.last_error() {
            Some(cause) => format!("{message}; last client error: {cause}"),
            None => message,
        }
    }

    /// Unassigns what a read assigned; a failure only is logged.
    fn unassign(&self, what: &str) {
        if let Err(e) = self.consumer().unassign() {
            tracing::debug!(cluster = %self.cluster, error = %e, "{what}: unassigning failed");
        }
    }

    /// The earliest (`Offset::Beginning`) or latest (`Offset::End`) offset of every
    /// partition, from one ListOffsets request per leader: the special timestamps -2
    /// and -1 ask the broker for those. A watermark query per partition costs two round
    /// trips each, one partition after the other: with 8 partitions per cluster, building
    /// a source took 120–140 ms to assign its splits that way and 80–90 ms this way
    /// (`mck-bench throughput`, two local clusters).
    ///
    /// A leader that moves or is not yet elected (a topic just made, a broker that
    /// restarts) is asked again, within the client timeout: librdkafka does not retry
    /// a ListOffsets answer that names such an error.
    fn list_offsets(
        &self,
        partitions: &[(String, i32)],
        which: Offset,
        what: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let until = std::time::Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.list_offsets_once(partitions, which, what) {
                Err(e) if leader_moving(&e) && std::time::Instant::now() + pause < until => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    fn list_offsets_once(
        &self,
        partitions: &[(String, i32)],
        which: Offset,
        what: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        for (topic, p) in partitions {
            tpl.add_partition_offset(topic, *p, which)
                .map_err(|e| self.err(what, &e))?;
        }
        let got = self
            .consumer()
            .offsets_for_times(tpl, self.timeout)
            .map_err(|e| self.err(what, &e))?;
        let mut out = BTreeMap::new();
        for e in got.elements() {
            e.error().map_err(|err| {
                self.err(&format!("{what} of {}/{}", e.topic(), e.partition()), &err)
            })?;
            match e.offset() {
                Offset::Offset(o) => {
                    out.insert((e.topic().to_string(), e.partition()), o);
                }
                other => {
                    return Err(SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!(
                            "{what} of {}/{}: the broker answered {other:?}",
                            e.topic(),
                            e.partition()
                        ),
                    });
                }
            }
        }
        Ok(out)
    }
}

impl Lookups for RdLookups {
    fn path(&self) -> &'static str {
        "librdkafka"
    }

    fn cluster_id(&self, end_early: EndEarly) -> Result<String, SourceError> {
        // A metadata answer carries the cluster id; asking for the id alone first
        // waits in librdkafka's one-second polling steps.
        let consumer = self.consumer();
        all_metadata(consumer.client(), self.timeout, end_early)
            .map_err(|e| self.err("metadata request", &e))?;
        consumer
            .client()
            .fetch_cluster_id(self.timeout)
            .ok_or_else(|| SourceError::Cluster {
                cluster: self.cluster.to_string(),
                message: self.with_cause(format!(
                    "metadata request: no answer within {:?}",
                    self.timeout
                )),
            })
    }

    fn describe(&self, topics: &BTreeSet<String>) -> Result<TopicPartitions, SourceError> {
        let consumer = self.consumer();
        let md = all_metadata(consumer.client(), self.timeout, EndEarly::OnRefusal)
            .map_err(|e| self.err("metadata request", &e))?;
        let mut out = TopicPartitions::default();
        for t in md.topics() {
            if topics.contains(t.name()) && t.error().is_none() && !t.partitions().is_empty() {
                let mut parts: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
                parts.sort_unstable();
                out.partitions.insert(t.name().to_string(), parts);
            }
        }
        for t in topics {
            if !out.partitions.contains_key(t) {
                out.missing.insert(t.clone());
            }
        }
        // A listing of all topics leaves out those the principal may not describe:
        // asked by name, the broker says which ones it refused.
        for t in &out.missing {
            if let Ok(md) = consumer.fetch_metadata(Some(t), self.timeout)
                && md.topics().iter().any(|m| {
                    m.name() == t
                        && m.error()
                            == Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
                })
            {
                out.unauthorized.insert(t.clone());
            }
        }
        Ok(out)
    }

    fn topic_names(&self) -> Result<Vec<String>, SourceError> {
        let md = all_metadata(self.consumer().client(), self.timeout, EndEarly::OnRefusal)
            .map_err(|e| self.err("metadata request", &e))?;
        // A topic being deleted may still be listed, as unknown.
        Ok(md
            .topics()
            .iter()
            .filter(|t| {
                t.error()
                    != Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
            })
            .map(|t| t.name().to_string())
            .collect())
    }

    fn bounds(&self, partitions: &[(String, i32)]) -> Result<Bounds, SourceError> {
        let earliest = self.list_offsets(partitions, Offset::Beginning, "earliest offsets")?;
        let latest = self.list_offsets(partitions, Offset::End, "latest offsets")?;
        let mut out = Bounds::new();
        for (topic, p) in partitions {
            let key = (topic.clone(), *p);
            let (Some(&low), Some(&high)) = (earliest.get(&key), latest.get(&key)) else {
                return Err(SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: format!("offsets of {topic}/{p}: missing from the broker's answer"),
                });
            };
            out.insert(key, (low, high));
        }
        Ok(out)
    }

    fn offsets_at_times(
        &self,
        queries: &[(String, i32, i64)],
    ) -> Result<PerPartition, SourceError> {
        let mut out = BTreeMap::new();
        let mut tpl = TopicPartitionList::new();
        for (topic, p, ts) in queries {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*ts))
                .map_err(|e| self.err("timestamp lookup", &e))?;
            out.insert((topic.clone(), *p), None);
        }
        let got = self
            .consumer()
            .offsets_for_times(tpl, self.timeout)
            .map_err(|e| self.err("timestamp lookup", &e))?;
        for e in got.elements() {
            if let Offset::Offset(o) = e.offset()
                && let Some(slot) = out.get_mut(&(e.topic().to_string(), e.partition()))
            {
                *slot = Some(o);
            }
        }
        Ok(out)
    }

    /// Assigns the partition to this client (and takes it away again): only for a
    /// client of its own, never one a reader fetches with.
    fn read_partition(
        &self,
        topic: &str,
        partition: i32,
        (start, end): (i64, i64),
        each: &mut EachRecord<'_>,
    ) -> Result<u64, SourceError> {
        use rdkafka::Message as _;
        let what = format!("reading {topic}/{partition}");
        let deadline = Instant::now() + self.timeout;
        let consumer = self.consumer();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(start))
            .map_err(|e| self.err(&what, &e))?;
        consumer.assign(&tpl).map_err(|e| self.err(&what, &e))?;
        let mut next = start;
        let mut read = 0u64;
        let outcome = loop {
            if next >= end {
                break Ok(read);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(SourceError::Cluster {
                    cluster: self.cluster.to_string(),
                    message: self.with_cause(format!(
                        "{what}: at offset {next} of {start}..{end} after {:?} (the client timeout)",
                        self.timeout
                    )),
                });
            }
            match consumer.poll(left.min(Duration::from_millis(100))) {
                Some(Ok(m)) => {
                    if m.topic() == topic && m.partition() == partition && m.offset() >= next {
                        each(m.offset(), m.key(), m.payload());
                        read += 1;
                        next = m.offset() + 1;
                    }
                }
                Some(Err(e)) => break Err(self.err(&what, &e)),
                None => {
                    // Nothing more to hand out: transaction markers at the end take
                    // offsets that no record is handed out for; the position passes
                    // them.
                    let position = consumer
                        .position()
                        .ok()
                        .and_then(|p| p.find_partition(topic, partition).map(|e| e.offset()));
                    if let Some(Offset::Offset(o)) = position {
                        next = next.max(o);
                    }
                }
            }
        };
        self.unassign(&what);
        outcome
    }

    /// Assigns the partitions to this client: only for a client of its own, as
    /// [`Self::read_partition`].
    fn newest_timestamps(&self, partitions: &[(String, i32)]) -> Result<PerPartition, SourceError> {
        use rdkafka::Message as _;
        let what = "newest record timestamps";
        let mut out: PerPartition = partitions.iter().map(|k| (k.clone(), None)).collect();
        let consumer = self.consumer();
        let mut tpl = TopicPartitionList::new();
        let mut wanted: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for (key, (low, high)) in self.bounds(partitions)? {
            if high > low {
                tpl.add_partition_offset(&key.0, key.1, Offset::Offset(high - 1))
                    .map_err(|e| self.err(what, &e))?;
                wanted.insert(key.clone(), high - 1);
            }
        }
        if wanted.is_empty() {
            return Ok(out);
        }
        consumer.assign(&tpl).map_err(|e| self.err(what, &e))?;
        let deadline = Instant::now() + self.timeout;
        let mut quiet_since = Instant::now();
        while !wanted.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            // A last offset that holds no record (a transaction marker) never comes:
            // after a second with nothing, those partitions have no timestamp.
            if left.is_zero() || quiet_since.elapsed() > Duration::from_secs(1) {
                break;
            }
            match consumer.poll(left.min(Duration::from_millis(100))) {
                Some(Ok(m)) => {
                    let key = (m.topic().to_string(), m.partition());
                    if wanted.get(&key).is_some_and(|at| m.offset() >= *at) {
                        wanted.remove(&key);
                        out.insert(key, m.timestamp().to_millis());
                    }
                    quiet_since = Instant::now();
                }
                Some(Err(e)) => {
                    self.unassign(what);
                    return Err(self.err(what, &e));
                }
                None => {}
            }
        }
        self.unassign(what);
        Ok(out)
    }

    fn rejected(&self) -> bool {
        self.consumer().context().refused_since_answer()
    }

    fn is_read(&self) -> bool {
        self.client.is_reading()
    }

    fn last_error(&self) -> Option<String> {
        self.consumer().context().last_error()
    }
}

/// Whether `e` says a partition's leader is moving or not yet known: worth asking
/// again shortly.
fn leader_moving(e: &SourceError) -> bool {
    e.kafka_kind() == Some(crate::error::KafkaErrorKind::LeaderMoving)
}
