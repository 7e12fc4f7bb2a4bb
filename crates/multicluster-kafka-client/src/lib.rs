//! A Kafka protocol client for consumers, on tokio: connections to brokers
//! (plaintext or TLS, SASL PLAIN, SCRAM and OAUTHBEARER with OIDC), the calls a reader
//! needs (ApiVersions, Metadata, ListOffsets, OffsetForLeaderEpoch, Fetch with fetch
//! sessions), record batches decoded in place with every codec Kafka has, and a
//! fetcher that reads many partitions of one cluster ([`cluster::ClusterFetches`]).
//!
//! Requests and responses are encoded and decoded with the maintained
//! [`kafka-protocol`](https://crates.io/crates/kafka-protocol) crate, except the Fetch
//! response and its record batches, decoded here without copying. Every count read
//! from the wire is bounded.
//!
//! It is the native fetch path of
//! [`multicluster-kafka`](https://crates.io/crates/multicluster-kafka), which reads one
//! logical stream from many clusters; it depends on nothing of that library and its
//! API may change with it.
//!
//! ```no_run
//! # async fn run() -> Result<(), multicluster_kafka_client::NativeError> {
//! use multicluster_kafka_client::{ConnectOptions, Connection};
//! let mut conn = Connection::connect("127.0.0.1:9092", &ConnectOptions::default()).await?;
//! let metadata = conn.metadata(None).await?;
//! println!("{} brokers", metadata.brokers.len());
//! # Ok(())
//! # }
//! ```

pub mod assertion;
pub mod batch;
pub mod budget;
pub mod calls;
pub mod cluster;
mod codec;
pub mod conn;
pub mod credentials;
pub mod cursor;
pub mod error;
pub mod fetch_response;
pub mod oauth;
pub mod oidc;
pub mod partition;
pub mod responses;
pub mod sasl;
pub mod session;
pub mod tls;
mod wire;

pub use batch::{BATCH_HEADER, Batch, Batches, Headers, LOG_OVERHEAD, Record, Records};
pub use calls::{BrokerInfo, FetchSettings, FetchWant, Metadata, PartitionInfo, TopicInfo};
pub use conn::{ConnectOptions, Connection, DEFAULT_MAX_FRAME_SIZE, NativeRequest};
pub use credentials::{Mechanism, Sasl, Tokens};
pub use cursor::{Cursor, DecodeError};
pub use error::{ErrorListener, Listener, NativeError};
pub use fetch_response::{
    AbortedTransaction, DivergingEpoch, FETCH_RESPONSE_MAX, FETCH_RESPONSE_MIN, FetchPartitionData,
    FetchResponseData, FetchTopicData, LeaderHint, NodeEndpoint, decode_fetch_response,
};
pub use kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
};
pub use oauth::{ProvidedToken, TokenProvider};
pub use partition::{PartitionIssue, PartitionOptions, PartitionReader};
pub use session::FetchSession;
pub use tls::{Pem, Tls, TlsError, TlsSettings};
pub use uuid::Uuid;
