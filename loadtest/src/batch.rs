//! Kafka RecordBatch v2, written and read here independently of the server's codec, so the
//! generator checks the server's bytes instead of trusting its own copy of the same code.
//! Uncompressed batches only: the generator sends none, and reads back what it sent.

use anyhow::{Context, bail, ensure};

const HEADER_LEN: usize = 61;
/// Bytes from the start of a batch to the first byte its CRC-32C covers (the attributes).
const CRC_FROM: usize = 21;

/// An idempotent producer's fields in a batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// Appends one batch of `records` (key, value) with `timestamp_ms` to `out`.
pub fn encode(
    records: &[(Option<&[u8]>, &[u8])],
    timestamp_ms: i64,
    producer: Option<ProducerFields>,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&0i64.to_be_bytes()); // baseOffset: the broker assigns it
    out.extend_from_slice(&0i32.to_be_bytes()); // batchLength, patched below
    out.extend_from_slice(&0i32.to_be_bytes()); // partitionLeaderEpoch
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // CRC, patched below
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes: no compression, create time
    let last_delta = i32::try_from(records.len().saturating_sub(1)).unwrap_or(i32::MAX);
    out.extend_from_slice(&last_delta.to_be_bytes());
    out.extend_from_slice(&timestamp_ms.to_be_bytes()); // baseTimestamp
    out.extend_from_slice(&timestamp_ms.to_be_bytes()); // maxTimestamp
    let fields = producer.unwrap_or(ProducerFields {
        id: -1,
        epoch: -1,
        base_sequence: -1,
    });
    out.extend_from_slice(&fields.id.to_be_bytes());
    out.extend_from_slice(&fields.epoch.to_be_bytes());
    out.extend_from_slice(&fields.base_sequence.to_be_bytes());
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    let mut body = Vec::new();
    for (delta, (key, value)) in records.iter().enumerate() {
        body.clear();
        body.push(0); // record attributes
        put_varint(&mut body, 0); // timestampDelta
        put_varint(&mut body, delta as i64);
        match key {
            Some(key) => {
                put_varint(&mut body, key.len() as i64);
                body.extend_from_slice(key);
            }
            None => put_varint(&mut body, -1),
        }
        put_varint(&mut body, value.len() as i64);
        body.extend_from_slice(value);
        put_varint(&mut body, 0); // headers
        put_varint(out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    let batch_length = u32::try_from(out.len() - start - 12).unwrap_or(u32::MAX);
    out[start + 8..start + 12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_FROM..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
}

/// One record read back from stored batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord<'a> {
    pub offset: u64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// Every record in `bytes` (whole batches as the server sends them), with each batch's CRC
/// checked. A partial batch at the end is an error: the server sends whole batches.
pub fn decode(mut bytes: &[u8]) -> anyhow::Result<Vec<StoredRecord<'_>>> {
    let mut records = Vec::new();
    while !bytes.is_empty() {
        ensure!(bytes.len() >= HEADER_LEN, "a batch header is cut short");
        let base_offset = u64::try_from(be_i64(&bytes[0..8])).context("negative base offset")?;
        let length = usize::try_from(be_i32(&bytes[8..12])).context("negative batch length")?;
        ensure!(
            length + 12 >= HEADER_LEN,
            "batch length {length} is below the header"
        );
        let batch = bytes.get(..12 + length).context("a batch is cut short")?;
        ensure!(batch[16] == 2, "magic {} is not 2", batch[16]);
        let crc = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
        ensure!(
            crc32c::crc32c(&batch[CRC_FROM..]) == crc,
            "CRC-32C mismatch in the batch at offset {base_offset}"
        );
        let attributes = u16::from_be_bytes([batch[21], batch[22]]);
        ensure!(
            attributes & 0x7 == 0,
            "compressed batches are not read here"
        );
        let count = usize::try_from(be_i32(&batch[57..61])).context("negative record count")?;
        let mut cursor = &batch[HEADER_LEN..];
        for _ in 0..count {
            let len = usize::try_from(varint(&mut cursor)?).context("negative record length")?;
            let mut record = cursor.get(..len).context("a record is cut short")?;
            cursor = &cursor[len..];
            record = record.get(1..).context("empty record")?;
            varint(&mut record)?; // timestampDelta
            let delta = u64::try_from(varint(&mut record)?).context("negative offset delta")?;
            let key = bytes_field(&mut record)?;
            let value = bytes_field(&mut record)?;
            records.push(StoredRecord {
                offset: base_offset + delta,
                key,
                value,
            });
        }
        bytes = &bytes[12 + length..];
    }
    Ok(records)
}

fn bytes_field<'a>(cursor: &mut &'a [u8]) -> anyhow::Result<Option<&'a [u8]>> {
    let len = varint(cursor)?;
    if len < 0 {
        return Ok(None);
    }
    let len = usize::try_from(len).context("field length")?;
    let field = cursor.get(..len).context("a field is cut short")?;
    *cursor = &cursor[len..];
    Ok(Some(field))
}

fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

fn varint(cursor: &mut &[u8]) -> anyhow::Result<i64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = cursor.split_first().context("a varint is cut short")?;
        *cursor = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    bail!("a varint is longer than 10 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn what_is_encoded_decodes_to_the_same_records(
            records in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                 proptest::collection::vec(any::<u8>(), 0..300)), 1..20),
            base in 0u64..1 << 40,
        ) {
            let borrowed: Vec<(Option<&[u8]>, &[u8])> =
                records.iter().map(|(k, v)| (k.as_deref(), v.as_slice())).collect();
            let mut bytes = Vec::new();
            encode(&borrowed, 1_700_000_000_000, None, &mut bytes);
            bytes[0..8].copy_from_slice(&(base as i64).to_be_bytes());
            let decoded = decode(&bytes).expect("decodes");
            prop_assert_eq!(decoded.len(), records.len());
            for (i, (record, (key, value))) in decoded.iter().zip(&records).enumerate() {
                prop_assert_eq!(record.offset, base + i as u64);
                prop_assert_eq!(record.key, key.as_deref());
                prop_assert_eq!(record.value, Some(value.as_slice()));
            }
        }

        #[test]
        fn a_flipped_bit_after_the_crc_field_is_caught(at in 21usize..200, bit in 0u8..8) {
            let mut bytes = Vec::new();
            encode(&[(Some(b"k".as_slice()), &[7u8; 150])], 0, None, &mut bytes);
            let at = at % bytes.len();
            bytes[at] ^= 1 << bit;
            prop_assert!(decode(&bytes).is_err());
        }
    }

    #[test]
    fn varints_round_trip_at_their_edges() {
        for value in [
            0i64,
            -1,
            1,
            63,
            -64,
            64,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(varint(&mut out.as_slice()).expect("varint"), value);
        }
    }
}
