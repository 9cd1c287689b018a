//! The Merkle tree of a transparency log (RFC 6962 section 2.1, SHA-256): leaf hashes, node
//! hashes, and every perfect subtree hash kept by height, which is what tiles are made of.
//!
//! `levels[h][i]` is the hash of the perfect subtree of height `h` over leaves
//! `[i * 2^h, (i + 1) * 2^h)`. Appending a leaf adds at most one hash per height, so the whole
//! structure is about twice the leaf hashes, and the root of any prefix of the log (for
//! consistency with an older checkpoint) is a fold over at most 64 of them.

use sha2::{Digest, Sha256};

/// A SHA-256 hash.
pub type Hash = [u8; 32];

/// `SHA-256(0x00 || entry)`.
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(entry);
    hasher.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The root of the empty tree: SHA-256 of nothing (RFC 6962).
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// Every perfect subtree hash of a growing log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    /// The tree over these leaf hashes, in order.
    pub fn from_leaf_hashes(hashes: impl IntoIterator<Item = Hash>) -> Tree {
        let mut tree = Tree::default();
        for hash in hashes {
            tree.push(hash);
        }
        tree
    }

    /// Leaves in the tree.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |leaves| leaves.len() as u64)
    }

    /// Appends one leaf hash.
    pub fn push(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut height = 0;
        loop {
            if self.levels.len() == height {
                self.levels.push(Vec::new());
            }
            let level = &mut self.levels[height];
            level.push(hash);
            // A new right sibling completes a subtree one level up.
            if level.len() % 2 == 1 {
                return;
            }
            let left = level[level.len() - 2];
            hash = node_hash(&left, &hash);
            height += 1;
        }
    }

    /// Hashes at `height` (perfect subtrees of `2^height` leaves), in order.
    pub fn level(&self, height: usize) -> &[Hash] {
        self.levels.get(height).map_or(&[], Vec::as_slice)
    }

    /// The root of the whole tree.
    pub fn root(&self) -> Hash {
        self.root_of(self.size())
    }

    /// The root of the tree of the first `size` leaves (`size <= self.size()`), or `None` when
    /// the tree is smaller.
    pub fn prefix_root(&self, size: u64) -> Option<Hash> {
        (size <= self.size()).then(|| self.root_of(size))
    }

    /// Folds the perfect subtrees of `size` (its set bits, largest first) from the right.
    fn root_of(&self, size: u64) -> Hash {
        if size == 0 {
            return empty_root();
        }
        let mut subtrees = Vec::new();
        let mut start = 0u64;
        for height in (0..64).rev() {
            if size & (1 << height) != 0 {
                let index = usize::try_from(start >> height).unwrap_or(usize::MAX);
                subtrees.push(self.levels[height][index]);
                start += 1 << height;
            }
        }
        let mut root = subtrees.pop().unwrap_or_else(empty_root);
        while let Some(left) = subtrees.pop() {
            root = node_hash(&left, &root);
        }
        root
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 6962's recursive definition, straight from the text: the oracle.
    fn reference_root(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                // The largest power of two strictly below n.
                let mut k = 1;
                while k * 2 < n {
                    k *= 2;
                }
                node_hash(&reference_root(&leaves[..k]), &reference_root(&leaves[k..]))
            }
        }
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(&(i as u64).to_be_bytes()))
            .collect()
    }

    #[test]
    fn c2sp_seven_leaf_example() {
        let l = leaves(7);
        let (h, i, j) = (
            node_hash(&l[0], &l[1]),
            node_hash(&l[2], &l[3]),
            node_hash(&l[4], &l[5]),
        );
        let (k, m) = (node_hash(&h, &i), node_hash(&j, &l[6]));
        let tree = Tree::from_leaf_hashes(l);
        assert_eq!(tree.root(), node_hash(&k, &m));
        assert_eq!(tree.prefix_root(4), Some(k));
        assert_eq!(tree.prefix_root(8), None);
    }

    proptest! {
        #[test]
        fn roots_match_the_rfc_definition(n in 0usize..600, m in 0usize..600) {
            let l = leaves(n);
            let tree = Tree::from_leaf_hashes(l.clone());
            prop_assert_eq!(tree.root(), reference_root(&l));
            let m = m.min(n);
            prop_assert_eq!(tree.prefix_root(m as u64), Some(reference_root(&l[..m])));
        }
    }
}
