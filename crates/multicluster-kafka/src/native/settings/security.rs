//! The cluster's TLS (`ssl.*`) and SASL credentials (`sasl.*`); OAUTHBEARER's tokens
//! are [`super::tokens`]'.

use crate::base::properties::{ClientProperties, hide_secrets};
use crate::error::SourceError;

use multicluster_kafka_client::credentials::{Mechanism, Sasl};
use multicluster_kafka_client::tls::{Pem, Tls, TlsSettings};

use super::tokens::oauth;
use super::{Given, refused};

/// The cluster's TLS from its `ssl.*` properties (librdkafka's names and defaults),
/// with its files read; none unless `security.protocol=ssl`.
pub(super) fn tls(given: &Given<'_>) -> Result<Option<Tls>, SourceError> {
    let props = given.props;
    let ssl = props.get("security.protocol").is_some_and(|p| {
        let p = p.trim();
        p.eq_ignore_ascii_case("ssl") || p.eq_ignore_ascii_case("sasl_ssl")
    });
    if !ssl {
        return Ok(None);
    }
    let pem = |file: &str, text: &str| {
        props
            .get(text)
            .map(|t| Pem::Text(t.to_string()))
            .or_else(|| props.get(file).map(|f| Pem::File(f.trim().into())))
    };
    // A property with two values (case-insensitive; unset: the first, librdkafka's
    // default) as a bool.
    let either = |property: &str, yes: &str, no: &str| match props
        .get(property)
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => Ok(true),
        Some(v) if v == yes => Ok(true),
        Some(v) if v == no => Ok(false),
        Some(_) => Err(refused(given, property, format!("{yes} or {no}"))),
    };
    let verify_hostname = either("ssl.endpoint.identification.algorithm", "https", "none")?;
    let verify_certificate = either("enable.ssl.certificate.verification", "true", "false")?;
    let settings = TlsSettings {
        // librdkafka's `probe` looks for the system's CAs: OpenSSL's defaults.
        ca: pem("ssl.ca.location", "ssl.ca.pem")
            .filter(|p| !matches!(p, Pem::File(f) if f.as_os_str() == "probe")),
        certificate: pem("ssl.certificate.location", "ssl.certificate.pem"),
        key: pem("ssl.key.location", "ssl.key.pem"),
        key_password: props.get("ssl.key.password").map(str::to_string),
        verify_hostname,
        verify_certificate,
    };
    // A path given by reference (`${env:…}`, `${file:…}`) is as secret as its
    // value: hidden like librdkafka's words about it.
    Tls::new(&settings)
        .map(Some)
        .map_err(|e| SourceError::Kafka {
            cluster: given.cluster.to_string(),
            message: hide_secrets(&e.to_string(), &props.secret_texts()).into_owned(),
            kind: crate::error::KafkaErrorKind::Configuration,
            retriable: false,
        })
}

/// `sasl.mechanism` (or its other spelling `sasl.mechanisms`), if set.
pub(super) fn mechanism(props: &ClientProperties) -> Option<&str> {
    props
        .get("sasl.mechanism")
        .or_else(|| props.get("sasl.mechanisms"))
}

/// The cluster's SASL credentials; none unless `security.protocol` is `sasl_*`.
pub(super) fn sasl(given: &Given<'_>) -> Result<Option<Sasl>, SourceError> {
    let props = given.props;
    let sasl = props
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl"));
    if !sasl {
        return Ok(None);
    }
    let mechanism = mechanism(props).and_then(Mechanism::parse).ok_or_else(|| {
        refused(
            given,
            "sasl.mechanism",
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
        )
    })?;
    if mechanism == Mechanism::OAuthBearer {
        return oauth(given).map(|tokens| Some(Sasl::oauth(tokens)));
    }
    let username = props
        .get("sasl.username")
        .ok_or_else(|| refused(given, "sasl.username", "not set"))?;
    let password = props
        .get("sasl.password")
        .ok_or_else(|| refused(given, "sasl.password", "not set"))?;
    Ok(Some(Sasl::password(
        mechanism,
        username.to_string(),
        password.to_string(),
    )))
}
