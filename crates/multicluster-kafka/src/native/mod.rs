//! The native fetch path's own Kafka client, on tokio (docs/native-fetch.md): its
//! first layer, a plaintext [`api::Connection`] to one broker with the calls the
//! fetch path needs. The `kafka-protocol` crate's types stay inside this module.

mod calls;
mod conn;
mod error;

/// What the crate shows of this module (as `unstable::native_conn`): the connection,
/// its calls' answers, its errors, and the request types it sends.
pub mod api {
    pub use crate::native::calls::{
        BrokerInfo, FetchedPartition, Metadata, PartitionInfo, TopicInfo,
    };
    pub use crate::native::conn::{
        ConnectOptions, Connection, DEFAULT_MAX_FRAME_SIZE, NativeRequest,
    };
    pub use crate::native::error::NativeError;
    pub use kafka_protocol::messages::{
        ApiVersionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    };
    pub use uuid::Uuid;
}
