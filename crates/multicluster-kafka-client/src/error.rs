//! What can go wrong on a native connection. Every error names the broker's address
//! and renders as one line.

/// An error of a native connection to one broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NativeError {
    /// The TCP connection could not be made.
    #[error("broker {addr}: cannot connect: {source}")]
    Connect {
        /// `host:port` of the broker.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The broker did not answer (or the connection was not made) in time. The
    /// connection is not used again.
    #[error("broker {addr}: no {what} within {timeout_ms} ms")]
    Timeout {
        /// `host:port` of the broker.
        addr: String,
        /// What was waited for, e.g. `Fetch v17 answer`.
        what: String,
        /// How long it was waited for, in milliseconds.
        timeout_ms: u128,
    },
    /// Reading or writing the connection failed (the broker closed it, a reset). The
    /// connection is not used again.
    #[error("broker {addr}: connection failed: {source}")]
    Io {
        /// `host:port` of the broker.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// An earlier failure left the connection out of step with the broker; open a new
    /// one.
    #[error("broker {addr}: connection unusable after an earlier failure")]
    Closed {
        /// `host:port` of the broker.
        addr: String,
    },
    /// A response frame announced more bytes than allowed (nothing was allocated for
    /// it). The connection is not used again.
    #[error("broker {addr}: a response frame of {size} bytes is over the limit of {max} bytes")]
    FrameTooLarge {
        /// `host:port` of the broker.
        addr: String,
        /// The size the frame announced.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A response frame announced fewer bytes than a response header takes, or a
    /// negative size. The connection is not used again.
    #[error("broker {addr}: a response frame of {size} bytes cannot hold a response header")]
    FrameTooSmall {
        /// `host:port` of the broker.
        addr: String,
        /// The size the frame announced.
        size: i32,
    },
    /// A response answered another request than the one sent. The connection is not
    /// used again.
    #[error("broker {addr}: a response with correlation id {got}, expected {expected}")]
    CorrelationMismatch {
        /// `host:port` of the broker.
        addr: String,
        /// The request's correlation id.
        expected: i32,
        /// The response's.
        got: i32,
    },
    /// A request could not be encoded at the chosen version.
    #[error("broker {addr}: cannot encode a {api} v{version} request: {message}")]
    Encode {
        /// `host:port` of the broker.
        addr: String,
        /// The API, e.g. `Fetch`.
        api: &'static str,
        /// The version.
        version: i16,
        /// What the codec said.
        message: String,
    },
    /// A response could not be decoded (malformed, truncated, or not what was asked).
    #[error("broker {addr}: cannot decode a {api} v{version} response: {message}")]
    Decode {
        /// `host:port` of the broker.
        addr: String,
        /// The API, e.g. `Fetch`.
        api: &'static str,
        /// The version it was decoded at.
        version: i16,
        /// What the codec said.
        message: String,
    },
    /// The broker does not offer this API at all.
    #[error("broker {addr}: does not offer the {api} API")]
    NotOffered {
        /// `host:port` of the broker.
        addr: String,
        /// The API, e.g. `Fetch`.
        api: &'static str,
    },
    /// The broker's versions of an API and ours do not overlap.
    #[error(
        "broker {addr}: offers {api} v{broker_min}..v{broker_max}, this client speaks v{ours_min}..v{ours_max}"
    )]
    Unsupported {
        /// `host:port` of the broker.
        addr: String,
        /// The API, e.g. `Fetch`.
        api: &'static str,
        /// The broker's lowest version.
        broker_min: i16,
        /// The broker's highest version.
        broker_max: i16,
        /// Our lowest version.
        ours_min: i16,
        /// Our highest version.
        ours_max: i16,
    },
    /// The TLS handshake failed (the broker's certificate refused, or the broker
    /// refused the client's). The connection is not used.
    #[error("broker {addr}: TLS handshake failed: {message}")]
    Tls {
        /// `host:port` of the broker.
        addr: String,
        /// OpenSSL's reasons, and the certificate check that failed.
        message: String,
    },
    /// SASL authentication failed: the broker refused the credentials (in its own
    /// words), does not enable the mechanism, or (SCRAM) could not prove it knows
    /// the password. Never shows the password.
    #[error("broker {addr}: SASL {mechanism} authentication failed: {message}")]
    Auth {
        /// `host:port` of the broker.
        addr: String,
        /// The mechanism, e.g. `SCRAM-SHA-512`.
        mechanism: &'static str,
        /// Why.
        message: String,
    },
    /// No OAUTHBEARER token to authenticate with: the token provider (the program's
    /// client hooks) failed or made an unusable token. Asked again at the next
    /// connection.
    #[error("broker {addr}: no SASL OAUTHBEARER token: {message}")]
    Token {
        /// `host:port` of the broker.
        addr: String,
        /// The provider's error, as one line.
        message: String,
    },
    /// The broker answered with an error code.
    #[error("broker {addr}: {api} refused: {message} (error code {code})")]
    Broker {
        /// `host:port` of the broker.
        addr: String,
        /// The API, e.g. `ListOffsets`.
        api: &'static str,
        /// Kafka's error code.
        code: i16,
        /// Kafka's description of the code, after what it concerned (e.g. `orders/0: `).
        message: String,
    },
}

impl NativeError {
    /// The broker's address the error is about.
    pub fn addr(&self) -> &str {
        match self {
            Self::Connect { addr, .. }
            | Self::Timeout { addr, .. }
            | Self::Io { addr, .. }
            | Self::Closed { addr }
            | Self::FrameTooLarge { addr, .. }
            | Self::FrameTooSmall { addr, .. }
            | Self::CorrelationMismatch { addr, .. }
            | Self::Encode { addr, .. }
            | Self::Decode { addr, .. }
            | Self::NotOffered { addr, .. }
            | Self::Unsupported { addr, .. }
            | Self::Tls { addr, .. }
            | Self::Auth { addr, .. }
            | Self::Token { addr, .. }
            | Self::Broker { addr, .. } => addr,
        }
    }
}

/// The codec's error (an `anyhow` chain, shown whole with `{:#}`) as one line.
pub fn one_line(e: &dyn std::fmt::Display) -> String {
    format!("{e:#}").replace(['\n', '\r'], " ")
}

/// Kafka's text for an error `code` in an answer (`None` for a code it does not
/// know, or 0).
pub fn code_text(code: i16) -> Option<String> {
    kafka_protocol::ResponseError::try_from_code(code).map(|e| e.to_string())
}

/// Told of each connection error a client meets, as a librdkafka client's error
/// callback is. Called on the runtime's threads: it must not block.
pub trait ErrorListener: Send + Sync {
    /// `error` happened; the client goes on (it reconnects, or reports it where it
    /// returns).
    fn on_error(&self, error: &NativeError);
}

/// An optional [`ErrorListener`]. `Debug` says only whether there is one.
#[derive(Clone, Default)]
pub struct Listener(pub Option<std::sync::Arc<dyn ErrorListener>>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Listener(set)"
        } else {
            "Listener(none)"
        })
    }
}

impl Listener {
    /// Tells the listener, if any, of `error`.
    pub fn tell(&self, error: &NativeError) {
        if let Some(l) = &self.0 {
            l.on_error(error);
        }
    }
}
