//! The native fetch path's own Kafka client, on tokio (docs/native-fetch.md): its
//! first layer, a plaintext [`conn::Connection`] to one broker with the calls the
//! fetch path needs. The `kafka-protocol` crate's types stay inside this module.

mod calls;
pub mod conn;
mod error;
