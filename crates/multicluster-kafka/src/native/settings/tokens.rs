//! Where an OAUTHBEARER cluster's tokens come from: the client hooks, an unsecured
//! JWT, or an OIDC token endpoint (with a client secret or a JWT assertion).

use std::path::Path;

use crate::base::properties::hide_secrets;
use crate::error::SourceError;

use multicluster_kafka_client::assertion::{
    self as jwt, Algorithm, Assertion, Claims, Key, Signed,
};
use multicluster_kafka_client::credentials::Tokens;
use multicluster_kafka_client::oauth::Unsecured;
use multicluster_kafka_client::oidc::{Grant, JWT_BEARER, Oidc, Roots};

use super::{Given, refused};

/// Tokens from the OIDC token endpoint of `sasl.oauthbearer.*` and `https.ca.*`.
fn oidc_tokens(given: &Given<'_>) -> Result<Tokens, SourceError> {
    let props = given.props;
    let required = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| props.get(k))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                refused(
                    given,
                    keys[0],
                    "not set (sasl.oauthbearer.method=oidc needs it)",
                )
            })
    };
    let endpoint = required(&["sasl.oauthbearer.token.endpoint.url"])?;
    let jwt_bearer = props
        .get("sasl.oauthbearer.grant.type")
        .is_some_and(|g| g.trim().eq_ignore_ascii_case(JWT_BEARER));
    let grant = if jwt_bearer {
        // librdkafka sends no client id nor secret with this grant.
        Grant::JwtBearer(assertion(given)?)
    } else {
        let id = required(&[
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.credentials.client.id",
        ])?;
        let secret = required(&[
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
        ])?;
        Grant::ClientCredentials {
            id: id.to_string(),
            secret: secret.to_string(),
        }
    };
    let extensions = multicluster_kafka_client::oauth::parse_extensions(
        props.get("sasl.oauthbearer.extensions").unwrap_or(""),
    )
    .map_err(|why| refused(given, "sasl.oauthbearer.extensions", why))?;
    let roots = match (props.get("https.ca.pem"), props.get("https.ca.location")) {
        (Some(pem), _) => Roots::Pem(pem.as_bytes().to_vec()),
        (None, None) => Roots::System,
        (None, Some(l)) if l.trim() == "probe" => Roots::System,
        (None, Some(location)) => Roots::Pem(
            read_cas(Path::new(location.trim()))
                .map_err(|why| refused(given, "https.ca.location", why))?,
        ),
    };
    let ca_key = if props.get("https.ca.pem").is_some() {
        "https.ca.pem"
    } else {
        "https.ca.location"
    };
    let oidc =
        Oidc::new(endpoint, grant, props.get("sasl.oauthbearer.scope"), roots).map_err(|why| {
            let key = if why.starts_with("the CA") {
                ca_key
            } else {
                "sasl.oauthbearer.token.endpoint.url"
            };
            refused(given, key, why)
        })?;
    Ok(Tokens::oidc(oidc, extensions))
}

