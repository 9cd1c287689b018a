//! One conformance suite for every object store Strata can tier to: the local folder
//! (`LocalFileSystem`) and real S3 (SeaweedFS). Each check is a function of the store; the
//! `conformance!` macro instantiates every check as a test per backend, so a failure names both
//! the behaviour and the store. The S3 backend is the prefix-scoped store of `TierStore` under a
//! unique prefix, so the suite also proves that scoping keeps tests (and tenants) apart.
//!
//! Where the backends genuinely differ, the difference is pinned by a backend-specific test at
//! the end (delete of a missing key, `PutMode::Update`), so an upgrade that changes it is noticed.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion, WriteMultipart,
};
use strata_tiering::store::{delete_if_exists, list_sorted};
use strata_tiering::testing::{s3_test_server, unique_prefix};
use strata_tiering::{StoreSettings, TierStore};
use tempfile::TempDir;

/// A store under test, with whatever must live as long as it. Next to its scope there is always
/// a neighbour object that the store must not see (a sibling folder, or a sibling key prefix in
/// the bucket), so a check of "only my keys" can fail when scoping is broken.
pub struct Target {
    pub store: Arc<dyn ObjectStore>,
    neighbour: Option<(Arc<dyn ObjectStore>, Path)>,
    _dir: Option<TempDir>,
}

impl Target {
    /// Deletes what the check left (S3 keeps it otherwise; a temporary folder goes by itself).
    async fn clean_up(self) {
        let keys: Vec<_> = self
            .store
            .list(None)
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .unwrap();
        for key in keys {
            delete_if_exists(self.store.as_ref(), &key).await.unwrap();
        }
        if let Some((root, key)) = self.neighbour {
            delete_if_exists(root.as_ref(), &key).await.unwrap();
        }
    }
}

pub async fn local_target() -> Target {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("neighbour"), b"outside the store").unwrap();
    let settings = StoreSettings {
        url: dir.path().join("tier").to_str().unwrap().to_owned(),
        ..StoreSettings::default()
    };
    let store = TierStore::open(&settings).unwrap().scoped();
    Target {
        store,
        neighbour: None,
        _dir: Some(dir),
    }
}

pub async fn s3_target() -> Target {
    let server = s3_test_server();
    let prefix = unique_prefix("conformance");
    let tier = server.open(&server.bucket, &prefix);
    // `<prefix>-neighbour` shares the prefix's characters but not its path segment.
    let neighbour = Path::from(format!("{prefix}-neighbour/key"));
    let root = Arc::clone(tier.root_store());
    root.put(&neighbour, PutPayload::from_static(b"outside the store"))
        .await
        .unwrap();
    Target {
        store: tier.scoped(),
        neighbour: Some((root, neighbour)),
        _dir: None,
    }
}

