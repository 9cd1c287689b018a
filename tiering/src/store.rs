//! Opens the object store that [`StoreSettings`] names: a local folder through `object_store`'s
//! `LocalFileSystem` (the default), or an S3 bucket through `AmazonS3` configured from the
//! settings plus the standard AWS environment (keys, session token, web identity, container
//! credentials, `AWS_ENDPOINT_URL`, `AWS_REGION`). The result, [`TierStore`], is the one handle
//! the rest of tiering uses: a store rooted at the folder or bucket plus the key prefix under
//! which every Strata object lives.
//!
//! Retries: S3 requests go through `object_store`'s built-in [`RetryConfig`] (exponential backoff
//! with jitter from 100 ms to 15 s, at most 10 retries within 3 minutes, on 5xx, 429, 408 and
//! connection errors; timeouts only for idempotent requests, so a `PutMode::Create` that timed out
//! is reported, never blindly resent). A second retry layer on top would multiply the attempts;
//! the uploader decides what an ambiguous failure means, not a generic retry loop.
//!
//! Must not depend on segment internals or on aws-sdk-s3 (that is `object_lock`'s job).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};
use serde::{Deserialize, Serialize};

use crate::store_url::{StoreUrl, StoreUrlError};

/// Region used when neither the settings nor `AWS_REGION`/`AWS_DEFAULT_REGION` name one (what
/// both `object_store` and most S3-compatible servers assume).
pub const DEFAULT_REGION: &str = "us-east-1";

/// The object-store settings, as they appear in Strata's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// A folder path, `file:///absolute/path` or `s3://bucket/prefix` (see [`StoreUrl`]).
    pub url: String,
    /// S3 endpoint for S3-compatible servers, e.g. `http://127.0.0.1:8333`. Default:
    /// `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`, else AWS itself. When set, requests use
    /// path-style addressing, and `http://` is allowed.
    #[serde(default)]
    pub s3_endpoint: Option<String>,
    /// S3 region. Default: `AWS_REGION`, then `AWS_DEFAULT_REGION`, else [`DEFAULT_REGION`].
    #[serde(default)]
    pub s3_region: Option<String>,
    /// Static S3 credentials. Never read from a configuration file (secrets don't belong there):
    /// set in code, by tests or by a loader of a secret file. When `None`, the standard AWS
    /// chain applies (environment keys and session token, web identity, container, instance).
    #[serde(skip)]
    pub s3_credentials: Option<S3Credentials>,
}

/// An access key pair (and optional session token).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Everything needed to reach one bucket, resolved once from the settings and the environment so
/// that `object_store` and aws-sdk-s3 (Object Lock) talk to the same place the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Connection {
    /// The bucket.
    pub bucket: String,
    /// The endpoint of an S3-compatible server; `None` for AWS.
    pub endpoint: Option<String>,
    /// The signing region.
    pub region: String,
    /// Static credentials; `None` for the standard AWS credential chain.
    pub credentials: Option<S3Credentials>,
}

