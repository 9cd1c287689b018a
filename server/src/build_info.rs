//! What this binary is: its version and the commit it was built from (stamped by `build.rs`).

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit of the build (`unknown` without git or `STRATA_GIT_COMMIT`).
pub const GIT_COMMIT: &str = env!("STRATA_GIT_COMMIT");

/// What `strata --version` prints after the name: `<version> (<commit>)`.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("STRATA_GIT_COMMIT"),
    ")"
);
