//! S3 Object Lock through aws-sdk-s3, the one thing `object_store` cannot do: put a retention
//! (GOVERNANCE or COMPLIANCE until a date) on an object version, read it back, and tell a delete
//! refused by a lock from any other refusal. The client is built from the same [`S3Connection`]
//! as the data path, so both talk to the same endpoint, region and credentials.
//!
//! Object Lock needs a bucket created with it enabled (which turns versioning on). Then a plain
//! DELETE only adds a delete marker (it succeeds, the data stays); what a lock refuses is deleting
//! a *version*, which is why [`ObjectLock::delete_version`] exists. S3 answers that refusal with
//! 403 AccessDenied, the same as a missing permission (SeaweedFS's message doesn't even mention
//! the lock), so the refusal is classified by reading the version's retention and legal hold.
//!
//! Must not depend on `object_store` beyond `Path` for keys; nothing else in tiering uses the SDK.

use std::time::{Duration, SystemTime};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    BucketVersioningStatus, ObjectLockLegalHoldStatus, ObjectLockRetention, ObjectLockRetentionMode,
};
use object_store::path::Path;

use crate::store::S3Connection;

/// How strictly a retention holds (S3's two Object Lock modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionMode {
    /// Users with `s3:BypassGovernanceRetention` can shorten or remove it.
    Governance,
    /// Nobody, not even the account root, can delete the version or shorten the retention.
    Compliance,
}

/// A retention on one object version. S3 keeps `retain_until` to the second; sub-second parts
/// are dropped when it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The mode.
    pub mode: RetentionMode,
    /// Until when the version can't be deleted.
    pub retain_until: SystemTime,
}

/// What protects a version whose delete was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// A retention that has not expired.
    Retention(Retention),
    /// A legal hold (no expiry).
    LegalHold,
}

/// A failed Object Lock request.
#[derive(Debug, thiserror::Error)]
pub enum ObjectLockError {
    /// S3 refused or could not be reached.
    #[error("{operation} on s3://{bucket}/{key} failed (HTTP status {status:?}, S3 code {code:?})")]
    Request {
        /// The S3 operation, e.g. `PutObjectRetention`.
        operation: &'static str,
        /// The bucket.
        bucket: String,
        /// The full key.
        key: String,
        /// The HTTP status, when a response arrived.
        status: Option<u16>,
        /// The S3 error code, e.g. `AccessDenied`.
        code: Option<String>,
        /// The SDK's error.
        #[source]
        source: Box<aws_sdk_s3::Error>,
    },
    /// S3 returned a retention this code does not understand.
    #[error("s3://{bucket}/{key} has an unreadable retention: {detail}")]
    UnreadableRetention {
        /// The bucket.
        bucket: String,
        /// The full key.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
}

impl ObjectLockError {
    /// The S3 error code of a refused request.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Request { code, .. } => code.as_deref(),
            Self::UnreadableRetention { .. } => None,
        }
    }

    /// The HTTP status of a refused request.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Request { status, .. } => *status,
            Self::UnreadableRetention { .. } => None,
        }
    }
}

/// One stored version of an object (see [`ObjectLock::versions_under`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The full key.
    pub key: String,
    /// The version id.
    pub version_id: String,
    /// Whether this version is a delete marker rather than data.
    pub delete_marker: bool,
}

/// Why [`ObjectLock::delete_version`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteVersionError {
    /// The version is protected by Object Lock: a refusal that retrying can't fix before
    /// `retain_until` (or ever, for a legal hold until it is lifted).
    #[error("s3://{bucket}/{key} version {version_id} is protected by Object Lock: {protection:?}")]
    Locked {
        /// The bucket.
        bucket: String,
        /// The full key.
        key: String,
        /// The version.
        version_id: String,
        /// What protects it.
        protection: Protection,
    },
    /// Any other failure, including a 403 on a version that no lock protects.
    #[error(transparent)]
    Request(#[from] ObjectLockError),
}

impl DeleteVersionError {
    /// Whether the delete failed because of an Object Lock retention or legal hold.
    pub fn is_locked(&self) -> bool {
        matches!(self, Self::Locked { .. })
    }
}

