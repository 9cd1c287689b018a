//! Restore from the bucket: a server that starts with an empty data directory (or one missing
//! some topics) against a bucket holding Strata data recreates every topic from its
//! `topic.json` and each partition's newest manifest. Records stay in the bucket and are served
//! by cold reads; each partition's local log starts empty at the manifest's end, so new appends
//! continue after the last remote offset.

use std::collections::BTreeMap;

use object_store::ObjectStoreExt;
use strata_tiering::layout;
use strata_tiering::manifest;

use super::sync::{REMOTE_TOPIC_FORMAT, RemoteTopic};
use super::{Tiering, TieringError};
use crate::audit::AUDIT_TOPIC;
use crate::names::TopicName;
use crate::topics::catalog::Catalog;
use crate::topics::holds::Holds;

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Topics recreated from the bucket.
    pub topics: Vec<String>,
}

impl Tiering {
    /// Recreates every topic the bucket has and the catalog lacks.
    ///
    /// # Errors
    /// Store errors and unreadable metadata; a topic that fails stops the restore, so the server
    /// does not start with part of its data silently missing.
    pub async fn restore(&self, catalog: &Catalog) -> Result<RestoreReport, RestoreError> {
        let mut report = RestoreReport::default();
        let listing = self
            .objects
            .list_with_delimiter(Some(&layout::topics_root()))
            .await
            .map_err(TieringError::from)?;
        for prefix in listing.common_prefixes {
            let Some(name) = prefix.filename().map(str::to_string) else {
                continue;
            };
            // A topic whose deletion is still removing its objects is no topic to restore.
            if catalog.get(&name).is_some() || self.deletion_pending(&name) {
                continue;
            }
            let key = layout::topic_file(&name);
            let body = match self.objects.get(&key).await {
                Ok(found) => found.bytes().await.map_err(TieringError::from)?,
                // Objects of a deleted topic whose cleanup has not finished: not a topic.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(TieringError::from(error).into()),
            };
            let remote: RemoteTopic =
                serde_json::from_slice(&body).map_err(|e| RestoreError::Invalid {
                    key: key.to_string(),
                    reason: e.to_string(),
                })?;
            if remote.format != REMOTE_TOPIC_FORMAT {
                return Err(RestoreError::Invalid {
                    key: key.to_string(),
                    reason: format!("unsupported format {}", remote.format),
                });
            }
            let mut starts = Vec::with_capacity(remote.partitions as usize);
            for partition in 0..remote.partitions {
                let start = manifest::load_latest(self.objects.as_ref(), &name, partition)
                    .await
                    .map_err(TieringError::from)?
                    .map_or(0, |m| m.next_offset());
                starts.push(start);
            }
            let configs: BTreeMap<String, serde_json::Value> = remote.configs;
            let holds = Holds {
                active: remote.legal_holds,
                next_id: remote.next_legal_hold_id.unwrap_or(0),
            };
            // The read audit is the one internal topic the bucket holds.
            let topic = if name == AUDIT_TOPIC {
                TopicName::internal(&name)
            } else {
                TopicName::parse(&name)
            }
            .map_err(|e| RestoreError::Catalog(e.to_string()))?;
            catalog
                .restore(&topic, &configs, &starts, holds)
                .await
                .map_err(|e| RestoreError::Catalog(e.to_string()))?;
            tracing::info!(
                topic = name,
                partitions = remote.partitions,
                ?starts,
                "restored topic from the bucket"
            );
            report.topics.push(name);
        }
        Ok(report)
    }
}

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The store failed.
    #[error(transparent)]
    Tiering(#[from] TieringError),
    /// Metadata in the bucket does not parse.
    #[error("restore: {key} is invalid: {reason}")]
    Invalid {
        /// The object.
        key: String,
        /// Why.
        reason: String,
    },
    /// The topic, or its group commits, could not be created locally.
    #[error("restore: {0}")]
    Catalog(String),
}
