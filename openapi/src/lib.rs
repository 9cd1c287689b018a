//! Strata wire contract. Filled by the HTTP API issue.
