//! Delete-records (Kafka's DeleteRecords) over both tiers as one operation: every record of a
//! partition below an offset goes, in the bucket and on the local disk.
//!
//! The bucket is trimmed first. A failure there changes nothing; a failure of the local step
//! after it leaves the bucket trimmed and the local log not yet, so readers still see the
//! records (the readable log start is the lower of the two) until a retry, which is
//! idempotent, trims the local log too. Trimming the local log first would instead hide the
//! records locally while the bucket still served them to readers below the local start.

use super::error::{DeleteRecordsError, OffsetOutOfRange};
use super::reader::PartitionReader;
use super::{Broker, ReaderOpenError};
use crate::log::retention::held_offset;
use crate::security::{Caller, Operation};
use crate::topics::catalog::Topic;

impl From<ReaderOpenError> for DeleteRecordsError {
    fn from(error: ReaderOpenError) -> Self {
        match error {
            ReaderOpenError::Lookup(lookup) => DeleteRecordsError::Lookup(lookup),
            ReaderOpenError::Remote(remote) => DeleteRecordsError::Remote(remote),
        }
    }
}

impl Broker {
    /// Deletes every record of `topic`/`partition` below `before`; returns the new log start
    /// offset. Readers in the middle of a fetch finish it. Needs `delete` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic, an offset above the high watermark, store or
    /// disk failures.
    pub async fn delete_records(
        &self,
        caller: &Caller,
        topic: &str,
        partition: u32,
        before: u64,
    ) -> Result<u64, DeleteRecordsError> {
        let topic = self.writable_topic_for(caller, Operation::Delete, topic)?;
        let reader = self.reader(&topic, partition).await?;
        let offsets = reader.offsets();
        if before > offsets.high_watermark {
            return Err(OffsetOutOfRange {
                requested: before,
                earliest: offsets.log_start_offset,
                latest: offsets.high_watermark,
            }
            .into());
        }
        self.refuse_held(&topic, partition, before, &reader)?;
        let local = reader.partition();
        if reader.remote().is_some() {
            self.tiering
                .delete_records(topic.name(), partition, local, before)
                .await?;
        }
        local.delete_records(before).await?;
        // What is left starts at `before`, in the bucket or on disk: the local start alone is
        // above it once the bucket holds the older segments.
        Ok(before.max(offsets.log_start_offset))
    }

    /// Refuses to move the log start past what a legal hold keeps.
    fn refuse_held(
        &self,
        topic: &Topic,
        partition: u32,
        before: u64,
        reader: &PartitionReader,
    ) -> Result<(), DeleteRecordsError> {
        let holds: Vec<_> = topic
            .legal_holds()
            .into_iter()
            .filter_map(|hold| Some((hold.held_from(partition)?, hold)))
            .collect();
        if holds.is_empty() {
            return Ok(());
        }
        let map = reader.segment_map();
        let floor = holds
            .into_iter()
            .filter_map(|(held, hold)| Some((held_offset(held, &map)?, hold)))
            .min_by_key(|(offset, _)| *offset);
        match floor {
            Some((held_from, hold)) if before > held_from => Err(DeleteRecordsError::Held {
                partition,
                held_from,
                id: hold.id,
                reason: hold.reason,
            }),
            _ => Ok(()),
        }
    }
}