impl S3Connection {
    /// Resolves the connection to `bucket` from `settings`, falling back to the environment
    /// variables that `env` returns (the process environment in production).
    ///
    /// # Errors
    /// [`OpenStoreError::InvalidEndpoint`] when the endpoint is not an `http(s)://host` URL.
    pub fn resolve(
        bucket: &str,
        settings: &StoreSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, OpenStoreError> {
        let nonempty = |name: &str| env(name).filter(|value| !value.is_empty());
        let endpoint = settings
            .s3_endpoint
            .clone()
            .or_else(|| nonempty("AWS_ENDPOINT_URL_S3"))
            .or_else(|| nonempty("AWS_ENDPOINT_URL"));
        if let Some(endpoint) = &endpoint {
            check_endpoint(endpoint)?;
        }
        let region = settings
            .s3_region
            .clone()
            .or_else(|| nonempty("AWS_REGION"))
            .or_else(|| nonempty("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        Ok(Self {
            bucket: bucket.to_owned(),
            endpoint,
            region,
            credentials: settings.s3_credentials.clone(),
        })
    }

    /// Whether requests address the bucket in the path (`http://host/bucket/key`) rather than in
    /// the host name: always for a custom endpoint, where `<bucket>.host` rarely resolves.
    pub fn path_style(&self) -> bool {
        self.endpoint.is_some()
    }

    /// Whether plain HTTP is allowed: only for an endpoint explicitly given as `http://`.
    pub fn allow_http(&self) -> bool {
        self.endpoint
            .as_deref()
            .is_some_and(|endpoint| endpoint.starts_with("http://"))
    }

    fn build_object_store(&self) -> Result<Arc<dyn ObjectStore>, OpenStoreError> {
        // Explicit credentials describe the whole connection: starting from the environment
        // would mix in a stray AWS_SESSION_TOKEN and break signing.
        let mut builder = match &self.credentials {
            None => AmazonS3Builder::from_env(),
            Some(credentials) => {
                let builder = AmazonS3Builder::new()
                    .with_access_key_id(&credentials.access_key_id)
                    .with_secret_access_key(&credentials.secret_access_key);
                match &credentials.session_token {
                    Some(token) => builder.with_token(token),
                    None => builder,
                }
            }
        };
        builder = builder
            .with_bucket_name(&self.bucket)
            .with_region(&self.region)
            .with_retry(RetryConfig::default())
            // If-None-Match / If-Match: what PutMode::Create and PutMode::Update send. The
            // start-up probe checks that the server honours them.
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_virtual_hosted_style_request(!self.path_style())
            .with_allow_http(self.allow_http());
        if let Some(endpoint) = &self.endpoint {
            // AWS_ENDPOINT_URL_S3 from the environment would take precedence over a plain
            // endpoint, so set both.
            builder = builder
                .with_endpoint(endpoint)
                .with_config(AmazonS3ConfigKey::S3Endpoint, endpoint);
        }
        let store = builder.build().map_err(|source| OpenStoreError::S3 {
            bucket: self.bucket.clone(),
            source,
        })?;
        Ok(Arc::new(store))
    }
}

fn check_endpoint(endpoint: &str) -> Result<(), OpenStoreError> {
    let invalid = || OpenStoreError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
    };
    let url = url::Url::parse(endpoint).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid());
    }
    Ok(())
}

/// Why the object store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    /// The URL setting does not parse.
    #[error("invalid object store setting")]
    Url(#[from] StoreUrlError),
    /// The S3 endpoint is not an `http(s)://host[:port]` URL.
    #[error("invalid S3 endpoint `{endpoint}`: expected http(s)://host[:port]")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
    },
    /// The local folder could not be created.
    #[error("cannot create the object store folder {}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `LocalFileSystem` refused the folder.
    #[error("cannot open the object store folder {}", path.display())]
    Local {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: object_store::Error,
    },
    /// The S3 client could not be configured.
    #[error("cannot configure the S3 client for bucket {bucket}")]
    S3 {
        /// The bucket.
        bucket: String,
        /// The cause.
        #[source]
        source: object_store::Error,
    },
}

/// Where an open [`TierStore`] points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A folder (canonical path).
    Local {
        /// The folder.
        root: PathBuf,
    },
    /// A bucket.
    S3(S3Connection),
}

/// An open object store: the store rooted at the folder or bucket, plus the key prefix under
/// which every Strata object lives. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TierStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    location: StoreLocation,
}

impl TierStore {
    /// Opens the store named by `settings`; for S3, unset fields come from the process
    /// environment. Creates a local folder if missing. Makes no network request: call
    /// [`crate::probe::probe_conditional_writes`] before trusting the store.
    ///
    /// # Errors
    /// See [`OpenStoreError`].
    pub fn open(settings: &StoreSettings) -> Result<Self, OpenStoreError> {
        match settings.url.parse::<StoreUrl>()? {
            StoreUrl::Local { root } => Self::open_local(root),
            StoreUrl::S3 { bucket, prefix } => {
                let connection =
                    S3Connection::resolve(&bucket, settings, |name| std::env::var(name).ok())?;
                let store = connection.build_object_store()?;
                Ok(Self {
                    store,
                    prefix,
                    location: StoreLocation::S3(connection),
                })
            }
        }
    }

