//! The native fetch path's side of the library (docs/native-fetch.md): the
//! `multicluster-kafka-client` crate's connections set up from a cluster's client
//! properties and hooks ([`settings`]), its errors in the source's words
//! ([`reported`]), and the lookups the source makes through it ([`lookups`], the
//! native side of the lookup seam: metadata, offsets, timestamps, short reads).

pub(crate) mod lookup;
pub(crate) mod lookups;
mod reported;
pub(crate) mod settings;
