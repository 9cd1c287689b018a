//! Recording reads of audited topics (`audit_reads = true`, see `crate::audit`). The broker
//! decides what a read disclosed and writes its entry; the HTTP layer sends the records only
//! after that returned, so an audited topic never discloses a record its audit log lacks.

use std::net::SocketAddr;

use super::Broker;
use crate::audit::entry::{ReadAuditEntry, ReadFormat, ReadOutcome};
use crate::audit::log::AuditError;
use crate::log::Record;
use crate::log::batch::batch_headers;
use crate::security::Caller;
use crate::topics::catalog::Topic;

/// Where a read came from, beyond its principal.
#[derive(Debug, Clone, Default)]
pub struct ReadOrigin {
    /// The client's socket address.
    pub client_address: Option<SocketAddr>,
    /// The request's id (`x-request-id`).
    pub request_id: String,
}

/// What one read of one partition sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disclosed {
    /// The partition.
    pub partition: u32,
    /// First offset sent.
    pub first_offset: u64,
    /// Last offset sent, inclusive.
    pub last_offset: u64,
    /// Records sent.
    pub records: u64,
}

impl Disclosed {
    /// The records of a decoded read; `None` when there are none.
    pub fn of_records(partition: u32, records: &[Record]) -> Option<Disclosed> {
        let offset = |r: &Record| u64::try_from(r.offset).unwrap_or(0);
        Some(Disclosed {
            partition,
            first_offset: offset(records.first()?),
            last_offset: offset(records.last()?),
            records: records.len() as u64,
        })
    }

    /// Whole stored batches sent as they are; `None` when there are none. Counts the records
    /// the batch headers declare, so gaps left by compaction are not counted.
    pub fn of_batches(partition: u32, bytes: &[u8], first_offset: u64) -> Option<Disclosed> {
        let mut records = 0u64;
        let mut last_offset = None;
        for (_, header) in batch_headers(bytes).flatten() {
            records += u64::try_from(header.record_count).unwrap_or(0);
            last_offset = u64::try_from(header.last_offset()).ok();
        }
        Some(Disclosed {
            partition,
            first_offset,
            last_offset: last_offset?,
            records,
        })
    }
}

/// The audit entry of a read could not be written: the records must not be sent.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct AuditUnavailable(#[from] pub AuditError);

impl Broker {
    /// Records reads that sent records, when their topic audits reads; returns once the entries
    /// are durable. Reads of topics that do not audit cost one flag check.
    ///
    /// # Errors
    /// The entries could not be written: send nothing.
    pub async fn audit_served(
        &self,
        caller: &Caller,
        origin: &ReadOrigin,
        format: ReadFormat,
        group: Option<&str>,
        reads: &[(&Topic, Disclosed)],
    ) -> Result<(), AuditUnavailable> {
        if !reads.iter().any(|(topic, _)| topic.audits_reads()) {
            return Ok(());
        }
        let now = self.clock.now_ms();
        let entries: Vec<ReadAuditEntry> = reads
            .iter()
            .filter(|(topic, _)| topic.audits_reads())
            .map(|(topic, read)| ReadAuditEntry {
                first_offset: Some(read.first_offset),
                last_offset: Some(read.last_offset),
                records: read.records,
                ..entry(
                    now,
                    ReadOutcome::Served,
                    caller,
                    origin,
                    topic.name(),
                    read.partition,
                    format,
                    group,
                )
            })
            .collect();
        let written = self.audit.record(&entries).await;
        self.stats
            .audited("served", entries.len() as u64, written.is_ok());
        written.map_err(|error| {
            tracing::error!(%error, "a read of an audited topic was refused: its audit entry \
                could not be written");
            AuditUnavailable(error)
        })
    }

    /// Records a refused read of `topic`, when it exists and audits reads. A failure to write
    /// the entry is logged; the caller is refused either way.
    pub async fn audit_denied(
        &self,
        caller: &Caller,
        origin: &ReadOrigin,
        format: ReadFormat,
        group: Option<&str>,
        (topic, partition): (&str, u32),
    ) {
        let Some(topic) = self.catalog.get(topic).filter(|t| t.audits_reads()) else {
            return;
        };
        let denied = entry(
            self.clock.now_ms(),
            ReadOutcome::Denied,
            caller,
            origin,
            topic.name(),
            partition,
            format,
            group,
        );
        let written = self.audit.record(&[denied]).await;
        self.stats.audited("denied", 1, written.is_ok());
        if let Err(error) = written {
            tracing::error!(%error, topic = topic.name(), partition,
                "a denied read could not be recorded in the read audit");
        }
    }
}

/// An entry without records.
#[allow(clippy::too_many_arguments)]
fn entry(
    time_ms: i64,
    outcome: ReadOutcome,
    caller: &Caller,
    origin: &ReadOrigin,
    topic: &str,
    partition: u32,
    format: ReadFormat,
    group: Option<&str>,
) -> ReadAuditEntry {
    ReadAuditEntry {
        time_ms,
        outcome,
        principal: caller.principal().to_string(),
        client_address: origin.client_address.map(|a| a.to_string()),
        topic: topic.to_string(),
        partition,
        first_offset: None,
        last_offset: None,
        records: 0,
        request_id: origin.request_id.clone(),
        format,
        group: group.map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::log::NewRecord;
    use crate::log::batch::{BatchOptions, encode_batch};

    fn batch(base: i64, count: usize) -> Bytes {
        let records: Vec<NewRecord> = (0..count)
            .map(|i| NewRecord {
                timestamp: 1,
                key: None,
                value: Some(Bytes::from(format!("v{i}"))),
                headers: Vec::new(),
            })
            .collect();
        let options = BatchOptions {
            base_offset: base,
            ..BatchOptions::default()
        };
        encode_batch(&options, &records).unwrap()
    }

    #[test]
    fn batches_disclose_every_record_their_headers_declare() {
        let mut bytes = batch(10, 3).to_vec();
        bytes.extend_from_slice(&batch(13, 2));
        let disclosed = Disclosed::of_batches(4, &bytes, 10).unwrap();
        assert_eq!(
            disclosed,
            Disclosed {
                partition: 4,
                first_offset: 10,
                last_offset: 14,
                records: 5
            }
        );
        assert_eq!(Disclosed::of_batches(4, &[], 10), None);
    }

    #[test]
    fn records_disclose_their_first_and_last_offsets() {
        let record = |offset| Record {
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
        };
        let read = [record(7), record(9), record(12)];
        let disclosed = Disclosed::of_records(1, &read).unwrap();
        assert_eq!((disclosed.first_offset, disclosed.last_offset), (7, 12));
        assert_eq!(disclosed.records, 3);
        assert_eq!(Disclosed::of_records(1, &[]), None);
    }
}
