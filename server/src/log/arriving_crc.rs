//! The CRC-32C of each batch of a raw body, computed while the body is still arriving.
//!
//! A streamed append (ADR 0016) validates its body only once the last byte is in, and the CRC
//! of 1 MiB of batches is then about 30 µs on the request's path, while the client waits. The
//! bytes before the last frame already sat in memory for most of the transport, so their CRC
//! is computed as they come, in the gaps between frames, and validation only compares the
//! result with each batch's stored CRC (`RecordBatch::decode_first_known`). Nothing is
//! trusted that was not computed here over exactly the batch's bytes: a batch whose span this
//! tracker did not follow to its end has its CRC computed at validation, as before.

use super::batch::{ATTRIBUTES_OFFSET, LOG_OVERHEAD};

/// One batch's CRC-covered bytes (`ATTRIBUTES_OFFSET` to its end) and their CRC-32C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchCrc {
    /// Where the batch starts in the body.
    pub start: usize,
    /// The batch's length, header included (`LOG_OVERHEAD + batchLength`).
    pub len: usize,
    /// CRC-32C of the body's bytes `start + ATTRIBUTES_OFFSET .. start + len`.
    pub crc: u32,
}

/// Follows a body's batches as it grows, one CRC per batch.
#[derive(Debug, Default)]
pub struct ArrivingCrcs {
    /// Start of the batch being followed.
    start: usize,
    /// Its length, once its length field has arrived.
    len: Option<usize>,
    /// How far into the body its CRC has been computed.
    covered: usize,
    crc: u32,
    done: Vec<BatchCrc>,
    /// A length field that cannot be a batch's: validation will refuse the body, so stop.
    stopped: bool,
}

impl ArrivingCrcs {
    /// Takes in what the body holds so far (`body`, all of it from its first byte: it only
    /// grows between calls).
    pub fn advance(&mut self, body: &[u8]) {
        while !self.stopped {
            let len = match self.len {
                Some(len) => len,
                None => match batch_len(body, self.start) {
                    Ok(Some(len)) => {
                        self.len = Some(len);
                        self.covered = self.start + ATTRIBUTES_OFFSET;
                        len
                    }
                    Ok(None) => return,
                    Err(()) => {
                        self.stopped = true;
                        return;
                    }
                },
            };
            let end = self.start + len;
            let until = end.min(body.len());
            if let Some(arrived) = body.get(self.covered..until) {
                self.crc = crc32c::crc32c_append(self.crc, arrived);
                self.covered = until;
            }
            if self.covered < end {
                return;
            }
            self.done.push(BatchCrc {
                start: self.start,
                len,
                crc: self.crc,
            });
            self.start = end;
            self.len = None;
            self.crc = 0;
        }
    }

    /// The CRCs of the batches that arrived whole, in body order.
    pub fn finish(self) -> Vec<BatchCrc> {
        self.done
    }
}

/// The length of the batch starting at `start`: `Ok(None)` until its length field arrived,
/// `Err` when the field cannot be a batch's (too short to hold its CRC).
fn batch_len(body: &[u8], start: usize) -> Result<Option<usize>, ()> {
    let Some(field) = body.get(start + 8..start + LOG_OVERHEAD) else {
        return Ok(None);
    };
    let mut length = [0u8; 4];
    length.copy_from_slice(field);
    let length = usize::try_from(i32::from_be_bytes(length)).map_err(|_| ())?;
    let len = LOG_OVERHEAD + length;
    if len < ATTRIBUTES_OFFSET {
        return Err(());
    }
    Ok(Some(len))
}

/// The CRC computed for the batch at `start` spanning `len` bytes, if it was followed whole.
pub fn known_crc(crcs: &[BatchCrc], start: usize, len: usize) -> Option<u32> {
    crcs.binary_search_by_key(&start, |c| c.start)
        .ok()
        .and_then(|i| crcs.get(i))
        .filter(|c| c.len == len)
        .map(|c| c.crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A body of batches with these payload lengths; only the length fields matter here, the
    /// other bytes are arbitrary.
    fn body_of(lengths: &[usize], fill: u8) -> Vec<u8> {
        let mut body = Vec::new();
        for (i, &payload) in lengths.iter().enumerate() {
            let batch_length = (ATTRIBUTES_OFFSET - LOG_OVERHEAD + payload) as i32;
            body.extend_from_slice(&(i as i64).to_be_bytes());
            body.extend_from_slice(&batch_length.to_be_bytes());
            let rest = ATTRIBUTES_OFFSET - LOG_OVERHEAD + payload;
            body.extend((0..rest).map(|j| fill.wrapping_add((j * 7 + i) as u8)));
        }
        body
    }

    proptest! {
        /// However the body arrives, each batch's CRC is that of its whole covered span.
        #[test]
        fn crcs_match_whole_batches(
            lengths in proptest::collection::vec(0usize..3000, 1..6),
            cuts in proptest::collection::vec(0usize..20_000, 0..12),
            fill in any::<u8>(),
        ) {
            let body = body_of(&lengths, fill);
            let mut ends: Vec<usize> = cuts.into_iter().map(|c| c % (body.len() + 1)).collect();
            ends.push(body.len());
            ends.sort_unstable();
            let mut crcs = ArrivingCrcs::default();
            for end in ends {
                crcs.advance(&body[..end]);
            }
            let crcs = crcs.finish();
            prop_assert_eq!(crcs.len(), lengths.len());
            let mut start = 0;
            for crc in &crcs {
                prop_assert_eq!(crc.start, start);
                let expected = crc32c::crc32c(&body[start + ATTRIBUTES_OFFSET..start + crc.len]);
                prop_assert_eq!(crc.crc, expected);
                prop_assert_eq!(known_crc(&crcs, start, crc.len), Some(expected));
                start += crc.len;
            }
        }
    }

    #[test]
    fn a_batch_cut_short_has_no_crc() {
        let body = body_of(&[100, 200], 3);
        let first = LOG_OVERHEAD + ATTRIBUTES_OFFSET - LOG_OVERHEAD + 100;
        let mut crcs = ArrivingCrcs::default();
        crcs.advance(&body[..body.len() - 1]);
        let crcs = crcs.finish();
        assert_eq!(crcs.len(), 1);
        assert_eq!(known_crc(&crcs, 0, first), Some(crcs[0].crc));
        assert_eq!(known_crc(&crcs, first, body.len() - first), None);
        // A different span at the same start is not vouched for.
        assert_eq!(known_crc(&crcs, 0, first + 1), None);
    }

    #[test]
    fn an_impossible_length_stops_following() {
        let mut body = body_of(&[50], 1);
        let mut bad = body_of(&[10], 2);
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        body.extend_from_slice(&bad);
        let mut crcs = ArrivingCrcs::default();
        crcs.advance(&body);
        assert_eq!(crcs.finish().len(), 1);

        let mut short = body_of(&[10], 2);
        short[8..12].copy_from_slice(&4i32.to_be_bytes());
        let mut crcs = ArrivingCrcs::default();
        crcs.advance(&short);
        assert!(crcs.finish().is_empty());
    }
}
