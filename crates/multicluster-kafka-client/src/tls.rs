//! TLS for the native path's connections, with OpenSSL: the library librdkafka is
//! built with here, so the same PEM files, key formats, password-protected keys and
//! certificate checks work on both fetch paths.
//!
//! [`TlsSettings`] are librdkafka's `ssl.*` properties as given; [`Tls::new`] reads
//! their files once (per cluster fetch), so a missing or unreadable file is an error
//! naming the property and the path before any broker is contacted. Key material and
//! the key's password never reach an error, a log or `Debug` output.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::X509;
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use crate::error::{NativeError, one_line};

/// A PEM value: a file's path or the PEM text itself.
#[derive(Clone)]
pub enum Pem {
    /// A file holding PEM (`ssl.*.location`).
    File(PathBuf),
    /// PEM text (`ssl.*.pem`).
    Text(String),
}

/// The TLS settings of a cluster, as librdkafka's properties give them.
#[derive(Clone, Default)]
pub struct TlsSettings {
    /// The CAs to trust (`ssl.ca.location` file or directory, or `ssl.ca.pem`);
    /// none: OpenSSL's default locations.
    pub ca: Option<Pem>,
    /// The client's certificate chain (`ssl.certificate.location` / `.pem`).
    pub certificate: Option<Pem>,
    /// Its private key (`ssl.key.location` / `.pem`).
    pub key: Option<Pem>,
    /// The key's password (`ssl.key.password`).
    pub key_password: Option<String>,
    /// Whether the broker's certificate must name the host connected to
    /// (`ssl.endpoint.identification.algorithm=https`, librdkafka's default).
    pub verify_hostname: bool,
    /// Whether the broker's certificate is checked at all
    /// (`enable.ssl.certificate.verification`).
    pub verify_certificate: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = |p: &Option<Pem>| match p {
            None => "none".to_string(),
            Some(Pem::File(path)) => path.display().to_string(),
            Some(Pem::Text(_)) => "PEM text".to_string(),
        };
        f.debug_struct("TlsSettings")
            .field("ca", &source(&self.ca))
            .field("certificate", &source(&self.certificate))
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field(
                "key_password",
                &self.key_password.as_ref().map(|_| "[redacted]"),
            )
            .field("verify_hostname", &self.verify_hostname)
            .field("verify_certificate", &self.verify_certificate)
            .finish()
    }
}

/// A TLS setting that cannot be used: which property, and why (never its value
/// when the value is a secret).
#[derive(Debug, thiserror::Error)]
#[error("property `{property}` refused: {message}")]
pub struct TlsError {
    /// The property, e.g. `ssl.ca.location`.
    pub property: &'static str,
    /// Why, with the file's path when it is one.
    pub message: String,
}

/// A cluster's TLS, ready to secure connections. Cheap to clone.
#[derive(Clone)]
pub struct Tls {
    connector: Arc<SslConnector>,
    verify_hostname: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("verify_hostname", &self.verify_hostname)
            .finish_non_exhaustive()
    }
}

fn refused(property: &'static str, message: impl Into<String>) -> TlsError {
    TlsError {
        property,
        message: message.into(),
    }
}

/// The bytes of a PEM value; a file that cannot be read names its path.
fn read(property: &'static str, pem: &Pem) -> Result<Vec<u8>, TlsError> {
    match pem {
        Pem::Text(text) => Ok(text.as_bytes().to_vec()),
        Pem::File(path) => std::fs::read(path)
            .map_err(|e| refused(property, format!("cannot read {}: {e}", path.display()))),
    }
}

/// Where a PEM value is, for errors about its content (never the content).
fn origin(pem: &Pem) -> String {
    match pem {
        Pem::File(path) => path.display().to_string(),
        Pem::Text(_) => "the PEM text".into(),
    }
}

fn location(pem: &Pem, file: &'static str, text: &'static str) -> &'static str {
    match pem {
        Pem::File(_) => file,
        Pem::Text(_) => text,
    }
}

