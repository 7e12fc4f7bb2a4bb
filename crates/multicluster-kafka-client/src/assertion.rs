//! The assertion of OIDC's JWT-bearer grant (RFC 7523), from librdkafka's
//! `sasl.oauthbearer.assertion.*` properties: either a prepared one, read anew from
//! `sasl.oauthbearer.assertion.file` for every token request, or one made here for
//! every request and signed with the client's private key (RS256 or ES256, OpenSSL).
//!
//! A made assertion is as librdkafka makes it: the header and payload of
//! `jwt.template.file` when it is set (else empty), with `alg` and `typ` in the header,
//! `iat` (now), `exp` (now + `claim.exp.seconds`) and `nbf` (now −
//! `claim.nbf.seconds`) in the payload always, and `sub`, `iss`, `aud` (the `claim.*`
//! properties) and a random `jti` replacing the template's when they are set. An
//! ES256 signature is JWS's `r || s` (RFC 7518 §3.4), 64 bytes. As with librdkafka,
//! an assertion without an issuer or an audience is sent all the same (RFC 7523 §3
//! wants both; the identity provider says whether it does): a cluster that reads on
//! librdkafka reads here too.
//!
//! The private key, its passphrase and the assertion never reach an error, a log
//! or `Debug` output; nor does the key's path, which librdkafka treats as
//! sensitive too.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openssl::ecdsa::EcdsaSig;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private};
use serde_json::{Map, Value};

/// The property of a prepared assertion's file.
pub const FILE: &str = "sasl.oauthbearer.assertion.file";
/// The property of the signing algorithm.
pub const ALGORITHM: &str = "sasl.oauthbearer.assertion.algorithm";
/// The property of the private key's file.
pub const KEY_FILE: &str = "sasl.oauthbearer.assertion.private.key.file";
/// The property of the private key as PEM text.
pub const KEY_PEM: &str = "sasl.oauthbearer.assertion.private.key.pem";
/// The property of the private key's passphrase.
pub const PASSPHRASE: &str = "sasl.oauthbearer.assertion.private.key.passphrase";
/// The property of the JWT template's file.
pub const TEMPLATE: &str = "sasl.oauthbearer.assertion.jwt.template.file";
/// The property of the `sub` claim.
pub const SUB: &str = "sasl.oauthbearer.assertion.claim.sub";
/// The property of the `iss` claim.
pub const ISS: &str = "sasl.oauthbearer.assertion.claim.iss";
/// The property of the `aud` claim.
pub const AUD: &str = "sasl.oauthbearer.assertion.claim.aud";
/// The property of the assertion's lifetime in seconds (`exp` − `iat`).
pub const EXP: &str = "sasl.oauthbearer.assertion.claim.exp.seconds";
/// The property of the seconds before now the assertion is valid from (`iat` − `nbf`).
pub const NBF: &str = "sasl.oauthbearer.assertion.claim.nbf.seconds";
/// The property that adds a random `jti` claim.
pub const JTI: &str = "sasl.oauthbearer.assertion.claim.jti.include";

/// The most bytes read of a prepared assertion or a template (librdkafka's limit).
const MAX_FILE: u64 = 1 << 20;

/// How a made assertion is signed (`sasl.oauthbearer.assertion.algorithm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (librdkafka's default).
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
}

impl Algorithm {
    /// The algorithm a property value names (either case), if it is one of the two.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_uppercase().as_str() {
            "RS256" => Some(Self::Rs256),
            "ES256" => Some(Self::Es256),
            _ => None,
        }
    }

    /// Its name in a JWS header.
    fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Es256 => "ES256",
        }
    }
}

/// Where the private key is.
#[derive(Clone)]
pub enum Key {
    /// A PEM file (`sasl.oauthbearer.assertion.private.key.file`), read for every
    /// assertion so that a replaced key is taken.
    File(PathBuf),
    /// PEM text (`sasl.oauthbearer.assertion.private.key.pem`).
    Pem(String),
}

