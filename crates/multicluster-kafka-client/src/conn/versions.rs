//! The API versions a connection agrees with its broker: asked for when it opens
//! (ApiVersions), then the version of each request sent.

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;

use super::{Connection, NativeRequest};
use crate::error::NativeError;
use crate::responses;

/// The version of ApiVersions asked first; a broker that does not know it answers
/// in v0 with `UNSUPPORTED_VERSION`.
const API_VERSIONS_FIRST: i16 = 3;

/// Kafka's `UNSUPPORTED_VERSION` error code.
const UNSUPPORTED_VERSION: i16 = 35;

impl Connection {
    /// The broker's (lowest, highest) version of API `R`, if it offers it.
    pub fn broker_versions<R: NativeRequest>(&self) -> Option<(i16, i16)> {
        self.broker_versions.get(&(R::KEY as i16)).copied()
    }

    /// The version of `R` this connection uses: the highest both the broker and this
    /// client speak.
    pub fn version<R: NativeRequest>(&self) -> Result<i16, NativeError> {
        let Some((broker_min, broker_max)) = self.broker_versions::<R>() else {
            return Err(NativeError::NotOffered {
                addr: self.addr.clone(),
                api: R::NAME,
            });
        };
        let ours = R::VERSIONS;
        let version = ours.max.min(broker_max);
        if version < ours.min.max(broker_min) {
            return Err(NativeError::Unsupported {
                addr: self.addr.clone(),
                api: R::NAME,
                broker_min,
                broker_max,
                ours_min: ours.min,
                ours_max: ours.max,
            });
        }
        Ok(version)
    }

    /// Asks for the broker's API versions and keeps them.
    pub(super) async fn negotiate(&mut self) -> Result<(), NativeError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("multicluster-kafka"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let body = self.exchange(&request, API_VERSIONS_FIRST).await?;
        let response = match responses::api_versions(&body, API_VERSIONS_FIRST) {
            Ok(r) if r.error_code != UNSUPPORTED_VERSION => r,
            // A broker answers an ApiVersions version it does not know with
            // UNSUPPORTED_VERSION, in v0's layout or in a mix of v0 and the version
            // asked (librdkafka's mock cluster): ask again in v0.
            _ => {
                let body = self.exchange(&ApiVersionsRequest::default(), 0).await?;
                responses::api_versions(&body, 0)
                    .map_err(|e| self.decode_error::<ApiVersionsRequest>(0, &e))?
            }
        };
        if response.error_code != 0 {
            return Err(self.broker_error::<ApiVersionsRequest>(response.error_code, "versions"));
        }
        self.broker_versions = response
            .keys
            .iter()
            .map(|(key, min, max)| (*key, (*min, *max)))
            .collect();
        Ok(())
    }

    /// The version of `R` to send when the answer is decoded by the path itself:
    /// the highest both sides speak, at most `decoded`'s highest.
    pub fn version_within<R: NativeRequest>(
        &self,
        decoded: &std::ops::RangeInclusive<i16>,
    ) -> Result<i16, NativeError> {
        let (broker_min, broker_max) =
            self.broker_versions::<R>()
                .ok_or_else(|| NativeError::NotOffered {
                    addr: self.addr.clone(),
                    api: R::NAME,
                })?;
        let ours_max = R::VERSIONS.max.min(*decoded.end());
        let ours_min = R::VERSIONS.min.max(*decoded.start());
        let version = ours_max.min(broker_max);
        if version < ours_min.max(broker_min) {
            return Err(NativeError::Unsupported {
                addr: self.addr.clone(),
                api: R::NAME,
                broker_min,
                broker_max,
                ours_min,
                ours_max,
            });
        }
        Ok(version)
    }
}
