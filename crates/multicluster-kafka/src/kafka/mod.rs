//! Talking to one Kafka cluster: its lookup client, client properties (with secrets
//! redacted), where reading starts and stops, and the hooks a program can put into
//! each librdkafka client.

pub(crate) mod client;
mod event_hub;
pub(crate) mod group_describe;
pub(crate) mod group_member;
pub mod hooks;
pub mod offsets;
pub mod properties;
pub(crate) mod resolve;
pub(crate) mod shard_lock;
pub(crate) mod shared;
