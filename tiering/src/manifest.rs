//! The per-partition manifest: the list of a partition's remote segments, and the only thing a
//! reader trusts about the bucket.
//!
//! Every version is its own object, `manifest/{generation:020}.json`, created with
//! `PutMode::Create` (If-None-Match: *). The store's conditional create is the fence: two
//! writers that loaded the same generation race for the next one and exactly one wins; the loser
//! gets [`ManifestError::Fenced`] and must stop writing to that partition. This needs only
//! conditional *create*, which every store that passed the start-up probe supports (the local
//! folder does not implement `PutMode::Update`). A manifest is written only after every object it
//! lists exists, so it never names a missing object; segments it no longer lists are deleted
//! afterwards (after their Object Lock retention, if any), so a crash in between leaves orphans,
//! never holes. Old generations are pruned after a new one is in place.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::layout;
use crate::store::{delete_if_exists, list_sorted};

/// Format version of manifest objects.
pub const MANIFEST_FORMAT: u32 = 1;

/// Generations kept behind the newest, for readers that listed just before a write.
const KEEP_OLD_GENERATIONS: u64 = 2;

/// One uploaded object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    /// Key relative to the store's prefix.
    pub key: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256 of the whole object, lowercase hex.
    pub sha256: String,
}

/// One remote segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSegment {
    /// Offset of its first batch (also the local segment's name).
    pub base_offset: u64,
    /// Offset of its last record.
    pub last_offset: u64,
    /// Timestamp of its first record.
    pub first_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Bytes of record data.
    pub size: u64,
    /// When the upload finished (ms since the epoch).
    pub uploaded_at_ms: i64,
    /// Object Lock retention of its objects, when the topic sets one (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until_ms: Option<i64>,
    /// Bytes per chunk in `chunks` (the unit of cold reads and of verification).
    pub chunk_bytes: u64,
    /// Record batches, byte for byte as in the local `.log` file.
    pub log: ObjectRef,
    /// The offset index, as the local `.index` file.
    pub index: ObjectRef,
    /// The time index, as the local `.timeindex` file.
    pub time_index: ObjectRef,
    /// SHA-256 of every `chunk_bytes` chunk of `log`.
    pub chunks: ObjectRef,
}

impl RemoteSegment {
    /// Every object of the segment.
    pub fn objects(&self) -> [&ObjectRef; 4] {
        [&self.log, &self.index, &self.time_index, &self.chunks]
    }
}

/// Objects no manifest lists any more, to delete once `not_before_ms` has passed (Object Lock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingDelete {
    /// Keys relative to the store's prefix.
    pub keys: Vec<String>,
    /// Not before this time (ms since the epoch).
    pub not_before_ms: i64,
}

/// One version of a partition's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// Version number; also the object's name.
    pub generation: u64,
    /// Id of the server process that wrote it.
    pub writer: String,
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// First offset of the partition's whole log (moved by total retention and delete-records).
    pub log_start_offset: u64,
    /// Remote segments, ascending and contiguous.
    pub segments: Vec<RemoteSegment>,
    /// Unlisted objects still to delete.
    #[serde(default)]
    pub pending_deletes: Vec<PendingDelete>,
}

