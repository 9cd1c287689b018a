//! SHA-256 digests of uploaded objects: of a whole object ([`sha256_hex`], what manifests record)
//! and of each aligned chunk of a segment log ([`ChunkDigests`]), so a cold read can check every
//! chunk it fetches with one ranged GET before serving or caching it.
//!
//! Chunk `i` of an object of `len` bytes covers `[i * chunk_bytes, min((i + 1) * chunk_bytes,
//! len))`; the last chunk may be short, an empty object has no chunks. [`ChunkDigests`] are
//! stored as their own object next to the segment log (format in [`ChunkDigests::encode`]).
//!
//! Must not depend on segment internals or on the object store: bytes in, bytes out.

use bytes::{BufMut, Bytes, BytesMut};
use sha2::{Digest, Sha256};

/// Default chunk size of cold reads and of [`ChunkDigests`]: large enough that one ranged GET
/// amortises its round trip, small enough that a fetch of a few records doesn't pull megabytes.
pub const DEFAULT_CHUNK_BYTES: u64 = 1 << 20;

/// The largest chunk size [`ChunkDigests::decode`] accepts: a chunk is fetched and held whole, so
/// a corrupt or hostile digest object must not make a reader allocate gigabytes.
pub const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// First bytes of an encoded [`ChunkDigests`] object ("Strata Chunk Digests").
const MAGIC: [u8; 4] = *b"STCD";
/// persisted: never reuse a value.
const FORMAT_VERSION: u8 = 1;
const HEADER_BYTES: usize = 24;
const DIGEST_BYTES: usize = 32;

/// The SHA-256 of `data` as 64 lowercase hex digits, the form manifests store and
/// [`crate::upload::UploadedObject::sha256`] reports.
pub fn sha256_hex(data: &[u8]) -> String {
    to_hex(&Sha256::digest(data).into())
}

/// `digest` as 64 lowercase hex digits.
pub fn to_hex(digest: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(64);
    for byte in digest {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The SHA-256 of `data` as raw bytes.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// The number of `chunk_bytes` chunks an object of `len` bytes has (the last may be short).
///
/// # Panics
/// If `chunk_bytes` is zero.
pub fn chunk_count(len: u64, chunk_bytes: u64) -> u64 {
    assert!(chunk_bytes > 0, "invariant: chunk_bytes is positive");
    len.div_ceil(chunk_bytes)
}

/// Why digests could not be decoded, or why a chunk does not match its digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The encoded object is shorter than its header says.
    #[error("chunk digests truncated: {actual} bytes, expected {expected}")]
    Truncated {
        /// The length the header implies (or the header length).
        expected: u64,
        /// The length found.
        actual: u64,
    },
    /// The encoded object is longer than its header says.
    #[error("chunk digests have {extra} trailing bytes")]
    TrailingBytes {
        /// Bytes after the self-check digest.
        extra: u64,
    },
    /// Not a chunk digests object.
    #[error("not a chunk digests object (magic {found:02x?})")]
    BadMagic {
        /// The first four bytes found.
        found: [u8; 4],
    },
    /// Written by a newer Strata.
    #[error("unsupported chunk digests version {version}")]
    UnsupportedVersion {
        /// The version byte found.
        version: u8,
    },
    /// The chunk size is zero or above [`MAX_CHUNK_BYTES`].
    #[error("invalid chunk size {chunk_bytes} (must be 1..={MAX_CHUNK_BYTES})")]
    InvalidChunkBytes {
        /// The chunk size found.
        chunk_bytes: u64,
    },
    /// The object's own trailing SHA-256 does not match its contents.
    #[error("chunk digests object is corrupt: self-check expected {expected}, actual {actual}")]
    Corrupt {
        /// The trailing digest, hex.
        expected: String,
        /// The digest of the contents, hex.
        actual: String,
    },
    /// A chunk index past the last chunk.
    #[error("chunk {chunk_index} out of range: the object has {chunks} chunks")]
    ChunkOutOfRange {
        /// The chunk asked for.
        chunk_index: u64,
        /// How many chunks the digests cover.
        chunks: u64,
    },
    /// The chunk's bytes are not the bytes that were uploaded.
    #[error("chunk {chunk_index} digest mismatch: expected {expected}, actual {actual}")]
    Mismatch {
        /// The chunk.
        chunk_index: u64,
        /// The digest recorded at upload, hex.
        expected: String,
        /// The digest of the bytes read, hex.
        actual: String,
    },
}

/// SHA-256 of each aligned `chunk_bytes` chunk of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkDigests {
    /// The chunk size the digests were computed with (`1..=MAX_CHUNK_BYTES`).
    pub chunk_bytes: u64,
    /// One digest per chunk, in order.
    pub digests: Vec<[u8; 32]>,
}

