//! Checkpoints as C2SP signed notes (https://c2sp.org/signed-note, https://c2sp.org/tlog-checkpoint)
//! with Ed25519 keys, and the key texts of Go's `sumdb/note` that tools of this field read:
//! `PRIVATE+KEY+<name>+<id>+<base64(0x01 || seed)>` and `<name>+<id>+<base64(0x01 || public key)>`.
//!
//! A checkpoint's text is `<origin>\n<size>\n<base64 root>\n`; the signature line is
//! `— <key name> <base64(key id || signature)>`, signed over exactly that text. The key id is the
//! first four bytes of SHA-256(name || 0x0A || 0x01 || public key).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::merkle::Hash;

/// Signature type byte of Ed25519 in signed notes.
const ED25519: u8 = 0x01;
/// The em dash that starts a signature line.
const DASH: &str = "\u{2014}";

/// Why a key or a checkpoint is not accepted.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NoteError {
    /// The key text is malformed.
    #[error("bad key: {0}")]
    BadKey(&'static str),
    /// The note is malformed.
    #[error("bad checkpoint: {0}")]
    Malformed(&'static str),
    /// No signature of the expected key verifies.
    #[error("no valid signature by key {0}")]
    Unsigned(String),
}

/// A key name is non-empty, without whitespace or `+`.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([b'\n', ED25519]);
    hasher.update(public);
    let digest = hasher.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A checkpoint signing key.
#[derive(Clone)]
pub struct NoteSigner {
    name: String,
    key: SigningKey,
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoteSigner")
            .field("verifier", &self.verifier().to_string())
            .finish()
    }
}

