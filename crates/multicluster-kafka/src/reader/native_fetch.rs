//! The native fetch path: a cluster's records fetched with the source's own Kafka
//! connections ([`crate::native::cluster`], on the source's tokio runtime) and
//! decoded on the fetch thread, in place from the fetch answers, a partition at a
//! time ([`PartitionReader`]). Chosen per cluster by `fetch.backend`
//! ([`choose`]); docs/native-fetch.md says what it supports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::offsets::OffsetReset;
use crate::base::properties::{BOOTSTRAP_SERVERS, ClientProperties, FetchBackend, hide_secrets};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::native::api::{
    ConnectOptions, FetchSettings, Mechanism, PartitionOptions, PartitionReader, Pem, Sasl, Tls,
    TlsSettings,
};
use crate::native::cluster::{Arrival, ClusterFetch, ClusterOptions, OutOfRange, PartKey};
use crate::record::RecordBatch;
use crate::split::{KafkaSplit, SplitId};

use super::fetch_path::{FetchPath, Opening, Polled};
use super::staging::{Slot, Staging, copy_into};

/// Properties the native path reads.
const HONOURED: &[&str] = &[
    BOOTSTRAP_SERVERS,
    crate::base::properties::FETCH_BACKEND,
    "security.protocol",
    "client.id",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.message.max.bytes",
    "isolation.level",
    "check.crcs",
    "client.rack",
    "queued.max.messages.kbytes",
    "socket.timeout.ms",
    "receive.message.max.bytes",
    // TLS (`security.protocol=ssl`), with OpenSSL as librdkafka: native/tls.rs.
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    // SASL PLAIN and SCRAM (`sasl_plaintext`, `sasl_ssl`): native/sasl.rs.
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
];

/// The `security.protocol` values the native path speaks.
const PROTOCOLS: [&str; 4] = ["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"];

/// Properties that do not change what a reader fetches: groups and commits (which
/// stay on librdkafka), producers' settings, logging, and librdkafka's own tuning.
const INDIFFERENT: &[&str] = &[
    "group.id",
    "group.instance.id",
    "group.protocol",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "enable.partition.eof",
    "allow.auto.create.topics",
    "log_level",
    "debug",
    "statistics.interval.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "topic.metadata.refresh.interval.ms",
    "metadata.max.age.ms",
    "fetch.queue.backoff.ms",
    "queued.min.messages",
    "fetch.error.backoff.ms",
    "linger.ms",
    "acks",
    "enable.idempotence",
    "message.timeout.ms",
    "compression.codec",
    "compression.type",
];

/// Which path a cluster's fetcher takes: `Ok(true)` for the native one. With
/// `fetch.backend=native` a property the native path does not support is an error
/// naming it; with `auto` such a cluster stays on librdkafka, said once at debug
/// level.
pub(crate) fn choose(opening: &Opening<'_>) -> Result<bool, SourceError> {
    let props = opening.props;
    let backend = props.fetch_backend().map_err(|r| SourceError::Kafka {
        cluster: opening.cluster.to_string(),
        message: r.to_string(),
        code: None,
        retriable: false,
    })?;
    if backend == FetchBackend::Librdkafka {
        return Ok(false);
    }
    let why_not = unsupported(opening);
    match (backend, why_not) {
        (FetchBackend::Native, Some(why)) => Err(SourceError::Kafka {
            cluster: opening.cluster.to_string(),
            message: format!("fetch.backend=native: {why}"),
            code: None,
            retriable: false,
        }),
        (FetchBackend::Native, None) => Ok(true),
        (_, Some(why)) => {
            tracing::debug!(cluster = %opening.cluster, reason = %why, "fetching with librdkafka");
            Ok(false)
        }
        (_, None) => Ok(AUTO_IS_NATIVE),
    }
}

/// What `fetch.backend=auto` takes for a cluster the native path supports: the
/// native path (every reading test of the library and of `mck` passed on it, and
/// again on librdkafka with `MCK_FETCH_BACKEND=librdkafka`).
const AUTO_IS_NATIVE: bool = true;

