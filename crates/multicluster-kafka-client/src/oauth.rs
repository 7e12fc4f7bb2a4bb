//! OAUTHBEARER tokens for the native path's connections (RFC 7628 over Kafka's
//! SaslAuthenticate, KIP-255): from the program's token provider, an OIDC token
//! endpoint (`oidc.rs`), or librdkafka's unsecured JWT built from
//! `sasl.oauthbearer.config` (for tests). A token is kept and
//! given to every connection of the cluster until 80 % of its lifetime has passed, as
//! librdkafka refreshes it; the provider is called on a blocking thread, never on a
//! runtime worker. The token never reaches an error, a log or `Debug` output.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::oidc::Oidc;

/// Share of a token's lifetime after which a new one is made.
const REFRESH_AT: f64 = 0.8;

/// The least life a kept token must have left for a new session to take it.
const SESSION_MIN: Duration = Duration::from_secs(3);

/// Where a cluster's tokens come from.
#[derive(Clone)]
enum Source {
    /// `enable.sasl.oauthbearer.unsecure.jwt=true`: an unsigned JWT (`"alg":"none"`)
    /// made here, which only a broker with Kafka's unsecured validator accepts.
    Unsecured(Unsecured),
    /// An OIDC token endpoint, with the client credentials or the JWT-bearer grant.
    Oidc(Oidc),
    /// The program's [`TokenProvider`].
    Provider {
        provider: Arc<dyn TokenProvider>,
        /// `sasl.oauthbearer.config`, handed to the provider.
        config: Option<String>,
    },
}

/// A program's maker of OAUTHBEARER tokens. It is asked on a blocking thread, never on
/// the runtime, when no kept token has enough life left.
pub trait TokenProvider: Send + Sync {
    /// A new token; `config` is the cluster's `sasl.oauthbearer.config`. An error is
    /// said in one line.
    fn token(&self, config: Option<&str>) -> Result<ProvidedToken, Box<dyn std::error::Error>>;
}

/// A token a [`TokenProvider`] made. `Debug` hides its value.
#[derive(Clone)]
pub struct ProvidedToken {
    /// The token (a JWT, for most identity providers).
    pub value: String,
    /// When it expires, in milliseconds since the Unix epoch.
    pub expires_ms: i64,
}

impl std::fmt::Debug for ProvidedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvidedToken")
            .field("value", &"[redacted]")
            .field("expires_ms", &self.expires_ms)
            .finish()
    }
}

/// The settings of an unsecured JWT, librdkafka's `sasl.oauthbearer.config` for it:
/// `principal=…` and optionally `principalClaimName=…`, `scope=a,b`,
/// `scopeClaimName=…`, `lifeSeconds=…`, `extension_<name>=…`, separated by spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsecured {
    principal: String,
    principal_claim: String,
    scope: Vec<String>,
    scope_claim: String,
    life: Duration,
    extensions: Vec<(String, String)>,
}

