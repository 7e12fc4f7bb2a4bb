//! The native fetch path's own Kafka client, on tokio (docs/native-fetch.md): its
//! first layer, a [`api::Connection`] to one broker (plaintext or TLS, SASL) with the calls the
//! fetch path needs, and the record batches of its answers decoded in place
//! ([`api::Batches`], codecs bounded). The `kafka-protocol` crate's types stay inside
//! this module.

mod assertion;
mod batch;
pub(crate) mod budget;
mod calls;
pub(crate) mod cluster;
mod codec;
mod conn;
mod credentials;
mod cursor;
mod error;
mod fetch_response;
pub(crate) mod lookup;
mod oauth;
mod oidc;
mod partition;
mod reported;
mod responses;
mod sasl;
mod session;
pub(crate) mod settings;
mod tls;
mod wire;

/// What the crate shows of this module (as `unstable::native_conn`): the connection,
/// its calls' answers, its errors, the request types it sends, and the record-batch
/// decoder.
pub mod api {
    pub use crate::native::batch::{
        BATCH_HEADER, Batch, Batches, Headers, LOG_OVERHEAD, Record, Records,
    };
    pub use crate::native::calls::{
        BrokerInfo, FetchSettings, FetchWant, Metadata, PartitionInfo, TopicInfo,
    };
    pub use crate::native::conn::{
        ConnectOptions, Connection, DEFAULT_MAX_FRAME_SIZE, NativeRequest,
    };
    pub use crate::native::credentials::{Mechanism, Sasl, Tokens};
    pub use crate::native::cursor::{Cursor, DecodeError};
    pub use crate::native::error::NativeError;
    pub use crate::native::fetch_response::{
        AbortedTransaction, DivergingEpoch, FETCH_RESPONSE_MAX, FETCH_RESPONSE_MIN,
        FetchPartitionData, FetchResponseData, FetchTopicData, LeaderHint, NodeEndpoint,
        decode_fetch_response,
    };
    pub use crate::native::partition::{PartitionIssue, PartitionOptions, PartitionReader};
    pub use crate::native::session::FetchSession;
    pub use crate::native::tls::{Pem, Tls, TlsError, TlsSettings};
    pub use kafka_protocol::messages::{
        ApiVersionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    };
    pub use uuid::Uuid;
}
