//! One connection to one Kafka broker (plaintext, or TLS: [`crate::tls`]), on tokio: requests framed with
//! Kafka's request header and increasing correlation ids, each response read whole
//! into one buffer and decoded from it (so a Fetch response's `records` are slices of
//! that buffer, not copies), and the API versions agreed with the broker when the
//! connection opens.
//!
//! The codecs are the `kafka-protocol` crate's. Its own `Request` trait is implemented
//! only when both its `client` and `broker` features are on (the trait also asks for a
//! request decoder); with `client` alone, [`NativeRequest`] ties a request to its
//! response and API key instead.
//!
//! **Not yet safe against a hostile or broken broker:** kafka-protocol 0.18's array
//! decoders reserve `Vec::with_capacity(n)` with `n` as read from the frame, unchecked
//! against the bytes left, so a count such as 0x7fffffff makes the allocation fail and
//! the process abort (a 6-byte ApiVersions body does it). Frames are bounded and other
//! malformed input ends in a [`NativeError`], but this needs a fix in the crate (a
//! capacity capped at the bytes left) before the path faces brokers it cannot trust.
//!
//! The parts: the requests it sends ([`NativeRequest`], `request`), the API versions
//! agreed with the broker (`versions`), a request's exchange for its answer
//! (`exchange`), and the answer's frame read into one buffer (`frames`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;

use crate::credentials::Sasl;
use crate::error::NativeError;
use crate::tls::Tls;

mod exchange;
mod frames;
mod request;
mod versions;

use frames::Frames;
pub use request::NativeRequest;

/// The largest response frame a connection reads by default: 100 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// The byte stream under a connection: plain TCP, or TLS over it.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for S {}

/// How a [`Connection`] is made.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// The client id sent with every request.
    pub client_id: String,
    /// How long connecting, and then each request's answer, may take.
    pub timeout: Duration,
    /// The largest response frame read; a larger one is an error, and nothing is
    /// allocated for it.
    pub max_frame_size: usize,
    /// TLS (`security.protocol=ssl` or `sasl_ssl`); none: plaintext.
    pub tls: Option<Tls>,
    /// SASL credentials (`sasl_plaintext`, `sasl_ssl`); none: no authentication.
    pub sasl: Option<Sasl>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            client_id: "multicluster-kafka".into(),
            timeout: Duration::from_secs(30),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            tls: None,
            sasl: None,
        }
    }
}

/// A connection to one broker (plaintext or TLS), with the API versions it offers.
/// One request at a time: each call waits for its answer.
pub struct Connection {
    addr: String,
    stream: Box<dyn Stream>,
    client_id: StrBytes,
    timeout: Duration,
    max_frame_size: usize,
    next_correlation_id: i32,
    /// API key → the broker's (lowest, highest) version.
    broker_versions: BTreeMap<i16, (i16, i16)>,
    /// An earlier failure left the stream out of step.
    broken: bool,
    /// The request being written, reused.
    out: BytesMut,
    /// Buffers of large answers read before, given back once nothing holds them.
    frames: Arc<Frames>,
    /// Answers read into a buffer of an earlier one.
    frames_reused: u64,
    /// The credentials, kept to re-authenticate.
    sasl: Option<Sasl>,
    /// When to re-authenticate (KIP-368), if the broker set a session lifetime.
    reauth_at: Option<Instant>,
    /// Re-authentications done on this connection.
    reauthentications: u64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`) and asks the broker which API versions it
    /// offers (ApiVersions v3, or v0 from a broker that does not know v3).
    pub async fn connect(addr: &str, options: &ConnectOptions) -> Result<Self, NativeError> {
        let stream = match tokio::time::timeout(options.timeout, TcpStream::connect(addr)).await {
            Err(_) => {
                return Err(NativeError::Timeout {
                    addr: addr.to_string(),
                    what: "connection".into(),
                    timeout_ms: options.timeout.as_millis(),
                });
            }
            Ok(Err(source)) => {
                return Err(NativeError::Connect {
                    addr: addr.to_string(),
                    source,
                });
            }
            Ok(Ok(stream)) => stream,
        };
        stream
            .set_nodelay(true)
            .map_err(|source| NativeError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let stream: Box<dyn Stream> = match &options.tls {
            None => Box::new(stream),
            Some(tls) => {
                let secured = tokio::time::timeout(options.timeout, tls.handshake(addr, stream));
                match secured.await {
                    Ok(Ok(secured)) => Box::new(secured),
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        return Err(NativeError::Timeout {
                            addr: addr.to_string(),
                            what: "TLS handshake".into(),
                            timeout_ms: options.timeout.as_millis(),
                        });
                    }
                }
            }
        };
        let mut conn = Self {
            addr: addr.to_string(),
            stream,
            client_id: StrBytes::from_string(options.client_id.clone()),
            timeout: options.timeout,
            max_frame_size: options.max_frame_size,
            next_correlation_id: 0,
            broker_versions: BTreeMap::new(),
            broken: false,
            out: BytesMut::new(),
            frames: Arc::default(),
            frames_reused: 0,
            sasl: options.sasl.clone(),
            reauth_at: None,
            reauthentications: 0,
        };
        if let Err(e) = conn.negotiate().await {
            return Err(match options.tls {
                Some(_) => crate::tls::alert_as_refusal(e),
                None => e,
            });
        }
        if let Some(sasl) = &options.sasl {
            conn.reauth_at = conn.authenticate(sasl).await?;
        }
        Ok(conn)
    }

    /// The broker's address, as given to [`connect`](Self::connect).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// How many answers were read into the buffer of an earlier one.
    pub fn frames_reused(&self) -> u64 {
        self.frames_reused
    }

    /// How many times this connection re-authenticated (KIP-368).
    pub fn reauthentications(&self) -> u64 {
        self.reauthentications
    }

    /// The request timeout, for requests that carry one.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}