/// An Object Lock client for one bucket.
#[derive(Debug, Clone)]
pub struct ObjectLock {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl ObjectLock {
    /// Builds the client for `connection`: its endpoint (path-style when set), region and static
    /// credentials, or else the standard AWS credential chain (environment, web identity,
    /// profile, container, instance metadata).
    pub async fn connect(connection: &S3Connection) -> Self {
        let region = Region::new(connection.region.clone());
        let mut config = match &connection.credentials {
            Some(keys) => aws_sdk_s3::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(region)
                .credentials_provider(Credentials::new(
                    &keys.access_key_id,
                    &keys.secret_access_key,
                    keys.session_token.clone(),
                    None,
                    "strata-settings",
                )),
            None => {
                let shared = aws_config::defaults(BehaviorVersion::latest())
                    .region(region)
                    .load()
                    .await;
                aws_sdk_s3::config::Builder::from(&shared)
            }
        };
        if let Some(endpoint) = &connection.endpoint {
            config = config.endpoint_url(endpoint);
        }
        let config = config.force_path_style(connection.path_style()).build();
        Self {
            client: aws_sdk_s3::Client::from_conf(config),
            bucket: connection.bucket.clone(),
        }
    }

    /// Puts `retention` on `key` (its latest version, or `version_id`).
    ///
    /// # Errors
    /// [`ObjectLockError`]; on a bucket without Object Lock, S3 answers 400 `InvalidRequest`.
    pub async fn set_retention(
        &self,
        key: &Path,
        version_id: Option<&str>,
        retention: Retention,
    ) -> Result<(), ObjectLockError> {
        let mode = match retention.mode {
            RetentionMode::Governance => ObjectLockRetentionMode::Governance,
            RetentionMode::Compliance => ObjectLockRetentionMode::Compliance,
        };
        let retain_until = DateTime::from_secs(whole_seconds(retention.retain_until));
        let body = ObjectLockRetention::builder()
            .mode(mode)
            .retain_until_date(retain_until)
            .build();
        self.client
            .put_object_retention()
            .bucket(&self.bucket)
            .key(key.as_ref())
            .set_version_id(version_id.map(str::to_owned))
            .retention(body)
            .send()
            .await
            .map_err(|e| self.request_error("PutObjectRetention", key, e))?;
        Ok(())
    }

