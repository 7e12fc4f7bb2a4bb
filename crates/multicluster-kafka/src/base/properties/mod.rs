//! librdkafka client properties, with secret values kept out of logs and `Debug`.
//!
//! - `map`: [`ClientProperties`], the map of keys to values, and what a person may
//!   see of it.
//! - `source_keys`: the source's own properties (`fetch.*`), read and checked by it.
//! - `secrets`: which keys are secret, and hiding secret values in a client's words.
//! - `refusal`: [`RefusedProperty`], a property refused and by whom.

mod map;
mod refusal;
mod secrets;
mod source_keys;

pub use map::{BOOTSTRAP_SERVERS, ClientProperties};
pub use refusal::{RefusedBy, RefusedProperty};
pub(crate) use secrets::hide_secrets;
pub use secrets::{LIBRDKAFKA_SENSITIVE, REDACTED, is_secret_key};
pub use source_keys::{
    DEFAULT_SHARE_MIN_BYTES, FETCH_BACKEND, FETCH_BACKEND_VAR, FETCH_CONNECTIONS, FETCH_SHARE,
    FetchBackend, SOURCE_KEYS,
};
