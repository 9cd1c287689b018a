//! Read audit: who read which records of a topic with `audit_reads = true`, kept in the
//! internal topic `__audit_reads`.
//!
//! The audit topic is an ordinary tiered log, so its records reach the bucket and its own
//! transparency log like any other's, and `strata verify --reads` lists them from the bucket
//! alone. See ADR 0013 for why an entry is durable before the records it describes leave.

pub mod entry;
pub mod log;

/// The internal topic holding the entries.
pub const AUDIT_TOPIC: &str = "__audit_reads";
