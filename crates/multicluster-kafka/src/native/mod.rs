//! The native fetch path's own Kafka client, on tokio (docs/native-fetch.md): its
//! first layer, a plaintext [`conn::Connection`] to one broker. The `kafka-protocol` crate's types stay inside this module.

pub mod conn;
mod error;