impl Manifest {
    /// The manifest of a partition with nothing uploaded yet (generation 0 is never stored).
    pub fn empty(topic: &str, partition: u32, writer: &str, log_start_offset: u64) -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            generation: 0,
            writer: writer.to_string(),
            topic: topic.to_string(),
            partition,
            log_start_offset,
            segments: Vec::new(),
            pending_deletes: Vec::new(),
        }
    }

    /// The offset after the last uploaded record (the log start when nothing is uploaded).
    pub fn next_offset(&self) -> u64 {
        self.segments
            .last()
            .map_or(self.log_start_offset, |s| s.last_offset + 1)
    }

    /// The remote segment holding `offset`, or the first one after it; none below the log start.
    pub fn segment_for(&self, offset: u64) -> Option<&RemoteSegment> {
        if offset < self.log_start_offset {
            return None;
        }
        self.segments.iter().find(|s| s.last_offset >= offset)
    }

    /// Bytes of record data in the bucket.
    pub fn size(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// The next version: same content, generation + 1, written by `writer`.
    pub fn successor(&self, writer: &str) -> Manifest {
        Manifest {
            generation: self.generation + 1,
            writer: writer.to_string(),
            ..self.clone()
        }
    }

    /// Drops segments that end below `offset` into `pending_deletes` and moves the log start.
    /// Returns how many segments left the manifest.
    pub fn cut_below(&mut self, offset: u64, now_ms: i64) -> usize {
        let keep_from = self
            .segments
            .iter()
            .position(|s| s.last_offset >= offset)
            .unwrap_or(self.segments.len());
        let removed: Vec<RemoteSegment> = self.segments.drain(..keep_from).collect();
        for segment in &removed {
            self.pending_deletes.push(PendingDelete {
                keys: segment.objects().iter().map(|o| o.key.clone()).collect(),
                not_before_ms: segment.retain_until_ms.unwrap_or(now_ms),
            });
        }
        self.log_start_offset = self.log_start_offset.max(offset);
        removed.len()
    }
}

/// Why a manifest could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Another writer created this generation first: two servers write to one bucket path.
    #[error(
        "manifest generation {generation} of {topic}/{partition} was written by another \
         writer: two servers are tiering to the same bucket path; this one stops tiering the \
         partition"
    )]
    Fenced {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// The generation lost.
        generation: u64,
    },
    /// This writer already created this generation with other content: an earlier attempt
    /// that reported an error (a timeout) but landed, before the change was rebuilt (with new
    /// upload times). Not a rival: adopt the manifest and redo the change on top of it.
    #[error(
        "manifest generation {} of {}/{} was already written by this writer (an earlier attempt \
         landed); adopting it",
        .0.generation, .0.topic, .0.partition
    )]
    LandedEarlier(Box<Manifest>),
    /// The store failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// A manifest object does not parse.
    #[error("manifest {key} is invalid: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// The parser's message.
        reason: String,
    },
}

/// Loads the newest manifest of a partition; `None` when it has none.
///
/// # Errors
/// Store errors and a newest manifest that does not parse.
pub async fn load_latest(
    store: &dyn ObjectStore,
    topic: &str,
    partition: u32,
) -> Result<Option<Manifest>, ManifestError> {
    let dir = layout::manifest_dir(topic, partition);
    let listed = list_sorted(store, Some(&dir)).await?;
    let Some(newest) = listed
        .iter()
        .filter_map(|m| layout::parse_manifest_generation(&m.location).map(|g| (g, &m.location)))
        .max_by_key(|(g, _)| *g)
    else {
        return Ok(None);
    };
    let body = store.get(newest.1).await?.bytes().await?;
    parse(newest.1, &body, newest.0).map(Some)
}

/// Parses the manifest object at `key`, which must be of `generation`.
fn parse(key: &Path, body: &[u8], generation: u64) -> Result<Manifest, ManifestError> {
    let manifest: Manifest = serde_json::from_slice(body).map_err(|e| ManifestError::Invalid {
        key: key.to_string(),
        reason: e.to_string(),
    })?;
    if manifest.format != MANIFEST_FORMAT || manifest.generation != generation {
        return Err(ManifestError::Invalid {
            key: key.to_string(),
            reason: format!(
                "format {} generation {} (expected format {MANIFEST_FORMAT}, generation {generation})",
                manifest.format, manifest.generation
            ),
        });
    }
    Ok(manifest)
}

