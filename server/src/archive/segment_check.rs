//! Checks of one live segment's four objects: present, the size and SHA-256 its log entry
//! names, every chunk digest, and every record batch (CRC-32C, offsets following each other
//! from the segment's first to its last offset).

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use strata_tiering::digest::{ChunkDigests, sha256_hex};
use strata_tiering::manifest::{ObjectRef, RemoteSegment};

use super::report::Failure;
use crate::log::RecordBatch;

/// Magic byte of a batch that crash recovery quarantined (ADR 0005).
const QUARANTINED_MAGIC: u8 = 0xfe;
/// Where the magic byte sits in a batch header.
const MAGIC_AT: usize = 16;

/// What checking one segment found.
#[derive(Debug, Default)]
pub struct SegmentCheck {
    /// Problems.
    pub failures: Vec<Failure>,
    /// Objects read.
    pub objects: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// Checks a live segment against its log entry; the four objects are fetched at once.
pub async fn check_segment(
    store: &dyn ObjectStore,
    segment: &RemoteSegment,
    whole_log_sha256: bool,
) -> SegmentCheck {
    let mut check = SegmentCheck::default();
    let range = (segment.base_offset, segment.last_offset);
    let mut fetched = Vec::new();
    let objects = segment.objects();
    let results = futures::future::join_all(
        objects
            .iter()
            .enumerate()
            .map(|(i, object)| fetch(store, object, i != 0 || whole_log_sha256)),
    )
    .await;
    for (object, result) in objects.iter().zip(results) {
        match result {
            Ok(bytes) => {
                check.objects += 1;
                check.bytes += bytes.len() as u64;
                fetched.push(Some(bytes));
            }
            Err(problem) => {
                check
                    .failures
                    .push(Failure::new(&object.key, problem).at(range.0, range.1));
                fetched.push(None);
            }
        }
    }
    let (Some(log), Some(chunks)) = (fetched[0].clone(), fetched[3].clone()) else {
        return check;
    };
    let result = tokio::task::spawn_blocking({
        let segment = segment.clone();
        move || check_contents(&segment, &log, &chunks)
    })
    .await;
    match result {
        Ok(failures) => check.failures.extend(failures),
        Err(error) => check.failures.push(Failure::new(
            &segment.log.key,
            format!("check interrupted: {error}"),
        )),
    }
    check
}

/// Gets an object and checks its size and (when `hash`) its SHA-256.
async fn fetch(store: &dyn ObjectStore, object: &ObjectRef, hash: bool) -> Result<Bytes, String> {
    let found = match store.get(&Path::from(object.key.as_str())).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => {
            return Err("missing: deleted without a deletion entry".to_string());
        }
        Err(error) => return Err(format!("unreadable: {error}")),
    };
    let bytes = found
        .bytes()
        .await
        .map_err(|e| format!("unreadable: {e}"))?;
    if bytes.len() as u64 != object.size {
        return Err(format!(
            "{} bytes, the log says {}",
            bytes.len(),
            object.size
        ));
    }
    if !hash {
        return Ok(bytes);
    }
    let digest = tokio::task::spawn_blocking({
        let bytes = bytes.clone();
        move || sha256_hex(&bytes)
    })
    .await
    .map_err(|e| format!("check interrupted: {e}"))?;
    if digest != object.sha256 {
        return Err(format!("SHA-256 {digest}, the log says {}", object.sha256));
    }
    Ok(bytes)
}

fn check_contents(segment: &RemoteSegment, log: &Bytes, chunks: &[u8]) -> Vec<Failure> {
    let mut failures = Vec::new();
    let key = &segment.log.key;
    let range = |f: Failure| f.at(segment.base_offset, segment.last_offset);
    match ChunkDigests::decode(chunks) {
        Ok(digests) => {
            let step = usize::try_from(segment.chunk_bytes.max(1)).unwrap_or(usize::MAX);
            let expected = log.len().div_ceil(step) as u64;
            if digests.chunk_count() != expected {
                failures.push(range(Failure::new(
                    &segment.chunks.key,
                    format!(
                        "{} chunk digests for {expected} chunks",
                        digests.chunk_count()
                    ),
                )));
            }
            for (index, chunk) in log.chunks(step).enumerate() {
                if let Err(error) = digests.verify(index as u64, chunk) {
                    failures.push(range(Failure::new(key, format!("chunk {index}: {error}"))));
                    break;
                }
            }
        }
        Err(error) => failures.push(range(Failure::new(&segment.chunks.key, error.to_string()))),
    }
    failures.extend(check_batches(segment, log));
    failures
}

/// Walks the batches: each one whole with a good CRC, offsets contiguous from the segment's
/// base to its last offset. Quarantined batches are skipped by their length.
fn check_batches(segment: &RemoteSegment, log: &Bytes) -> Vec<Failure> {
    let key = &segment.log.key;
    let mut position = 0usize;
    let mut expected = segment.base_offset;
    while position < log.len() {
        let rest = log.slice(position..);
        if rest.get(MAGIC_AT) == Some(&QUARANTINED_MAGIC) {
            let length = rest
                .get(8..12)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(i32::from_be_bytes)
                .and_then(|l| usize::try_from(l).ok());
            match length {
                Some(length) if length > 0 => {
                    position += 12 + length;
                    continue;
                }
                _ => {
                    return vec![
                        Failure::new(
                            key,
                            format!("unreadable quarantined batch at byte {position}"),
                        )
                        .at(expected, segment.last_offset),
                    ];
                }
            }
        }
        let batch = match RecordBatch::decode_first(&rest) {
            Ok(batch) => batch,
            Err(error) => {
                return vec![
                    Failure::new(key, format!("batch at byte {position}: {error}"))
                        .at(expected, segment.last_offset),
                ];
            }
        };
        let header = batch.header();
        let (base, last) = (header.base_offset, header.last_offset());
        if u64::try_from(base).ok() != Some(expected) {
            return vec![
                Failure::new(
                    key,
                    format!(
                        "batch at byte {position} starts at offset {base}, expected {expected}"
                    ),
                )
                .at(expected, segment.last_offset),
            ];
        }
        expected = u64::try_from(last).unwrap_or(0) + 1;
        position += batch.len();
    }
    if expected != segment.last_offset + 1 {
        return vec![
            Failure::new(
                key,
                format!(
                    "batches end at offset {}, the log says {}",
                    expected.saturating_sub(1),
                    segment.last_offset
                ),
            )
            .at(segment.base_offset, segment.last_offset),
        ];
    }
    Vec::new()
}
