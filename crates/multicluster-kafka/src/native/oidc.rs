//! OAUTHBEARER tokens from an OpenID Connect token endpoint with the client
//! credentials grant, from librdkafka's properties (`sasl.oauthbearer.method=oidc`):
//! a form POST with the client's id and secret as HTTP Basic credentials, the token
//! the `access_token` of the JSON answer, its lifetime and principal the JWT's `exp`
//! and `sub`. The HTTP client is `ureq` over native-tls (the OpenSSL the rest of the
//! path uses); the endpoint's certificate is checked against `https.ca.location` /
//! `https.ca.pem`, else the system's CAs. The client secret never reaches an error,
//! a log or `Debug` output.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

/// How long one token request may take (librdkafka's is 20 s too).
const TIMEOUT: Duration = Duration::from_secs(20);

/// The most bytes of an answer read.
const MAX_ANSWER: u64 = 1 << 20;

/// Where the endpoint's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Roots {
    /// The system's CAs (no `https.ca.*`, or `https.ca.location=probe`).
    System,
    /// These PEM certificates only.
    Pem(Vec<u8>),
}

/// A cluster's OIDC client.
#[derive(Clone)]
pub(crate) struct Oidc {
    endpoint: String,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scope", &self.scope)
            .finish()
    }
}

/// A token the endpoint made: its value, when it expires, and its principal.
pub(crate) struct Made {
    pub value: String,
    pub expires: SystemTime,
    pub principal: String,
}

impl Oidc {
    /// The client of `endpoint` (an `http` or `https` URL), checking its certificate
    /// against `roots`; an error says which of them is wrong.
    pub(crate) fn new(
        endpoint: &str,
        client_id: &str,
        client_secret: &str,
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
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            scope: scope.filter(|s| !s.trim().is_empty()).map(str::to_string),
            agent,
        })
    }

    /// Asks the endpoint for a token (blocking: call it off the runtime's workers).
    /// An error is one line naming the endpoint, never the secret.
    pub(crate) fn fetch(&self) -> Result<Made, String> {
        let at = |what: String| format!("token endpoint {}: {what}", self.endpoint);
        let basic = STANDARD.encode(format!("{}:{}", self.client_id, self.client_secret));
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        let mut answer = self
            .agent
            .post(&self.endpoint)
            .header("Accept", "application/json")
            .header("Authorization", format!("Basic {basic}"))
            .send_form(form)
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
            let said = match self.client_secret.as_str() {
                "" => body,
                secret => body.replace(secret, "[redacted]"),
            };
            return Err(at(format!(
                "HTTP {status}: {}",
                super::error::one_line(&said.chars().take(200).collect::<String>())
            )));
        }
        token_of(&body).map_err(at)
    }
}

/// The token of a token endpoint's JSON answer, with the `exp` and `sub` of its JWT
/// payload (what librdkafka takes them from).
fn token_of(answer: &str) -> Result<Made, String> {
    let json: serde_json::Value =
        serde_json::from_str(answer).map_err(|_| "the answer is not JSON".to_string())?;
    let value = json
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .ok_or("the answer has no access_token string")?;
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
        let made = token_of(&format!(
            r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":300}}"#
        ))
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
            let e = token_of(answer).err().unwrap_or_default();
            assert!(e.contains(why), "{answer}: {e}");
        }
    }

    #[test]
    fn bad_urls_and_cas_are_refused_and_the_secret_never_shown() {
        let e = Oidc::new("ftp://idp/token", "id", "s3cret", None, Roots::System).unwrap_err();
        assert!(e.contains("http"), "{e}");
        let e = Oidc::new(
            "https://idp/token",
            "id",
            "s3cret",
            None,
            Roots::Pem(b"not a pem".to_vec()),
        )
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let ok = Oidc::new(
            "https://idp/token",
            "id",
            "s3cret",
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
            "id",
            "s3cret",
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
        let oidc = Oidc::new(&url, "reader", "s3cret-echo", None, Roots::System).unwrap();
        let e = oidc.fetch().err().unwrap_or_default();
        server.join().unwrap();
        assert!(e.contains("HTTP 401"), "{e}");
        assert!(e.contains("bad client secret [redacted] for reader"), "{e}");
        assert!(!e.contains("s3cret-echo"), "{e}");
    }
}
