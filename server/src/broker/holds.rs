//! Legal holds on a topic: place, list, release. What a hold keeps is enforced where records
//! leave: retention (`cleaner`, the tiering sweep), delete-records and topic deletion.

use super::error::{LookupError, TopicError};
use super::{Broker, local_partition};
use crate::security::{Caller, Operation};
use crate::topics::holds::{HoldRange, LegalHold};

impl Broker {
    /// The legal holds in force on `topic`, oldest first. Needs `describe` on the topic.
    ///
    /// # Errors
    /// Not allowed, or no such topic.
    pub fn legal_holds(&self, caller: &Caller, topic: &str) -> Result<Vec<LegalHold>, LookupError> {
        Ok(self
            .topic_for(caller, Operation::Describe, topic)?
            .legal_holds())
    }

    /// Places a legal hold, durably, before answering. Needs `alter` on the topic (a hold
    /// overrides the topic's retention as a settings change would).
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic or partition, an invalid hold, storage failures.
    pub async fn place_legal_hold(
        &self,
        caller: &Caller,
        topic: &str,
        range: HoldRange,
        reason: &str,
    ) -> Result<LegalHold, TopicError> {
        let found = self.topic_for(caller, Operation::Alter, topic)?;
        if let HoldRange::Offsets {
            partition,
            start_offset,
            ..
        } = range
        {
            let high_watermark = local_partition(&found, partition)?.offsets().high_watermark;
            // Records already deleted cannot be kept: a hold that claimed them would tell an
            // investigation they are preserved.
            let log_start = self.log_start(&found, partition).await;
            if start_offset < log_start {
                return Err(TopicError::HoldOnDeleted {
                    partition,
                    start_offset,
                    log_start,
                    high_watermark,
                });
            }
        }
        let by = Some(caller.principal().to_string());
        Ok(self.catalog.place_hold(topic, range, reason, by).await?)
    }

    /// Releases a legal hold; the next retention pass may remove what it kept. Needs `alter` on
    /// the topic.
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic, no such hold, storage failures.
    pub async fn release_legal_hold(
        &self,
        caller: &Caller,
        topic: &str,
        id: &str,
    ) -> Result<LegalHold, TopicError> {
        self.topic_for(caller, Operation::Alter, topic)?;
        Ok(self.catalog.release_hold(topic, id).await?)
    }
}
