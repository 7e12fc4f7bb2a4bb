//! SASL on the native path's connections: PLAIN, SCRAM-SHA-256/512 (RFC 5802,
//! RFC 7677) and OAUTHBEARER (RFC 7628, tokens from `oauth.rs`) through
//! SaslHandshake v1 and SaslAuthenticate, right after the API versions are agreed;
//! and re-authentication on the live connection before the session lifetime the
//! broker sets runs out (KIP-368), with a fresh token for OAUTHBEARER.
//!
//! SCRAM's hashing, HMAC, PBKDF2, base64 and nonces are OpenSSL's (the library TLS
//! already uses). The password never reaches an error, a log or `Debug` output; the
//! broker's own refusal ("invalid credentials") is passed on as it said it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;

use crate::conn::Connection;
use crate::credentials::{Mechanism, Sasl};
use crate::cursor::{Cursor, Result as DecodeResult};
use crate::error::NativeError;
use crate::wire::{PREALLOCATED, Reader};

/// The hash of a SCRAM mechanism.
fn digest(mechanism: Mechanism) -> MessageDigest {
    match mechanism {
        Mechanism::ScramSha512 => MessageDigest::sha512(),
        _ => MessageDigest::sha256(),
    }
}

/// Kafka's `UNSUPPORTED_SASL_MECHANISM`.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;

/// SCRAM iteration counts outside this range are refused (Kafka takes 4096 to
/// 16384; a larger count from a broker would only burn the client's CPU).
const ITERATIONS: std::ops::RangeInclusive<u32> = 4096..=1_000_000;

/// Re-authenticate when this share of the session lifetime has passed, or a
/// second before its end if that is sooner (a session ends for good at its end:
/// the next request after it closes the connection, so the request that finds the
/// re-authentication due has to come before).
const REAUTH_AT: f64 = 0.85;

/// A broker takes no re-authentication within a second of the last one began
/// (it answers the handshake with IllegalSaslState); this leaves room for the
/// handshake's way there.
const REAUTH_INTERVAL_MIN: Duration = Duration::from_millis(1500);

/// When to re-authenticate a session that began at `began` and lasts `lifetime`.
fn reauth_due(began: Instant, lifetime: Duration) -> Instant {
    let before_end = lifetime
        .mul_f64(1.0 - REAUTH_AT)
        .max(Duration::from_secs(1).min(lifetime / 2));
    began + (lifetime - before_end).max(REAUTH_INTERVAL_MIN)
}

/// The versions of SaslAuthenticate whose answers this module decodes.
const AUTHENTICATE: std::ops::RangeInclusive<i16> = 0..=2;

/// What SaslAuthenticate answered.
struct AuthAnswer {
    error_code: i16,
    error_message: Option<String>,
    auth_bytes: Bytes,
    session_lifetime_ms: i64,
}

/// A SaslHandshake answer (v0 and v1 have one layout): its error and the mechanisms
/// the broker enables.
fn handshake_answer(body: &Bytes) -> DecodeResult<(i16, Vec<String>)> {
    let mut r = Reader {
        c: Cursor::new(body),
        body,
        flexible: false,
    };
    let error_code = r.c.i16()?;
    let n = r.count(2)?.unwrap_or(0);
    let mut mechanisms = Vec::with_capacity(n.min(PREALLOCATED));
    for _ in 0..n {
        mechanisms.push(r.string()?.unwrap_or_default());
    }
    Ok((error_code, mechanisms))
}

/// A SaslAuthenticate answer of `version` (flexible from v2).
fn authenticate_answer(body: &Bytes, version: i16) -> DecodeResult<AuthAnswer> {
    let mut r = Reader {
        c: Cursor::new(body),
        body,
        flexible: version >= 2,
    };
    let error_code = r.c.i16()?;
    let error_message = r.string()?;
    let auth_bytes = r.bytes()?;
    let session_lifetime_ms = if version >= 1 { r.c.i64()? } else { 0 };
    r.tagged(|_, _| Ok(()))?;
    Ok(AuthAnswer {
        error_code,
        error_message,
        auth_bytes,
        session_lifetime_ms,
    })
}