    fn open_local(root: PathBuf) -> Result<Self, OpenStoreError> {
        std::fs::create_dir_all(&root).map_err(|source| OpenStoreError::CreateDir {
            path: root.clone(),
            source,
        })?;
        // fsync: a tiered copy may be the only copy once local retention deletes the segment.
        let store = LocalFileSystem::new_with_prefix(&root)
            .map_err(|source| OpenStoreError::Local {
                path: root.clone(),
                source,
            })?
            .with_fsync(true);
        let root = std::fs::canonicalize(&root).map_err(|source| OpenStoreError::CreateDir {
            path: root.clone(),
            source,
        })?;
        Ok(Self {
            store: Arc::new(store),
            prefix: Path::default(),
            location: StoreLocation::Local { root },
        })
    }

    /// The store rooted at the folder or bucket (keys must be prefixed: see [`Self::key`]).
    pub fn root_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The key prefix under which every Strata object lives (empty for a local folder).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Where the store points.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The full key (prefix included) of `relative`, for APIs outside `object_store`, such as
    /// Object Lock.
    pub fn key(&self, relative: &Path) -> Path {
        self.prefix.parts().chain(relative.parts()).collect()
    }

    /// The store seen from inside the prefix: `a/b` means `<prefix>/a/b`, and listings return
    /// keys relative to the prefix. What tiering code should use.
    pub fn scoped(&self) -> Arc<dyn ObjectStore> {
        if self.prefix.as_ref().is_empty() {
            return Arc::clone(&self.store);
        }
        Arc::new(PrefixStore::new(
            Arc::clone(&self.store),
            self.prefix.clone(),
        ))
    }

    /// The same location through a decorated store (a fault injector, a read cache).
    pub fn map_store(
        self,
        wrap: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
    ) -> Self {
        Self {
            store: wrap(self.store),
            ..self
        }
    }
}

/// Deletes `location`, treating "already gone" as success. S3 answers 204 for a missing key but
/// `LocalFileSystem` returns `NotFound`; retention and retried deletes need the S3 behaviour.
///
/// # Errors
/// Any store error other than `NotFound`.
pub async fn delete_if_exists(
    store: &dyn ObjectStore,
    location: &Path,
) -> object_store::Result<()> {
    match store.delete(location).await {
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        other => other,
    }
}