impl Key {
    /// The property the key comes from.
    fn property(&self) -> &'static str {
        match self {
            Self::File(_) => KEY_FILE,
            Self::Pem(_) => KEY_PEM,
        }
    }
}

/// The claims properties of a made assertion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    pub sub: Option<String>,
    pub iss: Option<String>,
    pub aud: Option<String>,
    /// Seconds from `iat` to `exp` (librdkafka's default 300).
    pub exp_seconds: u64,
    /// Seconds from `nbf` to `iat` (librdkafka's default 60).
    pub nbf_seconds: u64,
    /// Whether a random `jti` (a UUID) is added.
    pub jti: bool,
}

impl Default for Claims {
    fn default() -> Self {
        Self {
            sub: None,
            iss: None,
            aud: None,
            exp_seconds: 300,
            nbf_seconds: 60,
            jti: false,
        }
    }
}

/// An assertion made and signed here for every token request.
#[derive(Clone)]
pub struct Signed {
    pub algorithm: Algorithm,
    pub key: Key,
    /// The key's passphrase, when it is encrypted.
    pub passphrase: Option<String>,
    /// `sasl.oauthbearer.assertion.jwt.template.file`, read for every assertion.
    pub template: Option<PathBuf>,
    pub claims: Claims,
}

/// Where a cluster's assertions come from.
#[derive(Clone)]
pub enum Assertion {
    /// A prepared assertion, read anew from this file for every token request (a
    /// file that some other program renews, such as a projected service account
    /// token).
    File(PathBuf),
    /// One made and signed here for every token request.
    Signed(Box<Signed>),
}

impl std::fmt::Debug for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("Assertion::File").field(path).finish(),
            Self::Signed(s) => f
                .debug_struct("Assertion::Signed")
                .field("algorithm", &s.algorithm)
                .field("key", &"[redacted]")
                .field("passphrase", &s.passphrase.as_ref().map(|_| "[redacted]"))
                .field("template", &s.template)
                .field("claims", &s.claims)
                .finish(),
        }
    }
}

/// Why an assertion cannot be had: the property at fault, and why (never a
/// secret's value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub property: &'static str,
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "property `{}` refused: {}", self.property, self.why)
    }
}

fn refusal(property: &'static str, why: impl Into<String>) -> Refusal {
    Refusal {
        property,
        why: why.into(),
    }
}

impl Assertion {
    /// The assertion for a token request made at `now`.
    pub fn make(&self, now: SystemTime) -> Result<String, Refusal> {
        match self {
            Self::File(path) => prepared(path),
            Self::Signed(signed) => signed.make(now),
        }
    }

    /// Whether an assertion can be had now (its files read, its key opened, its
    /// claims complete): what a cluster's settings check before any request.
    pub fn check(&self) -> Result<(), Refusal> {
        self.make(SystemTime::now()).map(drop)
    }
}

/// A file's text, at most [`MAX_FILE`] bytes; an error names `property` and says
/// why, with the path only when `show_path`.
fn read_text(property: &'static str, path: &Path, show_path: bool) -> Result<String, Refusal> {
    use std::io::Read as _;
    let at = if show_path {
        format!("{}: ", path.display())
    } else {
        String::new()
    };
    let file = std::fs::File::open(path).map_err(|e| refusal(property, format!("{at}{e}")))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| refusal(property, format!("{at}cannot read it: {e}")))?;
    if text.len() as u64 > MAX_FILE {
        return Err(refusal(property, format!("{at}larger than 1 MiB")));
    }
    Ok(text)
}

/// The prepared assertion of `path`, without the white space around it.
fn prepared(path: &Path) -> Result<String, Refusal> {
    let text = read_text(FILE, path, true)?;
    let assertion = text.trim();
    if assertion.is_empty() {
        return Err(refusal(FILE, format!("{}: empty", path.display())));
    }
    // A JWS or JWE in compact form: base64url parts joined by dots.
    let compact = assertion.contains('.')
        && assertion
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !compact {
        return Err(refusal(
            FILE,
            format!("{}: not a JWT in compact form", path.display()),
        ));
    }
    Ok(assertion.to_string())
}