/// Deterministic, non-repeating-looking bytes (a repeated pattern could hide an offset bug).
fn payload(size: usize, seed: u8) -> Bytes {
    let mut state = u32::from(seed).wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

fn create() -> PutOptions {
    PutOptions::from(PutMode::Create)
}

mod checks {
    use super::*;

    pub async fn put_then_get_returns_the_same_bytes(store: &dyn ObjectStore) {
        let key = Path::from("segments/0/00000000000000000000.log");
        let data = payload(100_000, 1);
        store
            .put(&key, PutPayload::from(data.clone()))
            .await
            .unwrap();
        let got = store.get(&key).await.unwrap();
        assert_eq!(got.meta.size, 100_000);
        assert_eq!(got.bytes().await.unwrap(), data);
        assert_eq!(store.head(&key).await.unwrap().size, 100_000);
    }

    pub async fn overwrite_replaces_the_content(store: &dyn ObjectStore) {
        let key = Path::from("object");
        store
            .put(&key, PutPayload::from_static(b"first"))
            .await
            .unwrap();
        store
            .put(&key, PutPayload::from_static(b"second, longer"))
            .await
            .unwrap();
        assert_eq!(
            store.get(&key).await.unwrap().bytes().await.unwrap(),
            "second, longer"
        );
    }

    pub async fn get_and_head_of_a_missing_key_are_not_found(store: &dyn ObjectStore) {
        let key = Path::from("missing");
        let get = store.get(&key).await.unwrap_err();
        assert!(
            matches!(get, object_store::Error::NotFound { .. }),
            "{get:?}"
        );
        let head = store.head(&key).await.unwrap_err();
        assert!(
            matches!(head, object_store::Error::NotFound { .. }),
            "{head:?}"
        );
    }

    pub async fn ranged_gets_return_exactly_the_requested_bytes(store: &dyn ObjectStore) {
        let key = Path::from("ranged");
        let data = payload(10_000, 2);
        store
            .put(&key, PutPayload::from(data.clone()))
            .await
            .unwrap();

        assert_eq!(store.get_range(&key, 0..1).await.unwrap(), data.slice(0..1));
        assert_eq!(
            store.get_range(&key, 4_096..8_192).await.unwrap(),
            data.slice(4_096..8_192)
        );
        let ranges = store
            .get_ranges(&key, &[10..20, 9_990..10_000])
            .await
            .unwrap();
        assert_eq!(ranges, vec![data.slice(10..20), data.slice(9_990..10_000)]);
        let suffix = GetOptions::new().with_range(Some(GetRange::Suffix(100)));
        let got = store.get_opts(&key, suffix).await.unwrap();
        assert_eq!(got.range, 9_900..10_000);
        assert_eq!(got.bytes().await.unwrap(), data.slice(9_900..));
        let offset = GetOptions::new().with_range(Some(GetRange::Offset(9_000)));
        assert_eq!(
            store
                .get_opts(&key, offset)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            data.slice(9_000..)
        );
        // A range running past the end returns the remainder; one starting past it is an error.
        assert_eq!(
            store.get_range(&key, 9_995..20_000).await.unwrap(),
            data.slice(9_995..)
        );
        assert!(store.get_range(&key, 10_001..10_002).await.is_err());
    }

    pub async fn list_with_a_prefix_matches_whole_segments(store: &dyn ObjectStore) {
        for key in [
            "topic/0/b",
            "topic/0/a",
            "topic/0/sub/c",
            "topic/01/x",
            "topic/1/y",
            "other",
        ] {
            store
                .put(&Path::from(key), PutPayload::from_static(b"x"))
                .await
                .unwrap();
        }
        let listed: BTreeSet<String> = store
            .list(Some(&Path::from("topic/0")))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap();
        let expected =
            BTreeSet::from(["topic/0/a", "topic/0/b", "topic/0/sub/c"].map(String::from));
        assert_eq!(listed, expected, "`topic/0` must not match `topic/01`");

        let sorted = list_sorted(store, Some(&Path::from("topic")))
            .await
            .unwrap();
        let sorted: Vec<String> = sorted
            .iter()
            .map(|meta| meta.location.to_string())
            .collect();
        assert_eq!(
            sorted,
            [
                "topic/0/a",
                "topic/0/b",
                "topic/0/sub/c",
                "topic/01/x",
                "topic/1/y"
            ]
        );

        let after: BTreeSet<String> = store
            .list_with_offset(Some(&Path::from("topic/0")), &Path::from("topic/0/a"))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            after,
            BTreeSet::from(["topic/0/b", "topic/0/sub/c"].map(String::from))
        );

        let level = store
            .list_with_delimiter(Some(&Path::from("topic/0")))
            .await
            .unwrap();
        let objects: BTreeSet<String> = level
            .objects
            .iter()
            .map(|m| m.location.to_string())
            .collect();
        let folders: BTreeSet<String> = level
            .common_prefixes
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            objects,
            BTreeSet::from(["topic/0/a", "topic/0/b"].map(String::from))
        );
        assert_eq!(folders, BTreeSet::from(["topic/0/sub".to_owned()]));
    }

    pub async fn list_of_everything_sees_only_this_stores_keys(store: &dyn ObjectStore) {
        store
            .put(&Path::from("mine"), PutPayload::from_static(b"x"))
            .await
            .unwrap();
        let all: Vec<String> = store
            .list(None)
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(all, ["mine"]);
    }

    pub async fn delete_removes_the_object_and_delete_if_exists_tolerates_missing(
        store: &dyn ObjectStore,
    ) {
        let key = Path::from("to-delete");
        store
            .put(&key, PutPayload::from_static(b"x"))
            .await
            .unwrap();
        store.delete(&key).await.unwrap();
        assert!(matches!(
            store.head(&key).await,
            Err(object_store::Error::NotFound { .. })
        ));
        delete_if_exists(store, &key).await.unwrap();
        delete_if_exists(store, &Path::from("never-existed"))
            .await
            .unwrap();
    }

    pub async fn create_on_an_existing_key_is_already_exists_and_keeps_the_content(
        store: &dyn ObjectStore,
    ) {
        let key = Path::from("manifest");
        store
            .put_opts(&key, PutPayload::from_static(b"first"), create())
            .await
            .unwrap();
        let second = store
            .put_opts(&key, PutPayload::from_static(b"second"), create())
            .await;
        assert!(
            matches!(second, Err(object_store::Error::AlreadyExists { .. })),
            "{second:?}"
        );
        assert_eq!(
            store.get(&key).await.unwrap().bytes().await.unwrap(),
            "first"
        );
    }

    pub async fn racing_creates_of_one_key_have_exactly_one_winner(store: &dyn ObjectStore) {
        let key = Path::from("contended");
        let attempts = (0..8u8)
            .map(|writer| store.put_opts(&key, PutPayload::from(vec![writer; 16]), create()));
        let results = futures::future::join_all(attempts).await;
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        for result in &results {
            if let Err(error) = result {
                assert!(
                    matches!(error, object_store::Error::AlreadyExists { .. }),
                    "{error:?}"
                );
            }
        }
        let content = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(content, vec![u8::try_from(winners[0]).unwrap(); 16]);
    }

    /// S3 only (`LocalFileSystem` doesn't implement `PutMode::Update`, see the pinned test).
    pub async fn update_succeeds_on_the_current_etag_and_fails_on_a_stale_one(
        store: &dyn ObjectStore,
    ) {
        let key = Path::from("cas");
        let v1 = store
            .put_opts(&key, PutPayload::from_static(b"v1"), create())
            .await
            .unwrap();
        let update = |result: &object_store::PutResult| {
            PutOptions::from(PutMode::Update(UpdateVersion {
                e_tag: result.e_tag.clone(),
                version: result.version.clone(),
            }))
        };
        let v2 = store
            .put_opts(&key, PutPayload::from_static(b"v2"), update(&v1))
            .await
            .unwrap();
        let stale = store
            .put_opts(&key, PutPayload::from_static(b"v3"), update(&v1))
            .await;
        assert!(
            matches!(stale, Err(object_store::Error::Precondition { .. })),
            "{stale:?}"
        );
        assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), "v2");
        store
            .put_opts(&key, PutPayload::from_static(b"v3"), update(&v2))
            .await
            .unwrap();
        assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), "v3");

        let missing = PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag: v2.e_tag.clone(),
            version: None,
        }));
        let on_missing = store
            .put_opts(
                &Path::from("absent"),
                PutPayload::from_static(b"x"),
                missing,
            )
            .await;
        assert!(
            on_missing.is_err(),
            "an update of a missing key must fail: {on_missing:?}"
        );
    }

    pub async fn multipart_upload_assembles_parts_in_order(store: &dyn ObjectStore) {
        let key = Path::from("segments/big.log");
        // 5 MiB is S3's smallest non-final part; three parts, the last one short.
        let part = 5 * 1024 * 1024;
        let data = payload(2 * part + 1_234, 3);
        let upload = store.put_multipart(&key).await.unwrap();
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
        for chunk in data.chunks(1_000_000) {
            writer.wait_for_capacity(2).await.unwrap();
            writer.write(chunk);
        }
        writer.finish().await.unwrap();
        let got = store.get(&key).await.unwrap();
        assert_eq!(got.meta.size, data.len() as u64);
        assert_eq!(got.bytes().await.unwrap(), data);
        let boundary = (part - 10) as u64..(part + 10) as u64;
        let across = store.get_range(&key, boundary.clone()).await.unwrap();
        assert_eq!(across, data.slice(part - 10..part + 10));
    }

    pub async fn aborted_multipart_upload_leaves_no_object(store: &dyn ObjectStore) {
        let key = Path::from("aborted");
        let mut upload = store.put_multipart(&key).await.unwrap();
        upload
            .put_part(PutPayload::from(payload(5 * 1024 * 1024, 4)))
            .await
            .unwrap();
        upload.abort().await.unwrap();
        assert!(matches!(
            store.head(&key).await,
            Err(object_store::Error::NotFound { .. })
        ));
    }
}

