//! An answer's frame read into one buffer: small ones fresh, large ones into a
//! buffer of an earlier answer kept for reuse ([`Frames`]), the largest into memory
//! mapped for them alone.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Connection;
use crate::error::NativeError;

/// Answers from this size up are read into buffers kept for reuse ([`Frames`]).
const POOLED_FRAME_MIN: usize = 64 << 10;

/// Buffers above this size are not kept (a large `fetch.max.bytes` would otherwise
/// keep its answers' size twice over for good).
const POOLED_FRAME_MAX: usize = 8 << 20;

/// How many free buffers a connection keeps.
const POOLED_FRAMES: usize = 2;

/// A connection's free answer buffers.
#[derive(Default)]
pub(super) struct Frames {
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl Frames {
    /// A free buffer (empty), if there is one.
    fn take(&self) -> Option<Vec<u8>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }
}

/// An answer's buffer, given back to its connection's [`Frames`] when the answer's
/// last bytes are dropped.
struct Pooled {
    frame: Vec<u8>,
    frames: std::sync::Weak<Frames>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.frame
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if self.frame.capacity() > POOLED_FRAME_MAX {
            return;
        }
        if let Some(frames) = self.frames.upgrade() {
            let mut free = frames.free.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < POOLED_FRAMES {
                let mut frame = std::mem::take(&mut self.frame);
                frame.clear();
                free.push(frame);
            }
        }
    }
}

/// An I/O error on the connection to `addr`.
fn io(addr: &str, source: std::io::Error) -> NativeError {
    NativeError::Io {
        addr: addr.to_string(),
        source,
    }
}

impl Connection {
    /// Writes `self.out`, then reads one whole response frame into one buffer and
    /// checks its correlation id.
    pub(super) async fn round_trip(&mut self, correlation_id: i32) -> Result<Bytes, NativeError> {
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| io(&self.addr, e))?;
        let mut size = [0; 4];
        self.stream
            .read_exact(&mut size)
            .await
            .map_err(|e| io(&self.addr, e))?;
        let size = i32::from_be_bytes(size);
        // Below 4 bytes (or negative) a frame cannot hold a correlation id: the
        // stream is out of step.
        let len = match usize::try_from(size) {
            Ok(len) if len >= 4 => len,
            _ => {
                return Err(NativeError::FrameTooSmall {
                    addr: self.addr.clone(),
                    size,
                });
            }
        };
        if len > self.max_frame_size {
            return Err(NativeError::FrameTooLarge {
                addr: self.addr.clone(),
                size: len,
                max: self.max_frame_size,
            });
        }
        // A large answer goes into a buffer of an earlier one that nothing holds any
        // more, else a new one: its memory is written again instead of being mapped
        // afresh (a page fault per 4 KiB) for every answer.
        let frame = if len > POOLED_FRAME_MAX {
            // Mapped on its own and unmapped when let go: from the heap, answers of a
            // few tens of MiB (a wide backlog) stay held by the allocator once it
            // has raised its threshold for mapping.
            let mut map = memmap2::MmapMut::map_anon(len).map_err(|e| io(&self.addr, e))?;
            self.fill_slice(&mut map, len).await?;
            Bytes::from_owner(map)
        } else if len >= POOLED_FRAME_MIN {
            let mut frame = match self.frames.take() {
                Some(frame) => {
                    self.frames_reused += 1;
                    frame
                }
                None => Vec::new(),
            };
            frame.reserve_exact(len);
            self.fill(&mut frame, len).await?;
            Bytes::from_owner(Pooled {
                frame,
                frames: Arc::downgrade(&self.frames),
            })
        } else {
            let mut frame = BytesMut::with_capacity(len);
            self.fill(&mut frame, len).await?;
            frame.freeze()
        };
        let got = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        if got != correlation_id {
            return Err(NativeError::CorrelationMismatch {
                addr: self.addr.clone(),
                expected: correlation_id,
                got,
            });
        }
        Ok(frame)
    }

    /// Reads the `len` bytes of an answer into `frame`, which holds them.
    async fn fill_slice(&mut self, frame: &mut [u8], len: usize) -> Result<(), NativeError> {
        match self.stream.read_exact(&mut frame[..len]).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let eof = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("closed by the broker before the {len} bytes of a response"),
                );
                Err(io(&self.addr, eof))
            }
            Err(e) => Err(io(&self.addr, e)),
        }
    }

    /// Reads the `len` bytes of an answer into `frame`.
    async fn fill(&mut self, frame: &mut impl BufMut, len: usize) -> Result<(), NativeError> {
        let mut read = 0;
        while read < len {
            let left = (len - read) as u64;
            let n = (&mut self.stream)
                .take(left)
                .read_buf(frame)
                .await
                .map_err(|e| io(&self.addr, e))?;
            if n == 0 {
                let eof = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("closed by the broker after {read} of {len} bytes of a response"),
                );
                return Err(io(&self.addr, eof));
            }
            read += n;
        }
        Ok(())
    }
}
