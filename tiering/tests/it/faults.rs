//! `FaultyObjectStore`: each kind of fault hits exactly the calls it was aimed at, and the store
//! behaves like its inner store otherwise.

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use strata_tiering::faults::{FaultKind, Faults, FaultyObjectStore, Operation, is_injected};
use tokio::time::Instant;

fn faulty() -> (FaultyObjectStore, Faults) {
    FaultyObjectStore::new(Arc::new(InMemory::new()))
}

fn key(name: &str) -> Path {
    Path::from(name)
}

#[tokio::test]
async fn fail_next_fails_exactly_n_calls_of_the_chosen_operation_then_recovers() {
    let (store, faults) = faulty();
    faults.fail_next(&[Operation::Put], 2, FaultKind::Unavailable);
    for _ in 0..2 {
        let error = store
            .put(&key("a"), PutPayload::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, object_store::Error::Generic { .. }),
            "{error:?}"
        );
        assert!(is_injected(&error), "{error:?}");
    }
    // Other operations were never affected; the third put goes through.
    assert!(matches!(
        store.head(&key("a")).await,
        Err(object_store::Error::NotFound { .. })
    ));
    store
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(
        store.get(&key("a")).await.unwrap().bytes().await.unwrap(),
        "x"
    );
    assert_eq!(faults.calls(Operation::Put), 3);
    assert_eq!(faults.injected(), 2);
}

#[tokio::test]
async fn real_errors_are_not_reported_as_injected() {
    let (store, _faults) = faulty();
    let error = store.get(&key("missing")).await.unwrap_err();
    assert!(matches!(error, object_store::Error::NotFound { .. }));
    assert!(!is_injected(&error));
}

#[tokio::test]
async fn permission_denied_faults_look_like_permission_denied() {
    let (store, faults) = faulty();
    faults.fail_next(&[Operation::Get], 1, FaultKind::PermissionDenied);
    let error = store.get(&key("a")).await.unwrap_err();
    assert!(
        matches!(error, object_store::Error::PermissionDenied { .. }),
        "{error:?}"
    );
    assert!(is_injected(&error));
}

#[tokio::test]
async fn a_put_that_lands_then_times_out_leaves_the_object_written() {
    let (store, faults) = faulty();
    faults.land_then_time_out_next_puts(1);
    let create = || PutOptions::from(PutMode::Create);
    let error = store
        .put_opts(&key("seg"), PutPayload::from_static(b"data"), create())
        .await
        .unwrap_err();
    assert!(is_injected(&error), "{error:?}");
    assert!(error.to_string().contains("landed"), "{error}");
    // The write is there, so a blind retry of the Create now says AlreadyExists: the uploader
    // must read back and compare, not treat this as a conflict.
    assert_eq!(
        store.get(&key("seg")).await.unwrap().bytes().await.unwrap(),
        "data"
    );
    let retry = store
        .put_opts(&key("seg"), PutPayload::from_static(b"data"), create())
        .await;
    assert!(
        matches!(retry, Err(object_store::Error::AlreadyExists { .. })),
        "{retry:?}"
    );
}

#[tokio::test]
async fn a_multipart_completion_can_land_then_time_out() {
    let (store, faults) = faulty();
    faults.land_then_time_out_next_puts(1);
    let mut writer = WriteMultipart::new(store.put_multipart(&key("big")).await.unwrap());
    writer.write(b"part one, part two");
    let error = writer.finish().await.unwrap_err();
    assert!(is_injected(&error), "{error:?}");
    let got = store.get(&key("big")).await.unwrap().bytes().await.unwrap();
    assert_eq!(got, "part one, part two");
}

#[tokio::test]
async fn multipart_parts_can_fail() {
    let (store, faults) = faulty();
    let mut upload = store.put_multipart(&key("big")).await.unwrap();
    faults.fail_next(&[Operation::PutMultipart], 1, FaultKind::TimedOut);
    let error = upload
        .put_part(PutPayload::from_static(b"part"))
        .await
        .unwrap_err();
    assert!(is_injected(&error), "{error:?}");
    upload.abort().await.unwrap();
}