/// Reads `location` whole; `None` when it does not exist.
///
/// # Errors
/// Any store error other than `NotFound`.
pub async fn get_if_exists(
    store: &dyn ObjectStore,
    location: &Path,
) -> object_store::Result<Option<bytes::Bytes>> {
    match store.get(location).await {
        Ok(found) => found.bytes().await.map(Some),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Lists every object under `prefix`, sorted by key. `ObjectStore::list` promises no order
/// (S3 returns keys sorted, `LocalFileSystem` in directory order).
///
/// # Errors
/// The first listing error.
pub async fn list_sorted(
    store: &dyn ObjectStore,
    prefix: Option<&Path>,
) -> object_store::Result<Vec<ObjectMeta>> {
    let mut objects: Vec<ObjectMeta> = store.list(prefix).try_collect().await?;
    objects.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        move |name| map.get(name).map(|value| (*value).to_owned())
    }

    fn settings(url: &str) -> StoreSettings {
        StoreSettings {
            url: url.to_owned(),
            ..StoreSettings::default()
        }
    }

    #[test]
    fn connection_without_endpoint_uses_virtual_hosted_https_and_default_region() {
        let connection = S3Connection::resolve("b", &settings("s3://b"), env(&[])).unwrap();
        assert_eq!(connection.endpoint, None);
        assert_eq!(connection.region, DEFAULT_REGION);
        assert!(!connection.path_style());
        assert!(!connection.allow_http());
    }

    #[test]
    fn connection_with_http_endpoint_uses_path_style_and_allows_http() {
        let mut settings = settings("s3://b");
        settings.s3_endpoint = Some("http://127.0.0.1:8333".to_owned());
        let connection = S3Connection::resolve("b", &settings, env(&[])).unwrap();
        assert!(connection.path_style());
        assert!(connection.allow_http());
    }

    #[test]
    fn connection_with_https_endpoint_does_not_allow_http() {
        let vars = [("AWS_ENDPOINT_URL", "https://minio.example:9000")];
        let connection = S3Connection::resolve("b", &settings("s3://b"), env(&vars)).unwrap();
        assert_eq!(
            connection.endpoint.as_deref(),
            Some("https://minio.example:9000")
        );
        assert!(connection.path_style());
        assert!(!connection.allow_http());
    }

    #[test]
    fn connection_settings_override_environment_and_s3_specific_env_wins() {
        let vars = [
            ("AWS_ENDPOINT_URL", "http://general:1"),
            ("AWS_ENDPOINT_URL_S3", "http://s3-specific:2"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_DEFAULT_REGION", "us-west-2"),
        ];
        let connection = S3Connection::resolve("b", &settings("s3://b"), env(&vars)).unwrap();
        assert_eq!(connection.endpoint.as_deref(), Some("http://s3-specific:2"));
        assert_eq!(connection.region, "eu-west-1");

        let mut explicit = settings("s3://b");
        explicit.s3_endpoint = Some("http://explicit:3".to_owned());
        explicit.s3_region = Some("ap-south-1".to_owned());
        let connection = S3Connection::resolve("b", &explicit, env(&vars)).unwrap();
        assert_eq!(connection.endpoint.as_deref(), Some("http://explicit:3"));
        assert_eq!(connection.region, "ap-south-1");
    }

    #[test]
    fn connection_falls_back_to_default_region_variable() {
        let vars = [("AWS_DEFAULT_REGION", "us-west-2"), ("AWS_REGION", "")];
        let connection = S3Connection::resolve("b", &settings("s3://b"), env(&vars)).unwrap();
        assert_eq!(connection.region, "us-west-2");
    }

    #[test]
    fn connection_rejects_endpoint_without_http_scheme() {
        for endpoint in ["127.0.0.1:8333", "ftp://host", "http://"] {
            let mut settings = settings("s3://b");
            settings.s3_endpoint = Some(endpoint.to_owned());
            let err = S3Connection::resolve("b", &settings, env(&[])).unwrap_err();
            assert!(
                matches!(err, OpenStoreError::InvalidEndpoint { .. }),
                "{endpoint}: {err:?}"
            );
        }
    }

    #[test]
    fn settings_deserialize_rejects_unknown_fields_and_never_reads_credentials() {
        let parsed: StoreSettings =
            serde_json::from_str(r#"{"url": "s3://b/p", "s3_region": "eu-west-1"}"#).unwrap();
        assert_eq!(parsed.s3_region.as_deref(), Some("eu-west-1"));
        assert!(serde_json::from_str::<StoreSettings>(r#"{"url": "x", "regio": "y"}"#).is_err());
        let with_keys = r#"{"url": "x", "s3_credentials": {"access_key_id": "a"}}"#;
        assert!(serde_json::from_str::<StoreSettings>(with_keys).is_err());
    }

    #[test]
    fn credentials_debug_redacts_secrets() {
        let credentials = S3Credentials {
            access_key_id: "AKIDEXAMPLE".to_owned(),
            secret_access_key: "wJalrXUtnFEMI".to_owned(),
            session_token: Some("FwoGZXIvYXdz".to_owned()),
        };
        let debug = format!("{credentials:?}");
        assert!(debug.contains("AKIDEXAMPLE"));
        assert!(
            !debug.contains("wJalrXUtnFEMI") && !debug.contains("FwoGZXIvYXdz"),
            "{debug}"
        );
    }

    #[test]
    fn open_s3_builds_without_network_and_keeps_prefix() {
        let mut settings = settings("s3://bucket/tenant/a");
        settings.s3_endpoint = Some("http://127.0.0.1:9".to_owned());
        let store = TierStore::open(&settings).unwrap();
        assert_eq!(store.prefix().as_ref(), "tenant/a");
        assert_eq!(store.key(&Path::from("x/y")).as_ref(), "tenant/a/x/y");
        assert!(matches!(store.location(), StoreLocation::S3(c) if c.bucket == "bucket"));
    }

    #[test]
    fn open_local_creates_missing_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a/b/tier");
        let store = TierStore::open(&settings(root.to_str().unwrap())).unwrap();
        assert!(root.is_dir());
        assert_eq!(store.prefix().as_ref(), "");
        assert_eq!(
            store.location(),
            &StoreLocation::Local {
                root: std::fs::canonicalize(&root).unwrap()
            }
        );
    }

    #[test]
    fn open_local_reports_uncreatable_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = TierStore::open(&settings(file.join("tier").to_str().unwrap())).unwrap_err();
        assert!(matches!(err, OpenStoreError::CreateDir { .. }), "{err:?}");
    }
}