    /// Reads the retention of `key` (its latest version, or `version_id`); `None` when it has
    /// none.
    ///
    /// # Errors
    /// [`ObjectLockError`], e.g. 404 `NoSuchKey` for a missing object.
    pub async fn retention(
        &self,
        key: &Path,
        version_id: Option<&str>,
    ) -> Result<Option<Retention>, ObjectLockError> {
        let answer = self
            .client
            .get_object_retention()
            .bucket(&self.bucket)
            .key(key.as_ref())
            .set_version_id(version_id.map(str::to_owned))
            .send()
            .await;
        let output = match answer {
            Ok(output) => output,
            // AWS says NoSuchObjectLockConfiguration; SeaweedFS ObjectLockConfigurationNotFoundError.
            Err(e)
                if matches!(
                    e.code(),
                    Some("NoSuchObjectLockConfiguration" | "ObjectLockConfigurationNotFoundError")
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(self.request_error("GetObjectRetention", key, e)),
        };
        let Some(retention) = output.retention() else {
            return Ok(None);
        };
        let unreadable = |detail: String| ObjectLockError::UnreadableRetention {
            bucket: self.bucket.clone(),
            key: key.to_string(),
            detail,
        };
        let mode = match retention.mode() {
            Some(ObjectLockRetentionMode::Governance) => RetentionMode::Governance,
            Some(ObjectLockRetentionMode::Compliance) => RetentionMode::Compliance,
            other => return Err(unreadable(format!("mode {other:?}"))),
        };
        let retain_until = retention
            .retain_until_date()
            .ok_or_else(|| unreadable("no RetainUntilDate".to_owned()))
            .and_then(|date| {
                SystemTime::try_from(*date)
                    .map_err(|e| unreadable(format!("RetainUntilDate {date}: {e}")))
            })?;
        Ok(Some(Retention { mode, retain_until }))
    }

    /// Turns the S3 legal hold of `key` (its latest version) on or off. A legal hold has no
    /// expiry: while it is on, no version delete succeeds, whatever the retention says.
    ///
    /// # Errors
    /// [`ObjectLockError`]; on a bucket without Object Lock, S3 answers 400 `InvalidRequest`.
    pub async fn set_legal_hold(&self, key: &Path, on: bool) -> Result<(), ObjectLockError> {
        let status = if on {
            ObjectLockLegalHoldStatus::On
        } else {
            ObjectLockLegalHoldStatus::Off
        };
        let hold = aws_sdk_s3::types::ObjectLockLegalHold::builder()
            .status(status)
            .build();
        self.client
            .put_object_legal_hold()
            .bucket(&self.bucket)
            .key(key.as_ref())
            .legal_hold(hold)
            .send()
            .await
            .map_err(|e| self.request_error("PutObjectLegalHold", key, e))?;
        Ok(())
    }

    /// Whether `key` (its latest version, or `version_id`) is under a legal hold.
    ///
    /// # Errors
    /// [`ObjectLockError`].
    pub async fn legal_hold(
        &self,
        key: &Path,
        version_id: Option<&str>,
    ) -> Result<bool, ObjectLockError> {
        let answer = self
            .client
            .get_object_legal_hold()
            .bucket(&self.bucket)
            .key(key.as_ref())
            .set_version_id(version_id.map(str::to_owned))
            .send()
            .await;
        match answer {
            Ok(output) => Ok(output
                .legal_hold()
                .and_then(|hold| hold.status())
                .is_some_and(|status| *status == ObjectLockLegalHoldStatus::On)),
            Err(e) if e.code() == Some("NoSuchObjectLegalHold") => Ok(false),
            Err(e) => Err(self.request_error("GetObjectLegalHold", key, e)),
        }
    }

    /// Deletes one version of `key` for good (a plain delete on a versioned bucket only adds a
    /// delete marker). `now` decides whether a retention still protects the version.
    ///
    /// # Errors
    /// [`DeleteVersionError::Locked`] when a 403 comes from an unexpired retention or a legal
    /// hold; [`DeleteVersionError::Request`] for everything else.
    pub async fn delete_version(
        &self,
        key: &Path,
        version_id: &str,
        now: SystemTime,
    ) -> Result<(), DeleteVersionError> {
        let answer = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key.as_ref())
            .version_id(version_id)
            .send()
            .await;
        let error = match answer {
            Ok(_) => return Ok(()),
            Err(e) => self.request_error("DeleteObject", key, e),
        };
        if error.status() != Some(403) {
            return Err(error.into());
        }
        // The delete's own error stays the answer unless a lock explains it; when the lock
        // can't be read either (same missing permission), that is no evidence of a lock.
        match self.protection(key, version_id, now).await {
            Ok(Some(protection)) => Err(DeleteVersionError::Locked {
                bucket: self.bucket.clone(),
                key: key.to_string(),
                version_id: version_id.to_owned(),
                protection,
            }),
            Ok(None) => Err(error.into()),
            Err(lookup) => {
                tracing::debug!(error = %lookup, "reading the Object Lock of a refused delete failed");
                Err(error.into())
            }
        }
    }

    /// Whether the bucket has Object Lock enabled (only such a bucket takes retentions and
    /// legal holds).
    ///
    /// # Errors
    /// [`ObjectLockError`], e.g. a 403 without `s3:GetBucketObjectLockConfiguration`.
    pub async fn is_lock_enabled(&self) -> Result<bool, ObjectLockError> {
        let answer = self
            .client
            .get_object_lock_configuration()
            .bucket(&self.bucket)
            .send()
            .await;
        match answer {
            Ok(output) => Ok(output
                .object_lock_configuration()
                .and_then(|config| config.object_lock_enabled())
                .is_some_and(|enabled| *enabled == aws_sdk_s3::types::ObjectLockEnabled::Enabled)),
            Err(e) if e.code() == Some("ObjectLockConfigurationNotFoundError") => Ok(false),
            Err(e) => Err(self.request_error("GetObjectLockConfiguration", &Path::from(""), e)),
        }
    }

    /// Whether the bucket keeps versions (Object Lock buckets always do). On such a bucket a
    /// plain delete leaves the data behind a delete marker, so deletes must go by version.
    ///
    /// # Errors
    /// [`ObjectLockError`], e.g. a 403 without `s3:GetBucketVersioning`.
    pub async fn is_versioned(&self) -> Result<bool, ObjectLockError> {
        let output = self
            .client
            .get_bucket_versioning()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| self.request_error("GetBucketVersioning", &Path::default(), e))?;
        Ok(matches!(
            output.status(),
            Some(BucketVersioningStatus::Enabled | BucketVersioningStatus::Suspended)
        ))
    }

