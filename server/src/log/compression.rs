//! Kafka's batch compression codecs: the records section of a v2 batch (everything after the
//! 61-byte header) compressed as a whole, codec in attribute bits 0-2.
//!
//! | id | codec  | framing, as Kafka's Java client writes it                                  |
//! |----|--------|----------------------------------------------------------------------------|
//! | 1  | gzip   | one gzip member (RFC 1952)                                                 |
//! | 2  | snappy | xerial framing: 16-byte header `\x82SNAPPY\0`, version 1, compat 1, then   |
//! |    |        | blocks of `i32` length + raw snappy; raw snappy without the header too     |
//! | 3  | lz4    | LZ4 frame format, independent 64 KiB blocks                                |
//! | 4  | zstd   | one zstd frame                                                             |
//!
//! Stored batches keep the producer's compressed bytes (and CRC); records are decompressed
//! when a batch is decoded for JSON, NDJSON, SSE, compaction or key checks. Decompression is
//! bounded by [`MAX_DECOMPRESSED_BYTES`], so a small batch cannot expand into unbounded memory.

use std::io::{Read, Write};

use super::batch_error::BatchError;

/// Largest records section a compressed batch may expand to. A batch is at most
/// `max_message_bytes` on disk (1 MiB by default); this leaves room for compression ratios far
/// beyond what real records reach, while capping what one hostile batch can allocate.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;
/// Uncompressed bytes per xerial snappy block (the Java client's default).
const SNAPPY_BLOCK: usize = 32 * 1024;
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
const XERIAL_HEADER_LEN: usize = 16;
/// zstd level for batches the server compresses (the codec's default).
const ZSTD_LEVEL: i32 = 3;

/// A compression codec of attribute bits 0-2.
// persisted: the discriminants are Kafka's codec ids; never reuse a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Records stored as they are.
    None = 0,
    /// gzip.
    Gzip = 1,
    /// Snappy with xerial framing.
    Snappy = 2,
    /// LZ4 frames.
    Lz4 = 3,
    /// Zstandard.
    Zstd = 4,
}

impl Compression {
    /// The codec of a Kafka codec id (attribute bits 0-2).
    ///
    /// # Errors
    /// [`BatchError::UnsupportedCompression`] for ids 5-7, which Kafka does not define.
    pub fn from_id(id: u8) -> Result<Compression, BatchError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(BatchError::UnsupportedCompression(other)),
        }
    }

    /// Kafka's codec id.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Kafka's name of the codec (`none`, `gzip`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

fn failed(codec: Compression, reason: impl std::fmt::Display) -> BatchError {
    BatchError::Decompression {
        codec: codec.name(),
        reason: reason.to_string(),
    }
}

/// Reads all of `reader`, refusing more than [`MAX_DECOMPRESSED_BYTES`].
fn read_bounded(codec: Compression, reader: impl Read) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| failed(codec, e))?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        return Err(failed(
            codec,
            format!("expands beyond {MAX_DECOMPRESSED_BYTES} bytes"),
        ));
    }
    Ok(out)
}

/// The records section of a batch compressed with `codec`.
///
/// # Errors
/// [`BatchError::Decompression`] when the bytes are not valid for the codec or expand beyond
/// [`MAX_DECOMPRESSED_BYTES`].
pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(codec, flate2::read::GzDecoder::new(data)),
        Compression::Snappy => decompress_snappy(data),
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(|e| failed(codec, e))?;
            read_bounded(codec, decoder)
        }
    }
}

fn decompress_snappy(data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let codec = Compression::Snappy;
    let raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), BatchError> {
        let len = snap::raw::decompress_len(block).map_err(|e| failed(codec, e))?;
        if out.len() + len > MAX_DECOMPRESSED_BYTES {
            return Err(failed(
                codec,
                format!("expands beyond {MAX_DECOMPRESSED_BYTES} bytes"),
            ));
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(|e| failed(codec, e))?;
        Ok(())
    };
    let mut out = Vec::new();
    if !data.starts_with(XERIAL_MAGIC) {
        raw(data, &mut out)?;
        return Ok(out);
    }
    let mut rest = data
        .get(XERIAL_HEADER_LEN..)
        .ok_or_else(|| failed(codec, "xerial header is cut off"))?;
    while !rest.is_empty() {
        let (len, body) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| failed(codec, "xerial block length is cut off"))?;
        let len = usize::try_from(i32::from_be_bytes(*len))
            .map_err(|_| failed(codec, "negative xerial block length"))?;
        let block = body
            .get(..len)
            .ok_or_else(|| failed(codec, "xerial block is cut off"))?;
        raw(block, &mut out)?;
        rest = &body[len..];
    }
    Ok(out)
}

/// `data` (a records section) compressed with `codec`, framed as Kafka's Java client does.
///
/// # Errors
/// [`BatchError::Decompression`] (naming the codec) if the encoder fails, which only happens on
/// allocation failure.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(data).map_err(|e| failed(codec, e))?;
            encoder.finish().map_err(|e| failed(codec, e))
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for block in data.chunks(SNAPPY_BLOCK) {
                let compressed = encoder.compress_vec(block).map_err(|e| failed(codec, e))?;
                let len = i32::try_from(compressed.len()).map_err(|e| failed(codec, e))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(data).map_err(|e| failed(codec, e))?;
            encoder.finish().map_err(|e| failed(codec, e))
        }
        Compression::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL).map_err(|e| failed(codec, e)),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    proptest! {
        #[test]
        fn every_codec_round_trips(data in prop::collection::vec(any::<u8>(), 0..100_000)) {
            for codec in CODECS {
                let compressed = compress(codec, &data).unwrap();
                prop_assert_eq!(&decompress(codec, &compressed).unwrap(), &data, "{:?}", codec);
            }
        }

        #[test]
        fn garbage_is_an_error_never_a_panic(data in prop::collection::vec(any::<u8>(), 0..2_000)) {
            for codec in CODECS {
                let _ = decompress(codec, &data);
            }
        }
    }

    #[test]
    fn a_batch_that_expands_beyond_the_bound_is_refused() {
        let zeros = vec![0u8; MAX_DECOMPRESSED_BYTES + 1];
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let compressed = compress(codec, &zeros).unwrap();
            assert!(
                compressed.len() < 1 << 20,
                "{codec:?} compresses zeros well"
            );
            assert!(
                matches!(
                    decompress(codec, &compressed),
                    Err(BatchError::Decompression { .. })
                ),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn raw_snappy_without_xerial_framing_decodes() {
        let data = b"hello hello hello hello".repeat(50);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw).unwrap(), data);
    }
}
