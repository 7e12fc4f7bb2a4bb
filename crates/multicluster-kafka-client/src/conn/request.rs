//! The requests a [`Connection`](super::Connection) can send ([`NativeRequest`]): each
//! tied to its response and API key, as `kafka-protocol`'s own `Request` trait would with
//! its `broker` feature on.

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message};

/// A request this connection can send: its API and the response it gets.
pub trait NativeRequest: Encodable + Message + HeaderVersion {
    /// The API key.
    const KEY: ApiKey;
    /// The API's name, for errors.
    const NAME: &'static str;
    /// The response to this request.
    type Response: Decodable + HeaderVersion;
}

macro_rules! native_requests {
    ($($request:ident => $response:ident, $key:ident;)*) => {$(
        impl NativeRequest for $request {
            const KEY: ApiKey = ApiKey::$key;
            const NAME: &'static str = stringify!($key);
            type Response = $response;
        }
    )*};
}

native_requests! {
    ApiVersionsRequest => ApiVersionsResponse, ApiVersions;
    MetadataRequest => MetadataResponse, Metadata;
    ListOffsetsRequest => ListOffsetsResponse, ListOffsets;
    FetchRequest => FetchResponse, Fetch;
    SaslHandshakeRequest => SaslHandshakeResponse, SaslHandshake;
    SaslAuthenticateRequest => SaslAuthenticateResponse, SaslAuthenticate;
}