impl Tls {
    /// Reads the settings' files and makes the TLS context.
    pub fn new(settings: &TlsSettings) -> Result<Self, TlsError> {
        let mut builder = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| refused("security.protocol", format!("OpenSSL: {}", reasons(&e))))?;
        if let Some(ca) = &settings.ca {
            let property = location(ca, "ssl.ca.location", "ssl.ca.pem");
            match ca {
                Pem::File(path) if path.is_dir() => add_ca_dir(&mut builder, property, path)?,
                _ => {
                    let bytes = read(property, ca)?;
                    let certs = X509::stack_from_pem(&bytes).map_err(|_| {
                        refused(property, format!("{}: not PEM certificates", origin(ca)))
                    })?;
                    if certs.is_empty() {
                        return Err(refused(
                            property,
                            format!("{}: no certificate in it", origin(ca)),
                        ));
                    }
                    let store = builder.cert_store_mut();
                    for cert in certs {
                        store.add_cert(cert).map_err(|e| {
                            refused(property, format!("{}: {}", origin(ca), reasons(&e)))
                        })?;
                    }
                }
            }
        }
        match (&settings.certificate, &settings.key) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(refused(
                    "ssl.key.location",
                    "a client certificate is set without its key (ssl.key.location or ssl.key.pem)",
                ));
            }
            (None, Some(_)) => {
                return Err(refused(
                    "ssl.certificate.location",
                    "a client key is set without its certificate (ssl.certificate.location or ssl.certificate.pem)",
                ));
            }
            (Some(cert), Some(key)) => {
                let property = location(cert, "ssl.certificate.location", "ssl.certificate.pem");
                let bytes = read(property, cert)?;
                let mut chain = X509::stack_from_pem(&bytes)
                    .map_err(|_| {
                        refused(property, format!("{}: not a PEM certificate", origin(cert)))
                    })?
                    .into_iter();
                let leaf = chain.next().ok_or_else(|| {
                    refused(property, format!("{}: no certificate in it", origin(cert)))
                })?;
                builder
                    .set_certificate(&leaf)
                    .map_err(|e| refused(property, format!("{}: {}", origin(cert), reasons(&e))))?;
                for extra in chain {
                    builder.add_extra_chain_cert(extra).map_err(|e| {
                        refused(property, format!("{}: {}", origin(cert), reasons(&e)))
                    })?;
                }
                let key = private_key(key, settings.key_password.as_deref())?;
                let not_its_key = |e: openssl::error::ErrorStack| {
                    refused(
                        location_of_key(&settings.key),
                        format!(
                            "the key does not belong to the client certificate ({})",
                            reasons(&e)
                        ),
                    )
                };
                builder.set_private_key(&key).map_err(not_its_key)?;
                builder.check_private_key().map_err(not_its_key)?;
            }
        }
        if !settings.verify_certificate {
            builder.set_verify(SslVerifyMode::NONE);
        }
        Ok(Self {
            connector: Arc::new(builder.build()),
            verify_hostname: settings.verify_hostname && settings.verify_certificate,
        })
    }

    /// Secures `tcp`, connected to `addr` (`host:port`): the handshake, with the
    /// broker's certificate checked against the CAs and (unless turned off) the host.
    pub async fn handshake(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> Result<SslStream<TcpStream>, NativeError> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let failed = |message: String| NativeError::Tls {
            addr: addr.to_string(),
            message,
        };
        let mut config = self
            .connector
            .configure()
            .map_err(|e| failed(one_line(&e)))?;
        config.set_verify_hostname(self.verify_hostname);
        let ssl = config.into_ssl(host).map_err(|e| failed(one_line(&e)))?;
        let mut stream = SslStream::new(ssl, tcp).map_err(|e| failed(one_line(&e)))?;
        if let Err(e) = Pin::new(&mut stream).connect().await {
            let verify = stream.ssl().verify_result();
            let mut message = match e.ssl_error() {
                Some(stack) => reasons(stack),
                None => one_line(&e),
            };
            if message.is_empty() {
                message = one_line(&e);
            }
            if verify.as_raw() != 0 {
                message = format!("{message} ({})", verify.error_string());
            }
            return Err(failed(message));
        }
        Ok(stream)
    }
}

/// `e`, the error of a TLS connection's first exchange, as a refusal when it is the
/// broker's TLS alert: with TLS 1.3 a broker checks the client's certificate after
/// the handshake completed on the client's side, and an expired or unknown one
/// comes back as an alert on the first read, not as a handshake failure.
pub fn alert_as_refusal(e: NativeError) -> NativeError {
    if let NativeError::Io { addr, source } = &e
        && let Some(ssl) = source
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<openssl::ssl::Error>())
        && let Some(stack) = ssl.ssl_error()
    {
        return NativeError::Tls {
            addr: addr.clone(),
            message: reasons(stack),
        };
    }
    e
}

/// OpenSSL's reasons in an error stack, without its source file names.
fn reasons(stack: &openssl::error::ErrorStack) -> String {
    let reasons: Vec<&str> = stack.errors().iter().filter_map(|e| e.reason()).collect();
    if reasons.is_empty() {
        one_line(stack)
    } else {
        reasons.join(", ")
    }
}

fn location_of_key(key: &Option<Pem>) -> &'static str {
    match key {
        Some(Pem::Text(_)) => "ssl.key.pem",
        _ => "ssl.key.location",
    }
}

/// The client's private key, decrypted with `password` if it is encrypted.
fn private_key(key: &Pem, password: Option<&str>) -> Result<PKey<Private>, TlsError> {
    let property = location(key, "ssl.key.location", "ssl.key.pem");
    let bytes = read(property, key)?;
    let parsed = match password {
        Some(pw) => PKey::private_key_from_pem_passphrase(&bytes, pw.as_bytes()),
        // No password: an encrypted key fails here. (Without a callback, OpenSSL would
        // ask for one on the terminal and wait.)
        None => PKey::private_key_from_pem_callback(&bytes, |_| Ok(0)),
    };
    parsed.map_err(|_| {
        let why = if password.is_some() {
            "not a PEM private key, or the password (ssl.key.password) does not open it"
        } else {
            "not a PEM private key (or it is encrypted and ssl.key.password is not set)"
        };
        refused(property, format!("{}: {why}", origin(key)))
    })
}

/// Trusts every PEM certificate file in `dir` (as librdkafka does with a directory).
fn add_ca_dir(
    builder: &mut openssl::ssl::SslConnectorBuilder,
    property: &'static str,
    dir: &Path,
) -> Result<(), TlsError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| refused(property, format!("cannot read {}: {e}", dir.display())))?;
    let mut added = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(certs) = X509::stack_from_pem(&bytes) else {
            continue;
        };
        for cert in certs {
            // A certificate twice in the directory is not an error.
            if builder.cert_store_mut().add_cert(cert).is_ok() {
                added += 1;
            }
        }
    }
    if added == 0 {
        return Err(refused(
            property,
            format!("{}: no PEM certificate in the directory", dir.display()),
        ));
    }
    Ok(())
}
