//! API tokens: 256 random bits from the OS, shown once, stored only as their SHA-256. A
//! stolen key file therefore gives no usable token, and a hash of a 256-bit secret needs no
//! salt or slow hash (nobody can guess the input).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Every token starts with this, so secret scanners and people recognise one.
pub const TOKEN_PREFIX: &str = "strata_";

/// A new token and the hex SHA-256 to store for it.
///
/// # Errors
/// The OS random source failed.
pub fn generate() -> Result<(String, String), getrandom::Error> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)?;
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(secret));
    let hash = hash(&token);
    Ok((token, hash))
}

/// A short random id for a key, to list and revoke it without the secret.
///
/// # Errors
/// The OS random source failed.
pub fn key_id() -> Result<String, getrandom::Error> {
    let mut id = [0u8; 8];
    getrandom::fill(&mut id)?;
    Ok(format!("k_{}", hex::encode(id)))
}

/// The hex SHA-256 of a presented token.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether two stored hashes are equal, in time that does not depend on where they differ.
pub fn hashes_equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_prefixed_and_hash_to_what_is_stored() {
        let (a, hash_a) = generate().unwrap();
        let (b, _) = generate().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43, "256 bits in base64url");
        assert!(hashes_equal(&hash(&a), &hash_a));
        assert!(!hashes_equal(&hash(&b), &hash_a));
        assert!(!hashes_equal("ab", "abc"));
        assert_ne!(key_id().unwrap(), key_id().unwrap());
    }
}
