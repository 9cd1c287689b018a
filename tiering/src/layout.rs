//! Where Strata's objects live inside the store's prefix. Names sort in offset order, so listing a
//! partition's `segments/` prefix shows its history oldest first:
//!
//! ```text
//! topics/{topic}/topic.json                                   topic metadata (configs, partitions)
//! topics/{topic}/{partition}/manifest/{generation:020}.json   one object per manifest version
//! topics/{topic}/{partition}/segments/{base:020}.{writer}.log        segment data
//! topics/{topic}/{partition}/segments/{base:020}.{writer}.index      sparse offset index
//! topics/{topic}/{partition}/segments/{base:020}.{writer}.timeindex  sparse time index
//! topics/{topic}/{partition}/segments/{base:020}.{writer}.chunks     SHA-256 of each data chunk
//! topics/{topic}/{partition}/tlog/checkpoint                  newest signed checkpoint
//! topics/{topic}/{partition}/tlog/checkpoints/{size:020}      every checkpoint, create-only
//! topics/{topic}/{partition}/tlog/tile/...                    C2SP tlog-tiles tiles and entry bundles
//! tlog-keys/{key id:08x}.vkey                                 checkpoint verification keys
//! groups/offsets.note                                         consumer-group commits, signed
//! security/acls.note                                          API-managed ACL rules, signed
//! FORMAT.md, format.json                                      this layout, for auditors
//! ```
//!
//! `writer` is a random id of the server process that uploaded the segment: a second writer that
//! wrongly shares the bucket path can never overwrite the first one's objects, and an upload
//! that a crash interrupted leaves objects under a name no manifest references (orphans, found by
//! listing and deleted after a grace period).

use object_store::path::Path;

/// Root of all topic data.
pub const TOPICS: &str = "topics";
/// Topic metadata object name.
pub const TOPIC_FILE: &str = "topic.json";

/// The four objects of one uploaded segment.
pub const SEGMENT_KINDS: [&str; 4] = ["log", "index", "timeindex", "chunks"];

/// The snapshot of consumer groups' committed offsets on tiered topics, for restores: a
/// signed note whose text is JSON.
pub fn group_offsets_file() -> Path {
    Path::from("groups/offsets.note")
}

/// `security/acls.note`: the ACL rules managed through the API, signed.
pub fn acls_file() -> Path {
    Path::from("security/acls.note")
}

/// `topics/{topic}/topic.json`.
pub fn topic_file(topic: &str) -> Path {
    Path::from_iter([TOPICS, topic, TOPIC_FILE])
}

/// `topics/`: list with a delimiter to find every topic.
pub fn topics_root() -> Path {
    Path::from(TOPICS)
}

/// `topics/{topic}/`: everything of a topic.
pub fn topic_root(topic: &str) -> Path {
    Path::from_iter([TOPICS, topic])
}

/// `topics/{topic}/{partition}/manifest/`.
pub fn manifest_dir(topic: &str, partition: u32) -> Path {
    Path::from_iter([TOPICS, topic, &partition.to_string(), "manifest"])
}

/// `topics/{topic}/{partition}/manifest/{generation:020}.json`.
pub fn manifest_file(topic: &str, partition: u32, generation: u64) -> Path {
    manifest_dir(topic, partition).join(format!("{generation:020}.json"))
}

/// The generation encoded in a manifest object's key.
pub fn parse_manifest_generation(key: &Path) -> Option<u64> {
    let name = key.filename()?;
    let stem = name.strip_suffix(".json")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// `topics/{topic}/{partition}/tlog`: the partition's transparency log (never deleted).
pub fn tlog_dir(topic: &str, partition: u32) -> Path {
    Path::from_iter([TOPICS, topic, &partition.to_string(), "tlog"])
}

/// `tlog-keys/{id:08x}.vkey`: a published checkpoint verification key.
pub fn tlog_key(id: u32) -> Path {
    Path::from_iter(["tlog-keys".to_string(), format!("{id:08x}.vkey")])
}

/// `tlog-keys/`.
pub fn tlog_keys_dir() -> Path {
    Path::from("tlog-keys")
}

/// `topics/{topic}/{partition}/segments/`.
pub fn segments_dir(topic: &str, partition: u32) -> Path {
    Path::from_iter([TOPICS, topic, &partition.to_string(), "segments"])
}

/// `topics/{topic}/{partition}/segments/{base:020}.{writer}.{kind}`.
pub fn segment_object(
    topic: &str,
    partition: u32,
    base_offset: u64,
    writer: &str,
    kind: &str,
) -> Path {
    segments_dir(topic, partition).join(format!("{base_offset:020}.{writer}.{kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_in_offset_and_generation_order_and_parse_back() {
        let a = segment_object("t", 0, 9, "w", "log");
        let b = segment_object("t", 0, 10, "w", "log");
        assert!(a.as_ref() < b.as_ref());
        assert_eq!(a.as_ref(), "topics/t/0/segments/00000000000000000009.w.log");
        let m = manifest_file("t", 3, 42);
        assert_eq!(m.as_ref(), "topics/t/3/manifest/00000000000000000042.json");
        assert_eq!(parse_manifest_generation(&m), Some(42));
        assert_eq!(
            parse_manifest_generation(&Path::from("topics/t/3/manifest/x.json")),
            None
        );
        assert!(manifest_file("t", 0, 9).as_ref() < manifest_file("t", 0, 10).as_ref());
        assert_eq!(topic_file("orders").as_ref(), "topics/orders/topic.json");
    }
}