impl Signed {
    /// The signed assertion for a request made at `now`.
    fn make(&self, now: SystemTime) -> Result<String, Refusal> {
        let (mut header, mut payload) = match &self.template {
            Some(path) => template(path)?,
            None => (Map::new(), Map::new()),
        };
        header.insert("alg".into(), self.algorithm.name().into());
        header.insert("typ".into(), "JWT".into());
        let iat = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        payload.insert("iat".into(), iat.into());
        payload.insert(
            "exp".into(),
            iat.saturating_add(self.claims.exp_seconds).into(),
        );
        payload.insert(
            "nbf".into(),
            iat.saturating_sub(self.claims.nbf_seconds).into(),
        );
        for (claim, value) in [
            ("sub", &self.claims.sub),
            ("iss", &self.claims.iss),
            ("aud", &self.claims.aud),
        ] {
            if let Some(v) = value {
                payload.insert(claim.into(), v.as_str().into());
            }
        }
        if self.claims.jti {
            payload.insert("jti".into(), random_uuid()?.into());
        }
        let key = self.private_key()?;
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(Value::Object(header).to_string()),
            URL_SAFE_NO_PAD.encode(Value::Object(payload).to_string())
        );
        let signature = sign(self.algorithm, &key, signing_input.as_bytes())
            .map_err(|why| refusal(ALGORITHM, why))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }

    /// The private key, opened with the passphrase, of the algorithm's type.
    fn private_key(&self) -> Result<PKey<Private>, Refusal> {
        let property = self.key.property();
        let pem = match &self.key {
            Key::Pem(text) => text.as_bytes().to_vec(),
            // The path is as secret as the key for librdkafka: never shown.
            Key::File(path) => std::fs::read(path)
                .map_err(|e| refusal(property, format!("cannot read the file: {e}")))?,
        };
        let passphrase = self.passphrase.as_deref().unwrap_or("").as_bytes();
        // A callback, never OpenSSL's default one, which would ask on the terminal
        // for the passphrase of an encrypted key.
        let key = PKey::private_key_from_pem_callback(&pem, |buf| {
            let n = passphrase.len();
            if n > buf.len() {
                return Err(openssl::error::ErrorStack::get());
            }
            buf[..n].copy_from_slice(passphrase);
            Ok(n)
        });
        let key = match key {
            Ok(key) => key,
            Err(_) => {
                // Said of the text without showing any of it.
                let encrypted = pem.windows(9).any(|w| w == b"ENCRYPTED");
                return Err(match (encrypted, self.passphrase.is_some()) {
                    (true, true) => refusal(PASSPHRASE, "does not open the private key"),
                    (true, false) => {
                        refusal(PASSPHRASE, "not set, and the private key is encrypted")
                    }
                    (false, _) => refusal(property, "not a PEM private key"),
                });
            }
        };
        let fits = match self.algorithm {
            Algorithm::Rs256 => key.id() == Id::RSA,
            Algorithm::Es256 => key
                .ec_key()
                .is_ok_and(|ec| ec.group().curve_name() == Some(Nid::X9_62_PRIME256V1)),
        };
        if !fits {
            let needs = match self.algorithm {
                Algorithm::Rs256 => "RS256 signs with an RSA key",
                Algorithm::Es256 => "ES256 signs with an EC key on P-256 (prime256v1)",
            };
            return Err(refusal(
                ALGORITHM,
                format!("{needs}, and the private key is not one"),
            ));
        }
        Ok(key)
    }
}

/// A JSON object: a JWT's header or payload.
type Object = Map<String, Value>;

/// The `header` and `payload` objects of a JWT template file.
fn template(path: &Path) -> Result<(Object, Object), Refusal> {
    let at = path.display();
    let text = read_text(TEMPLATE, path, true)?;
    if text.trim().is_empty() {
        return Err(refusal(TEMPLATE, format!("{at}: empty")));
    }
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| refusal(TEMPLATE, format!("{at}: not JSON ({e})")))?;
    let object = |name: &str| match json.get(name) {
        Some(Value::Object(m)) => Ok(m.clone()),
        _ => Err(refusal(
            TEMPLATE,
            format!(
                "{at}: a JWT template is a JSON object with a `header` object and a `payload` object"
            ),
        )),
    };
    Ok((object("header")?, object("payload")?))
}