/// The JWT-bearer grant's assertions from `sasl.oauthbearer.assertion.*`, as librdkafka
/// takes them: a prepared one from `sasl.oauthbearer.assertion.file` (which no other
/// assertion property may join), else one signed with the private key of `.file` or
/// `.pem` (one of them). Checked now: the files read, the key opened, the claims
/// complete; an error names the property, never a secret.
fn assertion(given: &Given<'_>) -> Result<Assertion, SourceError> {
    let props = given.props;
    let set = |key: &str| {
        props
            .get(key)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let assertion = if let Some(file) = set(jwt::FILE) {
        let others = [
            jwt::KEY_FILE,
            jwt::KEY_PEM,
            jwt::PASSPHRASE,
            jwt::TEMPLATE,
            jwt::SUB,
            jwt::AUD,
            jwt::ISS,
            jwt::JTI,
            jwt::EXP,
            jwt::NBF,
        ];
        if let Some(other) = others.into_iter().find(|k| props.get(k).is_some()) {
            return Err(refused(
                given,
                other,
                format!("cannot be set with {} (a prepared assertion)", jwt::FILE),
            ));
        }
        Assertion::File(file.into())
    } else {
        let key = match (props.get(jwt::KEY_FILE), props.get(jwt::KEY_PEM)) {
            (Some(_), Some(_)) => {
                return Err(refused(
                    given,
                    jwt::KEY_PEM,
                    format!("cannot be set with {}: one key", jwt::KEY_FILE),
                ));
            }
            (Some(file), None) => Key::File(file.trim().into()),
            (None, Some(pem)) => Key::Pem(pem.to_string()),
            (None, None) => {
                return Err(refused(
                    given,
                    jwt::KEY_FILE,
                    format!(
                        "not set, nor {}, nor {} (sasl.oauthbearer.grant.type={JWT_BEARER} needs one)",
                        jwt::KEY_PEM,
                        jwt::FILE
                    ),
                ));
            }
        };
        let algorithm = match props.get(jwt::ALGORITHM) {
            None => Algorithm::Rs256,
            Some(a) => Algorithm::parse(a)
                .ok_or_else(|| refused(given, jwt::ALGORITHM, "RS256 or ES256"))?,
        };
        let seconds = |key: &str, least: u64, default: u64| match props.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (least..=2_147_483_647).contains(n))
                .ok_or_else(|| {
                    refused(
                        given,
                        key,
                        format!("a number of seconds, {least} to 2147483647"),
                    )
                }),
        };
        let jti = match props.get(jwt::JTI).map(|v| v.trim().to_ascii_lowercase()) {
            None => false,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(_) => return Err(refused(given, jwt::JTI, "true or false")),
        };
        let claims = Claims {
            sub: set(jwt::SUB),
            iss: set(jwt::ISS),
            aud: set(jwt::AUD),
            exp_seconds: seconds(jwt::EXP, 1, 300)?,
            nbf_seconds: seconds(jwt::NBF, 0, 60)?,
            jti,
        };
        Assertion::Signed(Box::new(Signed {
            algorithm,
            key,
            passphrase: props.get(jwt::PASSPHRASE).map(str::to_string),
            template: set(jwt::TEMPLATE).map(Into::into),
            claims,
        }))
    };
    assertion.check().map_err(|r| {
        // Paths given by reference (`${file:…}`) are as secret as their values.
        let why = hide_secrets(&r.why, &props.secret_texts()).into_owned();
        refused(given, r.property, why)
    })?;
    Ok(assertion)
}

/// The PEM certificates of a file, or of every file in a directory.
fn read_cas(location: &Path) -> Result<Vec<u8>, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", location.display());
    if !location.is_dir() {
        return std::fs::read(location).map_err(cannot);
    }
    let mut pem = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(location)
        .map_err(cannot)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    for path in entries {
        if let Ok(bytes) = std::fs::read(&path) {
            pem.extend_from_slice(&bytes);
            pem.push(b'\n');
        }
    }
    Ok(pem)
}

/// Where an OAUTHBEARER cluster's tokens come from, as librdkafka takes them: the
/// client hooks when they make tokens, else an unsecured JWT when
/// `enable.sasl.oauthbearer.unsecure.jwt` is true; both, or neither, is refused.
pub(super) fn oauth(given: &Given<'_>) -> Result<Tokens, SourceError> {
    let props = given.props;
    let unsecure = props
        .get("enable.sasl.oauthbearer.unsecure.jwt")
        .map(str::trim);
    let unsecure = match unsecure {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(refused(
                given,
                "enable.sasl.oauthbearer.unsecure.jwt",
                "true or false",
            ));
        }
    };
    let config = props.get("sasl.oauthbearer.config");
    let hooks = given.hooks.filter(|h| h.enable_token_refresh());
    let oidc = props
        .get("sasl.oauthbearer.method")
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("oidc"));
    if oidc {
        if hooks.is_some() || unsecure {
            return Err(refused(
                given,
                "sasl.oauthbearer.method",
                "oidc makes the tokens; the client hooks or an unsecured JWT cannot too",
            ));
        }
        return oidc_tokens(given);
    }
    match (hooks, unsecure) {
        (Some(_), true) => Err(refused(
            given,
            "enable.sasl.oauthbearer.unsecure.jwt",
            "the client hooks make the tokens; set one or the other",
        )),
        (Some(h), false) => Ok(crate::native::reported::hooks_tokens(
            h.clone(),
            config.map(str::to_string),
        )),
        (None, true) => {
            let u = Unsecured::parse(config.unwrap_or(""))
                .map_err(|why| refused(given, "sasl.oauthbearer.config", why))?;
            Ok(Tokens::unsecured(u))
        }
        (None, false) => Err(refused(
            given,
            "sasl.mechanism",
            "OAUTHBEARER needs tokens: client hooks that make them, or enable.sasl.oauthbearer.unsecure.jwt=true",
        )),
    }
}
