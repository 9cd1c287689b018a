//! The start-up check that the object store honours conditional writes. Strata fences a second
//! writer and uploads each segment exactly once with `PutMode::Create` (S3 `If-None-Match: *`);
//! stores such as Garage accept the header and overwrite anyway, which would corrupt manifests
//! silently. So before tiering to a store, Strata writes a sentinel twice with `Create`: the
//! second write must fail with `AlreadyExists` and leave the first content in place, or Strata
//! refuses the store. `PutMode::Update` (S3 `If-Match`) is probed too: it must be either refused
//! for a stale ETag or not implemented at all (`LocalFileSystem`), never ignored.
//!
//! The sentinel is a unique key under `_strata/probe/`, deleted afterwards whatever the outcome.
//! Must not depend on anything but `object_store`.

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

/// Folder (under the store's prefix) that holds probe sentinels.
pub const PROBE_DIR: &str = "_strata/probe";

const FIRST: &[u8] = b"strata conditional-write probe: first write";
const SECOND: &[u8] = b"strata conditional-write probe: second write";

/// What the store supports, when it passed the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionalWrites {
    /// Whether `PutMode::Update` (compare-and-swap on the ETag) is available. When it isn't
    /// (`LocalFileSystem`), writers must fence with `PutMode::Create` on new keys only.
    pub update: UpdateSupport,
}

/// Whether the store implements `PutMode::Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateSupport {
    /// A stale ETag was refused with `Precondition`.
    Enforced,
    /// The store answers `NotImplemented`.
    NotImplemented,
}

/// Why Strata refuses to tier to the store.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A second `Create` of the same key succeeded or replaced the content.
    #[error(
        "the object store ignores conditional writes: a second PutMode::Create of {key} \
         {outcome}; Strata refuses to tier to it (manifests and segment uploads rely on \
         If-None-Match)"
    )]
    CreateIgnored {
        /// The sentinel key.
        key: Path,
        /// What happened instead of `AlreadyExists`.
        outcome: &'static str,
    },
    /// A `PutMode::Update` with a stale ETag succeeded.
    #[error(
        "the object store ignores conditional updates: PutMode::Update of {key} with a stale \
         ETag succeeded; Strata refuses to tier to it (manifest updates rely on If-Match)"
    )]
    UpdateIgnored {
        /// The sentinel key.
        key: Path,
    },
    /// The store does not implement `PutMode::Create` at all.
    #[error(
        "the object store does not support conditional writes (PutMode::Create on {key}); \
         Strata refuses to tier to it"
    )]
    CreateUnsupported {
        /// The sentinel key.
        key: Path,
        /// The store's answer.
        #[source]
        source: object_store::Error,
    },
    /// A store request failed for another reason (unreachable, denied, ...).
    #[error("conditional-write probe: {operation} of {key} failed")]
    Store {
        /// The request that failed.
        operation: &'static str,
        /// The sentinel key.
        key: Path,
        /// The store's answer.
        #[source]
        source: object_store::Error,
    },
    /// No randomness for a unique sentinel name.
    #[error("conditional-write probe: no randomness for a unique sentinel name")]
    Random(#[source] getrandom::Error),
}

/// Probes `store` (which should be the prefix-scoped store, see `TierStore::scoped`) for
/// conditional-write support. Makes about six requests; call once at start-up.
///
/// # Errors
/// [`ProbeError`]: the store ignores or lacks conditional writes, or a request failed.
pub async fn probe_conditional_writes(
    store: &dyn ObjectStore,
) -> Result<ConditionalWrites, ProbeError> {
    let token = getrandom::u64().map_err(ProbeError::Random)?;
    let key = Path::from(format!("{PROBE_DIR}/{token:016x}"));
    let outcome = run_probe(store, &key).await;
    // Delete whatever the outcome; a failed cleanup only matters if the probe itself passed.
    let cleanup = crate::store::delete_if_exists(store, &key).await;
    let support = outcome?;
    cleanup.map_err(|source| ProbeError::Store {
        operation: "delete",
        key,
        source,
    })?;
    Ok(support)
}

async fn run_probe(store: &dyn ObjectStore, key: &Path) -> Result<ConditionalWrites, ProbeError> {
    let store_error = |operation, source| ProbeError::Store {
        operation,
        key: key.clone(),
        source,
    };
    let create = || PutOptions::from(PutMode::Create);

    let first = match store
        .put_opts(key, PutPayload::from_static(FIRST), create())
        .await
    {
        Ok(result) => result,
        Err(source @ object_store::Error::NotImplemented { .. }) => {
            return Err(ProbeError::CreateUnsupported {
                key: key.clone(),
                source,
            });
        }
        Err(source) => return Err(store_error("first create", source)),
    };
    match store
        .put_opts(key, PutPayload::from_static(SECOND), create())
        .await
    {
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Ok(_) => {
            return Err(ProbeError::CreateIgnored {
                key: key.clone(),
                outcome: "succeeded",
            });
        }
        Err(source) => return Err(store_error("second create", source)),
    }
    if !content_is(store, key, FIRST)
        .await
        .map_err(|e| store_error("get", e))?
    {
        let outcome = "reported AlreadyExists but replaced the content";
        return Err(ProbeError::CreateIgnored {
            key: key.clone(),
            outcome,
        });
    }

    // A version the object never had: quoted like a real ETag, so servers compare, not reject.
    let stale = UpdateVersion {
        e_tag: Some("\"strata-probe-stale-etag\"".to_owned()),
        version: None,
    };
    let update = PutOptions::from(PutMode::Update(stale));
    let support = match store
        .put_opts(key, PutPayload::from_static(SECOND), update)
        .await
    {
        Err(object_store::Error::Precondition { .. }) => UpdateSupport::Enforced,
        Err(object_store::Error::NotImplemented { .. }) => UpdateSupport::NotImplemented,
        Ok(_) => return Err(ProbeError::UpdateIgnored { key: key.clone() }),
        Err(source) => return Err(store_error("stale update", source)),
    };
    if support == UpdateSupport::Enforced {
        if !content_is(store, key, FIRST)
            .await
            .map_err(|e| store_error("get", e))?
        {
            return Err(ProbeError::UpdateIgnored { key: key.clone() });
        }
        // And the matching ETag must be accepted, or every manifest update would fail later.
        let current = UpdateVersion {
            e_tag: first.e_tag,
            version: first.version,
        };
        let update = PutOptions::from(PutMode::Update(current));
        store
            .put_opts(key, PutPayload::from_static(SECOND), update)
            .await
            .map_err(|e| store_error("matching update", e))?;
    }
    Ok(ConditionalWrites { update: support })
}

async fn content_is(
    store: &dyn ObjectStore,
    key: &Path,
    expected: &[u8],
) -> object_store::Result<bool> {
    let bytes = store.get(key).await?.bytes().await?;
    Ok(bytes.as_ref() == expected)
}
