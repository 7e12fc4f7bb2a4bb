//! The source's own properties ([`SOURCE_KEYS`]): read and checked by the source, never
//! handed to librdkafka.

use super::map::ClientProperties;
use super::refusal::{RefusedBy, RefusedProperty};

/// The property that chooses how a cluster's records are fetched
/// ([`FetchBackend`]).
pub const FETCH_BACKEND: &str = "fetch.backend";

/// The environment variable that gives `fetch.backend` to clusters that do not set
/// it ([`ClientProperties::fetch_backend`]).
pub const FETCH_BACKEND_VAR: &str = "MCK_FETCH_BACKEND";

/// The property that sets how many connections, each with a fetch in flight, the
/// native fetch path keeps to each broker ([`ClientProperties::fetch_connections`]).
pub const FETCH_CONNECTIONS: &str = "fetch.connections.per.broker";

/// The property that sets from what size the native fetch path hands a value out as
/// a part of the fetch answer it came in instead of copying it
/// ([`ClientProperties::fetch_share_min_bytes`]).
pub const FETCH_SHARE: &str = "fetch.share.min.bytes";

/// `fetch.share.min.bytes` when unset. Measured with `mck consume --format value`
/// (BENCHMARKS.md), sharing every value cost 8 % more CPU at 100 B, came out even
/// at 256 B, and saved 10 % at 512 B, 20 % at 1 and 4 KiB, 40 % at 16 KiB; the
/// default leaves a margin above the crossing, as a value kept shared keeps its
/// whole answer alive.
pub const DEFAULT_SHARE_MIN_BYTES: usize = 1024;

/// Properties of the source itself, read by it and never handed to librdkafka.
pub const SOURCE_KEYS: &[&str] = &[FETCH_BACKEND, FETCH_CONNECTIONS, FETCH_SHARE];

/// How a cluster's records are fetched (its `fetch.backend` property).
///
/// ```
/// use multicluster_kafka::properties::{ClientProperties, FetchBackend};
/// let mut p = ClientProperties::new();
/// assert_eq!(p.fetch_backend().unwrap(), FetchBackend::Auto);
/// p.set("fetch.backend", "native");
/// assert_eq!(p.fetch_backend().unwrap(), FetchBackend::Native);
/// p.set("fetch.backend", "fast");
/// assert!(p.fetch_backend().unwrap_err().to_string().contains("native, librdkafka or auto"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchBackend {
    /// The source's own Fetch requests where they support every property the
    /// cluster sets, librdkafka elsewhere (docs/native-fetch.md).
    #[default]
    Auto,
    /// The source's own Fetch requests; a property they do not support is an error.
    Native,
    /// librdkafka's consumer.
    Librdkafka,
}

impl ClientProperties {
    /// The `fetch.backend` property. When it is unset, the `MCK_FETCH_BACKEND`
    /// environment variable gives the default (one switch for every cluster of every
    /// source in the process, e.g. to go back to librdkafka without touching
    /// configuration); without it, [`FetchBackend::Auto`].
    ///
    /// # Errors
    ///
    /// A value other than `native`, `librdkafka` or `auto` (case ignored), naming the
    /// property or the variable.
    pub fn fetch_backend(&self) -> Result<FetchBackend, RefusedProperty> {
        let (value, from) = match self.get(FETCH_BACKEND) {
            Some(v) => (v.to_string(), FETCH_BACKEND),
            None => match std::env::var(FETCH_BACKEND_VAR) {
                Ok(v) => (v, FETCH_BACKEND_VAR),
                Err(_) => return Ok(FetchBackend::Auto),
            },
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(FetchBackend::Auto),
            "native" => Ok(FetchBackend::Native),
            "librdkafka" => Ok(FetchBackend::Librdkafka),
            _ => Err(RefusedProperty {
                key: Some(FETCH_BACKEND.into()),
                by: RefusedBy::Source,
                reason: format!("{from} must be native, librdkafka or auto"),
            }),
        }
    }

    /// The `fetch.connections.per.broker` property: how many connections the native
    /// fetch path keeps to each broker it fetches from, each with one fetch in flight
    /// for its share of the broker's partitions. 2 when unset.
    ///
    /// ```
    /// use multicluster_kafka::properties::ClientProperties;
    /// let mut p = ClientProperties::new();
    /// assert_eq!(p.fetch_connections().unwrap(), 2);
    /// p.set("fetch.connections.per.broker", "1");
    /// assert_eq!(p.fetch_connections().unwrap(), 1);
    /// p.set("fetch.connections.per.broker", "0");
    /// let refused = p.fetch_connections().unwrap_err();
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "property `fetch.connections.per.broker` refused: a whole number from 1 to 8"
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// A value that is not a whole number from 1 to 8, naming the property.
    pub fn fetch_connections(&self) -> Result<usize, RefusedProperty> {
        let Some(value) = self.get(FETCH_CONNECTIONS) else {
            return Ok(2);
        };
        match value.trim().parse::<usize>() {
            Ok(n @ 1..=8) => Ok(n),
            _ => Err(RefusedProperty {
                key: Some(FETCH_CONNECTIONS.into()),
                by: RefusedBy::Source,
                reason: "a whole number from 1 to 8".into(),
            }),
        }
    }

    /// The `fetch.share.min.bytes` property: on the native fetch path, a value of at
    /// least this many bytes is handed out as a part of the fetch answer it came in
    /// (no copy; the batch then keeps that answer alive), a smaller one is copied
    /// into the batch's own buffer. [`DEFAULT_SHARE_MIN_BYTES`] when unset.
    ///
    /// ```
    /// use multicluster_kafka::properties::{ClientProperties, DEFAULT_SHARE_MIN_BYTES};
    /// let mut p = ClientProperties::new();
    /// assert_eq!(p.fetch_share_min_bytes().unwrap(), DEFAULT_SHARE_MIN_BYTES);
    /// p.set("fetch.share.min.bytes", "1024");
    /// assert_eq!(p.fetch_share_min_bytes().unwrap(), 1024);
    /// p.set("fetch.share.min.bytes", "-1");
    /// assert_eq!(
    ///     p.fetch_share_min_bytes().unwrap_err().to_string(),
    ///     "property `fetch.share.min.bytes` refused: a whole number of bytes"
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// A value that is not a whole number, naming the property.
    pub fn fetch_share_min_bytes(&self) -> Result<usize, RefusedProperty> {
        let Some(value) = self.get(FETCH_SHARE) else {
            return Ok(DEFAULT_SHARE_MIN_BYTES);
        };
        value.trim().parse::<usize>().map_err(|_| RefusedProperty {
            key: Some(FETCH_SHARE.into()),
            by: RefusedBy::Source,
            reason: "a whole number of bytes".into(),
        })
    }

    /// Checks the source's own properties ([`SOURCE_KEYS`]), which librdkafka never
    /// sees.
    ///
    /// # Errors
    ///
    /// The first of them whose value is refused, naming it.
    pub fn check_source_keys(&self) -> Result<(), RefusedProperty> {
        self.fetch_backend()?;
        self.fetch_connections()?;
        self.fetch_share_min_bytes()?;
        Ok(())
    }
}
