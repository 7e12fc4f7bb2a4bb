//! The record codecs of Kafka's batches, decompression only, each bounded: gzip,
//! snappy (raw, and the xerial framing Kafka's Java producer writes), lz4 (frame
//! format) and zstd. The decoders are crates' (flate2, snap, lz4_flex, zstd); what is
//! here is the bound and the xerial framing, which no crate reads.

use std::io::Read;

use crate::cursor::{Cursor, DecodeError};

/// The codec's name for an id of a batch's attributes.
pub fn name(id: u8) -> Result<&'static str, DecodeError> {
    Ok(match id {
        0 => "uncompressed",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        other => return Err(DecodeError::Codec(other)),
    })
}

/// Decompresses `input` (the records of a batch compressed with codec `id`) onto the
/// end of `out`, at most `limit` bytes.
pub fn decompress(
    id: u8,
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let codec = name(id)?;
    let failed = |e: &dyn std::fmt::Display| DecodeError::Decompress {
        codec,
        reason: crate::error::one_line(e),
    };
    match id {
        1 => bounded(flate2::read::MultiGzDecoder::new(input), codec, limit, out),
        2 => snappy(input, limit, out),
        3 => bounded(lz4_flex::frame::FrameDecoder::new(input), codec, limit, out),
        4 => bounded(
            zstd::stream::read::Decoder::with_buffer(input).map_err(|e| failed(&e))?,
            codec,
            limit,
            out,
        ),
        _ => Ok(()),
    }
}

/// Reads `r` to its end onto `out`, failing once more than `limit` bytes came.
fn bounded(
    r: impl Read,
    codec: &'static str,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let start = out.len();
    r.take((limit as u64).saturating_add(1))
        .read_to_end(out)
        .map_err(|e| DecodeError::Decompress {
            codec,
            reason: crate::error::one_line(&e),
        })?;
    if out.len() - start > limit {
        out.truncate(start);
        return Err(DecodeError::TooLarge { codec, limit });
    }
    Ok(())
}

/// The xerial framing's magic: `0x82 "SNAPPY" 0`, then a version and a compatible
/// version (4 bytes each), then blocks of a 4-byte length and raw snappy.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER: usize = 16;

fn snappy(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let start = out.len();
    if input.starts_with(XERIAL_MAGIC) {
        let mut c = Cursor::new(input);
        c.take(XERIAL_HEADER)?;
        while !c.rest().is_empty() {
            let len = c.i32()?;
            if len < 0 {
                return Err(DecodeError::Length(len.into()));
            }
            raw_snappy(c.take(len as usize)?, start, limit, out)?;
        }
        Ok(())
    } else {
        raw_snappy(input, start, limit, out)
    }
}

/// One raw snappy block onto `out`, whose bytes from `start` on may not pass `limit`.
fn raw_snappy(
    block: &[u8],
    start: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let failed = |e: snap::Error| DecodeError::Decompress {
        codec: "snappy",
        reason: crate::error::one_line(&e),
    };
    // The block states its decompressed length first: checked before anything is
    // allocated for it.
    let len = snap::raw::decompress_len(block).map_err(failed)?;
    let at = out.len();
    if (at - start).saturating_add(len) > limit {
        out.truncate(start);
        return Err(DecodeError::TooLarge {
            codec: "snappy",
            limit,
        });
    }
    out.resize(at + len, 0);
    match snap::raw::Decoder::new().decompress(block, &mut out[at..]) {
        Ok(n) => {
            out.truncate(at + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(failed(e))
        }
    }
}
