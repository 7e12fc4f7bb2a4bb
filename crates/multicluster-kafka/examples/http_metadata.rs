//! A metadata service of your own: the streams come from an HTTP endpoint that answers
//! with a metadata document in JSON (the layout of our metadata files, see
//! `docs/metadata-file.md`), polled in the background.
//!
//! [`HttpMetadataService`] is the part to copy into a program. It
//!
//! - reads the endpoint once at start (failing when it cannot), then every
//!   `poll_interval` on a task of its own;
//! - parses the answer with [`parse_metadata`], so a bad document gets the same
//!   one-line errors with line and column as a bad file, and `${env:NAME}` references
//!   resolve from this process's environment (a `${file:PATH}` must be absolute);
//! - keeps the last good metadata when the endpoint fails or answers a bad document,
//!   logging each new failure once, and answers with the failure
//!   ([`MetadataError::Service`], retriable for a timeout, a refused connection, a
//!   5xx, 408 or 429) only once the endpoint has failed for `max_staleness`: the source
//!   then reads on with its own last good copy and, past its
//!   `metadata_failure_threshold`, its readers report the error;
//! - ticks [`KafkaMetadataService::changes`] only when the parsed metadata changed, so
//!   the source applies a change at once, not at its next discovery;
//! - stops its task on [`KafkaMetadataService::close`] (the source closes its service
//!   when it ends) or when dropped.
//!
//! The same shape fits any other service (a Kubernetes custom resource, a
//! configuration database): replace `fetch`.
//!
//! # Running it
//!
//! Self-contained, nothing to install or start:
//!
//! ```sh
//! cargo run -p multicluster-kafka --example http_metadata
//! ```
//!
//! It starts two in-process librdkafka mock clusters, `east` and `west`, each with a
//! topic `orders` of three records, serves the metadata itself on a free loopback
//! port, and follows the stream `orders`, printing each record. The endpoint first
//! names `east` only; after 3 s it answers HTTP 503, after 6 s a document with a
//! mistake, after 9 s `east` and `west`: the first two keep `east` in force, the third
//! adds `west`, whose records follow. Ctrl-C ends it.
//!
//! With your own endpoint and cluster instead, set `MCK_METADATA_URL` (and
//! `MCK_STREAM`, default `orders`). For example, in a folder holding a
//! `streams.json` such as
//!
//! ```json
//! {
//!   "clusters": { "east": { "bootstrapServers": "localhost:9092" } },
//!   "streams": { "orders": { "clusters": { "east": { "topics": ["orders"] } } } }
//! }
//! ```
//!
//! run `python3 -m http.server 8000`, then
//!
//! ```sh
//! MCK_METADATA_URL=http://127.0.0.1:8000/streams.json \
//!   cargo run -p multicluster-kafka --example http_metadata
//! ```
//!
//! and edit `streams.json` while it runs. `RUST_LOG` changes what is logged (default
//! the service's lines and the source's change lines). The client speaks plain HTTP;
//! for https enable ureq's `rustls` feature. The URL names the service in errors and
//! logs: give credentials in a header, never in the URL.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mck_testkit::{MockKafkaCluster, TestCluster, TestRecord};
use multicluster_kafka::metadata::MetadataError;
use multicluster_kafka::metadata::file::parse_metadata;
use multicluster_kafka::prelude::*;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The largest answer read.
const MAX_ANSWER: u64 = 16 << 20;
/// How long one request may take, connecting and reading included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Stream metadata from an HTTP endpoint, polled in the background (see the top of
/// this file).
pub struct HttpMetadataService {
    shared: Arc<Shared>,
    poller: Mutex<Option<JoinHandle<()>>>,
}

/// What the service and its polling task share.
struct Shared {
    url: String,
    max_staleness: Duration,
    state: RwLock<State>,
    /// Bumped on every change of the metadata.
    changes: watch::Sender<u64>,
    closed: AtomicBool,
}

struct State {
    /// The last good metadata.
    streams: BTreeMap<String, KafkaStream>,
    /// The failure of the last poll, if it failed.
    last_error: Option<MetadataError>,
    /// When the current run of failures began.
    failing_since: Option<Instant>,
}