/// Builds [`ChunkDigests`] from bytes fed in pieces of any size (the parts of a streamed
/// upload), so a large object is digested in the same pass that reads it, with nothing buffered.
#[derive(Debug, Clone)]
pub struct ChunkDigester {
    chunk_bytes: u64,
    current: Sha256,
    /// Bytes of the current chunk fed so far.
    filled: u64,
    digests: Vec<[u8; 32]>,
}

impl ChunkDigester {
    /// A digester of `chunk_bytes` chunks.
    ///
    /// # Panics
    /// If `chunk_bytes` is not in `1..=MAX_CHUNK_BYTES`.
    pub fn new(chunk_bytes: u64) -> Self {
        assert!(
            (1..=MAX_CHUNK_BYTES).contains(&chunk_bytes),
            "invariant: chunk_bytes {chunk_bytes} in 1..={MAX_CHUNK_BYTES}"
        );
        Self {
            chunk_bytes,
            current: Sha256::new(),
            filled: 0,
            digests: Vec::new(),
        }
    }

    /// Adds the next bytes of the object.
    pub fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = self.chunk_bytes - self.filled;
            let take = usize::try_from(room).map_or(data.len(), |room| room.min(data.len()));
            self.current.update(&data[..take]);
            self.filled += take as u64;
            data = &data[take..];
            if self.filled == self.chunk_bytes {
                self.digests.push(self.current.finalize_reset().into());
                self.filled = 0;
            }
        }
    }

    /// The digests of everything fed, the last chunk possibly short.
    pub fn finish(mut self) -> ChunkDigests {
        if self.filled > 0 {
            self.digests.push(self.current.finalize().into());
        }
        ChunkDigests {
            chunk_bytes: self.chunk_bytes,
            digests: self.digests,
        }
    }
}

impl ChunkDigests {
    /// Digests of every `chunk_bytes` chunk of `data`. CPU-bound (about a millisecond per MiB):
    /// call it from blocking code for large objects.
    ///
    /// # Panics
    /// If `chunk_bytes` is not in `1..=MAX_CHUNK_BYTES`.
    pub fn compute(data: &[u8], chunk_bytes: u64) -> Self {
        assert!(
            (1..=MAX_CHUNK_BYTES).contains(&chunk_bytes),
            "invariant: chunk_bytes {chunk_bytes} in 1..={MAX_CHUNK_BYTES}"
        );
        let step = usize::try_from(chunk_bytes).expect("invariant: chunk_bytes fits in usize");
        Self {
            chunk_bytes,
            digests: data.chunks(step).map(sha256).collect(),
        }
    }

    /// How many chunks the digests cover.
    pub fn chunk_count(&self) -> u64 {
        self.digests.len() as u64
    }

    /// Encodes the digests as the object stored next to a segment log. Little-endian:
    ///
    /// | offset     | bytes  | field                                             |
    /// |------------|--------|---------------------------------------------------|
    /// | 0          | 4      | magic `STCD`                                      |
    /// | 4          | 1      | format version, `1`                               |
    /// | 5          | 3      | zero                                              |
    /// | 8          | 8      | `chunk_bytes` (u64)                               |
    /// | 16         | 8      | chunk count `n` (u64)                             |
    /// | 24         | 32 * n | SHA-256 of chunk 0, 1, ... n-1                    |
    /// | 24 + 32n   | 32     | SHA-256 of bytes `0..24 + 32n` (self-check)       |
    ///
    /// The self-check makes a damaged digest object fail [`Self::decode`] instead of failing
    /// every chunk it describes.
    pub fn encode(&self) -> Bytes {
        let body_len = HEADER_BYTES + DIGEST_BYTES * self.digests.len();
        let mut out = BytesMut::with_capacity(body_len + DIGEST_BYTES);
        out.put_slice(&MAGIC);
        out.put_u8(FORMAT_VERSION);
        out.put_slice(&[0; 3]);
        out.put_u64_le(self.chunk_bytes);
        out.put_u64_le(self.chunk_count());
        for digest in &self.digests {
            out.put_slice(digest);
        }
        let check = sha256(&out);
        out.put_slice(&check);
        out.freeze()
    }

