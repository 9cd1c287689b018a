//! The audit topic `__audit_reads`: one partition, never deleted by retention, tiered so every
//! entry reaches the bucket and its transparency log.
//!
//! It is created when the first entry is written, not at start: a server whose topics never
//! audit reads keeps a bucket without it. Entries are appended with `acks=all`, so the answer
//! to a read waits for its entry's fdatasync (group-committed with concurrent reads).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::OnceCell;

use super::AUDIT_TOPIC;
use super::entry::ReadAuditEntry;
use crate::log::batch::BatchOptions;
use crate::log::{Acks, AppendError, NewRecord, Partition, RecordBatch};
use crate::names::TopicName;
use crate::topics::catalog::{Catalog, CatalogError};

/// How long the audit topic keeps its local copy: the bucket keeps every entry.
const LOCAL_RETENTION_MS: i64 = 86_400_000;

/// Why an entry could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The audit topic could not be created or opened.
    #[error("the read audit topic cannot be opened: {0}")]
    Topic(#[from] CatalogError),
    /// The append failed (disk full, I/O error, shutting down).
    #[error("the read audit entry could not be written: {0}")]
    Append(#[from] AppendError),
    /// The entries could not be encoded.
    #[error("the read audit entry could not be encoded: {0}")]
    Encode(String),
}

/// Writes audit entries.
#[derive(Debug)]
pub struct AuditLog {
    catalog: Arc<Catalog>,
    upload_idle_ms: u64,
    partition: OnceCell<Arc<Partition>>,
}

impl AuditLog {
    /// Opens the audit log; when the topic exists, its settings are brought in line with
    /// `upload_idle_ms` (how soon a quiet audit topic's entries reach the bucket).
    ///
    /// # Errors
    /// The existing topic cannot be reconfigured.
    pub async fn open(catalog: Arc<Catalog>, upload_idle_ms: u64) -> Result<Self, AuditError> {
        let log = Self {
            catalog,
            upload_idle_ms,
            partition: OnceCell::new(),
        };
        if log.catalog.get(AUDIT_TOPIC).is_some() {
            let topic = log
                .catalog
                .update_internal_configs(AUDIT_TOPIC, &log.configs())
                .await?;
            if let Some(partition) = topic.partition(0) {
                let _ = log.partition.set(partition);
            }
        }
        Ok(log)
    }

    /// The settings the audit topic always has.
    fn configs(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("retention_ms".to_string(), Value::from(-1)),
            (
                "local_retention_ms".to_string(),
                Value::from(LOCAL_RETENTION_MS),
            ),
            ("remote_storage_enable".to_string(), Value::from(true)),
            (
                "remote_upload_idle_ms".to_string(),
                Value::from(self.upload_idle_ms.max(1)),
            ),
        ])
    }

    async fn partition(&self) -> Result<&Arc<Partition>, AuditError> {
        self.partition
            .get_or_try_init(|| async {
                let topic = match self.catalog.get(AUDIT_TOPIC) {
                    Some(topic) => topic,
                    None => {
                        let name = TopicName::internal(AUDIT_TOPIC).map_err(CatalogError::from)?;
                        match self.catalog.create(&name, 1, &self.configs()).await {
                            Ok(topic) => topic,
                            // Created by a concurrent first entry.
                            Err(CatalogError::AlreadyExists(_)) => self
                                .catalog
                                .get(AUDIT_TOPIC)
                                .ok_or_else(|| CatalogError::NotFound(AUDIT_TOPIC.into()))?,
                            Err(error) => return Err(error.into()),
                        }
                    }
                };
                topic
                    .partition(0)
                    .ok_or_else(|| CatalogError::NotFound(AUDIT_TOPIC.into()).into())
            })
            .await
    }

    /// Appends `entries` as one batch and returns once it is durable.
    ///
    /// # Errors
    /// See [`AuditError`]; nothing was recorded.
    pub async fn record(&self, entries: &[ReadAuditEntry]) -> Result<(), AuditError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut records = Vec::with_capacity(entries.len());
        for entry in entries {
            let value =
                serde_json::to_vec(entry).map_err(|error| AuditError::Encode(error.to_string()))?;
            records.push(NewRecord {
                timestamp: entry.time_ms,
                key: Some(bytes::Bytes::copy_from_slice(entry.topic.as_bytes())),
                value: Some(value.into()),
                headers: Vec::new(),
            });
        }
        let batch = RecordBatch::encode(&BatchOptions::default(), &records)
            .map_err(|error| AuditError::Encode(error.to_string()))?;
        self.partition()
            .await?
            .append(vec![batch], Acks::All)
            .await?;
        Ok(())
    }
}