impl NoteSigner {
    /// A signer from a 32-byte Ed25519 seed.
    ///
    /// # Errors
    /// A name with whitespace or `+`.
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<NoteSigner, NoteError> {
        if !valid_name(name) {
            return Err(NoteError::BadKey(
                "name must be non-empty, without spaces or +",
            ));
        }
        Ok(NoteSigner {
            name: name.to_string(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Parses `PRIVATE+KEY+<name>+<id hex>+<base64(0x01 || seed)>`.
    ///
    /// # Errors
    /// Any part missing or inconsistent (the id must match the key).
    pub fn parse(text: &str) -> Result<NoteSigner, NoteError> {
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(NoteError::BadKey("a signer key starts with PRIVATE+KEY+"))?;
        let (name, id, blob) = split_key(rest)?;
        let seed = ed25519_key(blob, "an Ed25519 seed has 32 bytes")?;
        let signer = NoteSigner::from_seed(name, seed)?;
        if signer.id() != id {
            return Err(NoteError::BadKey("key id does not match the key"));
        }
        Ok(signer)
    }

    /// The signer key text (secret).
    pub fn to_secret_text(&self) -> String {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.id(),
            STANDARD.encode(blob)
        )
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key id.
    pub fn id(&self) -> u32 {
        key_id(&self.name, self.key.verifying_key().as_bytes())
    }

    /// The public half.
    pub fn verifier(&self) -> NoteVerifier {
        NoteVerifier {
            name: self.name.clone(),
            key: self.key.verifying_key(),
        }
    }

    /// The signed checkpoint note of a tree.
    pub fn sign_checkpoint(&self, origin: &str, size: u64, root: &Hash) -> String {
        self.sign_note(&checkpoint_text(origin, size, root))
    }

    /// A signed note of `text` (which ends with a newline and holds no blank line), signed
    /// with this key: the text, a blank line, and `— <name> <base64(key id || signature)>`.
    pub fn sign_note(&self, text: &str) -> String {
        let signature = self.key.sign(text.as_bytes());
        let mut blob = self.id().to_be_bytes().to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        format!("{text}\n{DASH} {} {}\n", self.name, STANDARD.encode(blob))
    }
}

/// The text of a signed note, its signatures not checked (for a reader that does not hold
/// the key, such as a restore into a fresh data directory).
pub fn note_text(note: &str) -> Option<&str> {
    note.rfind("\n\n").map(|split| &note[..=split])
}

/// `<origin>\n<size>\n<base64 root>\n`: the signed text of a checkpoint.
pub fn checkpoint_text(origin: &str, size: u64, root: &Hash) -> String {
    format!("{origin}\n{size}\n{}\n", STANDARD.encode(root))
}

fn split_key(text: &str) -> Result<(&str, u32, &str), NoteError> {
    let (name, rest) = text
        .split_once('+')
        .ok_or(NoteError::BadKey("missing key id"))?;
    let (id, blob) = rest
        .split_once('+')
        .ok_or(NoteError::BadKey("missing key"))?;
    if !valid_name(name) {
        return Err(NoteError::BadKey("bad key name"));
    }
    if id.len() != 8 {
        return Err(NoteError::BadKey("key id is 8 hex digits"));
    }
    let id = u32::from_str_radix(id, 16).map_err(|_| NoteError::BadKey("key id is not hex"))?;
    Ok((name, id, blob))
}

/// The 32 key bytes of `base64(0x01 || key)`; `wrong_length` says which key it should be.
fn ed25519_key(blob: &str, wrong_length: &'static str) -> Result<[u8; 32], NoteError> {
    let bytes = STANDARD
        .decode(blob)
        .map_err(|_| NoteError::BadKey("key is not base64"))?;
    match bytes.split_first() {
        Some((&ED25519, key)) => key.try_into().map_err(|_| NoteError::BadKey(wrong_length)),
        _ => Err(NoteError::BadKey("only Ed25519 keys (type 0x01)")),
    }
}

/// A checkpoint verification key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    name: String,
    key: VerifyingKey,
}

impl std::fmt::Display for NoteVerifier {
    /// `<name>+<id hex>+<base64(0x01 || public key)>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        write!(
            f,
            "{}+{:08x}+{}",
            self.name,
            self.id(),
            STANDARD.encode(blob)
        )
    }
}

impl NoteVerifier {
    /// Parses `<name>+<id hex>+<base64(0x01 || public key)>`.
    ///
    /// # Errors
    /// Any part missing or inconsistent.
    pub fn parse(text: &str) -> Result<NoteVerifier, NoteError> {
        let (name, id, blob) = split_key(text.trim())?;
        let public = ed25519_key(blob, "an Ed25519 public key has 32 bytes")?;
        if key_id(name, &public) != id {
            return Err(NoteError::BadKey("key id does not match the key"));
        }
        let key = VerifyingKey::from_bytes(&public)
            .map_err(|_| NoteError::BadKey("not an Ed25519 public key"))?;
        Ok(NoteVerifier {
            name: name.to_string(),
            key,
        })
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key id.
    pub fn id(&self) -> u32 {
        key_id(&self.name, self.key.as_bytes())
    }

    /// Opens a signed checkpoint: its origin, size and root, when a signature of this key
    /// verifies (signatures of other keys are ignored, as the spec requires).
    ///
    /// # Errors
    /// A malformed note, or no valid signature of this key.
    pub fn open_checkpoint(&self, note: &str) -> Result<Checkpoint, NoteError> {
        parse_checkpoint_text(self.open_note(note)?)
    }

    /// The text of a signed note, when a signature of this key verifies (signatures of other
    /// keys are ignored, as the spec requires).
    ///
    /// # Errors
    /// A malformed note, or no valid signature of this key.
    pub fn open_note<'a>(&self, note: &'a str) -> Result<&'a str, NoteError> {
        let split = note
            .rfind("\n\n")
            .ok_or(NoteError::Malformed("no blank line before the signatures"))?;
        let (text, signatures) = (&note[..=split], &note[split + 2..]);
        let mut signed = false;
        for line in signatures.lines() {
            let Some(rest) = line.strip_prefix(DASH).and_then(|r| r.strip_prefix(' ')) else {
                return Err(NoteError::Malformed(
                    "a signature line starts with an em dash",
                ));
            };
            let Some((name, blob)) = rest.split_once(' ') else {
                return Err(NoteError::Malformed(
                    "a signature line is `— name signature`",
                ));
            };
            let Ok(blob) = STANDARD.decode(blob) else {
                return Err(NoteError::Malformed("a signature is base64"));
            };
            if name != self.name || blob.len() != 68 || blob[..4] != self.id().to_be_bytes() {
                continue;
            }
            let signature = Signature::from_slice(&blob[4..])
                .map_err(|_| NoteError::Malformed("bad signature bytes"))?;
            if self.key.verify(text.as_bytes(), &signature).is_err() {
                return Err(NoteError::Unsigned(self.to_string()));
            }
            signed = true;
        }
        if !signed {
            return Err(NoteError::Unsigned(self.to_string()));
        }
        Ok(text)
    }
}

