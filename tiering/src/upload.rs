//! Uploads of local files (closed segment logs and indexes) and small in-memory objects to the
//! object store, each reported with its size and SHA-256 so the manifest can record them.
//!
//! - Below [`UploadOptions::multipart_threshold_bytes`] a file is read whole and sent with one
//!   put; above, it is streamed in [`UploadOptions::part_bytes`] parts through a multipart
//!   upload, at most [`UploadOptions::max_concurrent_parts`] in flight, so memory stays bounded
//!   whatever the segment size. The SHA-256 is computed off the runtime (`spawn_blocking`) from
//!   the very bytes sent.
//! - Transient failures (`object_store::Error::Generic`: 5xx, connection loss, timeouts, local
//!   I/O errors) restart the whole upload after an exponential backoff with jitter, up to
//!   [`RetryPolicy::max_attempts`]. Restarting is safe because data keys are written once with
//!   the same bytes: an attempt that failed but landed is overwritten with identical content.
//!   This is *not* for conditional writes (manifests), where an ambiguous answer must be
//!   resolved by reading back. S3 requests are already retried one by one inside
//!   `object_store` (see [`crate::store`]); this layer covers what that can't, such as a
//!   multipart upload whose part or completion failed, so its default is a few attempts only.
//!   Other errors (permission, not found, invalid path) fail at once.
//! - A failed or abandoned multipart attempt is aborted (best effort); a bucket lifecycle rule
//!   for incomplete multipart uploads still belongs on the bucket, for crashes mid-upload.
//!
//! Must not depend on segment internals: it moves files to keys, nothing more.

use std::future::Future;
use std::path::{Path as LocalPath, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

use crate::digest::{ChunkDigester, ChunkDigests, DEFAULT_CHUNK_BYTES, to_hex};
use crate::manifest::ObjectRef;

/// Files smaller than this go in one put (S3 single puts are cheaper and atomic); larger ones as
/// a multipart upload, which bounds memory and lets a slow part be retried alone by the client.
pub const DEFAULT_MULTIPART_THRESHOLD_BYTES: u64 = 16 << 20;
/// Part size of multipart uploads: S3 wants at least 5 MiB (all but the last part) and at most
/// 10,000 parts, so 8 MiB parts cover objects up to ~78 GiB.
pub const DEFAULT_PART_BYTES: u64 = 8 << 20;
/// Parts in flight per multipart upload: enough to fill a link, `4 * 8 MiB` of memory per upload.
pub const DEFAULT_MAX_CONCURRENT_PARTS: usize = 4;

/// How uploads are split and retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadOptions {
    /// Files of at least this size use a multipart upload.
    pub multipart_threshold_bytes: u64,
    /// Size of each multipart part (the last may be shorter). S3 requires at least 5 MiB.
    pub part_bytes: u64,
    /// Parts of one upload sent concurrently (at least 1).
    pub max_concurrent_parts: usize,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Chunk size of the per-chunk digests computed in the same pass as the SHA-256 (cold reads
    /// verify each ranged GET with them), in `1..=MAX_CHUNK_BYTES`.
    pub chunk_bytes: u64,
}

impl Default for UploadOptions {
    fn default() -> Self {
        Self {
            multipart_threshold_bytes: DEFAULT_MULTIPART_THRESHOLD_BYTES,
            part_bytes: DEFAULT_PART_BYTES,
            max_concurrent_parts: DEFAULT_MAX_CONCURRENT_PARTS,
            retry: RetryPolicy::default(),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
        }
    }
}

/// Exponential backoff with full jitter between whole-upload attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (0 counts as 1).
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles each time (before jitter).
    pub base_delay: Duration,
    /// Cap on one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Three attempts, 200 ms then 400 ms (jittered): the store client has already retried each
    /// request, so a failure here means an outage that more attempts would only prolong.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self) -> ExponentialBuilder {
        let retries = self.max_attempts.saturating_sub(1);
        ExponentialBuilder::default()
            .with_min_delay(self.base_delay)
            .with_max_delay(self.max_delay.max(self.base_delay))
            .with_max_times(usize::try_from(retries).unwrap_or(usize::MAX))
            .with_jitter()
    }
}

