//! Object Lock against SeaweedFS's `strata-lock` bucket (created with Object Lock, so versioned).
//! Retentions here are real: COMPLIANCE versions can't be removed for a day, which is why each
//! test writes a few bytes under a unique prefix (`scripts/stop-s3.sh --purge` drops them).

use std::time::{Duration, SystemTime};

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use strata_tiering::S3Connection;
use strata_tiering::TierStore;
use strata_tiering::object_lock::{ObjectLock, Protection, Retention, RetentionMode};
use strata_tiering::store::StoreLocation;
use strata_tiering::testing::{s3_test_server, unique_prefix};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn lock_store(label: &str) -> (TierStore, S3Connection) {
    let server = s3_test_server();
    let tier = server.open(&server.lock_bucket, &unique_prefix(label));
    let StoreLocation::S3(connection) = tier.location().clone() else {
        panic!("an s3:// store must have an S3 location")
    };
    (tier, connection)
}

/// Puts `relative` and returns its full key and version id.
async fn put_version(tier: &TierStore, relative: &str) -> (Path, String) {
    let result = tier
        .scoped()
        .put(&Path::from(relative), PutPayload::from_static(b"locked"))
        .await
        .unwrap();
    let version = result
        .version
        .expect("a versioned bucket returns x-amz-version-id");
    (tier.key(&Path::from(relative)), version)
}