impl Unsecured {
    /// Parses `sasl.oauthbearer.config`; an error names the part that is wrong.
    pub fn parse(config: &str) -> Result<Self, String> {
        let mut u = Self {
            principal: String::new(),
            principal_claim: "sub".into(),
            scope: Vec::new(),
            scope_claim: "scope".into(),
            life: Duration::from_secs(3600),
            extensions: Vec::new(),
        };
        for part in config.split_whitespace() {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| "expected key=value pairs separated by spaces".to_string())?;
            match key {
                "principal" => u.principal = value.to_string(),
                "principalClaimName" => u.principal_claim = value.to_string(),
                "scopeClaimName" => u.scope_claim = value.to_string(),
                "scope" => {
                    u.scope = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                }
                "lifeSeconds" => {
                    let secs: u64 = value
                        .parse()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| "lifeSeconds is not a positive number".to_string())?;
                    u.life = Duration::from_secs(secs);
                }
                _ => match key.strip_prefix("extension_") {
                    Some(name) if valid_extension(name, value) => {
                        u.extensions.push((name.to_string(), value.to_string()));
                    }
                    Some(name) => return Err(format!("extension `{name}` is not valid")),
                    None => return Err(format!("unknown key `{key}`")),
                },
            }
        }
        if u.principal.is_empty() {
            return Err("principal=… is required".into());
        }
        Ok(u)
    }

    /// A new token, valid from `now`.
    fn token(&self, now: SystemTime) -> Token {
        // Whole seconds: a broker refuses a token issued after the moment it checks
        // it, and a fraction of a second may be just that (seen with Kafka 4.1).
        let iat = Duration::from_secs(now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs());
        let exp = iat + self.life;
        let mut claims = serde_json::Map::new();
        claims.insert(self.principal_claim.clone(), self.principal.clone().into());
        claims.insert("iat".into(), iat.as_secs().into());
        claims.insert("exp".into(), exp.as_secs().into());
        if !self.scope.is_empty() {
            claims.insert(self.scope_claim.clone(), self.scope.clone().into());
        }
        let claims = serde_json::Value::Object(claims).to_string();
        let value = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.as_bytes())
        );
        Token {
            value,
            made: now,
            expires: UNIX_EPOCH + exp,
        }
    }
}

/// `sasl.oauthbearer.extensions`: `key=value` pairs separated by commas.
pub fn parse_extensions(list: &str) -> Result<Vec<(String, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| "expected key=value pairs separated by commas".to_string())?;
            if valid_extension(k, v) {
                Ok((k.to_string(), v.to_string()))
            } else {
                Err(format!("extension `{k}` is not valid"))
            }
        })
        .collect()
}

/// RFC 7628's rules for an extension: a name of letters, a value of printable ASCII
/// (and spaces, tabs, line breaks); `auth` is reserved.
fn valid_extension(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name != "auth"
        && name.bytes().all(|b| b.is_ascii_alphabetic())
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// A token and its lifetime.
#[derive(Clone)]
struct Token {
    value: String,
    made: SystemTime,
    expires: SystemTime,
}

impl Token {
    /// Whether a new session may still take it at `now`: before 80 % of its
    /// lifetime, and with [`SESSION_MIN`] left (a broker ends a session when its
    /// token expires, and a session of a token nearly out would end before the
    /// connection could re-authenticate).
    fn fresh(&self, now: SystemTime) -> bool {
        let life = self.expires.duration_since(self.made).unwrap_or_default();
        now < self.made + life.mul_f64(REFRESH_AT) && now + SESSION_MIN <= self.expires
    }
}

/// The OAUTHBEARER tokens of one cluster, shared by its connections. `Debug` never
/// shows a token.
#[derive(Clone)]
pub struct Tokens {
    source: Source,
    /// SASL extensions sent with every token (key, value).
    extensions: Vec<(String, String)>,
    kept: Arc<Mutex<Option<Token>>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.source {
            Source::Unsecured(_) => "Tokens(unsecured JWT)",
            Source::Oidc(_) => "Tokens(OIDC token endpoint)",
            Source::Provider { .. } => "Tokens(the program's token provider)",
        })
    }
}

impl Tokens {
    /// Unsecured JWTs from `sasl.oauthbearer.config`, with its extensions.
    pub fn unsecured(config: Unsecured) -> Self {
        let extensions = config.extensions.clone();
        Self::from(Source::Unsecured(config), extensions)
    }

    /// Tokens of an OIDC endpoint, sent with `extensions`.
    pub fn oidc(oidc: Oidc, extensions: Vec<(String, String)>) -> Self {
        Self::from(Source::Oidc(oidc), extensions)
    }

    /// The tokens of the program's `provider`, asked with `config`
    /// (`sasl.oauthbearer.config`).
    pub fn from_provider(provider: Arc<dyn TokenProvider>, config: Option<String>) -> Self {
        Self::from(Source::Provider { provider, config }, Vec::new())
    }