macro_rules! conformance {
    ($backend:ident, $target:path, [$($check:ident),* $(,)?]) => {
        mod $backend {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let target = $target().await;
                    checks::$check(target.store.as_ref()).await;
                    target.clean_up().await;
                }
            )*
        }
    };
}

conformance!(
    local,
    local_target,
    [
        put_then_get_returns_the_same_bytes,
        overwrite_replaces_the_content,
        get_and_head_of_a_missing_key_are_not_found,
        ranged_gets_return_exactly_the_requested_bytes,
        list_with_a_prefix_matches_whole_segments,
        list_of_everything_sees_only_this_stores_keys,
        delete_removes_the_object_and_delete_if_exists_tolerates_missing,
        create_on_an_existing_key_is_already_exists_and_keeps_the_content,
        racing_creates_of_one_key_have_exactly_one_winner,
        multipart_upload_assembles_parts_in_order,
        aborted_multipart_upload_leaves_no_object,
    ]
);

conformance!(
    s3,
    s3_target,
    [
        put_then_get_returns_the_same_bytes,
        overwrite_replaces_the_content,
        get_and_head_of_a_missing_key_are_not_found,
        ranged_gets_return_exactly_the_requested_bytes,
        list_with_a_prefix_matches_whole_segments,
        list_of_everything_sees_only_this_stores_keys,
        delete_removes_the_object_and_delete_if_exists_tolerates_missing,
        create_on_an_existing_key_is_already_exists_and_keeps_the_content,
        racing_creates_of_one_key_have_exactly_one_winner,
        multipart_upload_assembles_parts_in_order,
        aborted_multipart_upload_leaves_no_object,
        update_succeeds_on_the_current_etag_and_fails_on_a_stale_one,
    ]
);

