//! Helpers shared by the library's integration tests (`use crate::support;` in each
//! module).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mck_testkit::{
    KafkaCluster, Listener, Seen, TestCluster, TestRecord, assert_each_once,
    assert_in_partition_order, shared_cluster,
};
use multicluster_kafka::hooks::OAuthToken;
use multicluster_kafka::metadata::KafkaMetadataService;
use multicluster_kafka::prelude::*;
use tokio::sync::oneshot;

/// How long a read may wait for records: a guard against hangs, not a timing
/// assertion.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Reads `n` records into `got` within [`PATIENCE`]; an error, the end of the stream
/// or running out of patience fails the test.
pub async fn read_records(
    source: &mut KafkaSourceStream<Utf8>,
    n: usize,
    got: &mut Vec<Record<String>>,
) {
    let done = tokio::time::timeout(PATIENCE, async {
        for _ in 0..n {
            let r = source.next().await.expect("the stream continues");
            got.push(r.expect("a record"));
        }
    })
    .await;
    assert!(done.is_ok(), "gave up after {} records", got.len());
}

/// The shared cluster `id`, started on first use.
/// The wall clock in milliseconds since the epoch (as record timestamps are).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64
}

pub fn cluster(id: &str) -> &'static KafkaCluster {
    shared_cluster(id).unwrap_or_else(|e| panic!("cluster {id} starts: {e:?}"))
}

/// The shared cluster `east`.
pub fn east() -> &'static KafkaCluster {
    cluster("east")
}

/// The shared cluster `west`.
pub fn west() -> &'static KafkaCluster {
    cluster("west")
}

/// Records with the values `<prefix>0` to `<prefix><n - 1>`, without keys or
/// partitions.
pub fn values(prefix: &str, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::value(format!("{prefix}{i}")))
        .collect()
}

/// A stream `id` reading `topic` on the shared clusters `east` and `west`.
pub fn east_and_west(id: &str, topic: &str) -> KafkaStream {
    KafkaStream::new(id)
        .with_cluster("east", meta(east(), &[topic]))
        .with_cluster("west", meta(west(), &[topic]))
}

/// A stream `id` over these clusters.
pub fn stream(id: &str, clusters: Vec<(&str, ClusterMetadata)>) -> KafkaStream {
    clusters
        .into_iter()
        .fold(KafkaStream::new(id), |s, (c, m)| s.with_cluster(c, m))
}

/// Where a record came from, and its value.
pub fn seen_of(r: Record<String>) -> Seen {
    (
        r.cluster.to_string(),
        r.topic.to_string(),
        r.partition,
        r.offset,
        r.value,
    )
}

/// Where a record of a batch came from, and its value.
pub fn seen_ref(r: &multicluster_kafka::record::RecordRef<'_, String>) -> Seen {
    (
        r.cluster.to_string(),
        r.topic.to_string(),
        r.partition,
        r.offset,
        r.value.clone(),
    )
}