    fn from(source: Source, extensions: Vec<(String, String)>) -> Self {
        Self {
            source,
            extensions,
            kept: Arc::new(Mutex::new(None)),
        }
    }

    /// The current token, made anew when the kept one is past 80 % of its lifetime.
    /// An error is the provider's, as one line.
    async fn token(&self) -> Result<String, String> {
        let now = SystemTime::now();
        if let Some(t) = self.kept.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && t.fresh(now)
        {
            return Ok(t.value.clone());
        }
        // The made token's value and expiry; the providers' own calls run on a
        // blocking thread.
        let (value, expires) = match &self.source {
            Source::Unsecured(u) => {
                let t = u.token(now);
                (t.value, t.expires)
            }
            Source::Oidc(oidc) => {
                let oidc = oidc.clone();
                let made = blocking(move || oidc.fetch()).await?;
                tracing::debug!(principal = %made.principal, "OAUTHBEARER token from the OIDC endpoint");
                (made.value, made.expires)
            }
            Source::Provider { provider, config } => {
                let (provider, config) = (provider.clone(), config.clone());
                let made = blocking(move || {
                    provider
                        .token(config.as_deref())
                        .map_err(|e| crate::error::one_line(&e))
                })
                .await?;
                let ms = u64::try_from(made.expires_ms).unwrap_or(0);
                (made.value, UNIX_EPOCH + Duration::from_millis(ms))
            }
        };
        if expires <= now {
            return Err("the token provider made a token that has already expired".into());
        }
        let token = Token {
            value,
            made: now,
            expires,
        };
        if token.value.is_empty() || token.value.bytes().any(|b| !(0x20..=0x7e).contains(&b)) {
            return Err("the token is empty or has characters a bearer token cannot".into());
        }
        let value = token.value.clone();
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(value)
    }

    /// The client's first (and only) OAUTHBEARER message with the current token:
    /// `n,,` ^A `auth=Bearer <token>` ^A extensions ^A ^A (RFC 7628 §3.1).
    pub async fn first_message(&self) -> Result<Vec<u8>, String> {
        let token = self.token().await?;
        Ok(message(&token, &self.extensions))
    }

