//! SASL credentials as a connection is given them (`sasl.rs` speaks the
//! protocol): the mechanism, the user and the password, which `Debug` never shows, or
//! the OAUTHBEARER tokens (`oauth.rs`).

pub use crate::oauth::Tokens;

/// A SASL mechanism the native path speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// `PLAIN`: the user name and password as they are (over TLS, one hopes).
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
    /// `OAUTHBEARER`: a bearer token (RFC 7628) from [`Sasl::tokens`].
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism of `sasl.mechanism`'s value (case-insensitive), if the native
    /// path speaks it.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Some(Self::Plain),
            "SCRAM-SHA-256" => Some(Self::ScramSha256),
            "SCRAM-SHA-512" => Some(Self::ScramSha512),
            "OAUTHBEARER" => Some(Self::OAuthBearer),
            _ => None,
        }
    }

    /// Its name as Kafka knows it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// A connection's SASL credentials. `Debug` shows the user, never the password or a
/// token.
#[derive(Clone)]
pub struct Sasl {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// `sasl.username` (PLAIN, SCRAM).
    pub username: String,
    /// `sasl.password` (PLAIN, SCRAM).
    pub password: String,
    /// Where OAUTHBEARER's tokens come from (required for it, unused by the others).
    pub tokens: Option<Tokens>,
}

impl Sasl {
    /// PLAIN or SCRAM credentials.
    pub fn password(mechanism: Mechanism, username: String, password: String) -> Self {
        Self {
            mechanism,
            username,
            password,
            tokens: None,
        }
    }

    /// OAUTHBEARER with `tokens`.
    pub fn oauth(tokens: Tokens) -> Self {
        Self {
            mechanism: Mechanism::OAuthBearer,
            username: String::new(),
            password: String::new(),
            tokens: Some(tokens),
        }
    }
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .field("tokens", &self.tokens)
            .finish()
    }
}