/// The JWS signature of `input` with `key`: PKCS#1 v1.5 for RS256, `r || s` for
/// ES256.
fn sign(algorithm: Algorithm, key: &PKey<Private>, input: &[u8]) -> Result<Vec<u8>, String> {
    let openssl = |e: openssl::error::ErrorStack| format!("signing failed: {e}");
    let mut signer = openssl::sign::Signer::new(MessageDigest::sha256(), key).map_err(openssl)?;
    signer.update(input).map_err(openssl)?;
    let signature = signer.sign_to_vec().map_err(openssl)?;
    match algorithm {
        Algorithm::Rs256 => Ok(signature),
        Algorithm::Es256 => {
            // OpenSSL's ECDSA signature is DER; JWS's is the two numbers, 32 bytes each.
            let sig = EcdsaSig::from_der(&signature).map_err(openssl)?;
            let mut raw = sig.r().to_vec_padded(32).map_err(openssl)?;
            raw.extend(sig.s().to_vec_padded(32).map_err(openssl)?);
            Ok(raw)
        }
    }
}

/// A random UUID (version 4), hyphenated, for a `jti` claim.
fn random_uuid() -> Result<String, Refusal> {
    let mut bytes = [0u8; 16];
    openssl::rand::rand_bytes(&mut bytes)
        .map_err(|e| refusal(JTI, format!("no random bytes: {e}")))?;
    Ok(uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::pkey::Public;
    use openssl::rsa::Rsa;
    use std::time::Duration;

    const NOW: u64 = 1_700_000_000;

    fn at_now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(NOW)
    }

    fn rsa() -> PKey<Private> {
        PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap()
    }

    fn ec() -> PKey<Private> {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
    }

    fn pem(key: &PKey<Private>) -> String {
        String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap()
    }

    fn public(key: &PKey<Private>) -> PKey<Public> {
        PKey::public_key_from_pem(&key.public_key_to_pem().unwrap()).unwrap()
    }

    fn signed(algorithm: Algorithm, key: Key, claims: Claims) -> Signed {
        Signed {
            algorithm,
            key,
            passphrase: None,
            template: None,
            claims,
        }
    }

    fn claims() -> Claims {
        Claims {
            sub: Some("orders-reader".into()),
            iss: Some("orders-app".into()),
            aud: Some("https://idp.example/token".into()),
            ..Claims::default()
        }
    }

    /// The header and payload of `jwt`, once its signature verifies with `key`.
    fn verified(jwt: &str, algorithm: Algorithm, key: &PKey<Public>) -> (Value, Value) {
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3, "{jwt}");
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let input = format!("{}.{}", parts[0], parts[1]);
        let mut verifier = openssl::sign::Verifier::new(MessageDigest::sha256(), key).unwrap();
        verifier.update(input.as_bytes()).unwrap();
        let ok = match algorithm {
            Algorithm::Rs256 => verifier.verify(&signature).unwrap(),
            Algorithm::Es256 => {
                assert_eq!(signature.len(), 64, "r || s, not DER");
                let r = openssl::bn::BigNum::from_slice(&signature[..32]).unwrap();
                let s = openssl::bn::BigNum::from_slice(&signature[32..]).unwrap();
                let der = EcdsaSig::from_private_components(r, s)
                    .unwrap()
                    .to_der()
                    .unwrap();
                verifier.verify(&der).unwrap()
            }
        };
        assert!(ok, "the signature verifies");
        let json = |p: &str| serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap();
        (json(parts[0]), json(parts[1]))
    }

    #[test]
    fn rs256_and_es256_assertions_verify_with_the_public_key_and_carry_the_claims() {
        for (algorithm, key) in [(Algorithm::Rs256, rsa()), (Algorithm::Es256, ec())] {
            let mut c = claims();
            c.exp_seconds = 600;
            c.nbf_seconds = 30;
            c.jti = true;
            let jwt = signed(algorithm, Key::Pem(pem(&key)), c)
                .make(at_now())
                .unwrap();
            let (header, payload) = verified(&jwt, algorithm, &public(&key));
            assert_eq!(
                header,
                serde_json::json!({"alg": algorithm.name(), "typ": "JWT"})
            );
            assert_eq!(payload["iat"], NOW);
            assert_eq!(payload["exp"], NOW + 600);
            assert_eq!(payload["nbf"], NOW - 30);
            assert_eq!(payload["sub"], "orders-reader");
            assert_eq!(payload["iss"], "orders-app");
            assert_eq!(payload["aud"], "https://idp.example/token");
            let jti = payload["jti"].as_str().unwrap();
            assert_eq!(uuid::Uuid::parse_str(jti).unwrap().get_version_num(), 4);
            // Another key's public half does not verify it.
            let other = match algorithm {
                Algorithm::Rs256 => rsa(),
                Algorithm::Es256 => ec(),
            };
            let parts: Vec<&str> = jwt.rsplitn(2, '.').collect();
            let other = public(&other);
            let mut verifier =
                openssl::sign::Verifier::new(MessageDigest::sha256(), &other).unwrap();
            verifier.update(parts[1].as_bytes()).unwrap();
            let sig = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
            assert!(!verifier.verify(&sig).unwrap_or(false));
        }
    }

    #[test]
    fn defaults_are_librdkafkas_and_no_jti_unless_asked() {
        let key = rsa();
        let jwt = signed(Algorithm::Rs256, Key::Pem(pem(&key)), claims())
            .make(at_now())
            .unwrap();
        let (_, payload) = verified(&jwt, Algorithm::Rs256, &public(&key));
        assert_eq!(payload["exp"], NOW + 300);
        assert_eq!(payload["nbf"], NOW - 60);
        assert!(payload.get("jti").is_none());
    }

    #[test]
    fn the_template_is_merged_with_the_properties_winning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("template.json");
        std::fs::write(
            &path,
            r#"{"header":{"kid":"key-7","alg":"none","typ":"x"},
                "payload":{"sub":"from-template","iss":"template-iss","aud":["a","b"],
                           "scope":"kafka","exp":1,"iat":2,"nbf":3,"jti":"fixed"}}"#,
        )
        .unwrap();
        let key = ec();
        let mut s = signed(
            Algorithm::Es256,
            Key::Pem(pem(&key)),
            Claims {
                sub: Some("from-property".into()),
                ..Claims::default()
            },
        );
        s.template = Some(path.clone());
        let jwt = s.make(at_now()).unwrap();
        let (header, payload) = verified(&jwt, Algorithm::Es256, &public(&key));
        assert_eq!(
            header,
            serde_json::json!({"kid": "key-7", "alg": "ES256", "typ": "JWT"})
        );
        assert_eq!(
            payload,
            serde_json::json!({
                "sub": "from-property", "iss": "template-iss", "aud": ["a", "b"],
                "scope": "kafka", "iat": NOW, "exp": NOW + 300, "nbf": NOW - 60,
                "jti": "fixed"
            })
        );

        // Bad templates, each said naming the property.
        for (text, says) in [
            ("", "empty"),
            ("{not json", "not JSON"),
            (r#"{"header":{}}"#, "`payload` object"),
            (r#"{"header":"x","payload":{}}"#, "`header` object"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = s.make(at_now()).unwrap_err();
            assert_eq!(e.property, TEMPLATE, "{text}");
            assert!(e.why.contains(says), "{text}: {e}");
        }
        s.template = Some(dir.path().join("absent.json"));
        assert_eq!(s.make(at_now()).unwrap_err().property, TEMPLATE);
    }

    #[test]
    fn keys_from_files_with_passphrases_and_their_errors_never_show_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let key = rsa();
        let encrypted = key
            .private_key_to_pem_pkcs8_passphrase(
                openssl::symm::Cipher::aes_256_cbc(),
                b"open-sesame",
            )
            .unwrap();
        let file = dir.path().join("secret-key-path.pem");
        std::fs::write(&file, &encrypted).unwrap();
        let mut s = signed(Algorithm::Rs256, Key::File(file.clone()), claims());
        s.passphrase = Some("open-sesame".into());
        let jwt = s.make(at_now()).unwrap();
        verified(&jwt, Algorithm::Rs256, &public(&key));
        // Debug shows neither the key's path nor the passphrase.
        let shown = format!("{:?}", Assertion::Signed(Box::new(s.clone())));
        assert!(!shown.contains("open-sesame") && !shown.contains("secret-key-path"));

        let pem_text = pem(&key);
        let mut cases: Vec<(Signed, &str, &str)> = Vec::new();
        let mut wrong = s.clone();
        wrong.passphrase = Some("wrong-passphrase".into());
        cases.push((wrong, PASSPHRASE, "does not open"));
        let mut none = s.clone();
        none.passphrase = None;
        cases.push((none, PASSPHRASE, "not set"));
        let absent = signed(
            Algorithm::Rs256,
            Key::File(dir.path().join("absent-secret-key-path.pem")),
            claims(),
        );
        cases.push((absent, KEY_FILE, "cannot read"));
        let garbage = signed(
            Algorithm::Rs256,
            Key::Pem("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----".into()),
            claims(),
        );
        cases.push((garbage, KEY_PEM, "not a PEM private key"));
        let rsa_for_es = signed(Algorithm::Es256, Key::Pem(pem_text.clone()), claims());
        cases.push((rsa_for_es, ALGORITHM, "EC key"));
        let ec_for_rs = signed(Algorithm::Rs256, Key::Pem(pem(&ec())), claims());
        cases.push((ec_for_rs, ALGORITHM, "RSA key"));
        for (s, property, says) in cases {
            let e = s.make(at_now()).unwrap_err();
            let line = e.to_string();
            assert_eq!(e.property, property, "{line}");
            assert!(line.contains(says), "{line}");
            assert!(!line.contains('\n'), "{line}");
            for secret in [
                "open-sesame",
                "wrong-passphrase",
                "secret-key-path",
                "c2VjcmV0",
            ] {
                assert!(!line.contains(secret), "{line}");
            }
            assert!(!line.contains(&pem_text[30..60]), "{line}");
        }
        // No subject, issuer or audience is left to the provider, as librdkafka
        // leaves it (some providers' grants have no subject).
        let mut bare = signed(Algorithm::Rs256, Key::Pem(pem_text), claims());
        (bare.claims.sub, bare.claims.iss, bare.claims.aud) = (None, None, None);
        let made = bare.make(at_now()).expect("made");
        let payload = made.split('.').nth(1).expect("a payload");
        let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert!(
            !payload.contains("\"iss\"") && !payload.contains("\"aud\""),
            "{payload}"
        );
    }

    #[test]
    fn a_prepared_assertion_is_read_anew_each_time_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("assertion.jwt");
        let assertion = Assertion::File(path.clone());
        std::fs::write(&path, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln\n").unwrap();
        assert_eq!(
            assertion.make(at_now()).unwrap(),
            "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"
        );
        std::fs::write(&path, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJiIn0.c2lo").unwrap();
        assert!(assertion.make(at_now()).unwrap().ends_with("c2lo"));
        for (text, says) in [("  \n", "empty"), ("not a jwt secret-words", "compact")] {
            std::fs::write(&path, text).unwrap();
            let e = assertion.check().unwrap_err();
            assert_eq!(e.property, FILE);
            assert!(
                e.why.contains(says) && !e.why.contains("secret-words"),
                "{e}"
            );
        }
        std::fs::remove_file(&path).unwrap();
        assert_eq!(assertion.check().unwrap_err().property, FILE);
    }
}
