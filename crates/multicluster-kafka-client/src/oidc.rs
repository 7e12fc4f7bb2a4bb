//! OAUTHBEARER tokens from an OpenID Connect token endpoint, from librdkafka's
//! properties (`sasl.oauthbearer.method=oidc`), with either of librdkafka's grants:
//! - client credentials: a form POST with the client's id and secret as HTTP Basic
//!   credentials;
//! - JWT bearer (`sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer`,
//!   RFC 7523): a form POST of the grant type and an assertion (`assertion.rs`),
//!   without HTTP authentication, as librdkafka sends it.
//!
//! The token is the `access_token` of the JSON answer (with the JWT-bearer grant, its
//! `id_token` when that is no token, as librdkafka takes it from some providers), its
//! lifetime and principal the JWT's `exp` and `sub`. The HTTP client is `ureq` over
//! native-tls (the OpenSSL the rest of the path uses); the endpoint's certificate is
//! checked against `https.ca.location` / `https.ca.pem`, else the system's CAs. The
//! client secret and the assertion never reach an error, a log or `Debug` output.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use crate::assertion::Assertion;

/// The grant type of RFC 7523's JWT bearer (`sasl.oauthbearer.grant.type`).
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// How long one token request may take (librdkafka's is 20 s too).
const TIMEOUT: Duration = Duration::from_secs(20);

/// The most bytes of an answer read.
const MAX_ANSWER: u64 = 1 << 20;

/// Where the endpoint's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The system's CAs (no `https.ca.*`, or `https.ca.location=probe`).
    System,
    /// These PEM certificates only.
    Pem(Vec<u8>),
}

/// How a cluster's client asks for tokens (`sasl.oauthbearer.grant.type`).
#[derive(Clone)]
pub enum Grant {
    /// `client_credentials`: the client's id and secret.
    ClientCredentials { id: String, secret: String },
    /// RFC 7523's JWT bearer: an assertion for every request.
    JwtBearer(Assertion),
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ClientCredentials { id, .. } => f
                .debug_struct("ClientCredentials")
                .field("id", id)
                .field("secret", &"[redacted]")
                .finish(),
            Self::JwtBearer(assertion) => f.debug_tuple("JwtBearer").field(assertion).finish(),
        }
    }
}

/// A cluster's OIDC client.
#[derive(Clone)]
pub struct Oidc {
    endpoint: String,
    grant: Grant,
    scope: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("endpoint", &self.endpoint)
            .field("grant", &self.grant)
            .field("scope", &self.scope)
            .finish()
    }
}

/// A token the endpoint made: its value, when it expires, and its principal.
pub struct Made {
    pub value: String,
    pub expires: SystemTime,
    pub principal: String,
}