/// Reads a bounded stream to its end.
pub async fn drain<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
) -> Vec<Seen> {
    let mut out = Vec::new();
    let done = tokio::time::timeout(PATIENCE, async {
        while let Some(r) = stream.next().await {
            out.push(seen_of(r.expect("record")));
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "the bounded read did not end; got {} records",
        out.len()
    );
    out
}

/// Reads exactly `n` records.
pub async fn take<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
    n: usize,
) -> Vec<Seen> {
    let mut out = Vec::new();
    read_until(stream, &mut out, |s| s.len() >= n).await;
    out
}

/// Reads into `seen` until `done` holds.
pub async fn read_until<D: Deserializer<Value = String>>(
    stream: &mut KafkaSourceStream<D>,
    seen: &mut Vec<Seen>,
    mut done: impl FnMut(&Vec<Seen>) -> bool,
) {
    let ok = tokio::time::timeout(PATIENCE, async {
        while !done(seen) {
            let r = stream.next().await.expect("stream continues");
            seen.push(seen_of(r.expect("record")));
        }
    })
    .await;
    assert!(ok.is_ok(), "gave up after {} records", seen.len());
}

/// The properties of `c`'s OAUTHBEARER listener without librdkafka's own unsecured
/// token maker, so that a program's token provider has to give the tokens.
pub fn oauth_without_token_maker(c: &KafkaCluster) -> Vec<(String, String)> {
    c.listener_properties(Listener::OauthSsl)
        .into_iter()
        .filter(|(k, _)| {
            k != "enable.sasl.oauthbearer.unsecure.jwt" && k != "sasl.oauthbearer.config"
        })
        .collect()
}

/// An unsecured JWS token (`"alg":"none"`, what the broker's unsecured validator
/// accepts) for `principal`, valid from now for `valid_for`.
pub fn unsecured_token(
    principal: &str,
    valid_for: Duration,
) -> Result<OAuthToken, Box<dyn std::error::Error>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let expires = now + valid_for.as_secs();
    let claims = format!(r#"{{"sub":"{principal}","iat":{now},"exp":{expires}}}"#);
    Ok(OAuthToken {
        token: format!(
            "{}.{}.",
            base64url(br#"{"alg":"none"}"#),
            base64url(claims.as_bytes())
        ),
        principal_name: principal.to_string(),
        lifetime_ms: (expires * 1000) as i64,
    })
}

/// Base64url without padding (RFC 4648 §5).
pub fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// What to read on the cluster at `bootstrap`: these topics, nothing else set.
pub fn meta_at(bootstrap: impl Into<String>, topics: &[&str]) -> ClusterMetadata {
    ClusterMetadata::builder(bootstrap)
        .topics(topics.iter().copied())
        .build()
        .unwrap()
}

/// What to read on cluster `c`: these topics, nothing else set.
pub fn meta(c: &dyn TestCluster, topics: &[&str]) -> ClusterMetadata {
    meta_at(c.bootstrap_servers(), topics)
}

/// A source builder subscribed to the one stream `stream`, which a static metadata
/// service holds; values as UTF-8.
pub fn source_over(stream: KafkaStream) -> SourceBuilder<Utf8> {
    let id = stream.stream_id.clone();
    MultiClusterKafkaSource::builder()
        .metadata_service(StaticMetadataService::new([stream]).unwrap())
        .stream_ids([id])
        .deserializer(Utf8)
}

/// A source builder subscribed to stream `s` of `svc`, a service the test keeps so as
/// to change the metadata while the source reads; values as UTF-8.
pub fn shared_source(svc: Arc<dyn KafkaMetadataService>) -> SourceBuilder<Utf8> {
    MultiClusterKafkaSource::builder()
        .shared_metadata_service(svc)
        .stream_ids(["s"])
        .deserializer(Utf8)
}

/// A source builder over one stream `s` with one cluster `c` (at `bootstrap`) and
/// one topic, values as UTF-8.
pub fn one_topic_source(bootstrap: &str, topic: &str) -> SourceBuilder<Utf8> {
    source_over(KafkaStream::new("s").with_cluster("c", meta_at(bootstrap, &[topic])))
}

/// A record [`Reading`] got, and when.
#[derive(Clone, Debug)]
pub struct Got {
    pub cluster: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
    pub at: Instant,
}

/// An unbounded source's records as they come, read by a task until told to stop.
/// Cluster and metadata errors are kept as reports (the source goes on, as `mck
/// consume` does); any other error or the end of the stream ends the task.
pub struct Reading {
    pub got: Arc<Mutex<Vec<Got>>>,
    pub errors: Arc<Mutex<Vec<String>>>,
    pub stop: Option<oneshot::Sender<()>>,
    /// Gives back the stream, and why it ended unless told to stop.
    pub task: tokio::task::JoinHandle<(KafkaSourceStream<Utf8>, Option<String>)>,
}

impl Reading {
    pub fn start(mut stream: KafkaSourceStream<Utf8>) -> Reading {
        let got = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = {
            let (got, errors) = (got.clone(), errors.clone());
            tokio::spawn(async move {
                let end = loop {
                    tokio::select! {
                        biased;
                        _ = &mut stopped => break None,
                        r = stream.next() => match r {
                            Some(Ok(r)) => got.lock().unwrap().push(Got {
                                cluster: r.cluster.to_string(),
                                topic: r.topic.to_string(),
                                partition: r.partition,
                                offset: r.offset,
                                value: r.value,
                                at: Instant::now(),
                            }),
                            Some(Err(
                                e @ (SourceError::Cluster { .. }
                                | SourceError::Kafka { .. }
                                | SourceError::Metadata(_)),
                            )) => errors.lock().unwrap().push(e.to_string()),
                            Some(Err(e)) => break Some(format!("fatal error: {e}")),
                            None => break Some("the unbounded stream ended".to_string()),
                        },
                    }
                };
                (stream, end)
            })
        };
        Reading {
            got,
            errors,
            stop: Some(stop),
            task,
        }
    }

    /// Everything read so far.
    pub fn snapshot(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// The values read so far from `cluster`.
    pub fn values_of(&self, cluster: &str) -> BTreeSet<String> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.cluster == cluster)
            .map(|g| g.value.clone())
            .collect()
    }

    /// How many records `cluster` handed out so far.
    pub fn count_of(&self, cluster: &str) -> usize {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.cluster == cluster)
            .count()
    }

    /// Waits until `cluster` has handed out at least `n` records.
    pub async fn until(&self, cluster: &str, n: usize, within: Duration) {
        let began = Instant::now();
        while self.count_of(cluster) < n {
            assert!(
                began.elapsed() < within,
                "{cluster}: {} records of {n} within {within:?}; errors: {:?}",
                self.count_of(cluster),
                self.errors.lock().unwrap()
            );
            assert!(!self.task.is_finished(), "the reading task ended early");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every value of `want` came out of `cluster`.
    pub async fn until_all(&self, cluster: &str, want: &[String], within: Duration) {
        let began = Instant::now();
        loop {
            let have = self.values_of(cluster);
            let missing = want.iter().filter(|v| !have.contains(*v)).count();
            if missing == 0 {
                return;
            }
            assert!(
                began.elapsed() < within,
                "{cluster}: {missing} of {} records not out within {within:?}; errors: {:?}",
                want.len(),
                self.errors.lock().unwrap()
            );
            assert!(!self.task.is_finished(), "the reading task ended early");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops reading, closes the source and returns everything read. The task must
    /// stop, without the source having failed, and the close end, each `within`.
    pub async fn close(mut self, within: Duration) -> Vec<Got> {
        let _ = self.stop.take().unwrap().send(());
        let (stream, end) = tokio::time::timeout(within, self.task)
            .await
            .expect("the reading task stops promptly")
            .expect("the reading task does not panic");
        assert_eq!(end, None, "the source failed");
        let t = Instant::now();
        tokio::time::timeout(within, stream.close())
            .await
            .unwrap_or_else(|_| panic!("close() did not end within {within:?}"));
        eprintln!("close() took {:?}", t.elapsed());
        let errors = self.errors.lock().unwrap().clone();
        eprintln!(
            "{} reported errors, e.g. {:?}",
            errors.len(),
            &errors[..errors.len().min(5)]
        );
        self.got.lock().unwrap().clone()
    }
}

/// Every value of `sent` came out of `cluster` exactly once and nothing else did;
/// per partition in offset order.
pub fn assert_read_once<'a>(
    cluster: &str,
    sent: impl IntoIterator<Item = &'a str>,
    got: &'a [Got],
) {
    let mine: Vec<&Got> = got.iter().filter(|g| g.cluster == cluster).collect();
    assert_in_partition_order(
        mine.iter()
            .map(|g| (cluster, g.topic.as_str(), g.partition, g.offset)),
    );
    assert_each_once(mine.iter().map(|g| g.value.as_str()), sent);
}

/// What [`Capture`] kept of one `tracing` event, or of a span's fields.
#[derive(Clone)]
enum Captured {
    Event {
        target: String,
        level: tracing::Level,
        /// Every field as `name=value `, the message among them.
        fields: String,
        /// The `message` field alone.
        message: String,
    },
    /// A new span's fields (`span ...`) or fields recorded later (`record ...`).
    Span(String),
}

/// What the library (targets under `multicluster_kafka`) said in every test of this
/// binary that asked: one global subscriber, installed on first use. A test looks at
/// the lines of its own clusters and topics, since other tests run beside it.
pub fn capture() -> &'static Capture {
    static CAPTURE: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::under("multicluster_kafka");
        tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber");
        capture
    })
}

