//! Zig-zag variable-length integers, as used inside Kafka's record format v2.
//!
//! Kafka writes every record-level length, delta and count as a zig-zag varint (the
//! protobuf `sint32`/`sint64` encoding): the signed value is first mapped to an unsigned one
//! so that numbers of small magnitude, negative or positive, stay small (`0, -1, 1, -2, 2` →
//! `0, 1, 2, 3, 4`), then written 7 bits at a time, least-significant group first, with the
//! high bit of each byte meaning "another byte follows".
//!
//! A 32-bit *varint* takes at most [`MAX_VARINT_LEN`] (5) bytes and a 64-bit *varlong* at
//! most [`MAX_VARLONG_LEN`] (10) bytes. The decoders read untrusted bytes from the network and
//! from disk, so they never panic: they return [`VarintError::Truncated`] when the input ends
//! before the last byte of a value and [`VarintError::Overflow`] when an encoding runs past the
//! maximum length or its final byte carries bits that do not fit the target width. (Kafka's Java
//! reader silently drops such excess bits; no conforming encoder emits them, so we reject them
//! rather than guess.) Non-minimal but in-range encodings such as `80 00` for zero are accepted,
//! as Kafka accepts them: the batch CRC covers the raw bytes, so we never need to re-encode.

use bytes::BufMut;

/// The longest encoding of a 32-bit varint: 32 bits in 7-bit groups.
pub const MAX_VARINT_LEN: usize = 5;
/// The longest encoding of a 64-bit varlong: 64 bits in 7-bit groups.
pub const MAX_VARLONG_LEN: usize = 10;

/// Why a varint or varlong could not be decoded.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended while the continuation bit still announced another byte.
    #[error("the input ended in the middle of a varint")]
    Truncated,
    /// The encoding is longer than the maximum for its width, or its last byte holds bits
    /// beyond that width.
    #[error("the varint is longer than allowed or does not fit in the target integer width")]
    Overflow,
}

/// Maps a signed 32-bit value to unsigned so that small magnitudes stay small.
fn zigzag32(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)) as u32
}

/// Inverse of [`zigzag32`].
fn unzigzag32(value: u32) -> i32 {
    ((value >> 1) as i32) ^ -((value & 1) as i32)
}

/// Maps a signed 64-bit value to unsigned so that small magnitudes stay small.
fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Inverse of [`zigzag64`].
fn unzigzag64(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Writes `value` in 7-bit groups, least significant first.
fn encode_unsigned(mut value: u64, out: &mut impl BufMut) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Number of bytes [`encode_unsigned`] writes for `value`.
fn unsigned_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads one unsigned varint of at most `max_len` bytes whose value must fit in `bits` bits.
/// Returns the value and the number of bytes consumed.
fn decode_unsigned(buf: &[u8], max_len: usize, bits: u32) -> Result<(u64, usize), VarintError> {
    let mut result: u64 = 0;
    for i in 0..max_len {
        let Some(&byte) = buf.get(i) else {
            return Err(VarintError::Truncated);
        };
        // i < 10, so the shift is at most 63 and the cast is lossless.
        let shift = 7 * i as u32;
        let payload = u64::from(byte & 0x7f);
        if i + 1 == max_len {
            // The final allowed byte may neither continue nor carry bits past `bits`.
            let room = bits.saturating_sub(shift);
            if byte & 0x80 != 0 || payload >> room != 0 {
                return Err(VarintError::Overflow);
            }
        }
        result |= payload << shift;
        if byte & 0x80 == 0 {
            return Ok((result, i + 1));
        }
    }
    Err(VarintError::Overflow)
}

/// Appends the zig-zag varint encoding of `value` (1 to 5 bytes).
pub fn encode_varint(value: i32, out: &mut impl BufMut) {
    encode_unsigned(u64::from(zigzag32(value)), out);
}

/// Appends the zig-zag varlong encoding of `value` (1 to 10 bytes).
pub fn encode_varlong(value: i64, out: &mut impl BufMut) {
    encode_unsigned(zigzag64(value), out);
}

/// Number of bytes [`encode_varint`] writes for `value`; lets encoders size buffers up front.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(zigzag32(value)))
}

/// Number of bytes [`encode_varlong`] writes for `value`.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(zigzag64(value))
}

/// Decodes a zig-zag varint from the start of `buf`, returning the value and the number of
/// bytes it occupied. Trailing bytes after the varint are ignored.
pub fn decode_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (raw, len) = decode_unsigned(buf, MAX_VARINT_LEN, 32)?;
    let raw = u32::try_from(raw).map_err(|_| VarintError::Overflow)?;
    Ok((unzigzag32(raw), len))
}