    /// Decodes what [`Self::encode`] wrote.
    ///
    /// # Errors
    /// Any [`DigestError`] but `ChunkOutOfRange` and `Mismatch`; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Self, DigestError> {
        let header: &[u8; HEADER_BYTES] = bytes
            .get(..HEADER_BYTES)
            .and_then(|header| header.try_into().ok())
            .ok_or(DigestError::Truncated {
                expected: HEADER_BYTES as u64,
                actual: bytes.len() as u64,
            })?;
        let [m0, m1, m2, m3, version, ..] = *header;
        if [m0, m1, m2, m3] != MAGIC {
            return Err(DigestError::BadMagic {
                found: [m0, m1, m2, m3],
            });
        }
        if version != FORMAT_VERSION {
            return Err(DigestError::UnsupportedVersion { version });
        }
        let chunk_bytes = read_u64(header, 8);
        if !(1..=MAX_CHUNK_BYTES).contains(&chunk_bytes) {
            return Err(DigestError::InvalidChunkBytes { chunk_bytes });
        }
        let count = read_u64(header, 16);
        let expected_len = count
            .checked_mul(DIGEST_BYTES as u64)
            .and_then(|digests| digests.checked_add((HEADER_BYTES + DIGEST_BYTES) as u64))
            .unwrap_or(u64::MAX);
        let actual_len = bytes.len() as u64;
        if actual_len < expected_len {
            return Err(DigestError::Truncated {
                expected: expected_len,
                actual: actual_len,
            });
        }
        if actual_len > expected_len {
            return Err(DigestError::TrailingBytes {
                extra: actual_len - expected_len,
            });
        }
        let (body, check) = bytes.split_at(bytes.len() - DIGEST_BYTES);
        let actual = sha256(body);
        if actual.as_slice() != check {
            return Err(DigestError::Corrupt {
                expected: hex_of_slice(check),
                actual: to_hex(&actual),
            });
        }
        let digests = body[HEADER_BYTES..]
            .chunks_exact(DIGEST_BYTES)
            .map(|digest| {
                digest
                    .try_into()
                    .expect("invariant: chunks_exact yields 32 bytes")
            })
            .collect();
        Ok(Self {
            chunk_bytes,
            digests,
        })
    }

    /// Checks `data` against the digest of chunk `chunk_index`.
    ///
    /// # Errors
    /// [`DigestError::ChunkOutOfRange`] past the last chunk, [`DigestError::Mismatch`] (naming
    /// both digests) when the bytes differ from those uploaded.
    pub fn verify(&self, chunk_index: u64, data: &[u8]) -> Result<(), DigestError> {
        let expected = usize::try_from(chunk_index)
            .ok()
            .and_then(|index| self.digests.get(index))
            .ok_or(DigestError::ChunkOutOfRange {
                chunk_index,
                chunks: self.chunk_count(),
            })?;
        let actual = sha256(data);
        if actual != *expected {
            return Err(DigestError::Mismatch {
                chunk_index,
                expected: to_hex(expected),
                actual: to_hex(&actual),
            });
        }
        Ok(())
    }
}

fn read_u64(header: &[u8; HEADER_BYTES], at: usize) -> u64 {
    let mut field = [0; 8];
    field.copy_from_slice(&header[at..at + 8]);
    u64::from_le_bytes(field)
}

