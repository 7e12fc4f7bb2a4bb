//! Secured listeners for a real cluster: certificates generated at start (with
//! OpenSSL, the same vendored build librdkafka links) and the broker and client
//! properties of each listener.
//!
//! Every broker keeps its `PLAINTEXT` listener (the test kit's own admin and produce
//! calls use it) and adds one listener per [`Listener`]. All certificates are PEM
//! files in one directory of the cluster's run; passwords are random per cluster, so
//! a test can look for them in output and find nothing by accident.

use std::fs;
use std::path::{Path, PathBuf};

use openssl::asn1::{Asn1Integer, Asn1Time};
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
};
use openssl::x509::{X509, X509NameBuilder};

use crate::TestkitError;

/// One secured listener a cluster started with [`crate::ClusterOptions::secured`] has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Listener {
    /// `SSL` with required client certificates (mTLS).
    Mtls,
    /// `SASL_SSL` with SCRAM-SHA-512 (the clients' default here) and SCRAM-SHA-256,
    /// one user with both (created when the log dirs are formatted).
    ScramSsl,
    /// `SASL_PLAINTEXT` with PLAIN.
    PlainSasl,
    /// `SASL_SSL` with OAUTHBEARER, checked by Kafka's unsecured JWS validator
    /// (librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` makes such tokens).
    OauthSsl,
    /// `SSL` (no client certificate) whose broker certificate expired yesterday.
    ExpiredCert,
    /// `SSL` (no client certificate) whose broker certificate names another host.
    WrongHost,
}

impl Listener {
    /// Every secured listener, in a fixed order.
    pub const ALL: [Listener; 6] = [
        Listener::Mtls,
        Listener::ScramSsl,
        Listener::PlainSasl,
        Listener::OauthSsl,
        Listener::ExpiredCert,
        Listener::WrongHost,
    ];

    /// The listeners that carry data (every one but the two with a bad broker
    /// certificate), each with the short name tests give the logical cluster behind it.
    pub const READ_THROUGH: [(Listener, &'static str); 4] = [
        (Listener::Mtls, "mtls"),
        (Listener::ScramSsl, "scram"),
        (Listener::PlainSasl, "plain"),
        (Listener::OauthSsl, "oauth"),
    ];

    /// The listener's name in `server.properties` (upper case).
    pub fn name(self) -> &'static str {
        match self {
            Listener::Mtls => "MTLS",
            Listener::ScramSsl => "SCRAM",
            Listener::PlainSasl => "PLAIN",
            Listener::OauthSsl => "OAUTH",
            Listener::ExpiredCert => "EXPIRED",
            Listener::WrongHost => "WRONGHOST",
        }
    }

    /// Its `security.protocol`.
    pub fn protocol(self) -> &'static str {
        match self {
            Listener::Mtls | Listener::ExpiredCert | Listener::WrongHost => "SSL",
            Listener::ScramSsl | Listener::OauthSsl => "SASL_SSL",
            Listener::PlainSasl => "SASL_PLAINTEXT",
        }
    }

    fn index(self) -> usize {
        Listener::ALL
            .iter()
            .position(|l| *l == self)
            .expect("every listener is in ALL")
    }
}

/// The certificates and credentials of a secured cluster. Paths are PEM files.
#[derive(Clone, Debug)]
pub struct Security {
    /// The directory holding every file below.
    pub dir: PathBuf,
    /// The CA that signed the broker and client certificates.
    pub ca: PathBuf,
    /// A CA that signed nothing this cluster uses (for "untrusted CA" tests).
    pub other_ca: PathBuf,
    /// The client certificate for the mTLS listener (signed by [`Security::ca`]).
    pub client_cert: PathBuf,
    /// Its private key (PKCS#8, unencrypted).
    pub client_key: PathBuf,
    /// A client certificate signed by [`Security::ca`] that expired yesterday.
    pub expired_client_cert: PathBuf,
    /// Its private key.
    pub expired_client_key: PathBuf,
    /// The SCRAM user (SCRAM-SHA-512 and SCRAM-SHA-256).
    pub scram_user: String,
    /// Its password (random per cluster).
    pub scram_password: String,
    /// The PLAIN user.
    pub plain_user: String,
    /// Its password (random per cluster).
    pub plain_password: String,
    /// The principal the OAUTHBEARER client puts in its unsecured token.
    pub oauth_principal: String,
}

