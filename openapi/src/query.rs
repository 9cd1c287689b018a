//! Checks on query parameters that their Rust type alone does not carry.

use serde::{Deserialize, Deserializer};

/// An optional count that must be at least 1: `max_records=0` names an upper bound no answer
/// can meet (a fetch always returns a record when one is available), so it is refused with
/// `bad_query` instead of being read as 1.
///
/// # Errors
/// When the value is 0 or not a `u32`.
pub fn at_least_one<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let value = Option::<u32>::deserialize(deserializer)?;
    if value == Some(0) {
        return Err(serde::de::Error::custom("must be at least 1"));
    }
    Ok(value)
}