/// Creates `manifest` as its generation's object; fails with [`ManifestError::Fenced`] when
/// that generation exists. Then prunes generations older than the last few.
///
/// # Errors
/// Fenced; LandedEarlier when this writer's own earlier attempt of the generation landed with
/// other content; store errors (the caller retries the same generation: a create that landed
/// but reported an error then reads as success when the content is the same).
pub async fn store_next(store: &dyn ObjectStore, manifest: &Manifest) -> Result<(), ManifestError> {
    let key = layout::manifest_file(&manifest.topic, manifest.partition, manifest.generation);
    let body = to_bytes(manifest);
    let options = PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    let body = Bytes::from(body);
    match store
        .put_opts(&key, PutPayload::from(body.clone()), options)
        .await
    {
        Ok(_) => {}
        Err(object_store::Error::AlreadyExists { .. }) => {
            // A retry of a create that landed although it reported an error finds its own
            // bytes there: that is success, not a second writer. Other bytes of our own writer
            // are an earlier attempt of this generation; anything else is a rival.
            let existing = store.get(&key).await?.bytes().await?;
            if existing != body {
                return Err(match parse(&key, &existing, manifest.generation) {
                    Ok(existing) if existing.writer == manifest.writer => {
                        ManifestError::LandedEarlier(Box::new(existing))
                    }
                    _ => ManifestError::Fenced {
                        topic: manifest.topic.clone(),
                        partition: manifest.partition,
                        generation: manifest.generation,
                    },
                });
            }
        }
        Err(error) => return Err(error.into()),
    }
    prune(store, manifest).await;
    Ok(())
}

/// Deletes manifest generations older than the last [`KEEP_OLD_GENERATIONS`]; failures only
/// leave extra objects.
async fn prune(store: &dyn ObjectStore, manifest: &Manifest) {
    if manifest.generation <= KEEP_OLD_GENERATIONS {
        return;
    }
    let dir = layout::manifest_dir(&manifest.topic, manifest.partition);
    let Ok(listed) = list_sorted(store, Some(&dir)).await else {
        return;
    };
    for object in listed {
        let old = layout::parse_manifest_generation(&object.location)
            .is_some_and(|g| g + KEEP_OLD_GENERATIONS < manifest.generation);
        if old && let Err(error) = delete_if_exists(store, &object.location).await {
            tracing::debug!(%error, key = %object.location, "could not prune an old manifest");
        }
    }
}

/// The stored bytes of a manifest (pretty JSON; the transparency log records their SHA-256).
pub fn to_bytes(manifest: &Manifest) -> Vec<u8> {
    serde_json::to_vec_pretty(manifest).unwrap_or_default()
}