fn ssl_err(what: &str) -> impl FnOnce(openssl::error::ErrorStack) -> TestkitError + '_ {
    move |e| TestkitError::Kafka {
        cluster: "-".into(),
        message: format!("generating {what}: {e}"),
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), TestkitError> {
    fs::write(path, bytes).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A random lower-case hex string of `n` bytes.
pub(crate) fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    openssl::rand::rand_bytes(&mut bytes).expect("OpenSSL's random generator works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn new_key() -> Result<PKey<Private>, TestkitError> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).map_err(ssl_err("a key"))?;
    let ec = EcKey::generate(&group).map_err(ssl_err("a key"))?;
    PKey::from_ec_key(ec).map_err(ssl_err("a key"))
}

/// Validity window in days relative to now: `(not_before, not_after)`.
type Days = (i64, i64);

const VALID: Days = (-1, 3650);
const EXPIRED: Days = (-30, -1);

struct Issued {
    cert: X509,
    key: PKey<Private>,
}

/// What a certificate is for.
enum Kind<'a> {
    Ca,
    Server {
        dns: &'a [&'a str],
        ips: &'a [&'a str],
    },
    Client,
}

fn issue(
    cn: &str,
    kind: Kind<'_>,
    days: Days,
    issuer: Option<&Issued>,
) -> Result<Issued, TestkitError> {
    let e = || ssl_err("a certificate");
    let key = new_key()?;
    let mut name = X509NameBuilder::new().map_err(e())?;
    name.append_entry_by_nid(Nid::COMMONNAME, cn).map_err(e())?;
    let name = name.build();
    let mut b = X509::builder().map_err(e())?;
    b.set_version(2).map_err(e())?;
    let mut serial = BigNum::new().map_err(e())?;
    serial
        .rand(120, MsbOption::MAYBE_ZERO, false)
        .map_err(e())?;
    let serial = Asn1Integer::from_bn(&serial).map_err(e())?;
    b.set_serial_number(&serial).map_err(e())?;
    b.set_subject_name(&name).map_err(e())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let day = 86_400;
    let not_before = Asn1Time::from_unix(now + days.0 * day).map_err(e())?;
    let not_after = Asn1Time::from_unix(now + days.1 * day).map_err(e())?;
    b.set_not_before(&not_before).map_err(e())?;
    b.set_not_after(&not_after).map_err(e())?;
    b.set_pubkey(&key).map_err(e())?;
    match kind {
        Kind::Ca => {
            b.append_extension(
                BasicConstraints::new()
                    .critical()
                    .ca()
                    .build()
                    .map_err(e())?,
            )
            .map_err(e())?;
            b.append_extension(
                KeyUsage::new()
                    .critical()
                    .key_cert_sign()
                    .crl_sign()
                    .build()
                    .map_err(e())?,
            )
            .map_err(e())?;
        }
        Kind::Server { dns, ips } => {
            let ctx_issuer = issuer.map(|i| &i.cert);
            let mut san = SubjectAlternativeName::new();
            for d in dns {
                san.dns(d);
            }
            for ip in ips {
                san.ip(ip);
            }
            let ext = san
                .build(&b.x509v3_context(ctx_issuer.map(|c| &**c), None))
                .map_err(e())?;
            b.append_extension(ext).map_err(e())?;
            b.append_extension(
                ExtendedKeyUsage::new()
                    .server_auth()
                    .client_auth()
                    .build()
                    .map_err(e())?,
            )
            .map_err(e())?;
        }
        Kind::Client => {
            b.append_extension(ExtendedKeyUsage::new().client_auth().build().map_err(e())?)
                .map_err(e())?;
        }
    }
    match issuer {
        Some(i) => {
            b.set_issuer_name(i.cert.subject_name()).map_err(e())?;
            b.sign(&i.key, MessageDigest::sha256()).map_err(e())?;
        }
        None => {
            b.set_issuer_name(&name).map_err(e())?;
            b.sign(&key, MessageDigest::sha256()).map_err(e())?;
        }
    }
    Ok(Issued {
        cert: b.build(),
        key,
    })
}