/// Why the native path cannot fetch for this cluster, if it cannot.
fn unsupported(opening: &Opening<'_>) -> Option<String> {
    let props = opening.props;
    if opening.hooks.is_some() {
        return Some("the program's client hooks are librdkafka's".into());
    }
    if opening.runtime.is_none() {
        return Some("the reader runs outside a tokio runtime".into());
    }
    let protocol = props
        .get("security.protocol")
        .unwrap_or("plaintext")
        .trim()
        .to_ascii_lowercase();
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Some(format!("security.protocol={protocol} is not supported"));
    }
    if protocol.starts_with("sasl") {
        // librdkafka's default mechanism is GSSAPI.
        let mechanism = mechanism(props).unwrap_or("GSSAPI");
        if Mechanism::parse(mechanism).is_none() {
            return Some(format!(
                "sasl.mechanism={} is not supported yet (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
                mechanism.trim()
            ));
        }
    }
    let other = props
        .iter()
        .map(|(k, _)| k)
        .find(|k| !HONOURED.contains(k) && !INDIFFERENT.contains(k));
    other.map(|k| format!("property `{k}` is not supported"))
}

/// A property as a number, or librdkafka's default; a value that is not one is an
/// error naming the key (never the value).
fn number<T: std::str::FromStr>(
    opening: &Opening<'_>,
    keys: &[&str],
    default: T,
) -> Result<T, SourceError> {
    for key in keys {
        if let Some(v) = opening.props.get(key) {
            return v.trim().parse().map_err(|_| SourceError::Kafka {
                cluster: opening.cluster.to_string(),
                message: format!("property `{key}` refused: not a number in range"),
                code: None,
                retriable: false,
            });
        }
    }
    Ok(default)
}

/// The cluster's fetch settings from its properties (librdkafka's names and
/// defaults).
fn options(opening: &Opening<'_>) -> Result<(ClusterOptions, PartitionOptions), SourceError> {
    let props: &ClientProperties = opening.props;
    let bootstrap: Vec<String> = props
        .bootstrap_servers()
        .unwrap_or_default()
        .split(',')
        .map(|s| {
            let s = s.trim();
            s.split_once("://").map_or(s, |(_, a)| a).to_string()
        })
        .filter(|s| !s.is_empty())
        .collect();
    let read_committed = match props.get("isolation.level").map(str::trim) {
        None | Some("read_committed") => true,
        Some("read_uncommitted") => false,
        Some(_) => {
            return Err(SourceError::Kafka {
                cluster: opening.cluster.to_string(),
                message: "property `isolation.level` refused: read_committed or read_uncommitted"
                    .into(),
                code: None,
                retriable: false,
            });
        }
    };
    let check_crcs = matches!(props.get("check.crcs").map(str::trim), Some("true"));
    let max_frame: usize = number(opening, &["receive.message.max.bytes"], 100_000_000)?;
    let fetch = FetchSettings {
        max_wait_ms: number(opening, &["fetch.wait.max.ms"], 500)?,
        min_bytes: number(opening, &["fetch.min.bytes"], 1)?,
        max_bytes: number(opening, &["fetch.max.bytes"], 52_428_800)?,
        read_committed,
        // A leader may point a client of a known rack to a replica in it
        // (KIP-392), which the cluster's broker tasks then follow.
        rack: props.get("client.rack").unwrap_or("").trim().to_string(),
    };
    let timeout_ms: u64 = number(opening, &["socket.timeout.ms"], 60_000)?;
    let tls = tls(opening)?;
    let connect = ConnectOptions {
        tls,
        sasl: sasl(opening)?,
        client_id: props.get("client.id").unwrap_or("rdkafka").to_string(),
        // A fetch waits up to fetch.wait.max.ms before the broker answers.
        timeout: Duration::from_millis(timeout_ms)
            + Duration::from_millis(u64::try_from(fetch.max_wait_ms).unwrap_or(0)),
        max_frame_size: max_frame.max(fetch.max_bytes.max(0) as usize + (1 << 20)),
    };
    let budget_kb: usize = number(opening, &["queued.max.messages.kbytes"], 65_536)?;
    let out_of_range = match opening.policy.out_of_range {
        OffsetReset::Earliest => OutOfRange::Earliest,
        OffsetReset::Latest => OutOfRange::Latest,
        _ => OutOfRange::Fail,
    };
    let cluster = ClusterOptions {
        cluster: opening.cluster.clone(),
        bootstrap,
        connect,
        partition_max_bytes: number(
            opening,
            &["max.partition.fetch.bytes", "fetch.message.max.bytes"],
            1_048_576,
        )?,
        fetch,
        budget: budget_kb.saturating_mul(1024).max(1 << 20),
        out_of_range,
    };
    let partition = PartitionOptions {
        read_committed,
        check_crcs,
        max_decompressed: max_frame.max(64 << 20),
    };
    Ok((cluster, partition))
}

