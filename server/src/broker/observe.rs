//! Observing the whole cluster, for monitoring (`/metrics`): every topic and every group, lag
//! included. One operation with one right: `describe` on the cluster, the monitoring right, so
//! a scraper's key needs one ACL instead of one per topic and group.

use std::sync::Arc;

use super::Broker;
use super::error::{GroupOpError, LookupError};
use super::groups::PartitionLagView;
use crate::groups::coordinator::GroupDescription;
use crate::security::{Caller, Operation, Resource};
use crate::topics::catalog::Topic;

/// A consumer group as a monitor sees it.
#[derive(Debug)]
pub struct GroupView {
    /// Group id.
    pub group: String,
    /// Membership; `None` for a group with only committed offsets.
    pub description: Option<GroupDescription>,
    /// Lag of every partition the group committed to or subscribes to.
    pub lag: Vec<PartitionLagView>,
}

impl Broker {
    /// Checks the monitoring right: `describe` on the cluster.
    ///
    /// # Errors
    /// Not allowed.
    pub fn may_observe(&self, caller: &Caller) -> Result<(), LookupError> {
        self.authorize(caller, Operation::Describe, Resource::cluster())
    }

    /// Every topic, internal ones included. Needs `describe` on the cluster.
    ///
    /// # Errors
    /// Not allowed.
    pub fn observe_topics(&self, caller: &Caller) -> Result<Vec<Arc<Topic>>, LookupError> {
        self.may_observe(caller)?;
        Ok(self.catalog.list())
    }

    /// Every group with its membership and lag. Needs `describe` on the cluster. A group whose
    /// lag cannot be read (a tiered partition whose bucket fails) is shown without lag and
    /// logged, so one failing bucket does not hide every other group.
    ///
    /// # Errors
    /// Not allowed.
    pub async fn observe_groups(&self, caller: &Caller) -> Result<Vec<GroupView>, LookupError> {
        self.may_observe(caller)?;
        let mut views = Vec::new();
        for group in self.group_names() {
            let lag = match self.lag_of(&group, |_| true).await {
                Ok(lag) => lag,
                Err(error) => {
                    log_lag_failure(&group, &error);
                    Vec::new()
                }
            };
            views.push(GroupView {
                description: self.coordinator.describe(&group),
                group,
                lag,
            });
        }
        Ok(views)
    }

    /// Members evicted since start: (session timeouts, poll-interval timeouts).
    pub fn evictions(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = self.coordinator.eviction_counts();
        (
            counts.session_timeout.load(Relaxed),
            counts.max_poll_interval.load(Relaxed),
        )
    }
}

fn log_lag_failure(group: &str, error: &GroupOpError) {
    tracing::warn!(group, %error, "cannot compute the group's lag for metrics");
}
