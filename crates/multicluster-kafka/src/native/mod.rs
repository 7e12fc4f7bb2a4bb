//! The native fetch path's side of the library (docs/native-fetch.md): the
//! `multicluster-kafka-client` crate's connections set up from a cluster's client
//! properties and hooks ([`settings`]), its errors in the source's words
//! ([`reported`]), and the lookups the source makes through it ([`lookup`]: metadata,
//! offsets, timestamps).

pub(crate) mod lookup;
mod reported;
pub(crate) mod settings;