#[tokio::test]
async fn a_down_store_fails_every_operation_until_it_is_up_again() {
    let (store, faults) = faulty();
    store
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    faults.set_down(true);
    assert!(is_injected(
        &store
            .put(&key("b"), PutPayload::from_static(b"x"))
            .await
            .unwrap_err()
    ));
    assert!(is_injected(&store.get(&key("a")).await.unwrap_err()));
    assert!(is_injected(&store.head(&key("a")).await.unwrap_err()));
    assert!(is_injected(
        &store.get_range(&key("a"), 0..1).await.unwrap_err()
    ));
    assert!(is_injected(&store.delete(&key("a")).await.unwrap_err()));
    assert!(is_injected(
        &store.list_with_delimiter(None).await.unwrap_err()
    ));
    assert!(is_injected(
        &store.copy(&key("a"), &key("c")).await.unwrap_err()
    ));
    assert!(is_injected(
        &store.put_multipart(&key("m")).await.unwrap_err()
    ));
    let listed: Vec<_> = store.list(None).collect().await;
    assert!(
        matches!(listed.as_slice(), [Err(error)] if is_injected(error)),
        "{listed:?}"
    );

    faults.set_down(false);
    assert_eq!(
        store.get(&key("a")).await.unwrap().bytes().await.unwrap(),
        "x"
    );
    let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn list_faults_fail_the_stream_once() {
    let (store, faults) = faulty();
    store
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    faults.fail_next(&[Operation::List], 1, FaultKind::Unavailable);
    assert!(store.list(None).try_collect::<Vec<_>>().await.is_err());
    assert_eq!(
        store
            .list(None)
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn delete_faults_hit_individual_locations() {
    let (store, faults) = faulty();
    for name in ["a", "b", "c"] {
        store
            .put(&key(name), PutPayload::from_static(b"x"))
            .await
            .unwrap();
    }
    faults.fail_next(&[Operation::Delete], 1, FaultKind::Unavailable);
    let locations = futures::stream::iter(["a", "b", "c"].map(|name| Ok(key(name)))).boxed();
    let results: Vec<_> = store.delete_stream(locations).collect().await;
    assert!(is_injected(results[0].as_ref().unwrap_err()));
    assert_eq!(results[1].as_ref().unwrap(), &key("b"));
    assert_eq!(results[2].as_ref().unwrap(), &key("c"));
    assert!(
        store.head(&key("a")).await.is_ok(),
        "the faulted delete must not have happened"
    );
    assert!(store.head(&key("b")).await.is_err());
}

#[tokio::test]
async fn rules_for_several_operations_are_charged_in_order() {
    let (store, faults) = faulty();
    faults.fail_next(&Operation::ALL, 1, FaultKind::Unavailable);
    faults.fail_next(&[Operation::Get], 1, FaultKind::PermissionDenied);
    // The first call of any kind takes the first rule; the next get takes the second.
    assert!(matches!(
        store.get(&key("a")).await.unwrap_err(),
        object_store::Error::Generic { .. }
    ));
    assert!(matches!(
        store.get(&key("a")).await.unwrap_err(),
        object_store::Error::PermissionDenied { .. }
    ));
    assert!(matches!(
        store.get(&key("a")).await.unwrap_err(),
        object_store::Error::NotFound { .. }
    ));
}

#[tokio::test]
async fn clear_removes_pending_faults() {
    let (store, faults) = faulty();
    faults.fail_next(&Operation::ALL, 10, FaultKind::Unavailable);
    faults.land_then_time_out_next_puts(3);
    faults.set_down(true);
    faults.clear();
    store
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(faults.injected(), 0);
}

#[tokio::test(start_paused = true)]
// Measures that injected latency really delays.
#[allow(clippy::disallowed_methods)]
async fn latency_delays_only_the_chosen_operations() {
    let (store, faults) = faulty();
    faults.set_latency(&[Operation::Get], Duration::from_secs(5));
    let start = Instant::now();
    store
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "puts are not delayed");
    store.get(&key("a")).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    faults.set_latency(&[Operation::Get], Duration::ZERO);
    let again = Instant::now();
    store.get(&key("a")).await.unwrap();
    assert_eq!(again.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
// Measures that injected latency really delays.
#[allow(clippy::disallowed_methods)]
async fn latency_applies_before_an_injected_error() {
    let (store, faults) = faulty();
    faults.set_latency(&[Operation::Put], Duration::from_secs(2));
    faults.fail_next(&[Operation::Put], 1, FaultKind::TimedOut);
    let start = Instant::now();
    assert!(
        store
            .put(&key("a"), PutPayload::from_static(b"x"))
            .await
            .is_err()
    );
    assert!(start.elapsed() >= Duration::from_secs(2));
}

#[tokio::test]
async fn the_faulty_store_wraps_a_tier_store() {
    let dir = tempfile::tempdir().unwrap();
    let settings = strata_tiering::StoreSettings {
        url: dir.path().to_str().unwrap().to_owned(),
        ..Default::default()
    };
    let mut handle = None;
    let tier = strata_tiering::TierStore::open(&settings)
        .unwrap()
        .map_store(|inner| {
            let (store, faults) = FaultyObjectStore::new(inner);
            handle = Some(faults);
            Arc::new(store) as Arc<dyn ObjectStore>
        });
    let faults = handle.unwrap();
    faults.set_down(true);
    let error = tier
        .scoped()
        .put(&key("a"), PutPayload::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(is_injected(&error));
    assert!(tier.scoped().to_string().starts_with("FaultyObjectStore("));
}