impl Oidc {
    /// The client of `endpoint` (an `http` or `https` URL), checking its certificate
    /// against `roots`; an error says which of them is wrong.
    pub fn new(
        endpoint: &str,
        grant: Grant,
        scope: Option<&str>,
        roots: Roots,
    ) -> Result<Self, String> {
        let scheme = endpoint
            .split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err("not an http:// or https:// URL".into());
        }
        let roots = match roots {
            Roots::System => RootCerts::PlatformVerifier,
            Roots::Pem(pem) => {
                let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                    .filter_map(|item| match item {
                        Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("the CA certificates: {e}"))?;
                if certs.is_empty() {
                    return Err("the CA certificates: no PEM certificate in them".into());
                }
                RootCerts::Specific(Arc::new(certs))
            }
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .tls_config(
                TlsConfig::builder()
                    .provider(TlsProvider::NativeTls)
                    .root_certs(roots)
                    .build(),
            )
            .build()
            .into();
        Ok(Self {
            endpoint: endpoint.to_string(),
            grant,
            scope: scope.filter(|s| !s.trim().is_empty()).map(str::to_string),
            agent,
        })
    }

    /// Asks the endpoint for a token (blocking: call it off the runtime's workers).
    /// An error is one line naming the endpoint, never the secret nor the assertion.
    pub fn fetch(&self) -> Result<Made, String> {
        let at = |what: String| format!("token endpoint {}: {what}", self.endpoint);
        let request = self
            .agent
            .post(&self.endpoint)
            .header("Accept", "application/json");
        // The form, in librdkafka's order, and the secret it carries.
        let (request, mut form, secret) = match &self.grant {
            Grant::ClientCredentials { id, secret } => {
                let basic = STANDARD.encode(format!("{id}:{secret}"));
                (
                    request.header("Authorization", format!("Basic {basic}")),
                    vec![("grant_type", "client_credentials".to_string())],
                    secret.clone(),
                )
            }
            Grant::JwtBearer(assertion) => {
                let made = assertion
                    .make(SystemTime::now())
                    .map_err(|r| at(format!("no assertion: {r}")))?;
                (
                    request,
                    vec![
                        ("grant_type", JWT_BEARER.to_string()),
                        ("assertion", made.clone()),
                    ],
                    made,
                )
            }
        };
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.clone()));
        }
        let mut answer = request
            .send_form(form.iter().map(|(k, v)| (*k, v.as_str())))
            .map_err(|e| at(e.to_string()))?;
        let status = answer.status();
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| at(format!("reading the answer: {e}")))?;
        if !status.is_success() {
            // The endpoint's words, without the secret should it repeat it.
            let said = match secret.as_str() {
                "" => body,
                secret => body.replace(secret, "[redacted]"),
            };
            return Err(at(format!(
                "HTTP {status}: {}",
                crate::error::one_line(&said.chars().take(200).collect::<String>())
            )));
        }
        match (token_of(&body, "access_token"), &self.grant) {
            (Err(why), Grant::JwtBearer(_)) => token_of(&body, "id_token").map_err(|_| at(why)),
            (made, _) => made.map_err(at),
        }
    }
}

