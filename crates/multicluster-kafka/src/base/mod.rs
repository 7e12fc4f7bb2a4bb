//! The bottom layer: plain data and pure decisions that every part above shares. Nothing
//! here makes a Kafka client, spawns a task or reads a file; nothing here imports a
//! module above it (`tests/it/layers.rs` checks it, docs/design.md draws the layers).

pub(crate) mod ack;
pub mod active;
pub mod assignment;
pub mod checkpoint;
pub(crate) mod config;
pub(crate) mod dispatch;
pub mod fingerprint;
pub mod hooks;
pub mod kafka_error;
pub mod metadata;
pub mod offsets;
pub mod plan;
pub mod properties;
pub(crate) mod protocol;
pub(crate) mod resolve;
pub mod retention;
pub mod setting;
pub mod shard;
pub mod split;
pub mod translate;
pub mod watermark;