/// Decodes a zig-zag varlong from the start of `buf`, returning the value and the number of
/// bytes it occupied. Trailing bytes after the varlong are ignored.
pub fn decode_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (raw, len) = decode_unsigned(buf, MAX_VARLONG_LEN, 64)?;
    Ok((unzigzag64(raw), len))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn varint_bytes(v: i32) -> Vec<u8> {
        let mut out = Vec::new();
        encode_varint(v, &mut out);
        out
    }

    fn varlong_bytes(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_varlong(v, &mut out);
        out
    }

    #[test]
    fn known_varint_encodings() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (300, &[0xd8, 0x04]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(value, bytes) in cases {
            assert_eq!(varint_bytes(value), bytes, "encoding {value}");
            assert_eq!(varint_len(value), bytes.len());
            assert_eq!(decode_varint(bytes).unwrap(), (value, bytes.len()));
        }
    }

    #[test]
    fn known_varlong_encodings() {
        let max = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let min = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(varlong_bytes(i64::MAX), max);
        assert_eq!(varlong_bytes(i64::MIN), min);
        assert_eq!(decode_varlong(&max).unwrap(), (i64::MAX, 10));
        assert_eq!(decode_varlong(&min).unwrap(), (i64::MIN, 10));
        assert_eq!(varlong_bytes(-10), [0x13]);
        assert_eq!(decode_varlong(&[0x13]).unwrap(), (-10, 1));
    }

    #[test]
    fn overlong_and_out_of_range_are_errors() {
        // Six bytes for a varint: the fifth byte still has its continuation bit set.
        assert_eq!(
            decode_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
            Err(VarintError::Overflow)
        );
        // Fifth byte carries bits beyond 32.
        assert_eq!(
            decode_varint(&[0xff, 0xff, 0xff, 0xff, 0x1f]),
            Err(VarintError::Overflow)
        );
        // Eleven bytes for a varlong.
        let mut long = vec![0x80; 10];
        long.push(0x00);
        assert_eq!(decode_varlong(&long), Err(VarintError::Overflow));
        // Tenth byte carries bits beyond 64.
        let mut wide = vec![0xff; 9];
        wide.push(0x02);
        assert_eq!(decode_varlong(&wide), Err(VarintError::Overflow));
    }

    #[test]
    fn non_minimal_encodings_are_accepted() {
        assert_eq!(decode_varint(&[0x80, 0x00]).unwrap(), (0, 2));
        assert_eq!(decode_varlong(&[0x82, 0x80, 0x00]).unwrap(), (1, 3));
    }

    #[test]
    fn empty_and_truncated_inputs_are_errors() {
        assert_eq!(decode_varint(&[]), Err(VarintError::Truncated));
        assert_eq!(decode_varlong(&[]), Err(VarintError::Truncated));
        let bytes = varlong_bytes(i64::MIN);
        for len in 0..bytes.len() {
            assert_eq!(decode_varlong(&bytes[..len]), Err(VarintError::Truncated));
        }
        let bytes = varint_bytes(i32::MIN);
        for len in 0..bytes.len() {
            assert_eq!(decode_varint(&bytes[..len]), Err(VarintError::Truncated));
        }
    }

    proptest! {
        #[test]
        fn varint_round_trip(value in any::<i32>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut bytes = varint_bytes(value);
            prop_assert_eq!(bytes.len(), varint_len(value));
            prop_assert!(bytes.len() <= MAX_VARINT_LEN);
            let len = bytes.len();
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(decode_varint(&bytes), Ok((value, len)));
        }

        #[test]
        fn varlong_round_trip(value in any::<i64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut bytes = varlong_bytes(value);
            prop_assert_eq!(bytes.len(), varlong_len(value));
            prop_assert!(bytes.len() <= MAX_VARLONG_LEN);
            let len = bytes.len();
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(decode_varlong(&bytes), Ok((value, len)));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok((value, len)) = decode_varint(&bytes) {
                prop_assert!((1..=MAX_VARINT_LEN).contains(&len));
                let canonical = varint_bytes(value);
                prop_assert_eq!(decode_varint(&canonical), Ok((value, canonical.len())));
            }
            if let Ok((value, len)) = decode_varlong(&bytes) {
                prop_assert!((1..=MAX_VARLONG_LEN).contains(&len));
                let canonical = varlong_bytes(value);
                prop_assert_eq!(decode_varlong(&canonical), Ok((value, canonical.len())));
            }
        }
    }
}
