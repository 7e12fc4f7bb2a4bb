//! A request exchanged for its answer: framed with the request header and the next
//! correlation id, sent (after re-authenticating when the session's lifetime is nearly
//! over), and the answer's body decoded.

use std::time::Instant;

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::{Connection, NativeRequest};
use crate::error::{NativeError, one_line};

impl Connection {
    /// Sends `request` at the agreed [`version`](Self::version) and waits for its
    /// response, decoded by `kafka-protocol` (whose counts are not bounded: the
    /// path's own calls decode their answers themselves). Error codes inside the
    /// response are the caller's to read.
    pub async fn send<R: NativeRequest>(&mut self, request: R) -> Result<R::Response, NativeError> {
        let version = self.version::<R>()?;
        self.send_at(&request, version).await
    }

    /// Sends `request` at `version` (within both sides' ranges) and decodes the
    /// response.
    pub async fn send_at<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, NativeError> {
        let body = self.exchange(request, version).await?;
        self.decode::<R>(body, version)
    }

    /// Writes one request and reads its response's frame; returns the response's
    /// body (after its header). Re-authenticates first when the session lifetime
    /// the broker set is nearly over. A failure of the stream, or a timeout, makes
    /// the connection unusable.
    pub async fn exchange<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, NativeError> {
        if let (Some(at), Some(sasl)) = (self.reauth_at, &self.sasl)
            && Instant::now() >= at
        {
            let sasl = sasl.clone();
            self.reauth_at = self.authenticate(&sasl).await?;
            self.reauthentications += 1;
            tracing::debug!(broker = %self.addr, mechanism = sasl.mechanism.name(), "re-authenticated");
        }
        self.exchange_now(request, version).await
    }

    /// [`exchange`](Self::exchange) without re-authenticating first.
    pub async fn exchange_now<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, NativeError> {
        if self.broken {
            return Err(NativeError::Closed {
                addr: self.addr.clone(),
            });
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        self.encode(request, version, correlation_id)?;
        // Unusable until the whole answer is in: an error, or the caller dropping this
        // future half way, leaves the stream out of step.
        self.broken = true;
        let frame = match tokio::time::timeout(self.timeout, self.round_trip(correlation_id)).await
        {
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(NativeError::Timeout {
                    addr: self.addr.clone(),
                    what: format!("{} v{version} answer", R::NAME),
                    timeout_ms: self.timeout.as_millis(),
                });
            }
        };
        self.broken = false;
        let mut body = frame;
        ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| self.decode_error::<R>(version, &e))?;
        Ok(body)
    }

    /// Puts the request's frame (size, header, body) into `self.out`.
    fn encode<R: NativeRequest>(
        &mut self,
        request: &R,
        version: i16,
        correlation_id: i32,
    ) -> Result<(), NativeError> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        self.out.clear();
        self.out.put_i32(0);
        let encoded = header
            .encode(&mut self.out, R::header_version(version))
            .and_then(|()| request.encode(&mut self.out, version));
        if let Err(e) = encoded {
            return Err(NativeError::Encode {
                addr: self.addr.clone(),
                api: R::NAME,
                version,
                message: one_line(&e),
            });
        }
        let size = i32::try_from(self.out.len() - 4).map_err(|_| NativeError::Encode {
            addr: self.addr.clone(),
            api: R::NAME,
            version,
            message: format!("{} bytes do not fit a frame", self.out.len() - 4),
        })?;
        self.out[..4].copy_from_slice(&size.to_be_bytes());
        Ok(())
    }

    /// Decodes a response body (zero-copy: byte fields are slices of `body`).
    fn decode<R: NativeRequest>(
        &self,
        mut body: Bytes,
        version: i16,
    ) -> Result<R::Response, NativeError> {
        R::Response::decode(&mut body, version).map_err(|e| self.decode_error::<R>(version, &e))
    }

    pub(super) fn decode_error<R: NativeRequest>(
        &self,
        version: i16,
        e: &dyn std::fmt::Display,
    ) -> NativeError {
        NativeError::Decode {
            addr: self.addr.clone(),
            api: R::NAME,
            version,
            message: one_line(e),
        }
    }

    /// The broker's error `code` about `what` (e.g. `orders/0`) as an error.
    pub fn broker_error<R: NativeRequest>(&self, code: i16, what: &str) -> NativeError {
        let text = crate::error::code_text(code).unwrap_or_else(|| "no error".into());
        NativeError::Broker {
            addr: self.addr.clone(),
            api: R::NAME,
            code,
            message: format!("{what}: {text}"),
        }
    }

    /// A decode error of the path's own decoders, located.
    pub fn decoded<R: NativeRequest, T>(
        &self,
        version: i16,
        decoded: Result<T, crate::cursor::DecodeError>,
    ) -> Result<T, NativeError> {
        decoded.map_err(|e| self.decode_error::<R>(version, &e))
    }
}