    /// Forgets the kept token (the broker refused it), so the next connection asks
    /// for a new one.
    pub fn forget(&self) {
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// `f` (a token provider's call, which may wait on the network) on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the token provider panicked or was cancelled: {e}"))?
}

/// RFC 7628's initial client response for `token` with `extensions`.
fn message(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {token}\x01");
    for (k, v) in extensions {
        m.push_str(k);
        m.push('=');
        m.push_str(v);
        m.push('\x01');
    }
    m.push('\x01');
    m.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_unsecured_config_is_parsed_as_librdkafka_takes_it() {
        let u = Unsecured::parse(
            "principal=carol scope=read,write lifeSeconds=60 extension_traceId=abc-1",
        )
        .unwrap();
        assert_eq!(u.principal, "carol");
        assert_eq!(u.scope, ["read", "write"]);
        assert_eq!(u.life, Duration::from_secs(60));
        assert_eq!(u.extensions, [("traceId".to_string(), "abc-1".to_string())]);
        for (bad, why) in [
            ("scope=a", "principal"),
            ("principal=a lifeSeconds=x", "lifeSeconds"),
            ("principal=a lifeSeconds=0", "lifeSeconds"),
            ("principal=a colour=red", "colour"),
            ("principal=a extension_auth=x", "auth"),
            ("principal=a extension_1=x", "`1`"),
            ("principal", "key=value"),
        ] {
            let e = Unsecured::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unsecured_token_carries_the_claims_and_the_message_its_extensions() {
        let u = Unsecured::parse("principal=carol scope=s1 lifeSeconds=100 extension_a=b").unwrap();
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_600);
        let t = u.token(now);
        let parts: Vec<&str> = t.value.split('.').collect();
        assert_eq!(parts.len(), 3, "{}", t.value);
        assert_eq!(parts[2], "");
        let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
        assert_eq!(header, br#"{"alg":"none"}"#);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["sub"], "carol");
        assert_eq!(claims["iat"].as_u64(), Some(1_700_000_000));
        assert_eq!(claims["exp"].as_u64(), Some(1_700_000_100));
        assert_eq!(claims["scope"], serde_json::json!(["s1"]));
        assert!(t.fresh(now + Duration::from_secs(79)));
        assert!(!t.fresh(now + Duration::from_secs(80)));
        // A short-lived token (it expires 3.4 s after `now`, its `iat` being in
        // whole seconds) is kept only while 3 s are left of it.
        let short = Unsecured::parse("principal=carol lifeSeconds=4").unwrap();
        let t = short.token(now);
        assert!(t.fresh(now + Duration::from_millis(400)));
        assert!(!t.fresh(now + Duration::from_millis(401)));
        let m = message("tok", &u.extensions);
        assert_eq!(m, b"n,,\x01auth=Bearer tok\x01a=b\x01\x01");
        assert_eq!(
            parse_extensions("logicalCluster=lkc-1, identityPoolId=pool-X").unwrap(),
            [
                ("logicalCluster".to_string(), "lkc-1".to_string()),
                ("identityPoolId".to_string(), "pool-X".to_string())
            ]
        );
        assert!(parse_extensions("a").unwrap_err().contains("key=value"));
        assert!(parse_extensions("auth=x").unwrap_err().contains("`auth`"));
    }

    /// Hooks that count their calls and make tokens living `life_ms` from now (less
    /// than zero: already expired).
    struct Counting {
        made: AtomicU32,
        life_ms: i64,
        fail: bool,
    }

    impl TokenProvider for Counting {
        fn token(&self, config: Option<&str>) -> Result<ProvidedToken, Box<dyn std::error::Error>> {
            assert_eq!(config, Some("cfg"));
            self.made.fetch_add(1, Ordering::Relaxed);
            if self.fail {
                return Err("the identity provider\nis down".into());
            }
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            Ok(ProvidedToken {
                value: "secret-token-1".into(),
                expires_ms: now.as_millis() as i64 + self.life_ms,
            })
        }
    }

    fn counting(life_ms: i64, fail: bool) -> (Arc<Counting>, Tokens) {
        let hooks = Arc::new(Counting {
            made: AtomicU32::new(0),
            life_ms,
            fail,
        });
        let tokens = Tokens::from_provider(hooks.clone(), Some("cfg".into()));
        (hooks, tokens)
    }

    #[tokio::test]
    async fn the_hooks_token_is_kept_until_it_needs_refreshing_and_never_shown() {
        let (hooks, tokens) = counting(600_000, false);
        for _ in 0..3 {
            let m = tokens.first_message().await.unwrap();
            assert_eq!(m, b"n,,\x01auth=Bearer secret-token-1\x01\x01");
        }
        assert_eq!(hooks.made.load(Ordering::Relaxed), 1, "one token for three");
        tokens.forget();
        tokens.first_message().await.unwrap();
        assert_eq!(
            hooks.made.load(Ordering::Relaxed),
            2,
            "a forgotten token is made anew"
        );
        assert!(!format!("{tokens:?}").contains("secret"));

        // A token past 80 % of its life is made anew for the next connection.
        let (short, tokens) = counting(50, false);
        tokens.first_message().await.unwrap();
        std::thread::sleep(Duration::from_millis(60));
        tokens.first_message().await.unwrap();
        assert_eq!(short.made.load(Ordering::Relaxed), 2);

        let (_, tokens) = counting(-1_000, false);
        let e = tokens.first_message().await.unwrap_err();
        assert!(e.contains("already expired"), "{e}");
    }

    #[tokio::test]
    async fn a_failing_provider_is_one_line() {
        let (_, tokens) = counting(600_000, true);
        let e = tokens.first_message().await.unwrap_err();
        assert_eq!(e, "the identity provider is down");
    }
}