impl HttpMetadataService {
    /// Reads `url` once (failing when it does not answer a valid document), then
    /// again every `poll_interval`. Calls answer with the last good metadata, or with
    /// the endpoint's error once it has failed for `max_staleness`.
    pub async fn start(
        url: impl Into<String>,
        poll_interval: Duration,
        max_staleness: Duration,
    ) -> Result<Self, MetadataError> {
        let url = url.into();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            // A status other than 2xx is an answer to classify, not a transport error.
            .http_status_as_error(false)
            .build()
            .into();
        let streams = fetch_in_background(&agent, &url).await?;
        let shared = Arc::new(Shared {
            url,
            max_staleness,
            state: RwLock::new(State {
                streams,
                last_error: None,
                failing_since: None,
            }),
            changes: watch::Sender::new(0),
            closed: AtomicBool::new(false),
        });
        let poller = tokio::spawn(poll(agent, shared.clone(), poll_interval));
        Ok(Self {
            shared,
            poller: Mutex::new(Some(poller)),
        })
    }

    /// Why the endpoint's latest answer is not in force, if it is not.
    pub fn last_error(&self) -> Option<MetadataError> {
        self.shared.read().last_error.clone()
    }
}

/// Reads the endpoint every `interval` until the task is aborted.
async fn poll(agent: ureq::Agent, shared: Arc<Shared>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // The first tick is at once, and `start` has just read.
    loop {
        ticker.tick().await;
        let outcome = fetch_in_background(&agent, &shared.url).await;
        shared.apply(outcome);
    }
}

/// Runs the blocking [`fetch`] off the async workers.
async fn fetch_in_background(
    agent: &ureq::Agent,
    url: &str,
) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    let (agent, owned_url) = (agent.clone(), url.to_string());
    tokio::task::spawn_blocking(move || fetch(&agent, &owned_url))
        .await
        .unwrap_or_else(|e| Err(service_error(url, format!("the request failed: {e}"), true)))
}

/// One request: the parsed metadata, or why there is none.
fn fetch(agent: &ureq::Agent, url: &str) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    let mut response = agent
        .get(url)
        .header("accept", "application/json")
        .call()
        .map_err(|e| {
            // A malformed URL stays malformed; anything else (refused, timed out, name
            // not found) may pass.
            let retriable = !matches!(e, ureq::Error::BadUri(_) | ureq::Error::Http(_));
            service_error(url, e.to_string(), retriable)
        })?;
    let status = response.status();
    if !status.is_success() {
        // A server error, a timeout or throttling may pass; 404, 401 or 403 need
        // someone to act.
        let retriable = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
        let message = format!("answered HTTP {status}");
        return Err(service_error(url, message, retriable));
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_vec()
        .map_err(|e| {
            let retriable = !matches!(e, ureq::Error::BodyExceedsLimit(_));
            service_error(url, format!("cannot read the answer: {e}"), retriable)
        })?;
    let text = std::str::from_utf8(&body)
        .map_err(|e| service_error(url, format!("the answer is not UTF-8: {e}"), false))?;
    // The URL stands in for the file name in errors (`http://…/streams.json:4:7: …`).
    parse_metadata(text, Path::new(url))
}

fn service_error(url: &str, message: String, retriable: bool) -> MetadataError {
    MetadataError::Service {
        service: url.to_string(),
        message,
        retriable,
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the outcome of one poll.
    fn apply(&self, outcome: Result<BTreeMap<String, KafkaStream>, MetadataError>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(streams) => {
                if state.last_error.take().is_some() {
                    tracing::info!(url = %self.url, "metadata endpoint answers again");
                }
                state.failing_since = None;
                // Compared parsed, so a reformatted document is no change.
                if state.streams != streams {
                    let count = streams.len();
                    state.streams = streams;
                    drop(state);
                    self.changes.send_modify(|g| *g += 1);
                    tracing::info!(url = %self.url, streams = count, "metadata changed");
                }
            }
            Err(error) => {
                if state.last_error.as_ref() != Some(&error) {
                    tracing::warn!(%error, "metadata endpoint failed; keeping the last good metadata");
                }
                state.failing_since.get_or_insert_with(Instant::now);
                state.last_error = Some(error);
            }
        }
    }

    /// The state to answer from: the last good metadata, unless the endpoint has
    /// failed for `max_staleness` already.
    fn answer(&self) -> Result<std::sync::RwLockReadGuard<'_, State>, MetadataError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(MetadataError::Closed);
        }
        let state = self.read();
        match (&state.last_error, state.failing_since) {
            (Some(error), Some(since)) if since.elapsed() >= self.max_staleness => {
                Err(error.clone())
            }
            _ => Ok(state),
        }
    }
}

#[async_trait]
impl KafkaMetadataService for HttpMetadataService {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        let state = self.shared.answer()?;
        Ok(stream_ids
            .iter()
            .filter_map(|id| state.streams.get(id).map(|s| (id.clone(), s.clone())))
            .collect())
    }

    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        Ok(self.shared.answer()?.streams.clone())
    }

    async fn close(&self) -> Result<(), MetadataError> {
        self.shared.closed.store(true, Ordering::Release);
        let poller = self
            .poller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(poller) = poller {
            // A request under way finishes on its own thread, within REQUEST_TIMEOUT.
            poller.abort();
            let _ = poller.await;
        }
        Ok(())
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.shared.changes.subscribe())
    }
}