/// Writes `<stem>.pem` (certificate), `<stem>.key` (PKCS#8 key) and, when `keystore`,
/// `<stem>-keystore.pem` (key then the chain up to `ca`, what a broker's PEM keystore
/// wants).
fn save(
    dir: &Path,
    stem: &str,
    it: &Issued,
    ca: Option<&Issued>,
    keystore: bool,
) -> Result<(PathBuf, PathBuf), TestkitError> {
    let e = || ssl_err("PEM text");
    let cert_pem = it.cert.to_pem().map_err(e())?;
    let key_pem = it.key.private_key_to_pem_pkcs8().map_err(e())?;
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}.key"));
    write(&cert, &cert_pem)?;
    write(&key, &key_pem)?;
    if keystore {
        let mut all = key_pem.clone();
        all.extend_from_slice(&cert_pem);
        if let Some(ca) = ca {
            all.extend_from_slice(&ca.cert.to_pem().map_err(e())?);
        }
        write(&dir.join(format!("{stem}-keystore.pem")), &all)?;
    }
    Ok((cert, key))
}

impl Security {
    /// Generates every certificate and credential into `dir`.
    pub(crate) fn generate(dir: &Path) -> Result<Security, TestkitError> {
        fs::create_dir_all(dir).map_err(|source| TestkitError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let loopback = Kind::Server {
            dns: &["localhost"],
            ips: &["127.0.0.1"],
        };
        let ca = issue("mck-test-ca", Kind::Ca, VALID, None)?;
        let other = issue("mck-other-ca", Kind::Ca, VALID, None)?;
        let broker = issue("mck-broker", loopback, VALID, Some(&ca))?;
        let expired_broker = issue(
            "mck-broker-expired",
            Kind::Server {
                dns: &["localhost"],
                ips: &["127.0.0.1"],
            },
            EXPIRED,
            Some(&ca),
        )?;
        let wrong_host = issue(
            "mck-broker-wrong-host",
            Kind::Server {
                dns: &["kafka.wrong-host.invalid"],
                ips: &[],
            },
            VALID,
            Some(&ca),
        )?;
        let client = issue("mck-client", Kind::Client, VALID, Some(&ca))?;
        let expired_client = issue("mck-client-expired", Kind::Client, EXPIRED, Some(&ca))?;
        let (ca_pem, _) = save(dir, "ca", &ca, None, false)?;
        let (other_pem, _) = save(dir, "other-ca", &other, None, false)?;
        save(dir, "broker", &broker, Some(&ca), true)?;
        save(dir, "broker-expired", &expired_broker, Some(&ca), true)?;
        save(dir, "broker-wrong-host", &wrong_host, Some(&ca), true)?;
        let (client_cert, client_key) = save(dir, "client", &client, None, false)?;
        let (expired_client_cert, expired_client_key) =
            save(dir, "client-expired", &expired_client, None, false)?;
        Ok(Security {
            dir: dir.to_path_buf(),
            ca: ca_pem,
            other_ca: other_pem,
            client_cert,
            client_key,
            expired_client_cert,
            expired_client_key,
            scram_user: "alice".into(),
            scram_password: format!("scram-{}", random_hex(12)),
            plain_user: "bob".into(),
            plain_password: format!("plain-{}", random_hex(12)),
            oauth_principal: "carol".into(),
        })
    }

    /// The `kafka-storage format` arguments that create the SCRAM user.
    pub(crate) fn format_args(&self) -> Vec<String> {
        vec![
            "--add-scram".into(),
            format!(
                "SCRAM-SHA-512=[name={},password={}]",
                self.scram_user, self.scram_password
            ),
            "--add-scram".into(),
            format!(
                "SCRAM-SHA-256=[name={},password={}]",
                self.scram_user, self.scram_password
            ),
        ]
    }

    /// `server.properties` entries for the secured listeners (the listener list and
    /// protocol map are the caller's).
    pub(crate) fn broker_properties(&self) -> Vec<(String, String)> {
        let d = |f: &str| self.dir.join(f).display().to_string();
        vec![
            ("ssl.keystore.type".into(), "PEM".into()),
            ("ssl.keystore.location".into(), d("broker-keystore.pem")),
            ("ssl.truststore.type".into(), "PEM".into()),
            ("ssl.truststore.location".into(), d("ca.pem")),
            ("ssl.client.auth".into(), "none".into()),
            ("listener.name.mtls.ssl.client.auth".into(), "required".into()),
            (
                "listener.name.expired.ssl.keystore.location".into(),
                d("broker-expired-keystore.pem"),
            ),
            (
                "listener.name.wronghost.ssl.keystore.location".into(),
                d("broker-wrong-host-keystore.pem"),
            ),
            (
                "listener.name.scram.sasl.enabled.mechanisms".into(),
                "SCRAM-SHA-512,SCRAM-SHA-256".into(),
            ),
            (
                "listener.name.scram.scram-sha-512.sasl.jaas.config".into(),
                "org.apache.kafka.common.security.scram.ScramLoginModule required;".into(),
            ),
            (
                "listener.name.scram.scram-sha-256.sasl.jaas.config".into(),
                "org.apache.kafka.common.security.scram.ScramLoginModule required;".into(),
            ),
            (
                "listener.name.plain.sasl.enabled.mechanisms".into(),
                "PLAIN".into(),
            ),
            (
                "listener.name.plain.plain.sasl.jaas.config".into(),
                format!(
                    "org.apache.kafka.common.security.plain.PlainLoginModule required user_{}=\"{}\";",
                    self.plain_user, self.plain_password
                ),
            ),
            (
                "listener.name.oauth.sasl.enabled.mechanisms".into(),
                "OAUTHBEARER".into(),
            ),
            (
                "listener.name.oauth.oauthbearer.sasl.jaas.config".into(),
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                    .into(),
            ),
            (
                "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class".into(),
                "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler".into(),
            ),
        ]
    }

    /// The librdkafka properties (besides `bootstrap.servers`) that reach `listener`
    /// with valid credentials.
    pub fn client_properties(&self, listener: Listener) -> Vec<(String, String)> {
        let s = |k: &str, v: &str| (k.to_string(), v.to_string());
        let path = |p: &Path| p.display().to_string();
        let mut p = vec![s("security.protocol", listener.protocol())];
        if listener.protocol().ends_with("SSL") {
            p.push(s("ssl.ca.location", &path(&self.ca)));
        }
        match listener {
            Listener::Mtls => {
                p.push(s("ssl.certificate.location", &path(&self.client_cert)));
                p.push(s("ssl.key.location", &path(&self.client_key)));
            }
            Listener::ScramSsl => {
                p.push(s("sasl.mechanism", "SCRAM-SHA-512"));
                p.push(s("sasl.username", &self.scram_user));
                p.push(s("sasl.password", &self.scram_password));
            }
            Listener::PlainSasl => {
                p.push(s("sasl.mechanism", "PLAIN"));
                p.push(s("sasl.username", &self.plain_user));
                p.push(s("sasl.password", &self.plain_password));
            }
            Listener::OauthSsl => {
                p.push(s("sasl.mechanism", "OAUTHBEARER"));
                p.push(s("enable.sasl.oauthbearer.unsecure.jwt", "true"));
                p.push(s(
                    "sasl.oauthbearer.config",
                    &format!("principal={}", self.oauth_principal),
                ));
            }
            Listener::ExpiredCert | Listener::WrongHost => {}
        }
        p
    }

    /// The port index of `listener` among a broker's secured ports.
    pub(crate) fn slot(listener: Listener) -> usize {
        listener.index()
    }
}