/// The cluster's TLS from its `ssl.*` properties (librdkafka's names and defaults),
/// with its files read; none unless `security.protocol=ssl`.
fn tls(opening: &Opening<'_>) -> Result<Option<Tls>, SourceError> {
    let props = opening.props;
    let ssl = props.get("security.protocol").is_some_and(|p| {
        let p = p.trim();
        p.eq_ignore_ascii_case("ssl") || p.eq_ignore_ascii_case("sasl_ssl")
    });
    if !ssl {
        return Ok(None);
    }
    let pem = |file: &str, text: &str| {
        props
            .get(text)
            .map(|t| Pem::Text(t.to_string()))
            .or_else(|| props.get(file).map(|f| Pem::File(f.trim().into())))
    };
    let refused = |property: &str, expected: &str| SourceError::Kafka {
        cluster: opening.cluster.to_string(),
        message: format!("property `{property}` refused: {expected}"),
        code: None,
        retriable: false,
    };
    // A property with two values (case-insensitive; unset: the first, librdkafka's
    // default) as a bool.
    let either = |property: &str, yes: &str, no: &str| match props
        .get(property)
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => Ok(true),
        Some(v) if v == yes => Ok(true),
        Some(v) if v == no => Ok(false),
        Some(_) => Err(refused(property, &format!("{yes} or {no}"))),
    };
    let verify_hostname = either("ssl.endpoint.identification.algorithm", "https", "none")?;
    let verify_certificate = either("enable.ssl.certificate.verification", "true", "false")?;
    let settings = TlsSettings {
        // librdkafka's `probe` looks for the system's CAs: OpenSSL's defaults.
        ca: pem("ssl.ca.location", "ssl.ca.pem")
            .filter(|p| !matches!(p, Pem::File(f) if f.as_os_str() == "probe")),
        certificate: pem("ssl.certificate.location", "ssl.certificate.pem"),
        key: pem("ssl.key.location", "ssl.key.pem"),
        key_password: props.get("ssl.key.password").map(str::to_string),
        verify_hostname,
        verify_certificate,
    };
    // A path given by reference (`${env:…}`, `${file:…}`) is as secret as its
    // value: hidden like librdkafka's words about it.
    Tls::new(&settings)
        .map(Some)
        .map_err(|e| SourceError::Kafka {
            cluster: opening.cluster.to_string(),
            message: hide_secrets(&e.to_string(), &props.secret_texts()).into_owned(),
            code: None,
            retriable: false,
        })
}

/// `sasl.mechanism` (or its other spelling `sasl.mechanisms`), if set.
fn mechanism(props: &ClientProperties) -> Option<&str> {
    props
        .get("sasl.mechanism")
        .or_else(|| props.get("sasl.mechanisms"))
}