impl Connection {
    /// Authenticates with `sasl` (SaslHandshake v1, then SaslAuthenticate) and
    /// returns when the next re-authentication is due, if the broker set a session
    /// lifetime.
    pub async fn authenticate(&mut self, sasl: &Sasl) -> Result<Option<Instant>, NativeError> {
        let began = Instant::now();
        let failed = |addr: &str, message: String| NativeError::Auth {
            addr: addr.to_string(),
            mechanism: sasl.mechanism.name(),
            message,
        };
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name()));
        let version = self.version_within::<SaslHandshakeRequest>(&(1..=1))?;
        let body = self.exchange_now(&handshake, version).await?;
        let (code, offered) =
            self.decoded::<SaslHandshakeRequest, _>(version, handshake_answer(&body))?;
        if code == UNSUPPORTED_SASL_MECHANISM {
            return Err(failed(
                self.addr(),
                format!(
                    "the listener does not enable it (it offers {})",
                    offered.join(", ")
                ),
            ));
        }
        if code != 0 {
            return Err(self.broker_error::<SaslHandshakeRequest>(code, sasl.mechanism.name()));
        }
        let version = self.version_within::<SaslAuthenticateRequest>(&AUTHENTICATE)?;
        let lifetime = match sasl.mechanism {
            Mechanism::Plain => {
                let mut token = Vec::with_capacity(sasl.username.len() + sasl.password.len() + 2);
                token.push(0);
                token.extend_from_slice(sasl.username.as_bytes());
                token.push(0);
                token.extend_from_slice(sasl.password.as_bytes());
                let answer = self.sasl_step(sasl, version, token).await?;
                answer.session_lifetime_ms
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let mut scram = Scram::new(sasl);
                let first = scram.client_first();
                let answer = self.sasl_step(sasl, version, first.into_bytes()).await?;
                let server_first = String::from_utf8(answer.auth_bytes.to_vec()).map_err(|_| {
                    failed(
                        self.addr(),
                        "the server's first message is not UTF-8".into(),
                    )
                })?;
                let last = scram
                    .client_final(&server_first)
                    .map_err(|m| failed(self.addr(), m))?;
                let answer = self.sasl_step(sasl, version, last.into_bytes()).await?;
                let server_final = String::from_utf8_lossy(&answer.auth_bytes).into_owned();
                scram
                    .verify_server(&server_final)
                    .map_err(|m| failed(self.addr(), m))?;
                answer.session_lifetime_ms
            }
            Mechanism::OAuthBearer => self.bearer(sasl, version).await?,
        };
        Ok((lifetime > 0).then(|| reauth_due(began, Duration::from_millis(lifetime as u64))))
    }

    /// OAUTHBEARER's exchange: the token in one message; returns the session lifetime.
    /// A broker that refuses the token answers with its reasons (a JSON object, RFC
    /// 7628 §3.2.2) and expects a lone ^A before it fails the authentication in its own
    /// words.
    async fn bearer(&mut self, sasl: &Sasl, version: i16) -> Result<i64, NativeError> {
        let Some(tokens) = &sasl.tokens else {
            return Err(NativeError::Token {
                addr: self.addr().to_string(),
                message: "no token provider is set".into(),
            });
        };
        let first = tokens
            .first_message()
            .await
            .map_err(|message| NativeError::Token {
                addr: self.addr().to_string(),
                message,
            })?;
        let answer = self
            .sasl_step(sasl, version, first)
            .await
            .inspect_err(|_| tokens.forget())?;
        if answer.auth_bytes.is_empty() {
            return Ok(answer.session_lifetime_ms);
        }
        tokens.forget();
        let reasons = crate::error::one_line(&String::from_utf8_lossy(&answer.auth_bytes));
        // The broker's failure, in its words, follows the ^A.
        let said = match self.sasl_step(sasl, version, vec![1]).await {
            Err(NativeError::Auth { message, .. }) => message,
            Err(other) => return Err(other),
            Ok(_) => reasons.clone(),
        };
        let message = if said == reasons {
            format!("the broker refused the token: {reasons}")
        } else {
            format!("the broker refused the token ({reasons}): {said}")
        };
        Err(NativeError::Auth {
            addr: self.addr().to_string(),
            mechanism: sasl.mechanism.name(),
            message,
        })
    }

    /// One SaslAuthenticate exchange; a refusal is an [`NativeError::Auth`] with the
    /// broker's own words.
    async fn sasl_step(
        &mut self,
        sasl: &Sasl,
        version: i16,
        token: Vec<u8>,
    ) -> Result<AuthAnswer, NativeError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let body = self.exchange_now(&request, version).await?;
        let answer = self
            .decoded::<SaslAuthenticateRequest, _>(version, authenticate_answer(&body, version))?;
        if answer.error_code != 0 {
            let said = answer
                .error_message
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| {
                    match kafka_protocol::ResponseError::try_from_code(answer.error_code) {
                        Some(e) => e.to_string(),
                        None => format!("error code {}", answer.error_code),
                    }
                });
            return Err(NativeError::Auth {
                addr: self.addr().to_string(),
                mechanism: sasl.mechanism.name(),
                message: crate::error::one_line(&said),
            });
        }
        Ok(answer)
    }
}

