//! `strata verify --reads`: the read audit (`__audit_reads`) as the bucket holds it. The audit
//! topic is verified like every other partition (its own transparency log); this lists its
//! entries, so an auditor sees who read what without a running server.

use object_store::ObjectStore;
use serde::Serialize;

use super::read::{ReadRange, visit_manifest};
use crate::audit::AUDIT_TOPIC;
use crate::audit::entry::{ReadAuditEntry, ReadOutcome};

/// One entry and where it sits in the audit topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedRead {
    /// The entry's offset in `__audit_reads`.
    pub audit_offset: u64,
    /// The entry.
    #[serde(flatten)]
    pub entry: ReadAuditEntry,
}

/// Every entry the bucket holds, in offset order; empty when no topic ever audited reads.
///
/// # Errors
/// Unreadable objects, batches that fail their CRC, or an entry that is not an audit entry.
pub async fn list(store: &dyn ObjectStore) -> anyhow::Result<Vec<ListedRead>> {
    let range = ReadRange {
        topic: AUDIT_TOPIC.to_string(),
        partition: 0,
        from_offset: 0,
        to_offset: u64::MAX,
        from_time: i64::MIN,
        to_time: i64::MAX,
    };
    let Some(manifest) = strata_tiering::manifest::load_latest(store, AUDIT_TOPIC, 0).await? else {
        return Ok(Vec::new());
    };
    let mut reads = Vec::new();
    visit_manifest(store, &manifest, &range, &mut |audit_offset, record| {
        let value = record.value.as_deref().unwrap_or_default();
        let entry: ReadAuditEntry = serde_json::from_slice(value).map_err(|error| {
            anyhow::anyhow!("{AUDIT_TOPIC} offset {audit_offset} is not an audit entry: {error}")
        })?;
        reads.push(ListedRead {
            audit_offset,
            entry,
        });
        Ok(())
    })
    .await?;
    Ok(reads)
}

/// One line per entry, for people.
pub fn summary(reads: &[ListedRead]) -> String {
    if reads.is_empty() {
        return "reads: the bucket holds no read audit entries\n".to_string();
    }
    let mut text = format!("reads: {} audit entries\n", reads.len());
    for read in reads {
        let entry = &read.entry;
        let what = match (entry.outcome, entry.first_offset, entry.last_offset) {
            (ReadOutcome::Denied, ..) => "DENIED".to_string(),
            (ReadOutcome::Served, Some(first), Some(last)) => {
                format!("offsets {first}..={last} ({} records)", entry.records)
            }
            (ReadOutcome::Served, ..) => format!("{} records", entry.records),
        };
        let group = entry
            .group
            .as_deref()
            .map(|g| format!(" group {g}"))
            .unwrap_or_default();
        let format = serde_json::to_string(&entry.format).unwrap_or_default();
        text.push_str(&format!(
            "  #{} at {} ms: {} from {} read {}/{} {} as {}{group}, request {}\n",
            read.audit_offset,
            entry.time_ms,
            entry.principal,
            entry.client_address.as_deref().unwrap_or("?"),
            entry.topic,
            entry.partition,
            what,
            format.trim_matches('"'),
            entry.request_id,
        ));
    }
    text
}