/// What S3 stores: whole seconds.
fn truncated(time: SystemTime) -> SystemTime {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn compliance_retention_reads_back_and_refuses_the_version_delete() {
    let (tier, connection) = lock_store("lock-compliance");
    let lock = ObjectLock::connect(&connection).await;
    let (key, version) = put_version(&tier, "segment.log").await;
    let now = SystemTime::now();
    let retention = Retention {
        mode: RetentionMode::Compliance,
        retain_until: now + DAY,
    };

    lock.set_retention(&key, Some(&version), retention)
        .await
        .unwrap();
    let read = lock.retention(&key, Some(&version)).await.unwrap();
    let expected = Retention {
        retain_until: truncated(now + DAY),
        ..retention
    };
    assert_eq!(read, Some(expected));
    // Without a version id, the latest version's retention is read.
    assert_eq!(lock.retention(&key, None).await.unwrap(), Some(expected));

    let error = lock.delete_version(&key, &version, now).await.unwrap_err();
    assert!(error.is_locked(), "{error:?}");
    assert!(
        matches!(error, strata_tiering::object_lock::DeleteVersionError::Locked {
            protection: Protection::Retention(r), ..
        } if r == expected),
        "{error:?}"
    );
    assert_eq!(
        tier.root_store()
            .get(&key)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        "locked",
        "the locked version must still be readable"
    );

    // Shortening a COMPLIANCE retention is refused too.
    let shorter = Retention {
        retain_until: now + Duration::from_secs(60),
        ..retention
    };
    let shorten = lock
        .set_retention(&key, Some(&version), shorter)
        .await
        .unwrap_err();
    assert_eq!(shorten.status(), Some(403), "{shorten:?}");
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn an_object_without_retention_reads_none_and_its_version_deletes() {
    let (tier, connection) = lock_store("lock-none");
    let lock = ObjectLock::connect(&connection).await;
    let (key, version) = put_version(&tier, "plain.log").await;
    assert_eq!(lock.retention(&key, Some(&version)).await.unwrap(), None);
    assert!(!lock.legal_hold(&key, Some(&version)).await.unwrap());
    lock.delete_version(&key, &version, SystemTime::now())
        .await
        .unwrap();
    assert!(matches!(
        tier.root_store().head(&key).await,
        Err(object_store::Error::NotFound { .. })
    ));
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn a_plain_delete_in_the_lock_bucket_only_hides_a_retained_object() {
    let (tier, connection) = lock_store("lock-marker");
    let lock = ObjectLock::connect(&connection).await;
    let (key, version) = put_version(&tier, "segment.log").await;
    let now = SystemTime::now();
    let retention = Retention {
        mode: RetentionMode::Governance,
        retain_until: now + DAY,
    };
    lock.set_retention(&key, Some(&version), retention)
        .await
        .unwrap();

    // object_store's delete sends no version id: S3 adds a delete marker and says yes.
    tier.root_store().delete(&key).await.unwrap();
    assert!(matches!(
        tier.root_store().get(&key).await,
        Err(object_store::Error::NotFound { .. })
    ));
    // The data version is still there, still retained, and still can't be deleted.
    let read = lock.retention(&key, Some(&version)).await.unwrap();
    assert_eq!(read.map(|r| r.mode), Some(RetentionMode::Governance));
    let error = lock.delete_version(&key, &version, now).await.unwrap_err();
    assert!(error.is_locked(), "{error:?}");
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn a_refusal_without_a_lock_is_not_reported_as_locked() {
    let (tier, mut connection) = lock_store("lock-denied");
    let (key, version) = put_version(&tier, "segment.log").await;
    if let Some(credentials) = connection.credentials.as_mut() {
        credentials.secret_access_key.push_str("-wrong");
    }
    let lock = ObjectLock::connect(&connection).await;
    let error = lock
        .delete_version(&key, &version, SystemTime::now())
        .await
        .unwrap_err();
    assert!(!error.is_locked(), "{error:?}");
    let strata_tiering::object_lock::DeleteVersionError::Request(inner) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(inner.status(), Some(403), "{error:?}");
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn retention_on_a_bucket_without_object_lock_is_refused() {
    let server = s3_test_server();
    let tier = server.open(&server.bucket, &unique_prefix("lock-plain-bucket"));
    let StoreLocation::S3(connection) = tier.location().clone() else {
        panic!("s3 location")
    };
    let lock = ObjectLock::connect(&connection).await;
    tier.scoped()
        .put(&Path::from("x"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    let retention = Retention {
        mode: RetentionMode::Compliance,
        retain_until: SystemTime::now() + DAY,
    };
    let error = lock
        .set_retention(&tier.key(&Path::from("x")), None, retention)
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(400), "{error:?}");
    tier.scoped().delete(&Path::from("x")).await.unwrap();
}

#[tokio::test]
async fn versioning_is_reported_for_the_lock_bucket_only() {
    let (_, connection) = lock_store("lock-versioning");
    assert!(
        ObjectLock::connect(&connection)
            .await
            .is_versioned()
            .await
            .unwrap()
    );
    let server = s3_test_server();
    let plain = server.open(&server.bucket, &unique_prefix("plain-versioning"));
    let StoreLocation::S3(connection) = plain.location().clone() else {
        panic!("s3 location")
    };
    assert!(
        !ObjectLock::connect(&connection)
            .await
            .is_versioned()
            .await
            .unwrap()
    );
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn deleting_all_versions_leaves_no_data_and_no_delete_marker() {
    let (tier, connection) = lock_store("lock-all-versions");
    let lock = ObjectLock::connect(&connection).await;
    let (key, first) = put_version(&tier, "retried.log").await;
    let (_, second) = put_version(&tier, "retried.log").await;
    // A neighbour sharing the key as a prefix must not be touched.
    let (neighbour, _) = put_version(&tier, "retried.log.chunks").await;
    tier.root_store().delete(&key).await.unwrap();
    let versions = lock.versions(&key).await.unwrap();
    assert_eq!(
        versions.len(),
        3,
        "two data versions and a delete marker: {versions:?}"
    );
    assert!(versions.contains(&first) && versions.contains(&second));

    lock.delete_all_versions(&key, SystemTime::now())
        .await
        .unwrap();
    assert_eq!(lock.versions(&key).await.unwrap(), Vec::<String>::new());
    assert_eq!(lock.versions(&neighbour).await.unwrap().len(), 1);
    // Deleting what is already gone is success.
    lock.delete_all_versions(&key, SystemTime::now())
        .await
        .unwrap();
}

#[tokio::test]
// Retain-until dates are checked by the S3 server against real time.
#[allow(clippy::disallowed_methods)]
async fn a_version_whose_retention_expired_is_deleted_and_one_still_locked_is_refused() {
    let (tier, connection) = lock_store("lock-expiring");
    let lock = ObjectLock::connect(&connection).await;
    let (key, version) = put_version(&tier, "segment.log").await;
    let until = SystemTime::now() + Duration::from_secs(2);
    let retention = Retention {
        mode: RetentionMode::Compliance,
        retain_until: until,
    };
    lock.set_retention(&key, Some(&version), retention)
        .await
        .unwrap();
    let error = lock
        .delete_all_versions(&key, SystemTime::now())
        .await
        .unwrap_err();
    assert!(error.is_locked(), "{error:?}");
    assert_eq!(lock.versions(&key).await.unwrap(), vec![version]);

    // S3 keeps retain-until dates to the second: wait until it has surely passed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    lock.delete_all_versions(&key, SystemTime::now())
        .await
        .unwrap();
    assert_eq!(lock.versions(&key).await.unwrap(), Vec::<String>::new());
}