fn hex_of_slice(bytes: &[u8]) -> String {
    <[u8; 32]>::try_from(bytes)
        .map(|digest| to_hex(&digest))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sha256_hex_matches_the_standard_test_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn compute_splits_into_aligned_chunks_with_a_short_last_chunk() {
        let data: Vec<u8> = (0..=255).cycle().take(2500).collect();
        let digests = ChunkDigests::compute(&data, 1000);
        assert_eq!(digests.chunk_count(), chunk_count(2500, 1000));
        assert_eq!(
            digests.digests,
            vec![
                sha256(&data[..1000]),
                sha256(&data[1000..2000]),
                sha256(&data[2000..])
            ]
        );
        assert_eq!(ChunkDigests::compute(&[], 1000).chunk_count(), 0);
    }

    #[test]
    fn encoding_has_the_documented_layout() {
        let digests = ChunkDigests::compute(b"hello world", 4);
        let encoded = digests.encode();
        assert_eq!(encoded.len(), 24 + 3 * 32 + 32);
        assert_eq!(&encoded[..8], b"STCD\x01\0\0\0");
        assert_eq!(&encoded[8..16], &4u64.to_le_bytes());
        assert_eq!(&encoded[16..24], &3u64.to_le_bytes());
        assert_eq!(&encoded[24..56], &sha256(b"hell"));
    }

    #[test]
    fn verify_past_the_last_chunk_is_out_of_range() {
        let digests = ChunkDigests::compute(b"abc", 2);
        assert_eq!(
            digests.verify(2, b""),
            Err(DigestError::ChunkOutOfRange {
                chunk_index: 2,
                chunks: 2
            })
        );
    }

    #[test]
    fn decode_rejects_a_zero_chunk_size_even_with_a_valid_self_check() {
        let mut body = BytesMut::new();
        body.put_slice(b"STCD\x01\0\0\0");
        body.put_u64_le(0);
        body.put_u64_le(0);
        let check = sha256(&body);
        body.put_slice(&check);
        assert_eq!(
            ChunkDigests::decode(&body),
            Err(DigestError::InvalidChunkBytes { chunk_bytes: 0 })
        );
    }

    #[test]
    fn decode_rejects_a_huge_count_without_allocating() {
        let mut body = BytesMut::new();
        body.put_slice(b"STCD\x01\0\0\0");
        body.put_u64_le(1024);
        body.put_u64_le(u64::MAX);
        assert!(matches!(
            ChunkDigests::decode(&body),
            Err(DigestError::Truncated { .. })
        ));
    }

    fn arb_digests() -> impl Strategy<Value = (Vec<u8>, u64)> {
        (proptest::collection::vec(any::<u8>(), 0..600), 1u64..130)
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips((data, chunk_bytes) in arb_digests()) {
            let digests = ChunkDigests::compute(&data, chunk_bytes);
            prop_assert_eq!(ChunkDigests::decode(&digests.encode()), Ok(digests));
        }

        #[test]
        fn every_chunk_of_the_original_verifies((data, chunk_bytes) in arb_digests()) {
            let digests = ChunkDigests::compute(&data, chunk_bytes);
            let step = usize::try_from(chunk_bytes).unwrap();
            for (index, chunk) in data.chunks(step).enumerate() {
                prop_assert_eq!(digests.verify(index as u64, chunk), Ok(()));
            }
        }

        #[test]
        fn any_flipped_byte_fails_verify(
            (data, chunk_bytes) in arb_digests(),
            position in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            prop_assume!(!data.is_empty());
            let digests = ChunkDigests::compute(&data, chunk_bytes);
            let mut corrupt = data.clone();
            let position = position.index(corrupt.len());
            corrupt[position] ^= flip;
            let step = usize::try_from(chunk_bytes).unwrap();
            let index = position / step;
            let chunk = corrupt.chunks(step).nth(index).unwrap();
            let result = digests.verify(index as u64, chunk);
            prop_assert!(
                matches!(result, Err(DigestError::Mismatch { chunk_index, .. })
                    if chunk_index == index as u64),
                "{:?}", result
            );
        }

        #[test]
        fn digests_fed_in_pieces_equal_those_of_the_whole(
            (data, chunk_bytes) in arb_digests(),
            piece_sizes in proptest::collection::vec(1usize..200, 1..20),
        ) {
            let mut digester = ChunkDigester::new(chunk_bytes);
            let mut rest = &data[..];
            for size in piece_sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, tail) = rest.split_at((*size).min(rest.len()));
                digester.update(piece);
                rest = tail;
            }
            prop_assert_eq!(digester.finish(), ChunkDigests::compute(&data, chunk_bytes));
        }

        #[test]
        fn decode_of_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = ChunkDigests::decode(&bytes);
        }

        #[test]
        fn any_flipped_byte_of_an_encoding_fails_decode(
            (data, chunk_bytes) in arb_digests(),
            position in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let mut encoded = ChunkDigests::compute(&data, chunk_bytes).encode().to_vec();
            let position = position.index(encoded.len());
            encoded[position] ^= flip;
            prop_assert!(ChunkDigests::decode(&encoded).is_err());
        }
    }
}
