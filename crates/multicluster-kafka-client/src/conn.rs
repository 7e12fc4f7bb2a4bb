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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, FetchResponse, ListOffsetsResponse, MetadataResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::credentials::Sasl;
use crate::error::{NativeError, one_line};
use crate::responses;
use crate::tls::Tls;
use kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};

/// The largest response frame a connection reads by default: 100 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// The version of ApiVersions asked first; a broker that does not know it answers
/// in v0 with `UNSUPPORTED_VERSION`.
const API_VERSIONS_FIRST: i16 = 3;

/// Kafka's `UNSUPPORTED_VERSION` error code.
const UNSUPPORTED_VERSION: i16 = 35;

/// A request this connection can send: its API and the response it gets.
pub trait NativeRequest: Encodable + Message + HeaderVersion {
    /// The API key.
    const KEY: ApiKey;
    /// The API's name, for errors.
    const NAME: &'static str;
    /// The response to this request.
    type Response: Decodable + HeaderVersion;
}

macro_rules! native_requests {
    ($($request:ident => $response:ident, $key:ident;)*) => {$(
        impl NativeRequest for $request {
            const KEY: ApiKey = ApiKey::$key;
            const NAME: &'static str = stringify!($key);
            type Response = $response;
        }
    )*};
}

native_requests! {
    ApiVersionsRequest => ApiVersionsResponse, ApiVersions;
    MetadataRequest => MetadataResponse, Metadata;
    ListOffsetsRequest => ListOffsetsResponse, ListOffsets;
    FetchRequest => FetchResponse, Fetch;
    SaslHandshakeRequest => SaslHandshakeResponse, SaslHandshake;
    SaslAuthenticateRequest => SaslAuthenticateResponse, SaslAuthenticate;
}

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

/// Answers from this size up are read into buffers kept for reuse ([`Frames`]).
const POOLED_FRAME_MIN: usize = 64 << 10;

/// Buffers above this size are not kept (a large `fetch.max.bytes` would otherwise
/// keep its answers' size twice over for good).
const POOLED_FRAME_MAX: usize = 8 << 20;

/// How many free buffers a connection keeps.
const POOLED_FRAMES: usize = 2;

/// A connection's free answer buffers.
#[derive(Default)]
struct Frames {
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl Frames {
    /// A free buffer (empty), if there is one.
    fn take(&self) -> Option<Vec<u8>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }
}

/// An answer's buffer, given back to its connection's [`Frames`] when the answer's
/// last bytes are dropped.
struct Pooled {
    frame: Vec<u8>,
    frames: std::sync::Weak<Frames>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.frame
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if self.frame.capacity() > POOLED_FRAME_MAX {
            return;
        }
        if let Some(frames) = self.frames.upgrade() {
            let mut free = frames.free.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < POOLED_FRAMES {
                let mut frame = std::mem::take(&mut self.frame);
                frame.clear();
                free.push(frame);
            }
        }
    }
}

