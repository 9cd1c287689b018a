//! Background cleaning of topics: time and size retention (`cleanup_policy` containing
//! `delete`). Compaction follows in its own module.

pub mod retention;