/// What a checkpoint says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's origin line.
    pub origin: String,
    /// Leaves in the tree.
    pub size: u64,
    /// The tree's root hash.
    pub root: Hash,
}

fn parse_checkpoint_text(text: &str) -> Result<Checkpoint, NoteError> {
    let mut lines = text.lines();
    let origin = lines.next().filter(|l| !l.is_empty());
    let size = lines.next().and_then(|l| {
        (l == "0" || !l.starts_with('0'))
            .then(|| l.parse::<u64>().ok())
            .flatten()
    });
    let root = lines
        .next()
        .and_then(|l| STANDARD.decode(l).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok());
    match (origin, size, root) {
        (Some(origin), Some(size), Some(root)) => Ok(Checkpoint {
            origin: origin.to_string(),
            size,
            root,
        }),
        _ => Err(NoteError::Malformed(
            "origin, size and root hash lines expected",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example key and note of Go's `sumdb/note` documentation.
    const SKEY: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";

    #[test]
    fn go_example_keys_parse_and_match() {
        let signer = NoteSigner::parse(SKEY).unwrap();
        assert_eq!(signer.verifier().to_string(), VKEY);
        assert_eq!(NoteVerifier::parse(VKEY).unwrap(), signer.verifier());
        assert_eq!(signer.to_secret_text(), SKEY);
    }

    #[test]
    fn go_example_signature_is_reproduced() {
        // Ed25519 is deterministic: the same text gives the documented signature.
        let signer = NoteSigner::parse(SKEY).unwrap();
        let text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
        let signature = signer.key.sign(text.as_bytes());
        let mut blob = signer.id().to_be_bytes().to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        assert_eq!(
            STANDARD.encode(blob),
            "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
        );
    }

    #[test]
    fn checkpoints_round_trip_and_reject_tampering() {
        let signer = NoteSigner::from_seed("strata-test", [7; 32]).unwrap();
        let verifier = signer.verifier();
        let note = signer.sign_checkpoint("strata/topics/t/0", 42, &[9; 32]);
        let opened = verifier.open_checkpoint(&note).unwrap();
        assert_eq!(
            (opened.origin.as_str(), opened.size, opened.root),
            ("strata/topics/t/0", 42, [9; 32])
        );
        let tampered = note.replace("\n42\n", "\n43\n");
        assert!(matches!(
            verifier.open_checkpoint(&tampered),
            Err(NoteError::Unsigned(_))
        ));
        let other = NoteSigner::from_seed("strata-test", [8; 32])
            .unwrap()
            .verifier();
        assert!(matches!(
            other.open_checkpoint(&note),
            Err(NoteError::Unsigned(_))
        ));
        assert!(NoteVerifier::parse(&VKEY.replace("c74f20a3", "c74f20a4")).is_err());
    }

    #[test]
    fn any_text_can_be_signed_and_every_change_is_refused() {
        let signer = NoteSigner::from_seed("strata-test", [9; 32]).unwrap();
        let verifier = signer.verifier();
        let text = "{\n  \"format\": 1,\n  \"groups\": {}\n}\n";
        let note = signer.sign_note(text);
        assert_eq!(verifier.open_note(&note).unwrap(), text);
        assert_eq!(note_text(&note), Some(text));
        for at in 0..note.len() {
            let mut bytes = note.clone().into_bytes();
            bytes[at] ^= 1;
            if let Ok(flipped) = String::from_utf8(bytes) {
                assert!(
                    verifier.open_note(&flipped).is_err(),
                    "a flip at byte {at} passed"
                );
            }
        }
        let other = NoteSigner::from_seed("strata-test", [8; 32]).unwrap();
        assert!(other.verifier().open_note(&note).is_err());
    }
}