/// Collects `tracing` events (target, level, fields, message) and spans' fields, of
/// every target or of those under one prefix ([`Capture::under`]).
#[derive(Clone, Default)]
pub struct Capture {
    kept: Arc<Mutex<Vec<Captured>>>,
    under: Option<&'static str>,
}

impl Capture {
    /// Collects only what targets starting with `prefix` say; the others are not
    /// enabled at all.
    pub fn under(prefix: &'static str) -> Capture {
        Capture {
            under: Some(prefix),
            ..Capture::default()
        }
    }

    /// The events so far: (target, level, fields).
    pub fn events(&self) -> Vec<(String, tracing::Level, String)> {
        self.kept
            .lock()
            .unwrap()
            .iter()
            .filter_map(|c| match c {
                Captured::Event {
                    target,
                    level,
                    fields,
                    ..
                } => Some((target.clone(), *level, fields.clone())),
                Captured::Span(_) => None,
            })
            .collect()
    }

    /// The messages of the events so far for which `keep(target, level)` holds.
    pub fn messages(&self, keep: impl Fn(&str, tracing::Level) -> bool) -> Vec<String> {
        self.kept
            .lock()
            .unwrap()
            .iter()
            .filter_map(|c| match c {
                Captured::Event {
                    target,
                    level,
                    message,
                    ..
                } if keep(target, *level) => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// Everything so far as text, in order: `<target> <level> <fields>` an event,
    /// `span <fields>` a new span, `record <fields>` fields recorded on a span.
    pub fn lines(&self) -> Vec<String> {
        self.kept
            .lock()
            .unwrap()
            .iter()
            .map(|c| match c {
                Captured::Event {
                    target,
                    level,
                    fields,
                    ..
                } => format!("{target} {level} {fields}"),
                Captured::Span(text) => text.clone(),
            })
            .collect()
    }
}

/// A span's or event's fields as `name=value `, and the `message` field alone.
#[derive(Default)]
struct Fields {
    all: String,
    message: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        self.all.push_str(&format!("{}={v:?} ", f.name()));
        if f.name() == "message" {
            self.message = format!("{v:?}");
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        self.under.is_none_or(|p| m.target().starts_with(p))
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields::default();
        span.record(&mut fields);
        self.kept
            .lock()
            .unwrap()
            .push(Captured::Span(format!("span {}", fields.all)));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        self.kept
            .lock()
            .unwrap()
            .push(Captured::Span(format!("record {}", fields.all)));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let m = event.metadata();
        self.kept.lock().unwrap().push(Captured::Event {
            target: m.target().to_string(),
            level: *m.level(),
            fields: fields.all,
            message: fields.message,
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// An OpenID Connect token endpoint for the tests on 127.0.0.1: a POST with HTTP Basic
/// credentials `client_id:client_secret` (or, started with
/// [`TokenEndpoint::start_jwt_bearer`], a JWT-bearer grant whose assertion verifies)
/// is answered with an unsecured JWT for `principal` living 300 s (what the broker's
/// unsecured validator accepts); other requests get 401 (400 `invalid_grant` for a
/// bad assertion). It keeps the bodies it was sent.
pub struct TokenEndpoint {
    /// `http://127.0.0.1:PORT/token`, or `https://…` with TLS.
    pub url: String,
    /// The form bodies of the requests with good credentials.
    pub granted: Arc<Mutex<Vec<String>>>,
    /// The `User-Agent` of each granted request (which client asked).
    pub agents: Arc<Mutex<Vec<String>>>,
    /// Requests refused for their credentials.
    pub refused: Arc<std::sync::atomic::AtomicU64>,
}

impl TokenEndpoint {
    /// Starts the endpoint over plain HTTP on a thread of its own (it lives as long
    /// as the process).
    pub fn start(principal: &str, client_id: &str, client_secret: &str) -> Self {
        let basic = format!(
            "basic {}",
            base64std(format!("{client_id}:{client_secret}").as_bytes())
        );
        Self::serve(principal, Grant::Basic(basic), None)
    }

    /// An endpoint of the JWT-bearer grant (RFC 7523) over plain HTTP: it grants a
    /// request whose `assertion` is signed (RS256 or ES256, JWS's `r || s`) by the
    /// private half of `public_pem` and has the claims of `want`, valid now.
    pub fn start_jwt_bearer(principal: &str, public_pem: &[u8], want: WantedClaims) -> Self {
        let key = openssl::pkey::PKey::public_key_from_pem(public_pem).expect("a public key");
        Self::serve(principal, Grant::JwtBearer { key, want }, None)
    }

    /// The same over HTTPS, with the certificate and key (PEM files) of `tls`.
    pub fn start_tls(
        principal: &str,
        client_id: &str,
        client_secret: &str,
        tls: (&std::path::Path, &std::path::Path),
    ) -> Self {
        use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
        let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
        acceptor.set_certificate_chain_file(tls.0).unwrap();
        acceptor
            .set_private_key_file(tls.1, SslFiletype::PEM)
            .unwrap();
        let basic = format!(
            "basic {}",
            base64std(format!("{client_id}:{client_secret}").as_bytes())
        );
        Self::serve(principal, Grant::Basic(basic), Some(acceptor.build()))
    }

    fn serve(principal: &str, grant: Grant, tls: Option<openssl::ssl::SslAcceptor>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}/token", listener.local_addr().unwrap());
        let granted = Arc::new(Mutex::new(Vec::new()));
        let agents = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let kept = Kept {
            granted: granted.clone(),
            agents: agents.clone(),
            refused: refused.clone(),
        };
        let principal = principal.to_string();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let answered = match &tls {
                    Some(acceptor) => match acceptor.accept(conn) {
                        Ok(stream) => answer(stream, &grant, &principal, &kept),
                        // A client that refused the certificate.
                        Err(_) => continue,
                    },
                    None => answer(conn, &grant, &principal, &kept),
                };
                let _ = answered;
            }
        });
        Self {
            url,
            granted,
            agents,
            refused,
        }
    }
}

/// The claims a [`TokenEndpoint::start_jwt_bearer`] endpoint wants in an assertion.
#[derive(Clone, Debug)]
pub struct WantedClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
}

/// What a [`TokenEndpoint`] grants.
enum Grant {
    /// Client credentials: this `Authorization` header, lower-cased.
    Basic(String),
    /// JWT bearer: an assertion this key verifies, with these claims.
    JwtBearer {
        key: openssl::pkey::PKey<openssl::pkey::Public>,
        want: WantedClaims,
    },
}

/// What a [`TokenEndpoint`] keeps of its requests.
struct Kept {
    granted: Arc<Mutex<Vec<String>>>,
    agents: Arc<Mutex<Vec<String>>>,
    refused: Arc<std::sync::atomic::AtomicU64>,
}

/// A form body's fields, percent-decoded (`+` is a space).
pub fn form_fields(body: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => {
                            out.push(b);
                            i += 2;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Whether `assertion` is a JWT signed by `key` (RS256, or ES256 as `r || s`) with
/// the claims of `want`, valid now; else why not.
pub fn check_assertion(
    assertion: &str,
    key: &openssl::pkey::PKey<openssl::pkey::Public>,
    want: &WantedClaims,
) -> Result<(), String> {
    use openssl::hash::MessageDigest;
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, payload, signature] = parts[..] else {
        return Err("not three parts".into());
    };
    let json = |p: &str| -> Result<serde_json::Value, String> {
        let bytes = base64url_decode(p).ok_or("not base64url")?;
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    let (header, claims) = (json(header)?, json(payload)?);
    let signature = base64url_decode(signature).ok_or("signature not base64url")?;
    let signed = &assertion[..assertion.rfind('.').unwrap_or(0)];
    let mut verifier =
        openssl::sign::Verifier::new(MessageDigest::sha256(), key).map_err(|e| e.to_string())?;
    verifier
        .update(signed.as_bytes())
        .map_err(|e| e.to_string())?;
    let verified = match header["alg"].as_str() {
        Some("RS256") => verifier.verify(&signature).unwrap_or(false),
        Some("ES256") if signature.len() == 64 => {
            let n = |b: &[u8]| openssl::bn::BigNum::from_slice(b).unwrap();
            let der = openssl::ecdsa::EcdsaSig::from_private_components(
                n(&signature[..32]),
                n(&signature[32..]),
            )
            .and_then(|s| s.to_der())
            .map_err(|e| e.to_string())?;
            verifier.verify(&der).unwrap_or(false)
        }
        alg => {
            return Err(format!(
                "alg {alg:?} with a {}-byte signature",
                signature.len()
            ));
        }
    };
    if !verified || header["typ"] != "JWT" {
        return Err("the signature does not verify".into());
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let at = |c: &str| claims[c].as_i64().unwrap_or(i64::MIN);
    let fresh = at("iat") <= now + 5 && at("nbf") <= now && now < at("exp");
    let who = claims["iss"] == want.iss.as_str()
        && claims["sub"] == want.sub.as_str()
        && claims["aud"] == want.aud.as_str();
    if !fresh || !who {
        return Err(format!("claims not as wanted: {claims}"));
    }
    Ok(())
}

/// Base64url without padding, decoded.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Reads one token request from `conn` and answers it (see [`TokenEndpoint`]).
fn answer(
    mut conn: impl std::io::Read + std::io::Write,
    grant: &Grant,
    principal: &str,
    kept: &Kept,
) -> std::io::Result<()> {
    // The head, byte by byte up to the blank line (requests here are small).
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte)? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let length: usize = header("content-length:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    conn.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();
    let refusal = match grant {
        Grant::Basic(basic) => (header("authorization:").as_deref()
            != Some(&basic.to_ascii_lowercase()))
        .then_some(("401 Unauthorized", "invalid_client")),
        Grant::JwtBearer { key, want } => {
            let fields = form_fields(&body);
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            };
            let good = field("grant_type") == Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
                && header("authorization:").is_none()
                && field("assertion").is_some_and(|a| check_assertion(a, key, want).is_ok());
            (!good).then_some(("400 Bad Request", "invalid_grant"))
        }
    };
    let (status, json) = match refusal {
        None => {
            kept.granted.lock().unwrap().push(body);
            kept.agents
                .lock()
                .unwrap()
                .push(header("user-agent:").unwrap_or_default());
            let token = unsecured_token(principal, Duration::from_secs(300))
                .expect("a token")
                .token;
            (
                "200 OK",
                format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":300}}"#),
            )
        }
        Some((status, error)) => {
            kept.refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (status, format!(r#"{{"error":"{error}"}}"#))
        }
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )?;
    conn.flush()
}

impl TokenEndpoint {
    /// The properties that take OAUTHBEARER tokens from this endpoint as client
    /// `client_id` with `client_secret` (librdkafka's OIDC client credentials).
    pub fn properties(&self, client_id: &str, client_secret: &str) -> Vec<(String, String)> {
        [
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.token.endpoint.url", self.url.as_str()),
            ("sasl.oauthbearer.client.id", client_id),
            ("sasl.oauthbearer.client.secret", client_secret),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// Base64 with padding (RFC 4648 §4), for HTTP Basic credentials.
pub fn base64std(bytes: &[u8]) -> String {
    let url = base64url(bytes).replace('-', "+").replace('_', "/");
    let pad = (4 - url.len() % 4) % 4;
    url + &"=".repeat(pad)
}