/// An object that now exists in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedObject {
    /// Its key.
    pub key: Path,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, 64 lowercase hex digits.
    pub sha256: String,
    /// The SHA-256 of each `UploadOptions::chunk_bytes` chunk of its bytes.
    pub chunk_digests: ChunkDigests,
}

impl UploadedObject {
    /// The manifest's record of this object.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            key: self.key.to_string(),
            size: self.size,
            sha256: self.sha256.clone(),
        }
    }
}

/// Both digests of an object, computed in one pass over its bytes.
struct ObjectHasher {
    whole: Sha256,
    chunks: ChunkDigester,
}

impl ObjectHasher {
    fn new(chunk_bytes: u64) -> Self {
        Self {
            whole: Sha256::new(),
            chunks: ChunkDigester::new(chunk_bytes),
        }
    }

    fn update(&mut self, data: &[u8]) {
        self.whole.update(data);
        self.chunks.update(data);
    }

    /// The SHA-256 (hex) and the chunk digests.
    fn finish(self) -> (String, ChunkDigests) {
        (to_hex(&self.whole.finalize().into()), self.chunks.finish())
    }

    fn of(data: &[u8], chunk_bytes: u64) -> (String, ChunkDigests) {
        let mut hasher = Self::new(chunk_bytes);
        hasher.update(data);
        hasher.finish()
    }
}

