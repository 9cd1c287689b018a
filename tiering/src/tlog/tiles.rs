//! Object names and contents of C2SP `tlog-tiles` (https://c2sp.org/tlog-tiles) under a
//! partition's `tlog/` prefix: tiles of 256 hashes per level of 8 tree heights, entry bundles of
//! 256 leaves, each with a `.p/<width>` suffix while partial.

use object_store::path::Path;

use super::merkle::{Hash, Tree};

/// Hashes (or entries) in a full tile: tile height 8.
pub const TILE_WIDTH: u64 = 256;
/// Tree heights per tile level.
pub const TILE_HEIGHT: usize = 8;

/// The tile index `n` as path elements: groups of three digits, all but the last `x`-prefixed
/// (1234067 -> `x001/x234/067`).
pub fn index_path(mut n: u64) -> String {
    let mut path = format!("{:03}", n % 1000);
    while n >= 1000 {
        n /= 1000;
        path = format!("x{:03}/{path}", n % 1000);
    }
    path
}

fn with_width(base: String, width: u64) -> String {
    if width == TILE_WIDTH {
        base
    } else {
        format!("{base}.p/{width}")
    }
}

/// `tile/<level>/<n>[.p/<width>]`, relative to the log's prefix.
pub fn tile_path(level: usize, index: u64, width: u64) -> String {
    with_width(format!("tile/{level}/{}", index_path(index)), width)
}

/// `tile/entries/<n>[.p/<width>]`, relative to the log's prefix.
pub fn bundle_path(index: u64, width: u64) -> String {
    with_width(format!("tile/entries/{}", index_path(index)), width)
}

/// `relative` (`tile/0/000.p/5`, `checkpoint`) under a log's prefix.
pub fn under(prefix: &Path, relative: &str) -> Path {
    relative
        .split('/')
        .fold(prefix.clone(), |path, part| path.join(part))
}

/// A tile or entry bundle named by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileName {
    /// `None` for an entry bundle, else the tile level.
    pub level: Option<usize>,
    /// Tile index.
    pub index: u64,
    /// Hashes or entries it holds (256 when full).
    pub width: u64,
}

/// Parses `tile/<level>/<n>[.p/<width>]` or `tile/entries/<n>[.p/<width>]`; `None` for any
/// other name, including non-canonical spellings of a valid one.
pub fn parse_tile_path(path: &str) -> Option<TileName> {
    let rest = path.strip_prefix("tile/")?;
    let (kind, rest) = rest.split_once('/')?;
    let (index_part, width) = match rest.split_once(".p/") {
        Some((index, width)) => (
            index,
            width
                .parse::<u64>()
                .ok()
                .filter(|w| (1..TILE_WIDTH).contains(w))?,
        ),
        None => (rest, TILE_WIDTH),
    };
    let mut index = 0u64;
    let groups: Vec<&str> = index_part.split('/').collect();
    for (i, group) in groups.iter().enumerate() {
        let digits = if i + 1 < groups.len() {
            group.strip_prefix('x')?
        } else {
            group
        };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        index = index
            .checked_mul(1000)?
            .checked_add(digits.parse::<u64>().ok()?)?;
    }
    let level = match kind {
        "entries" => None,
        level => Some(level.parse::<usize>().ok().filter(|l| *l < 64)?),
    };
    let name = TileName {
        level,
        index,
        width,
    };
    let canonical = match level {
        None => bundle_path(index, width),
        Some(level) => tile_path(level, index, width),
    };
    (canonical == path).then_some(name)
}

/// Hashes at tile level `level` for a tree of `size` leaves: `floor(size / 256^level)`.
pub fn hashes_at_level(size: u64, level: usize) -> u64 {
    let shift = u32::try_from(level * TILE_HEIGHT).unwrap_or(u32::MAX);
    size.checked_shr(shift).unwrap_or(0)
}

/// Every tile (level, index, width) of a tree of `size` leaves whose content includes a hash
/// that a tree of `old_size` did not have: what an append must write.
pub fn tiles_changed(old_size: u64, size: u64) -> Vec<(usize, u64, u64)> {
    let mut tiles = Vec::new();
    for level in 0.. {
        let count = hashes_at_level(size, level);
        if count == 0 {
            break;
        }
        let old = hashes_at_level(old_size, level);
        if old == count {
            continue;
        }
        for index in old / TILE_WIDTH..count.div_ceil(TILE_WIDTH) {
            let width = (count - index * TILE_WIDTH).min(TILE_WIDTH);
            tiles.push((level, index, width));
        }
    }
    tiles
}