/// An I/O error on the connection to `addr`.
fn io(addr: &str, source: std::io::Error) -> NativeError {
    NativeError::Io {
        addr: addr.to_string(),
        source,
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

    /// The broker's (lowest, highest) version of API `R`, if it offers it.
    pub fn broker_versions<R: NativeRequest>(&self) -> Option<(i16, i16)> {
        self.broker_versions.get(&(R::KEY as i16)).copied()
    }

    /// The version of `R` this connection uses: the highest both the broker and this
    /// client speak.
    pub fn version<R: NativeRequest>(&self) -> Result<i16, NativeError> {
        let Some((broker_min, broker_max)) = self.broker_versions::<R>() else {
            return Err(NativeError::NotOffered {
                addr: self.addr.clone(),
                api: R::NAME,
            });
        };
        let ours = R::VERSIONS;
        let version = ours.max.min(broker_max);
        if version < ours.min.max(broker_min) {
            return Err(NativeError::Unsupported {
                addr: self.addr.clone(),
                api: R::NAME,
                broker_min,
                broker_max,
                ours_min: ours.min,
                ours_max: ours.max,
            });
        }
        Ok(version)
    }

    /// Sends `request` at the agreed [`version`](Self::version) and waits for its
    /// response, decoded by `kafka-protocol` (whose counts are not bounded: the
    /// path's own calls decode their answers themselves). Error codes inside the
    /// response are the caller's to read.
    pub async fn send<R: NativeRequest>(&mut self, request: R) -> Result<R::Response, NativeError> {
        let version = self.version::<R>()?;
        self.send_at(&request, version).await
    }

    /// Sends `request` at `version` (within both sides' ranges) and decodes the
    /// response.
    pub async fn send_at<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, NativeError> {
        let body = self.exchange(request, version).await?;
        self.decode::<R>(body, version)
    }

    /// Asks for the broker's API versions and keeps them.
    async fn negotiate(&mut self) -> Result<(), NativeError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("multicluster-kafka"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let body = self.exchange(&request, API_VERSIONS_FIRST).await?;
        let response = match responses::api_versions(&body, API_VERSIONS_FIRST) {
            Ok(r) if r.error_code != UNSUPPORTED_VERSION => r,
            // A broker answers an ApiVersions version it does not know with
            // UNSUPPORTED_VERSION, in v0's layout or in a mix of v0 and the version
            // asked (librdkafka's mock cluster): ask again in v0.
            _ => {
                let body = self.exchange(&ApiVersionsRequest::default(), 0).await?;
                responses::api_versions(&body, 0)
                    .map_err(|e| self.decode_error::<ApiVersionsRequest>(0, &e))?
            }
        };
        if response.error_code != 0 {
            return Err(self.broker_error::<ApiVersionsRequest>(response.error_code, "versions"));
        }
        self.broker_versions = response
            .keys
            .iter()
            .map(|(key, min, max)| (*key, (*min, *max)))
            .collect();
        Ok(())
    }

    /// How many answers were read into the buffer of an earlier one.
    pub fn frames_reused(&self) -> u64 {
        self.frames_reused
    }

    /// How many times this connection re-authenticated (KIP-368).
    pub fn reauthentications(&self) -> u64 {
        self.reauthentications
    }

    /// Writes one request and reads its response's frame; returns the response's
    /// body (after its header). Re-authenticates first when the session lifetime
    /// the broker set is nearly over. A failure of the stream, or a timeout, makes
    /// the connection unusable.
    pub async fn exchange<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, NativeError> {
        if let (Some(at), Some(sasl)) = (self.reauth_at, &self.sasl)
            && Instant::now() >= at
        {
            let sasl = sasl.clone();
            self.reauth_at = self.authenticate(&sasl).await?;
            self.reauthentications += 1;
            tracing::debug!(broker = %self.addr, mechanism = sasl.mechanism.name(), "re-authenticated");
        }
        self.exchange_now(request, version).await
    }

    /// [`exchange`](Self::exchange) without re-authenticating first.
    pub async fn exchange_now<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, NativeError> {
        if self.broken {
            return Err(NativeError::Closed {
                addr: self.addr.clone(),
            });
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        self.encode(request, version, correlation_id)?;
        // Unusable until the whole answer is in: an error, or the caller dropping this
        // future half way, leaves the stream out of step.
        self.broken = true;
        let frame = match tokio::time::timeout(self.timeout, self.round_trip(correlation_id)).await
        {
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(NativeError::Timeout {
                    addr: self.addr.clone(),
                    what: format!("{} v{version} answer", R::NAME),
                    timeout_ms: self.timeout.as_millis(),
                });
            }
        };
        self.broken = false;
        let mut body = frame;
        ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| self.decode_error::<R>(version, &e))?;
        Ok(body)
    }

    /// Puts the request's frame (size, header, body) into `self.out`.
    fn encode<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
        correlation_id: i32,
    ) -> Result<(), NativeError> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        self.out.clear();
        self.out.put_i32(0);
        let encoded = header
            .encode(&mut self.out, R::header_version(version))
            .and_then(|()| request.encode(&mut self.out, version));
        if let Err(e) = encoded {
            return Err(NativeError::Encode {
                addr: self.addr.clone(),
                api: R::NAME,
                version,
                message: one_line(&e),
            });
        }
        let size = i32::try_from(self.out.len() - 4).map_err(|_| NativeError::Encode {
            addr: self.addr.clone(),
            api: R::NAME,
            version,
            message: format!("{} bytes do not fit a frame", self.out.len() - 4),
        })?;
        self.out[..4].copy_from_slice(&size.to_be_bytes());
        Ok(())
    }

    /// Writes `self.out`, then reads one whole response frame into one buffer and
    /// checks its correlation id.
    async fn round_trip(&mut self, correlation_id: i32) -> Result<Bytes, NativeError> {
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| io(&self.addr, e))?;
        let mut size = [0; 4];
        self.stream
            .read_exact(&mut size)
            .await
            .map_err(|e| io(&self.addr, e))?;
        let size = i32::from_be_bytes(size);
        // Below 4 bytes (or negative) a frame cannot hold a correlation id: the
        // stream is out of step.
        let len = match usize::try_from(size) {
            Ok(len) if len >= 4 => len,
            _ => {
                return Err(NativeError::FrameTooSmall {
                    addr: self.addr.clone(),
                    size,
                });
            }
        };
        if len > self.max_frame_size {
            return Err(NativeError::FrameTooLarge {
                addr: self.addr.clone(),
                size: len,
                max: self.max_frame_size,
            });
        }
        // A large answer goes into a buffer of an earlier one that nothing holds any
        // more, else a new one: its memory is written again instead of being mapped
        // afresh (a page fault per 4 KiB) for every answer.
        let frame = if len > POOLED_FRAME_MAX {
            // Mapped on its own and unmapped when let go: from the heap, answers of a
            // few tens of MiB (a wide backlog) stay held by the allocator once it
            // has raised its threshold for mapping.
            let mut map = memmap2::MmapMut::map_anon(len).map_err(|e| io(&self.addr, e))?;
            self.fill_slice(&mut map, len).await?;
            Bytes::from_owner(map)
        } else if len >= POOLED_FRAME_MIN {
            let mut frame = match self.frames.take() {
                Some(frame) => {
                    self.frames_reused += 1;
                    frame
                }
                None => Vec::new(),
            };
            frame.reserve_exact(len);
            self.fill(&mut frame, len).await?;
            Bytes::from_owner(Pooled {
                frame,
                frames: Arc::downgrade(&self.frames),
            })
        } else {
            let mut frame = BytesMut::with_capacity(len);
            self.fill(&mut frame, len).await?;
            frame.freeze()
        };
        let got = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        if got != correlation_id {
            return Err(NativeError::CorrelationMismatch {
                addr: self.addr.clone(),
                expected: correlation_id,
                got,
            });
        }
        Ok(frame)
    }

    /// Reads the `len` bytes of an answer into `frame`, which holds them.
    async fn fill_slice(&mut self, frame: &mut [u8], len: usize) -> Result<(), NativeError> {
        match self.stream.read_exact(&mut frame[..len]).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let eof = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("closed by the broker before the {len} bytes of a response"),
                );
                Err(io(&self.addr, eof))
            }
            Err(e) => Err(io(&self.addr, e)),
        }
    }

    /// Reads the `len` bytes of an answer into `frame`.
    async fn fill(&mut self, frame: &mut impl BufMut, len: usize) -> Result<(), NativeError> {
        let mut read = 0;
        while read < len {
            let left = (len - read) as u64;
            let n = (&mut self.stream)
                .take(left)
                .read_buf(frame)
                .await
                .map_err(|e| io(&self.addr, e))?;
            if n == 0 {
                let eof = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("closed by the broker after {read} of {len} bytes of a response"),
                );
                return Err(io(&self.addr, eof));
            }
            read += n;
        }
        Ok(())
    }

    /// Decodes a response body (zero-copy: byte fields are slices of `body`).
    fn decode<R: NativeRequest>(
        &self,
        mut body: Bytes,
        version: i16,
    ) -> Result<R::Response, NativeError> {
        R::Response::decode(&mut body, version).map_err(|e| self.decode_error::<R>(version, &e))
    }

    fn decode_error<R: NativeRequest>(
        &self,
        version: i16,
        e: &dyn std::fmt::Display,
    ) -> NativeError {
        NativeError::Decode {
            addr: self.addr.clone(),
            api: R::NAME,
            version,
            message: one_line(e),
        }
    }

    /// The broker's error `code` about `what` (e.g. `orders/0`) as an error.
    pub fn broker_error<R: NativeRequest>(&self, code: i16, what: &str) -> NativeError {
        let text = crate::error::code_text(code).unwrap_or_else(|| "no error".into());
        NativeError::Broker {
            addr: self.addr.clone(),
            api: R::NAME,
            code,
            message: format!("{what}: {text}"),
        }
    }

    /// The version of `R` to send when the answer is decoded by the path itself:
    /// the highest both sides speak, at most `decoded`'s highest.
    pub fn version_within<R: NativeRequest>(
        &self,
        decoded: &std::ops::RangeInclusive<i16>,
    ) -> Result<i16, NativeError> {
        let (broker_min, broker_max) =
            self.broker_versions::<R>()
                .ok_or_else(|| NativeError::NotOffered {
                    addr: self.addr.clone(),
                    api: R::NAME,
                })?;
        let ours_max = R::VERSIONS.max.min(*decoded.end());
        let ours_min = R::VERSIONS.min.max(*decoded.start());
        let version = ours_max.min(broker_max);
        if version < ours_min.max(broker_min) {
            return Err(NativeError::Unsupported {
                addr: self.addr.clone(),
                api: R::NAME,
                broker_min,
                broker_max,
                ours_min,
                ours_max,
            });
        }
        Ok(version)
    }

    /// A decode error of the path's own decoders, located.
    pub fn decoded<R: NativeRequest, T>(
        &self,
        version: i16,
        decoded: Result<T, crate::cursor::DecodeError>,
    ) -> Result<T, NativeError> {
        decoded.map_err(|e| self.decode_error::<R>(version, &e))
    }

    /// The request timeout, for requests that carry one.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}