/// Why an upload failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The local file could not be opened or read.
    #[error("cannot read {} for upload", path.display())]
    ReadFile {
        /// The local file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file's size changed while it was being uploaded: it was not a closed segment.
    #[error("{} changed during upload: {expected} bytes at start, {actual} read", path.display())]
    FileChanged {
        /// The local file.
        path: PathBuf,
        /// Its size when the attempt started.
        expected: u64,
        /// The bytes actually read.
        actual: u64,
    },
    /// The blocking task that reads and hashes the file failed (panicked or was cancelled).
    #[error("reading {} for upload: the blocking task failed", path.display())]
    ReadTask {
        /// The local file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The store refused the object, or kept failing until the attempts ran out.
    #[error("cannot upload {key} (after {attempts} attempts)")]
    Store {
        /// The object's key.
        key: Path,
        /// Attempts made.
        attempts: u32,
        /// The last store error.
        #[source]
        source: object_store::Error,
    },
}

/// The outcome of one attempt: local failures end the upload, store failures may be retried.
#[derive(Debug)]
enum AttemptError {
    Local(UploadError),
    Store(object_store::Error),
}

/// Whether a store error may go away by itself. `Generic` is what 5xx answers, connection
/// failures, timeouts and local I/O errors map to; everything else is a definite answer.
fn is_transient(error: &object_store::Error) -> bool {
    matches!(error, object_store::Error::Generic { .. })
}

/// Upload attempts retried after a transient store error, since start (process-wide, for
/// the server's `/metrics`).
static UPLOAD_RETRIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Upload attempts retried after a transient store error since the process started.
pub fn upload_retries() -> u64 {
    UPLOAD_RETRIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs `attempt` until it succeeds, fails for good, or the policy's attempts are spent.
async fn with_retries<T, F, Fut>(
    key: &Path,
    policy: &RetryPolicy,
    mut attempt: F,
) -> Result<T, UploadError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let mut attempts = 0_u32;
    let result = (|| {
        attempts += 1;
        attempt()
    })
    .retry(policy.backoff())
    .when(|error| matches!(error, AttemptError::Store(source) if is_transient(source)))
    .notify(|error, delay| {
        UPLOAD_RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let AttemptError::Store(source) = error {
            tracing::warn!(%key, error = %source, delay_ms = delay.as_millis(), "upload failed; retrying");
        }
    })
    .await;
    result.map_err(|error| match error {
        AttemptError::Local(error) => error,
        AttemptError::Store(source) => UploadError::Store {
            key: key.clone(),
            attempts,
            source,
        },
    })
}

/// Uploads the small in-memory object `bytes` to `key` with one put (retried like files).
/// Hashes on the calling thread: meant for objects of kilobytes (digests, indexes), not segments.
///
/// # Errors
/// [`UploadError::Store`].
pub async fn upload_bytes(
    store: &dyn ObjectStore,
    key: &Path,
    bytes: Bytes,
    options: &UploadOptions,
) -> Result<UploadedObject, UploadError> {
    let digests = ObjectHasher::of(&bytes, options.chunk_bytes);
    put_with_retries(store, key, bytes, digests, options).await
}

/// One put of `bytes` (whose digests are `(sha256, chunk_digests)`), retried on transient
/// failures.
async fn put_with_retries(
    store: &dyn ObjectStore,
    key: &Path,
    bytes: Bytes,
    (sha256, chunk_digests): (String, ChunkDigests),
    options: &UploadOptions,
) -> Result<UploadedObject, UploadError> {
    let size = bytes.len() as u64;
    let payload = PutPayload::from(bytes);
    with_retries(key, &options.retry, || async {
        store
            .put(key, payload.clone())
            .await
            .map(drop)
            .map_err(AttemptError::Store)
    })
    .await?;
    Ok(UploadedObject {
        key: key.clone(),
        size,
        sha256,
        chunk_digests,
    })
}

/// Uploads the local file `local` to `key`: one put below the multipart threshold, a multipart
/// upload above; transient failures restart the upload after a backoff. The file must not change
/// meanwhile (a closed segment).
///
/// # Errors
/// [`UploadError::ReadFile`] / [`UploadError::FileChanged`] / [`UploadError::ReadTask`] for the
/// local side (never retried), [`UploadError::Store`] when the store refuses or keeps failing.
pub async fn upload_file(
    store: &dyn ObjectStore,
    local: &LocalPath,
    key: &Path,
    options: &UploadOptions,
) -> Result<UploadedObject, UploadError> {
    let read_error = |source| UploadError::ReadFile {
        path: local.to_owned(),
        source,
    };
    let size = tokio::fs::metadata(local).await.map_err(read_error)?.len();
    if size < options.multipart_threshold_bytes {
        let (bytes, digests) = read_whole(local, options.chunk_bytes).await?;
        return put_with_retries(store, key, bytes, digests, options).await;
    }
    let (sha256, chunk_digests) = with_retries(key, &options.retry, || {
        upload_multipart_attempt(store, local, key, size, options)
    })
    .await?;
    Ok(UploadedObject {
        key: key.clone(),
        size,
        sha256,
        chunk_digests,
    })
}

/// Uploads every `(local file, key)` pair with at most `concurrency` uploads at once (0 counts
/// as 1), returning the objects in input order. After the first failure no new upload starts;
/// those already running finish (so none is left half-done), then the first error is returned.
///
/// # Errors
/// The first [`UploadError`] in completion order.
pub async fn upload_all(
    store: &dyn ObjectStore,
    files: Vec<(PathBuf, Path)>,
    options: &UploadOptions,
    concurrency: usize,
) -> Result<Vec<UploadedObject>, UploadError> {
    let count = files.len();
    let failed = AtomicBool::new(false);
    let failed = &failed;
    let mut uploads = futures::stream::iter(files.into_iter().enumerate())
        .map(|(index, (local, key))| async move {
            if failed.load(Ordering::Relaxed) {
                return (index, None);
            }
            let result = upload_file(store, &local, &key, options).await;
            if result.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            (index, Some(result))
        })
        .buffer_unordered(concurrency.max(1));
    let mut uploaded: Vec<Option<UploadedObject>> = vec![None; count];
    let mut first_error = None;
    while let Some((index, result)) = uploads.next().await {
        match result {
            Some(Ok(object)) => uploaded[index] = Some(object),
            Some(Err(error)) => {
                first_error.get_or_insert(error);
            }
            None => {}
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    Ok(uploaded
        .into_iter()
        .map(|object| object.expect("invariant: without an error every upload ran"))
        .collect())
}

/// Reads a whole (small) file and its digests on a blocking thread.
async fn read_whole(
    local: &LocalPath,
    chunk_bytes: u64,
) -> Result<(Bytes, (String, ChunkDigests)), UploadError> {
    let path = local.to_owned();
    tokio::task::spawn_blocking(move || {
        let data = std::fs::read(&path).map_err(|source| UploadError::ReadFile { path, source })?;
        let digests = ObjectHasher::of(&data, chunk_bytes);
        Ok((Bytes::from(data), digests))
    })
    .await
    .map_err(|source| UploadError::ReadTask {
        path: local.to_owned(),
        source,
    })?
}

/// One multipart attempt: streams the file part by part, hashing what it sends. Aborts the
/// upload on any failure before completion. Returns the digests of the bytes sent.
async fn upload_multipart_attempt(
    store: &dyn ObjectStore,
    local: &LocalPath,
    key: &Path,
    size: u64,
    options: &UploadOptions,
) -> Result<(String, ChunkDigests), AttemptError> {
    let mut reader = PartReader::open(local, options.chunk_bytes)
        .await
        .map_err(AttemptError::Local)?;
    let upload = store
        .put_multipart(key)
        .await
        .map_err(AttemptError::Store)?;
    let part_bytes = usize::try_from(options.part_bytes.max(1)).unwrap_or(usize::MAX);
    let mut writer = WriteMultipart::new_with_chunk_size(upload, part_bytes);
    let fed = feed_parts(
        &mut writer,
        &mut reader,
        part_bytes,
        options.max_concurrent_parts,
    )
    .await;
    let outcome = match fed {
        Ok(sent) if sent != size => Err(AttemptError::Local(UploadError::FileChanged {
            path: local.to_owned(),
            expected: size,
            actual: sent,
        })),
        Ok(_) => Ok(()),
        Err(error) => Err(error),
    };
    if let Err(error) = outcome {
        if let Err(abort_error) = writer.abort().await {
            tracing::warn!(%key, error = %abort_error, "aborting a failed multipart upload failed");
        }
        return Err(error);
    }
    // `finish` aborts the upload itself when a part or the completion fails.
    writer.finish().await.map_err(AttemptError::Store)?;
    Ok(reader.finish())
}

/// Reads the file into the writer; returns the bytes sent.
async fn feed_parts(
    writer: &mut WriteMultipart,
    reader: &mut PartReader,
    part_bytes: usize,
    max_concurrent_parts: usize,
) -> Result<u64, AttemptError> {
    let mut sent = 0_u64;
    loop {
        let part = reader
            .next_part(part_bytes)
            .await
            .map_err(AttemptError::Local)?;
        if part.is_empty() {
            return Ok(sent);
        }
        sent += part.len() as u64;
        writer
            .wait_for_capacity(max_concurrent_parts.max(1))
            .await
            .map_err(AttemptError::Store)?;
        writer.put(part);
    }
}

/// Reads a file in parts and hashes them, each step on a blocking thread.
struct PartReader {
    path: PathBuf,
    /// `None` only while a step runs on the blocking thread.
    state: Option<(std::fs::File, ObjectHasher)>,
}

impl PartReader {
    async fn open(local: &LocalPath, chunk_bytes: u64) -> Result<Self, UploadError> {
        let file = tokio::fs::File::open(local)
            .await
            .map_err(|source| UploadError::ReadFile {
                path: local.to_owned(),
                source,
            })?;
        let file = file.into_std().await;
        Ok(Self {
            path: local.to_owned(),
            state: Some((file, ObjectHasher::new(chunk_bytes))),
        })
    }

    /// The next `part_bytes` bytes (fewer at the end, empty past it), added to the hash.
    async fn next_part(&mut self, part_bytes: usize) -> Result<Bytes, UploadError> {
        let (mut file, mut hasher) = self
            .state
            .take()
            .expect("invariant: next_part is not called concurrently");
        let path = self.path.clone();
        let (file, hasher, part) = tokio::task::spawn_blocking(move || {
            let part = read_up_to(&mut file, part_bytes)
                .map_err(|source| UploadError::ReadFile { path, source })?;
            hasher.update(&part);
            Ok::<_, UploadError>((file, hasher, part))
        })
        .await
        .map_err(|source| UploadError::ReadTask {
            path: self.path.clone(),
            source,
        })??;
        self.state = Some((file, hasher));
        Ok(part)
    }

    /// The digests of everything read.
    fn finish(self) -> (String, ChunkDigests) {
        let (_, hasher) = self.state.expect("invariant: no step is running");
        hasher.finish()
    }
}

/// Reads until `limit` bytes or end of file.
fn read_up_to(file: &mut std::fs::File, limit: usize) -> std::io::Result<Bytes> {
    use std::io::Read;
    let mut buffer = BytesMut::zeroed(limit);
    let mut filled = 0;
    while filled < limit {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    buffer.truncate(filled);
    Ok(buffer.freeze())
}