/// One SCRAM exchange, client side (RFC 5802 without channel binding).
struct Scram<'a> {
    sasl: &'a Sasl,
    client_nonce: String,
    client_first_bare: String,
    server_signature: Vec<u8>,
}

impl<'a> Scram<'a> {
    fn new(sasl: &'a Sasl) -> Self {
        let mut raw = [0u8; 24];
        openssl::rand::rand_bytes(&mut raw).expect("OpenSSL's random generator works");
        Self::with_nonce(sasl, openssl::base64::encode_block(&raw))
    }

    fn with_nonce(sasl: &'a Sasl, client_nonce: String) -> Self {
        let name = sasl.username.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={name},r={client_nonce}");
        Self {
            sasl,
            client_nonce,
            client_first_bare,
            server_signature: Vec::new(),
        }
    }

    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client's final message for the server's first; keeps the signature the
    /// server must then show.
    fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let field = |key: &str| {
            server_first
                .split(',')
                .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        };
        if let Some(e) = field("e") {
            return Err(format!("the server refused: {e}"));
        }
        let nonce = field("r").ok_or("the server's first message has no nonce")?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("the server's nonce does not extend the client's".into());
        }
        let salt = field("s")
            .and_then(|s| openssl::base64::decode_block(s).ok())
            .ok_or("the server's first message has no salt in base64")?;
        let iterations: u32 = field("i")
            .and_then(|i| i.parse().ok())
            .ok_or("the server's first message has no iteration count")?;
        if !ITERATIONS.contains(&iterations) {
            return Err(format!(
                "the server's iteration count {iterations} is outside {}..={}",
                ITERATIONS.start(),
                ITERATIONS.end()
            ));
        }
        let digest = digest(self.sasl.mechanism);
        let mut salted = vec![0u8; digest.size()];
        openssl::pkcs5::pbkdf2_hmac(
            self.sasl.password.as_bytes(),
            &salt,
            iterations as usize,
            digest,
            &mut salted,
        )
        .map_err(|e| e.to_string())?;
        let client_key = hmac(digest, &salted, b"Client Key")?;
        let stored_key = openssl::hash::hash(digest, &client_key).map_err(|e| e.to_string())?;
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac(digest, &stored_key, auth_message.as_bytes())?;
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(digest, &salted, b"Server Key")?;
        self.server_signature = hmac(digest, &server_key, auth_message.as_bytes())?;
        Ok(format!(
            "{without_proof},p={}",
            openssl::base64::encode_block(&proof)
        ))
    }

    /// Checks the server's final message: it must prove the server knows the
    /// password too.
    fn verify_server(&self, server_final: &str) -> Result<(), String> {
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(format!("the server refused: {e}"));
        }
        let shown = server_final
            .split(',')
            .find_map(|kv| kv.strip_prefix("v="))
            .and_then(|v| openssl::base64::decode_block(v).ok())
            .ok_or("the server's final message has no signature")?;
        // `memcmp::eq` (constant time) takes slices of one length only.
        let same = shown.len() == self.server_signature.len()
            && openssl::memcmp::eq(&shown, &self.server_signature);
        if !same {
            return Err(
                "the server's signature does not match: it does not know the password".into(),
            );
        }
        Ok(())
    }
}