    /// Every version id of exactly `key`, delete markers included.
    ///
    /// # Errors
    /// [`ObjectLockError`].
    pub async fn versions(&self, key: &Path) -> Result<Vec<String>, ObjectLockError> {
        Ok(self
            .versions_under(key)
            .await?
            .into_iter()
            .filter(|found| found.key == key.as_ref())
            .map(|found| found.version_id)
            .collect())
    }

    /// Every version (delete markers included) of every key that starts with `prefix`: what a
    /// versioned bucket still stores, and bills, whatever a plain listing shows.
    ///
    /// # Errors
    /// [`ObjectLockError`].
    pub async fn versions_under(
        &self,
        prefix: &Path,
    ) -> Result<Vec<ObjectVersion>, ObjectLockError> {
        let mut found = Vec::new();
        let mut key_marker = None;
        let mut version_marker = None;
        loop {
            let output = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix.as_ref())
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| self.request_error("ListObjectVersions", prefix, e))?;
            let versions = output
                .versions()
                .iter()
                .map(|v| (v.key(), v.version_id(), false));
            let markers = output
                .delete_markers()
                .iter()
                .map(|m| (m.key(), m.version_id(), true));
            found.extend(
                versions
                    .chain(markers)
                    .filter_map(|(key, version, delete_marker)| {
                        Some(ObjectVersion {
                            key: key?.to_owned(),
                            version_id: version?.to_owned(),
                            delete_marker,
                        })
                    }),
            );
            if output.is_truncated() != Some(true) {
                return Ok(found);
            }
            key_marker = output.next_key_marker().map(str::to_owned);
            version_marker = output.next_version_id_marker().map(str::to_owned);
            if key_marker.is_none() && version_marker.is_none() {
                return Ok(found);
            }
        }
    }

    /// Deletes every version of `key` (data and delete markers), so nothing of it is left or
    /// billed. Tries them all; a missing key is success.
    ///
    /// # Errors
    /// The first failure, [`DeleteVersionError::Locked`] for a version a lock still protects.
    pub async fn delete_all_versions(
        &self,
        key: &Path,
        now: SystemTime,
    ) -> Result<(), DeleteVersionError> {
        let mut first_error = None;
        for version in self.versions(key).await? {
            if let Err(error) = self.delete_version(key, &version, now).await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn protection(
        &self,
        key: &Path,
        version_id: &str,
        now: SystemTime,
    ) -> Result<Option<Protection>, ObjectLockError> {
        if let Some(retention) = self.retention(key, Some(version_id)).await?
            && retention.retain_until > now
        {
            return Ok(Some(Protection::Retention(retention)));
        }
        if self.legal_hold(key, Some(version_id)).await? {
            return Ok(Some(Protection::LegalHold));
        }
        Ok(None)
    }

    fn request_error<E>(
        &self,
        operation: &'static str,
        key: &Path,
        error: SdkError<E, HttpResponse>,
    ) -> ObjectLockError
    where
        E: ProvideErrorMetadata,
        aws_sdk_s3::Error: From<SdkError<E, HttpResponse>>,
    {
        let status = error
            .raw_response()
            .map(|response| response.status().as_u16());
        let code = error.code().map(str::to_owned);
        ObjectLockError::Request {
            operation,
            bucket: self.bucket.clone(),
            key: key.to_string(),
            status,
            code,
            source: Box::new(aws_sdk_s3::Error::from(error)),
        }
    }
}

/// Seconds since the epoch, rounded down (S3 stores retain-until dates to the second). Times
/// before 1970 become 0: no retention that early is meaningful.
fn whole_seconds(time: SystemTime) -> i64 {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    i64::try_from(seconds).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_drops_fractions_and_clamps_before_epoch() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_999);
        assert_eq!(whole_seconds(time), 1_700_000_000);
        assert_eq!(
            whole_seconds(SystemTime::UNIX_EPOCH - Duration::from_secs(5)),
            0
        );
    }

    #[test]
    fn only_locked_delete_errors_say_locked() {
        let locked = DeleteVersionError::Locked {
            bucket: "b".to_owned(),
            key: "k".to_owned(),
            version_id: "v".to_owned(),
            protection: Protection::LegalHold,
        };
        assert!(locked.is_locked());
        let other = DeleteVersionError::Request(ObjectLockError::UnreadableRetention {
            bucket: "b".to_owned(),
            key: "k".to_owned(),
            detail: "x".to_owned(),
        });
        assert!(!other.is_locked());
    }
}