/// Keys under a partition's `segments/` prefix that `manifest` does not reference (neither
/// listed nor pending deletion) and that are older than `grace_ms`: left by uploads a crash
/// interrupted before their manifest was written.
///
/// # Errors
/// Listing errors.
pub async fn find_orphans(
    store: &dyn ObjectStore,
    manifest: &Manifest,
    now_ms: i64,
    grace_ms: i64,
) -> Result<Vec<Path>, ManifestError> {
    let referenced: std::collections::HashSet<&str> = manifest
        .segments
        .iter()
        .flat_map(|s| s.objects().map(|o| o.key.as_str()))
        .chain(
            manifest
                .pending_deletes
                .iter()
                .flat_map(|p| p.keys.iter().map(String::as_str)),
        )
        .collect();
    let dir = layout::segments_dir(&manifest.topic, manifest.partition);
    let listed = list_sorted(store, Some(&dir)).await?;
    Ok(listed
        .into_iter()
        .filter(|m| !referenced.contains(m.location.as_ref()))
        .filter(|m| m.last_modified.timestamp_millis().saturating_add(grace_ms) <= now_ms)
        .map(|m| m.location)
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;

    fn object(key: &str) -> ObjectRef {
        ObjectRef {
            key: key.to_string(),
            size: 1,
            sha256: "00".to_string(),
        }
    }

    fn segment(base: u64, last: u64) -> RemoteSegment {
        RemoteSegment {
            base_offset: base,
            last_offset: last,
            first_timestamp: 0,
            max_timestamp: 0,
            size: 100,
            uploaded_at_ms: 0,
            retain_until_ms: None,
            chunk_bytes: 1 << 20,
            log: object(&format!("l{base}")),
            index: object(&format!("i{base}")),
            time_index: object(&format!("t{base}")),
            chunks: object(&format!("c{base}")),
        }
    }

    #[test]
    fn lookups_and_cuts_follow_offsets() {
        let mut manifest = Manifest::empty("t", 0, "w", 0);
        assert_eq!(manifest.next_offset(), 0);
        manifest.segments = vec![segment(0, 9), segment(10, 19), segment(20, 29)];
        assert_eq!(manifest.next_offset(), 30);
        assert_eq!(manifest.segment_for(15).map(|s| s.base_offset), Some(10));
        assert_eq!(manifest.segment_for(30), None);
        assert_eq!(manifest.cut_below(12, 5), 1);
        assert_eq!(manifest.log_start_offset, 12);
        assert_eq!(manifest.segment_for(11), None, "below the log start");
        assert_eq!(manifest.pending_deletes.len(), 1);
        assert_eq!(manifest.pending_deletes[0].keys, ["l0", "i0", "t0", "c0"]);
        assert_eq!(manifest.size(), 200);
    }

    #[tokio::test]
    async fn generations_fence_a_second_writer_and_the_newest_loads() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        assert!(load_latest(store.as_ref(), "t", 1).await.unwrap().is_none());
        let first = Manifest::empty("t", 1, "a", 0).successor("a");
        store_next(store.as_ref(), &first).await.unwrap();
        // Retrying the very same write (a put that landed but reported an error) is fine.
        store_next(store.as_ref(), &first).await.unwrap();
        let mut rival = Manifest::empty("t", 1, "b", 0).successor("b");
        rival.log_start_offset = 5;
        let fenced = store_next(store.as_ref(), &rival).await;
        assert!(
            matches!(fenced, Err(ManifestError::Fenced { generation: 1, .. })),
            "{fenced:?}"
        );
        // The same writer with other content for generation 1: its earlier attempt, returned.
        let mut rebuilt = first.clone();
        rebuilt.log_start_offset = 7;
        match store_next(store.as_ref(), &rebuilt).await {
            Err(ManifestError::LandedEarlier(existing)) => assert_eq!(*existing, first),
            other => panic!("{other:?}"),
        }
        let mut next = first.successor("a");
        for _ in 0..5 {
            store_next(store.as_ref(), &next).await.unwrap();
            next = next.successor("a");
        }
        let latest = load_latest(store.as_ref(), "t", 1).await.unwrap().unwrap();
        assert_eq!(latest.generation, 6);
        let kept = list_sorted(store.as_ref(), Some(&layout::manifest_dir("t", 1)))
            .await
            .unwrap();
        assert_eq!(kept.len(), 3, "old generations are pruned");
    }

    #[tokio::test]
    async fn orphans_are_unreferenced_segment_objects() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let mut manifest = Manifest::empty("t", 0, "w", 0);
        let mut listed = segment(0, 9);
        listed.log.key = layout::segment_object("t", 0, 0, "w", "log").to_string();
        manifest.segments = vec![listed.clone()];
        for key in [
            listed.log.key.clone(),
            layout::segment_object("t", 0, 10, "w", "log").to_string(),
        ] {
            store
                .put(&Path::from(key), PutPayload::from_static(b"x"))
                .await
                .unwrap();
        }
        let now = chrono_now_ms();
        let orphans = find_orphans(store.as_ref(), &manifest, now, 0)
            .await
            .unwrap();
        assert_eq!(
            orphans,
            vec![layout::segment_object("t", 0, 10, "w", "log")]
        );
        let young = find_orphans(store.as_ref(), &manifest, now, 3_600_000)
            .await
            .unwrap();
        assert!(
            young.is_empty(),
            "the grace period protects uploads in flight"
        );
    }

    // The test compares against the real time the store uses.
    #[allow(clippy::disallowed_methods)]
    fn chrono_now_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
            + 1_000
    }
}