fn hmac(digest: MessageDigest, key: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    let key = PKey::hmac(key).map_err(|e| e.to_string())?;
    let mut signer = Signer::new(digest, &key).map_err(|e| e.to_string())?;
    signer.update(data).map_err(|e| e.to_string())?;
    signer.sign_to_vec().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(mechanism: Mechanism) -> Sasl {
        Sasl::password(mechanism, "user".into(), "pencil".into())
    }

    #[test]
    fn re_authentication_is_due_before_the_session_ends_and_not_too_soon() {
        let began = Instant::now();
        let due = |ms: u64| reauth_due(began, Duration::from_millis(ms)) - began;
        // Long sessions: at 85 % of their life.
        assert_eq!(due(3_600_000), Duration::from_millis(3_060_000));
        assert_eq!(due(20_000), Duration::from_millis(17_000));
        // Short ones: a second before the end, ...
        assert_eq!(due(4_000), Duration::from_millis(3_000));
        assert_eq!(due(3_000), Duration::from_millis(2_000));
        // ... and never within 1.5 s of the last start, which a broker refuses.
        assert_eq!(due(2_000), Duration::from_millis(1_500));
        assert_eq!(due(800), Duration::from_millis(1_500));
    }

    /// RFC 7677's SCRAM-SHA-256 example exchange.
    #[test]
    fn the_rfc_7677_exchange_is_reproduced() {
        let sasl = user(Mechanism::ScramSha256);
        let mut scram = Scram::with_nonce(&sasl, "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = scram.client_final(server_first).unwrap();
        assert_eq!(
            last,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        let forged = scram
            .verify_server("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(forged.contains("does not match"), "{forged}");
    }

    #[test]
    fn bad_server_messages_are_refused_without_the_password() {
        let sasl = user(Mechanism::ScramSha512);
        let cases = [
            ("r=other,s=W22Z,i=4096", "does not extend"),
            ("r=abc,s=W22Z,i=4096", "does not extend"),
            ("r=abcdef,i=4096", "no salt"),
            ("r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=12", "outside"),
            (
                "r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999",
                "no iteration count",
            ),
            ("e=invalid-proof", "refused"),
        ];
        for (server_first, why) in cases {
            let mut scram = Scram::with_nonce(&sasl, "abc".into());
            let e = scram.client_final(server_first).unwrap_err();
            assert!(e.contains(why), "{server_first}: {e}");
            assert!(!e.contains("pencil"));
        }
        let scram = Scram::with_nonce(&sasl, "abc".into());
        assert!(
            scram
                .verify_server("x=1")
                .unwrap_err()
                .contains("no signature")
        );
    }

    #[test]
    fn names_with_commas_and_equals_are_escaped() {
        let sasl = Sasl::password(Mechanism::ScramSha256, "a,b=c".into(), "pencil".into());
        let scram = Scram::with_nonce(&sasl, "n".into());
        assert_eq!(scram.client_first(), "n,,n=a=2Cb=3Dc,r=n");
        assert!(!format!("{sasl:?}").contains("pencil"));
    }
}