// Pinned differences between the backends.

#[tokio::test]
async fn local_update_is_not_implemented() {
    let target = local_target().await;
    let key = Path::from("cas");
    let v1 = target
        .store
        .put_opts(&key, PutPayload::from_static(b"v1"), create())
        .await
        .unwrap();
    let update = PutOptions::from(PutMode::Update(UpdateVersion {
        e_tag: v1.e_tag,
        version: None,
    }));
    let result = target
        .store
        .put_opts(&key, PutPayload::from_static(b"v2"), update)
        .await;
    assert!(
        matches!(result, Err(object_store::Error::NotImplemented { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn local_delete_of_a_missing_key_is_not_found_but_s3_succeeds() {
    let local = local_target().await;
    let result = local.store.delete(&Path::from("missing")).await;
    assert!(
        matches!(result, Err(object_store::Error::NotFound { .. })),
        "{result:?}"
    );
    let s3 = s3_target().await;
    s3.store.delete(&Path::from("missing")).await.unwrap();
}

#[tokio::test]
async fn s3_scoped_store_writes_under_the_prefix_of_the_bucket() {
    let server = s3_test_server();
    let prefix = unique_prefix("scoping");
    let tier = server.open(&server.bucket, &prefix);
    tier.scoped()
        .put(&Path::from("a/b"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    let full = tier.key(&Path::from("a/b"));
    assert_eq!(full.as_ref(), format!("{prefix}/a/b"));
    assert_eq!(
        tier.root_store()
            .get(&full)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        "x"
    );
    tier.root_store().delete(&full).await.unwrap();
}

#[tokio::test]
async fn s3_with_a_wrong_secret_is_refused() {
    let server = s3_test_server();
    let mut settings = server.settings(&server.bucket, &unique_prefix("auth"));
    if let Some(credentials) = settings.s3_credentials.as_mut() {
        credentials.secret_access_key.push_str("-wrong");
    }
    let store = TierStore::open(&settings).unwrap().scoped();
    let result = store
        .put(&Path::from("x"), PutPayload::from_static(b"x"))
        .await;
    assert!(
        result.is_err(),
        "a wrong secret must not be able to write: {result:?}"
    );
}
