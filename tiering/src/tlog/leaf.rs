//! What one leaf of a partition's transparency log says. A leaf is one JSON object (UTF-8, as
//! written: verifiers hash the stored bytes and only then parse them), one of:
//!
//! - `segment`: a segment was uploaded; the manifest entry itself (offsets, timestamps, size,
//!   the four objects with their keys, sizes and SHA-256, chunk size). The `chunks` object's
//!   SHA-256 is the root of the segment's chunk digests.
//! - `deletion`: offsets `[from_offset, to_offset)` left the log, with the reason (`retention`,
//!   `delete_records`, `topic_deleted`, `local_gap`, `recovered`), the policy that decided it,
//!   the time and the principal when known. Logged before any object of the range is removed.
//! - `manifest`: a manifest generation was written: its key, size and SHA-256.
//! - `topic`: the topic's `topic.json` changed (in partition 0's log): key, size and SHA-256.
//!
//! One leaf per segment (not per batch): the segment is the unit of upload and of deletion, a
//! batch is already covered by the object's SHA-256, the chunk digests and its own CRC-32C, and a
//! leaf per batch would make the log thousands of times larger for no extra evidence.

use serde::{Deserialize, Serialize};

use crate::manifest::RemoteSegment;

/// One leaf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Leaf {
    /// A segment entered the bucket.
    Segment {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: u32,
        /// The segment as the manifest lists it.
        segment: RemoteSegment,
    },
    /// A range of offsets left the log.
    Deletion {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: u32,
        /// First offset removed.
        from_offset: u64,
        /// First offset kept (the new log start).
        to_offset: u64,
        /// Why: `retention`, `delete_records`, `topic_deleted`, `local_gap` or `recovered`.
        reason: String,
        /// The rule that decided it (for example `retention_ms=604800000`), empty when none.
        policy: String,
        /// When (ms since the epoch).
        time_ms: i64,
        /// Who asked, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<String>,
    },
    /// A manifest generation was written.
    Manifest {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: u32,
        /// Its generation.
        generation: u64,
        /// Its key, relative to the store's prefix.
        key: String,
        /// Its bytes.
        size: u64,
        /// SHA-256 of its bytes, lowercase hex.
        sha256: String,
    },
    /// The topic's metadata object changed.
    Topic {
        /// Topic name.
        topic: String,
        /// Its key, relative to the store's prefix.
        key: String,
        /// Its bytes.
        size: u64,
        /// SHA-256 of its bytes, lowercase hex.
        sha256: String,
    },
}

impl Leaf {
    /// The bytes stored in the entry bundle (and hashed into the tree).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses stored leaf bytes.
    ///
    /// # Errors
    /// Bytes that are not a leaf.
    pub fn parse(bytes: &[u8]) -> Result<Leaf, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_round_trip_with_their_kind_first() {
        let leaf = Leaf::Deletion {
            topic: "t".into(),
            partition: 1,
            from_offset: 0,
            to_offset: 10,
            reason: "retention".into(),
            policy: "retention_ms=1".into(),
            time_ms: 5,
            principal: None,
        };
        let bytes = leaf.to_bytes();
        assert!(
            bytes.starts_with(br#"{"kind":"deletion","#),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(Leaf::parse(&bytes).unwrap(), leaf);
        assert!(Leaf::parse(br#"{"kind":"nothing"}"#).is_err());
    }
}