/// The bytes of tile (level, index, width) of `tree`: the hashes at tree height `8 * level`.
pub fn tile_bytes(tree: &Tree, level: usize, index: u64, width: u64) -> Option<Vec<u8>> {
    let hashes = tree.level(level * TILE_HEIGHT);
    let start = usize::try_from(index * TILE_WIDTH).ok()?;
    let end = start + usize::try_from(width).ok()?;
    Some(hashes.get(start..end)?.concat())
}

/// An entry bundle: each entry as a big-endian `u16` length and its bytes.
pub fn encode_bundle<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        let length = u16::try_from(entry.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&entry[..usize::from(length)]);
    }
    out
}

/// The entries of a bundle, or `None` when a length runs past the end.
pub fn decode_bundle(mut bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut entries = Vec::new();
    while !bytes.is_empty() {
        let (length, rest) = bytes.split_first_chunk::<2>()?;
        let length = usize::from(u16::from_be_bytes(*length));
        entries.push(rest.get(..length)?.to_vec());
        bytes = &rest[length..];
    }
    Some(entries)
}

/// Splits tile bytes into hashes, or `None` when the length is not a multiple of 32.
pub fn tile_hashes(bytes: &[u8]) -> Option<Vec<Hash>> {
    if !bytes.len().is_multiple_of(32) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(32)
            .map(|chunk| {
                let mut hash = [0u8; 32];
                hash.copy_from_slice(chunk);
                hash
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlog::merkle::leaf_hash;
    use proptest::prelude::*;

    #[test]
    fn index_paths_follow_the_spec() {
        assert_eq!(index_path(0), "000");
        assert_eq!(index_path(999), "999");
        assert_eq!(index_path(1000), "x001/000");
        assert_eq!(index_path(1_234_067), "x001/x234/067");
        assert_eq!(tile_path(0, 1_234_067, 112), "tile/0/x001/x234/067.p/112");
        assert_eq!(bundle_path(0, 5), "tile/entries/000.p/5");
        assert_eq!(tile_path(1, 0, 256), "tile/1/000");
    }

    #[test]
    fn tile_paths_parse_back() {
        for (level, index, width) in [(0, 0, 256), (0, 1_234_067, 112), (3, 1000, 1)] {
            let name = parse_tile_path(&tile_path(level, index, width)).unwrap();
            assert_eq!(
                (name.level, name.index, name.width),
                (Some(level), index, width)
            );
        }
        let bundle = parse_tile_path(&bundle_path(5, 7)).unwrap();
        assert_eq!((bundle.level, bundle.index, bundle.width), (None, 5, 7));
        for bad in [
            "tile/0/0",
            "tile/0/x000",
            "tile/0/000.p/256",
            "tile/0/000.p/0",
            "tile/a/000",
            "tile/0/1000",
            "checkpoint",
        ] {
            assert_eq!(parse_tile_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn partial_widths_of_the_spec_example() {
        // 70,000 leaves: 273 full level-0 tiles + width 112; 1 full level-1 tile + width 17;
        // level 2 width 1.
        let tiles = tiles_changed(0, 70_000);
        assert_eq!(tiles.iter().filter(|t| t.0 == 0).count(), 274);
        assert!(tiles.contains(&(0, 273, 112)));
        assert!(tiles.contains(&(1, 1, 17)));
        assert!(tiles.contains(&(2, 0, 1)));
        assert_eq!(tiles_changed(70_000, 70_000), vec![]);
        assert_eq!(tiles_changed(256, 257), vec![(0, 1, 1)]);
    }

    proptest! {
        #[test]
        fn bundles_round_trip(entries in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..40)) {
            let encoded = encode_bundle(entries.iter().map(Vec::as_slice));
            prop_assert_eq!(decode_bundle(&encoded), Some(entries));
        }

        /// Level-1 tile hashes are the roots of the full level-0 tiles below them.
        #[test]
        fn upper_tiles_hash_full_lower_tiles(n in 256u64..1200) {
            let tree = Tree::from_leaf_hashes((0..n).map(|i| leaf_hash(&i.to_be_bytes())));
            let full = n / 256;
            let level1 = tile_bytes(&tree, 1, 0, full).unwrap();
            for t in 0..full {
                let leaves = tile_hashes(&tile_bytes(&tree, 0, t, 256).unwrap()).unwrap();
                let root = Tree::from_leaf_hashes(leaves).root();
                prop_assert_eq!(&level1[(t as usize) * 32..(t as usize + 1) * 32], &root[..]);
            }
        }
    }
}
