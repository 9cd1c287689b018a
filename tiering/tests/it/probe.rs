//! The start-up conditional-write probe: passes on the local folder and on SeaweedFS, refuses
//! stores that ignore (or lack) conditional writes, and never leaves its sentinel behind.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use strata_tiering::faults::FaultyObjectStore;
use strata_tiering::probe::PROBE_DIR;
use strata_tiering::testing::{s3_test_server, unique_prefix};
use strata_tiering::{ConditionalWrites, ProbeError, UpdateSupport, probe_conditional_writes};

use crate::conformance::{local_target, s3_target};

/// What the wrapper does to conditional puts, imitating broken stores.
#[derive(Debug, Clone, Copy)]
enum Misbehaviour {
    /// Garage-style: `Create` and `Update` overwrite.
    IgnoreAllConditions,
    /// `Create` works, `Update` overwrites.
    IgnoreUpdate,
    /// `Create` answers NotImplemented.
    NoConditionalCreate,
}

/// An in-memory store that misbehaves on conditional puts and forwards everything else.
#[derive(Debug)]
struct MisbehavingStore {
    inner: InMemory,
    misbehaviour: Misbehaviour,
}

impl MisbehavingStore {
    fn new(misbehaviour: Misbehaviour) -> Self {
        Self {
            inner: InMemory::new(),
            misbehaviour,
        }
    }
}

impl fmt::Display for MisbehavingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MisbehavingStore({:?})", self.misbehaviour)
    }
}

#[async_trait]
impl ObjectStore for MisbehavingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match (self.misbehaviour, &opts.mode) {
            (Misbehaviour::IgnoreAllConditions, PutMode::Create | PutMode::Update(_))
            | (Misbehaviour::IgnoreUpdate, PutMode::Update(_)) => opts.mode = PutMode::Overwrite,
            (Misbehaviour::NoConditionalCreate, PutMode::Create) => {
                return Err(object_store::Error::NotImplemented {
                    operation: "put_opts with PutMode::Create".to_owned(),
                    implementer: self.to_string(),
                });
            }
            _ => {}
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

async fn sentinels_left(store: &dyn ObjectStore) -> Vec<Path> {
    store
        .list(Some(&Path::from(PROBE_DIR)))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn probe_passes_on_the_local_folder_without_update_support() {
    let target = local_target().await;
    let support = probe_conditional_writes(target.store.as_ref())
        .await
        .unwrap();
    assert_eq!(
        support,
        ConditionalWrites {
            update: UpdateSupport::NotImplemented
        }
    );
    assert_eq!(
        sentinels_left(target.store.as_ref()).await,
        Vec::<Path>::new()
    );
}

#[tokio::test]
async fn probe_passes_on_seaweedfs_with_update_enforced() {
    let target = s3_target().await;
    let support = probe_conditional_writes(target.store.as_ref())
        .await
        .unwrap();
    assert_eq!(
        support,
        ConditionalWrites {
            update: UpdateSupport::Enforced
        }
    );
    assert_eq!(
        sentinels_left(target.store.as_ref()).await,
        Vec::<Path>::new()
    );
}

#[tokio::test]
async fn probe_passes_on_a_correct_in_memory_store() {
    // The control for the misbehaving wrappers below: the same store without the misbehaviour.
    let store = InMemory::new();
    let support = probe_conditional_writes(&store).await.unwrap();
    assert_eq!(support.update, UpdateSupport::Enforced);
}

#[tokio::test]
async fn probe_refuses_a_store_that_ignores_conditional_creates() {
    let store = MisbehavingStore::new(Misbehaviour::IgnoreAllConditions);
    let error = probe_conditional_writes(&store).await.unwrap_err();
    assert!(
        matches!(error, ProbeError::CreateIgnored { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("ignores conditional writes"), "{message}");
    assert!(message.contains("refuses to tier"), "{message}");
    assert_eq!(
        sentinels_left(&store).await,
        Vec::<Path>::new(),
        "the sentinel must be cleaned up"
    );
}

#[tokio::test]
async fn probe_refuses_a_store_that_ignores_conditional_updates() {
    let store = MisbehavingStore::new(Misbehaviour::IgnoreUpdate);
    let error = probe_conditional_writes(&store).await.unwrap_err();
    assert!(
        matches!(error, ProbeError::UpdateIgnored { .. }),
        "{error:?}"
    );
    assert_eq!(sentinels_left(&store).await, Vec::<Path>::new());
}

#[tokio::test]
async fn probe_refuses_a_store_without_conditional_creates() {
    let store = MisbehavingStore::new(Misbehaviour::NoConditionalCreate);
    let error = probe_conditional_writes(&store).await.unwrap_err();
    assert!(
        matches!(error, ProbeError::CreateUnsupported { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn probe_of_an_unreachable_store_is_a_store_error() {
    let (store, faults) = FaultyObjectStore::new(Arc::new(InMemory::new()));
    faults.set_down(true);
    let error = probe_conditional_writes(&store).await.unwrap_err();
    assert!(
        matches!(
            error,
            ProbeError::Store {
                operation: "first create",
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn probe_under_an_s3_prefix_leaves_the_rest_of_the_bucket_alone() {
    let server = s3_test_server();
    let prefix = unique_prefix("probe-scope");
    let tier = server.open(&server.bucket, &prefix);
    probe_conditional_writes(tier.scoped().as_ref())
        .await
        .unwrap();
    let left: Vec<ObjectMeta> = tier
        .root_store()
        .list(Some(tier.prefix()))
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}