/// The token of a token endpoint's JSON answer (its `field`), with the `exp` and
/// `sub` of its JWT payload (what librdkafka takes them from).
fn token_of(answer: &str, field: &str) -> Result<Made, String> {
    let json: serde_json::Value =
        serde_json::from_str(answer).map_err(|_| "the answer is not JSON".to_string())?;
    let value = json
        .get(field)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("the answer has no {field} string"))?;
    let payload = value
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok())
        .ok_or("the access token is not a JWT (no base64url payload)")?;
    let claims: serde_json::Value = serde_json::from_slice(&payload)
        .map_err(|_| "the access token's payload is not JSON".to_string())?;
    let exp = claims
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        .filter(|e| *e > 0.0 && e.is_finite())
        .ok_or("the access token has no valid exp claim")?;
    let principal = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .ok_or("the access token has no sub claim")?;
    Ok(Made {
        value: value.to_string(),
        expires: UNIX_EPOCH + Duration::from_secs_f64(exp),
        principal: principal.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(id: &str, secret: &str) -> Grant {
        Grant::ClientCredentials {
            id: id.into(),
            secret: secret.into(),
        }
    }

    fn jwt(claims: &str) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    #[test]
    fn the_token_its_expiry_and_principal_come_from_the_answer() {
        let token = jwt(r#"{"sub":"orders-reader","exp":1700000300,"iat":1700000000}"#);
        let made = token_of(
            &format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":300}}"#),
            "access_token",
        )
        .unwrap();
        assert_eq!(made.value, token);
        assert_eq!(made.principal, "orders-reader");
        assert_eq!(
            made.expires,
            UNIX_EPOCH + Duration::from_secs(1_700_000_300)
        );
        for (answer, why) in [
            ("<html>", "not JSON"),
            (r#"{"token":"x"}"#, "no access_token"),
            (r#"{"access_token":"opaque"}"#, "not a JWT"),
            (
                &format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"sub":"a"}"#)),
                "exp",
            ),
            (
                &format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"exp":5}"#)),
                "sub",
            ),
        ] {
            let e = token_of(answer, "access_token").err().unwrap_or_default();
            assert!(e.contains(why), "{answer}: {e}");
        }
    }

    #[test]
    fn bad_urls_and_cas_are_refused_and_the_secret_never_shown() {
        let e = Oidc::new(
            "ftp://idp/token",
            credentials("id", "s3cret"),
            None,
            Roots::System,
        )
        .unwrap_err();
        assert!(e.contains("http"), "{e}");
        let e = Oidc::new(
            "https://idp/token",
            credentials("id", "s3cret"),
            None,
            Roots::Pem(b"not a pem".to_vec()),
        )
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let ok = Oidc::new(
            "https://idp/token",
            credentials("id", "s3cret"),
            Some("kafka"),
            Roots::System,
        )
        .unwrap();
        assert!(!format!("{ok:?}").contains("s3cret"));
    }

    #[test]
    fn an_endpoint_that_does_not_answer_is_one_line_without_the_secret() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let oidc = Oidc::new(
            &format!("http://127.0.0.1:{port}/token"),
            credentials("id", "s3cret"),
            None,
            Roots::System,
        )
        .unwrap();
        let e = oidc.fetch().err().unwrap_or_default();
        assert!(e.starts_with("token endpoint http://127.0.0.1:"), "{e}");
        assert!(!e.contains("s3cret") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_refusal_that_repeats_the_secret_is_said_without_it() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            let body = "bad client secret s3cret-echo\nfor reader";
            let _ = write!(
                conn,
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        });
        let oidc = Oidc::new(
            &url,
            credentials("reader", "s3cret-echo"),
            None,
            Roots::System,
        )
        .unwrap();
        let e = oidc.fetch().err().unwrap_or_default();
        server.join().unwrap();
        assert!(e.contains("HTTP 401"), "{e}");
        assert!(e.contains("bad client secret [redacted] for reader"), "{e}");
        assert!(!e.contains("s3cret-echo"), "{e}");
    }

    /// An endpoint on 127.0.0.1 that answers one request with `status` and `body`,
    /// and hands back the request it read (head and form).
    fn answer_once(
        status: &'static str,
        body: String,
    ) -> (String, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            // The head, then as many body bytes as it says.
            loop {
                let n = conn.read(&mut buf).unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, form)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if form.len() >= length || n == 0 {
                        break;
                    }
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, server)
    }

    #[test]
    fn the_jwt_bearer_grant_posts_its_assertion_without_basic_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("assertion.jwt");
        std::fs::write(&file, "aGVhZGVy.cGF5bG9hZA.c2lnbmF0dXJl\n").unwrap();
        let grant = Grant::JwtBearer(Assertion::File(file));
        // A provider that answers with an id_token only (as librdkafka takes it).
        let token = jwt(r#"{"sub":"orders-reader","exp":4000000000}"#);
        let (url, server) = answer_once("200 OK", format!(r#"{{"id_token":"{token}"}}"#));
        let oidc = Oidc::new(&url, grant.clone(), Some("kafka read"), Roots::System).unwrap();
        let made = oidc.fetch().unwrap();
        assert_eq!(
            (made.value, made.principal.as_str()),
            (token, "orders-reader")
        );
        let request = server.join().unwrap();
        assert!(
            !request.to_ascii_lowercase().contains("authorization:"),
            "{request}"
        );
        let form = request.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(
            form,
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer\
             &assertion=aGVhZGVy.cGF5bG9hZA.c2lnbmF0dXJl&scope=kafka+read"
        );

        // A refusal that repeats the assertion is said without it.
        let (url, server) = answer_once(
            "400 Bad Request",
            r#"{"error":"invalid_grant","assertion":"aGVhZGVy.cGF5bG9hZA.c2lnbmF0dXJl"}"#.into(),
        );
        let oidc = Oidc::new(&url, grant, None, Roots::System).unwrap();
        let e = oidc.fetch().err().unwrap_or_default();
        server.join().unwrap();
        assert!(e.contains("HTTP 400") && e.contains("invalid_grant"), "{e}");
        assert!(!e.contains("c2lnbmF0dXJl"), "{e}");
        assert!(!format!("{oidc:?}").contains("c2lnbmF0dXJl"));
    }
}
