//! `strata_tiering::upload`: single puts and multipart uploads of local files, their SHA-256,
//! retries of transient failures (through `FaultyObjectStore`), and `upload_all`'s ordering and
//! stop-on-failure. Retry delays are 1 ms so the tests never wait for real.

use std::path::{Path as LocalPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use strata_tiering::digest::{ChunkDigests, sha256_hex};
use strata_tiering::faults::{FaultKind, Faults, FaultyObjectStore, Operation, is_injected};
use strata_tiering::upload::{
    RetryPolicy, UploadError, UploadOptions, upload_all, upload_bytes, upload_file,
};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add((i >> 8) as u8) ^ seed)
        .collect()
}

/// Tiny thresholds so multipart is exercised with small files, and 1 ms retry delays.
fn options() -> UploadOptions {
    UploadOptions {
        multipart_threshold_bytes: 64 * 1024,
        part_bytes: 16 * 1024,
        max_concurrent_parts: 2,
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        },
        // Not a divisor of the part size: chunks straddle parts.
        chunk_bytes: 5 * 1024,
    }
}

/// What every upload must report as its chunk digests.
fn chunk_digests_of(data: &[u8]) -> ChunkDigests {
    ChunkDigests::compute(data, options().chunk_bytes)
}

fn faulty_memory() -> (Arc<dyn ObjectStore>, Arc<InMemory>, Faults) {
    let memory = Arc::new(InMemory::new());
    let (store, faults) = FaultyObjectStore::new(Arc::clone(&memory) as Arc<dyn ObjectStore>);
    (Arc::new(store), memory, faults)
}

fn write_file(dir: &LocalPath, name: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path
}

async fn stored(store: &dyn ObjectStore, key: &Path) -> Bytes {
    store.get(key).await.unwrap().bytes().await.unwrap()
}

