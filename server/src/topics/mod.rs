//! Topic-level building blocks: where a record goes (`partitioner`) and the per-topic settings
//! that govern retention, compaction and limits (`config`).

pub mod catalog;
pub mod config;
pub mod holds;
pub mod partitioner;
