//! The client machinery: one Kafka cluster's librdkafka clients, how they are
//! configured, and the hooks a program can put into each of them. The properties and
//! offsets they are made from are plain data in `base`.

pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod errors;
pub(crate) mod events;
pub(crate) mod group_describe;
pub(crate) mod group_member;
pub(crate) mod lookups;
pub(crate) mod mm2;
pub(crate) mod shard_lock;
pub(crate) mod shared;