#[tokio::test]
async fn small_file_is_uploaded_with_one_put_and_its_sha256() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(1000, 1);
    let local = write_file(dir.path(), "small.log", &data);
    let (store, memory, faults) = faulty_memory();
    let key = Path::from("t/0/00000000000000000000.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(uploaded.key, key);
    assert_eq!(uploaded.size, 1000);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(uploaded.chunk_digests, chunk_digests_of(&data));
    assert_eq!(faults.calls(Operation::Put), 1);
    assert_eq!(faults.calls(Operation::PutMultipart), 0);
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn file_above_the_threshold_is_uploaded_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(100_000, 2);
    let local = write_file(dir.path(), "big.log", &data);
    let (store, memory, faults) = faulty_memory();
    let key = Path::from("big.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(uploaded.size, 100_000);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(uploaded.chunk_digests, chunk_digests_of(&data));
    // create + ceil(100000 / 16384) = 7 parts + complete
    assert_eq!(faults.calls(Operation::PutMultipart), 9);
    assert_eq!(faults.calls(Operation::Put), 0);
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn multipart_upload_to_a_local_folder_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(root.path()).unwrap());
    let data = pattern(200_000, 3);
    let local = write_file(dir.path(), "seg.log", &data);
    let key = Path::from("topic/0/seg.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(stored(&*store, &key).await, data);
}

#[tokio::test]
async fn empty_file_is_uploaded_as_an_empty_object() {
    let dir = tempfile::tempdir().unwrap();
    let local = write_file(dir.path(), "empty.log", b"");
    let (store, memory, _) = faulty_memory();
    let key = Path::from("empty.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(uploaded.size, 0);
    assert_eq!(uploaded.sha256, sha256_hex(b""));
    assert!(stored(&*memory, &key).await.is_empty());
}

#[tokio::test]
async fn transient_put_failures_are_retried_until_the_put_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(5000, 4);
    let local = write_file(dir.path(), "a.log", &data);
    let (store, memory, faults) = faulty_memory();
    faults.fail_next(&[Operation::Put], 2, FaultKind::Unavailable);
    let key = Path::from("a.log");
    let retries = strata_tiering::upload::upload_retries();

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(faults.calls(Operation::Put), 3);
    // Counted for /metrics (process-wide: other tests may add their own retries).
    assert!(strata_tiering::upload::upload_retries() >= retries + 2);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn transient_failures_beyond_max_attempts_return_the_last_store_error() {
    let dir = tempfile::tempdir().unwrap();
    let local = write_file(dir.path(), "a.log", &pattern(5000, 5));
    let (store, memory, faults) = faulty_memory();
    faults.fail_next(&[Operation::Put], 3, FaultKind::TimedOut);
    let key = Path::from("a.log");

    let error = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap_err();

    match error {
        UploadError::Store {
            key: failed,
            attempts,
            source,
        } => {
            assert_eq!(failed, key);
            assert_eq!(attempts, 3);
            assert!(is_injected(&source), "{source}");
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    assert_eq!(faults.calls(Operation::Put), 3);
    assert!(memory.head(&key).await.is_err());
}

#[tokio::test]
async fn permission_denied_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let local = write_file(dir.path(), "a.log", &pattern(10, 6));
    let (store, _, faults) = faulty_memory();
    faults.fail_next(&[Operation::Put], 1, FaultKind::PermissionDenied);

    let error = upload_file(&*store, &local, &Path::from("a.log"), &options())
        .await
        .unwrap_err();

    assert!(
        matches!(error, UploadError::Store { attempts: 1, .. }),
        "{error:?}"
    );
    assert_eq!(faults.calls(Operation::Put), 1);
}

#[tokio::test]
async fn put_that_landed_but_timed_out_is_retried_and_the_object_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3000, 7);
    let local = write_file(dir.path(), "a.log", &data);
    let (store, memory, faults) = faulty_memory();
    faults.land_then_time_out_next_puts(1);
    let key = Path::from("a.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(faults.calls(Operation::Put), 2);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn multipart_completion_that_landed_but_timed_out_restarts_the_upload() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(70_000, 8);
    let local = write_file(dir.path(), "big.log", &data);
    let (store, memory, faults) = faulty_memory();
    faults.land_then_time_out_next_puts(1);
    let key = Path::from("big.log");

    let uploaded = upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    // Two attempts of create + 5 parts + complete, plus the abort after the first completion.
    assert_eq!(faults.calls(Operation::PutMultipart), 2 * 7 + 1);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    // The digests are of one attempt's bytes, not of both attempts.
    assert_eq!(uploaded.chunk_digests, chunk_digests_of(&data));
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn failure_to_start_a_multipart_upload_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(70_000, 9);
    let local = write_file(dir.path(), "big.log", &data);
    let (store, memory, faults) = faulty_memory();
    faults.fail_next(&[Operation::PutMultipart], 1, FaultKind::Unavailable);
    let key = Path::from("big.log");

    upload_file(&*store, &local, &key, &options())
        .await
        .unwrap();

    assert_eq!(faults.calls(Operation::PutMultipart), 1 + 7);
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn missing_local_file_is_a_read_error_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, faults) = faulty_memory();
    let missing = dir.path().join("missing.log");

    let error = upload_file(&*store, &missing, &Path::from("m"), &options())
        .await
        .unwrap_err();

    match error {
        UploadError::ReadFile { path, source } => {
            assert_eq!(path, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    assert_eq!(faults.calls(Operation::Put), 0);
}

#[tokio::test]
async fn upload_bytes_retries_and_reports_the_sha256() {
    let (store, memory, faults) = faulty_memory();
    faults.fail_next(&[Operation::Put], 1, FaultKind::Unavailable);
    let key = Path::from("a.digests");
    let data = Bytes::from_static(b"digest object");

    let uploaded = upload_bytes(&*store, &key, data.clone(), &options())
        .await
        .unwrap();

    assert_eq!(uploaded.size, data.len() as u64);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    assert_eq!(faults.calls(Operation::Put), 2);
    assert_eq!(stored(&*memory, &key).await, data);
}

#[tokio::test]
async fn upload_all_returns_the_objects_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let (store, memory, faults) = faulty_memory();
    // Latency makes later, smaller uploads overtake earlier ones; the order must not change.
    faults.set_latency(
        &[Operation::Put, Operation::PutMultipart],
        Duration::from_millis(2),
    );
    let sizes = [90_000, 10, 70_000, 1, 5000, 0];
    let files: Vec<(PathBuf, Path)> = sizes
        .iter()
        .enumerate()
        .map(|(i, size)| {
            let local = write_file(dir.path(), &format!("{i}.log"), &pattern(*size, i as u8));
            (local, Path::from(format!("seg/{i}.log")))
        })
        .collect();

    let uploaded = upload_all(&*store, files.clone(), &options(), 3)
        .await
        .unwrap();

    assert_eq!(uploaded.len(), sizes.len());
    for ((object, (_, key)), (i, size)) in uploaded.iter().zip(&files).zip(sizes.iter().enumerate())
    {
        let data = pattern(*size, i as u8);
        assert_eq!(&object.key, key);
        assert_eq!(object.size, *size as u64);
        assert_eq!(object.sha256, sha256_hex(&data));
        assert_eq!(stored(&*memory, key).await, data);
    }
}

#[tokio::test]
async fn upload_all_starts_no_upload_after_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, faults) = faulty_memory();
    let good = write_file(dir.path(), "good.log", b"good");
    let files = vec![
        (good.clone(), Path::from("0")),
        (dir.path().join("missing.log"), Path::from("1")),
        (good.clone(), Path::from("2")),
        (good, Path::from("3")),
    ];

    let error = upload_all(&*store, files, &options(), 1).await.unwrap_err();

    assert!(matches!(error, UploadError::ReadFile { .. }), "{error:?}");
    assert_eq!(faults.calls(Operation::Put), 1);
}
