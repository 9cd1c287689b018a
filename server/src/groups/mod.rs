//! Consumer groups: committed offsets (`offsets`), membership with generations and fencing
//! (`coordinator`), and partition assignment strategies (`assignment`). No HTTP in here.

pub mod assignment;
pub mod coordinator;
pub mod offsets;