/// The cluster's SASL credentials; none unless `security.protocol` is `sasl_*`.
fn sasl(opening: &Opening<'_>) -> Result<Option<Sasl>, SourceError> {
    let props = opening.props;
    let sasl = props
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl"));
    if !sasl {
        return Ok(None);
    }
    let refused = |property: &str, why: &str| SourceError::Kafka {
        cluster: opening.cluster.to_string(),
        message: format!("property `{property}` refused: {why}"),
        code: None,
        retriable: false,
    };
    let mechanism = mechanism(props)
        .and_then(Mechanism::parse)
        .ok_or_else(|| refused("sasl.mechanism", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let username = props
        .get("sasl.username")
        .ok_or_else(|| refused("sasl.username", "not set"))?;
    let password = props
        .get("sasl.password")
        .ok_or_else(|| refused("sasl.password", "not set"))?;
    Ok(Some(Sasl {
        mechanism,
        username: username.to_string(),
        password: password.to_string(),
    }))
}

/// A partition as the fetch thread reads it.
struct Reading {
    reader: PartitionReader,
    generation: u64,
    stop: Option<i64>,
}

/// The native path of one cluster for one fetcher.
pub(crate) struct NativeFetch {
    cluster: Arc<str>,
    fetch: ClusterFetch,
    parts: HashMap<PartKey, Reading>,
    topics: HashMap<String, Arc<str>>,
    options: PartitionOptions,
    include_headers: bool,
    staging: Staging,
    slots: Vec<Slot>,
    /// Splits whose log was truncated since the last poll, with the offset fetched
    /// up to then (for [`Polled::truncated`]).
    truncated: Vec<(SplitId, i64)>,
    last_lag_report: Instant,
}

/// How often per-split lag is reported.
const LAG_REPORT_INTERVAL: Duration = Duration::from_secs(1);

impl NativeFetch {
    pub fn open(opening: Opening<'_>) -> Result<Self, SourceError> {
        let (cluster_options, options) = options(&opening)?;
        if cluster_options.bootstrap.is_empty() {
            return Err(SourceError::Kafka {
                cluster: opening.cluster.to_string(),
                message: "no bootstrap.servers".into(),
                code: None,
                retriable: false,
            });
        }
        let runtime = opening
            .runtime
            .clone()
            .ok_or_else(|| SourceError::Cluster {
                cluster: opening.cluster.to_string(),
                message: "the native fetch path needs a tokio runtime".into(),
            })?;
        let wake = opening.wake.clone();
        let fetch = ClusterFetch::start(&runtime, cluster_options, Box::new(move || wake.wake()));
        metrics::counter!(crate::metrics::CONSUMERS_CREATED, "cluster" => opening.cluster.to_string())
            .increment(1);
        tracing::debug!(cluster = %opening.cluster, "fetching natively");
        Ok(Self {
            cluster: opening.cluster,
            fetch,
            parts: HashMap::new(),
            topics: HashMap::new(),
            options,
            include_headers: opening.include_headers,
            staging: Staging::default(),
            slots: Vec::new(),
            truncated: Vec::new(),
            last_lag_report: Instant::now()
                .checked_sub(LAG_REPORT_INTERVAL)
                .unwrap_or_else(Instant::now),
        })
    }

    fn topic(&mut self, name: &str) -> Arc<str> {
        if let Some(t) = self.topics.get(name) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(name);
        self.topics.insert(name.to_string(), t.clone());
        t
    }

    fn split_id(&self, key: &PartKey) -> SplitId {
        SplitId {
            cluster: self.cluster.clone(),
            topic: key.0.clone(),
            partition: key.1,
        }
    }

    /// Moves a partition's reader to `to` (its position was reset, or its log
    /// truncated) and counts the reset. Returns the partition's stop, or `None` when
    /// the arrival is of an assignment it no longer has.
    fn reset_to(&mut self, key: &PartKey, generation: u64, to: i64) -> Option<Option<i64>> {
        let part = self.parts.get_mut(key)?;
        if part.generation != generation {
            return None;
        }
        part.reader.seek(to);
        metrics::counter!(
            crate::metrics::OFFSET_RESETS,
            "cluster" => self.cluster.to_string(),
            "topic" => key.0.to_string()
        )
        .increment(1);
        Some(part.stop)
    }

    /// Takes one arrival's records into `slots` (keys and values into `data`);
    /// returns a fatal error, if the arrival is one, and whether the split reached
    /// its stop.
    fn absorb(
        &mut self,
        arrival: Arrival,
        out_topics: &mut dyn FnMut(&Arc<str>) -> u32,
        data: &mut Vec<u8>,
        finished: &mut Vec<PartKey>,
    ) -> Option<SourceError> {
        match arrival {
            Arrival::Records {
                key,
                generation,
                answer,
            } => {
                let part = self.parts.get_mut(&key)?;
                if part.generation != generation {
                    return None;
                }
                let topic = out_topics(&key.0);
                let stop = part.stop;
                let include_headers = self.include_headers;
                let slots = &mut self.slots;
                let mut bad_header = None;
                let absorbed = part.reader.absorb(&answer, |r| {
                    if stop.is_some_and(|s| r.offset >= s) {
                        return;
                    }
                    let hash = match r.hash() {
                        Ok(h) => h,
                        Err(e) => {
                            bad_header.get_or_insert((r.offset, e));
                            return;
                        }
                    };
                    let headers = if include_headers {
                        r.headers()
                            .filter_map(Result::ok)
                            .map(|(k, v)| {
                                (
                                    String::from_utf8_lossy(k).into_owned(),
                                    v.map(<[u8]>::to_vec),
                                )
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    slots.push(Slot {
                        topic,
                        partition: key.1,
                        offset: r.offset,
                        timestamp: (r.timestamp >= 0).then_some(r.timestamp),
                        key: r.key.map(|k| copy_into(data, k)),
                        value: r.value.map(|v| copy_into(data, v)),
                        headers,
                        hash,
                    });
                });
                let corrupt = match (absorbed, bad_header) {
                    (Err(issue), _) => Some(issue.to_string()),
                    (Ok(_), Some((offset, e))) => Some(format!("record at offset {offset}: {e}")),
                    (Ok(_), None) => None,
                };
                if part.stop.is_some_and(|s| part.reader.next_offset() >= s) {
                    finished.push(key.clone());
                }
                corrupt.map(|what| {
                    // Read again from where the reader stands: nothing after the
                    // corruption is handed out before it.
                    let at = part.reader.next_offset();
                    part.generation = self.fetch.seek(&key, at);
                    SourceError::Cluster {
                        cluster: self.cluster.to_string(),
                        message: format!("{}/{}: {what}", key.0, key.1),
                    }
                })
            }
            Arrival::Reset {
                key,
                generation,
                from,
                to,
                log_start,
                log_end,
            } => {
                let stop = self.reset_to(&key, generation, to)?;
                let split = format!("{}/{}/{}", self.cluster, key.0, key.1);
                tracing::warn!(
                    split = %split,
                    offset = from,
                    log_start,
                    log_end,
                    to,
                    "position outside the log (records deleted, or the topic re-created); resetting as the out-of-range policy says"
                );
                if stop.is_some_and(|s| to >= s) {
                    finished.push(key);
                }
                None
            }
            Arrival::Truncated {
                key,
                generation,
                from,
                to,
                epoch,
            } => {
                self.reset_to(&key, generation, to)?;
                let id = self.split_id(&key);
                tracing::warn!(
                    split = %id,
                    offset = from,
                    to,
                    epoch,
                    "log truncated below the position (an unclean leader election?): the records fetched from `to` on are no longer in the log; reading on from there"
                );
                self.truncated.push((id, from));
                None
            }
            Arrival::OutOfRange {
                key,
                generation,
                offset,
                log_start,
                log_end,
            } => {
                let part = self.parts.get(&key)?;
                if part.generation != generation {
                    return None;
                }
                Some(SourceError::OffsetOutOfRange {
                    split: format!("{}/{}/{}", self.cluster, key.0, key.1),
                    offset,
                    log_start,
                    log_end,
                })
            }
        }
    }
}

impl<D: Deserializer> FetchPath<D> for NativeFetch {
    fn add(&mut self, splits: Vec<KafkaSplit>) -> Result<Vec<SplitId>, SourceError> {
        let mut done = Vec::new();
        for s in splits {
            if s.is_finished() {
                done.push(s.id);
                continue;
            }
            let key = (self.topic(&s.id.topic), s.id.partition);
            let generation = self.fetch.add(key.clone(), s.next_offset);
            self.parts.insert(
                key,
                Reading {
                    reader: PartitionReader::new(s.next_offset, self.options),
                    generation,
                    stop: s.stop_offset,
                },
            );
        }
        Ok(done)
    }

    fn remove(&mut self, ids: &[SplitId]) {
        let keys: Vec<PartKey> = ids
            .iter()
            .map(|id| (self.topic(&id.topic), id.partition))
            .collect();
        for key in &keys {
            self.parts.remove(key);
        }
        self.fetch.remove(&keys);
        self.staging.remove(ids);
    }

    fn pause(&mut self, ids: &[SplitId], paused: bool) {
        let keys: Vec<PartKey> = ids
            .iter()
            .map(|id| (self.topic(&id.topic), id.partition))
            .collect();
        self.fetch.pause(&keys, paused);
    }

    fn poll(
        &mut self,
        deserializer: &D,
        max: usize,
        out: &mut RecordBatch<D::Value>,
    ) -> Result<Polled, SourceError> {
        let mut polled = Polled::default();
        if self
            .staging
            .take_leftover(&self.cluster, deserializer, max, out, &mut polled)
        {
            return Ok(polled);
        }
        if let Some(e) = self.staging.take_failed() {
            return Err(e);
        }
        let lag_due = self.last_lag_report.elapsed() >= LAG_REPORT_INTERVAL;
        let mut data = self.staging.buffer();
        self.slots.clear();
        let mut finished: Vec<PartKey> = Vec::new();
        let mut fatal = None;
        // Whole answers, until they give `max` records (those past it wait for the
        // next poll).
        while self.slots.len() < max {
            let Some(arrival) = self.fetch.take() else {
                break;
            };
            let mut index = |t: &Arc<str>| out.topic_index(t);
            if let Some(e) = self.absorb(arrival, &mut index, &mut data, &mut finished) {
                fatal = Some(e);
                break;
            }
        }
        if !self.slots.is_empty() {
            self.fetch.records_flow();
        }
        let mut slots = std::mem::take(&mut self.slots);
        self.staging.fill(
            &self.cluster,
            deserializer,
            max,
            data,
            &mut slots,
            out,
            &mut polled,
        );
        self.slots = slots;
        if lag_due {
            self.last_lag_report = Instant::now();
            for (key, high) in self.fetch.high_watermarks() {
                if self.parts.contains_key(&key) {
                    polled.high_watermarks.push((key.0, key.1, high));
                }
            }
        }
        polled.truncated = std::mem::take(&mut self.truncated);
        if !finished.is_empty() {
            finished.sort();
            finished.dedup();
            for key in &finished {
                self.parts.remove(key);
            }
            self.fetch.remove(&finished);
            let ids: Vec<SplitId> = finished.iter().map(|k| self.split_id(k)).collect();
            polled.finished = self.staging.defer_finished(ids);
        }
        self.staging.answer(polled, fatal)
    }

    fn close(self: Box<Self>, closed: std::sync::mpsc::Sender<()>) {
        // The tasks stop and their connections close as the fetch is dropped; nothing
        // here waits for a broker.
        drop(self);
        drop(closed);
    }
}
