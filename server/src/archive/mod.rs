//! The bucket as an auditor sees it, without a running server: `strata verify` ([`verify`])
//! with `--reads` for the read audit ([`reads`]), and `strata archive read` ([`read`]). Only read access to the store is needed, and a copy of
//! the bucket in a folder works the same.

pub mod cli;
pub mod read;
pub mod reads;
pub mod report;
pub mod segment_check;
pub mod verify;