impl Drop for HttpMetadataService {
    fn drop(&mut self) {
        let poller = self
            .poller
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(poller) = poller.take() {
            poller.abort();
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let filter = std::env::var("RUST_LOG")
        .unwrap_or_else(|_| "warn,http_metadata=info,multicluster_kafka::changes=info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_target(false)
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();

    let stream = std::env::var("MCK_STREAM").unwrap_or_else(|_| "orders".into());
    // `demo` is kept to the end: the mock clusters stop when dropped.
    let (url, demo) = match std::env::var("MCK_METADATA_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let (url, clusters) = demo_endpoint().await?;
            (url, Some(clusters))
        }
    };

    let service =
        HttpMetadataService::start(&url, Duration::from_secs(1), Duration::from_secs(60)).await?;
    println!("metadata from {url}; following stream `{stream}` (Ctrl-C ends)");
    let source = MultiClusterKafkaSource::builder()
        .metadata_service(service)
        .stream_ids([stream])
        .deserializer(ValueOnly::<String>::utf8())
        .starting_offsets(StartingOffsets::Earliest)
        .build()?;
    let mut reader = source.open().await?;

    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            record = reader.next() => match record {
                Some(Ok(r)) => println!("{:>4} {}/{}@{}: {}", r.cluster, r.topic, r.partition, r.offset, r.value),
                Some(Err(e)) => eprintln!("error: {e}"),
                None => break,
            },
            _ = &mut ctrl_c => break,
        }
    }
    println!("closing");
    reader.close().await;
    drop(demo);
    Ok(())
}

/// Starts the mock clusters and the endpoint of the self-contained run, and the
/// script of what the endpoint answers. Returns the endpoint's URL and the clusters.
async fn demo_endpoint() -> Result<(String, [MockKafkaCluster; 2]), Box<dyn Error>> {
    let east = MockKafkaCluster::start("east", 1)?;
    let west = MockKafkaCluster::start("west", 1)?;
    for (cluster, region) in [(&east, "east"), (&west, "west")] {
        cluster.create_topic("orders", 1)?;
        let records: Vec<TestRecord> = (0..3)
            .map(|i| TestRecord::value(format!("order {i} from {region}")))
            .collect();
        cluster.produce("orders", &records)?;
    }
    let east_only = document(&[("east", &east)]);
    let both = document(&[("east", &east), ("west", &west)]);
    // `topic` for `topics`: rejected with its line and column.
    let mistake = both.replacen("\"topics\"", "\"topic\"", 1);

    let answer = Arc::new(Mutex::new((200, east_only)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/streams.json", listener.local_addr()?);
    tokio::spawn(serve(listener, answer.clone()));
    tokio::spawn(async move {
        let steps = [
            (503, String::new(), "answers HTTP 503"),
            (200, mistake, "answers a document with a mistake"),
            (200, both, "names east and west"),
        ];
        for (status, body, what) in steps {
            tokio::time::sleep(Duration::from_secs(3)).await;
            println!("-- the endpoint now {what}");
            *answer.lock().unwrap_or_else(PoisonError::into_inner) = (status, body);
        }
    });
    Ok((url, [east, west]))
}

/// A metadata document in JSON: topic `orders` on each of these clusters.
fn document(clusters: &[(&str, &MockKafkaCluster)]) -> String {
    let mut defined = serde_json::Map::new();
    let mut read = serde_json::Map::new();
    for (id, cluster) in clusters {
        let bootstrap = cluster.bootstrap_servers();
        defined.insert(
            id.to_string(),
            serde_json::json!({ "bootstrapServers": bootstrap }),
        );
        read.insert(id.to_string(), serde_json::json!({ "topics": ["orders"] }));
    }
    let doc = serde_json::json!({
        "clusters": defined,
        "streams": { "orders": { "clusters": read } },
    });
    serde_json::to_string_pretty(&doc).expect("a JSON value serialises")
}

/// Serves `answer` (a status and a JSON body) to every request.
async fn serve(listener: tokio::net::TcpListener, answer: Arc<Mutex<(u16, String)>>) {
    use http_body_util::Full;
    use hyper::body::Bytes;

    while let Ok((connection, _)) = listener.accept().await {
        let answer = answer.clone();
        let respond = hyper::service::service_fn(move |_request| {
            let (status, body) = answer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            async move {
                hyper::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
            }
        });
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(connection), respond),
        );
    }
}
