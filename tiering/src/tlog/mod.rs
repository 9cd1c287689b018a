//! A transparency log per partition in the bucket, in the C2SP `tlog-tiles` layout, so an
//! auditor can verify the archive's history without Strata: [`merkle`] (RFC 6962 hashing),
//! [`tiles`] (tile and entry bundle names and contents), [`note`] (signed checkpoints, Ed25519
//! keys), [`leaf`] (what a leaf says) and [`log`] (loading, appending, publishing).

pub mod leaf;
pub mod log;
pub mod merkle;
pub mod note;
pub mod tiles;
