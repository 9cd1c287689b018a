//! One partition's transparency log in the bucket: loading it, appending leaves, and publishing
//! the new entry bundles, tiles and signed checkpoint.
//!
//! Everything but `checkpoint` is created with `PutMode::Create`: bundles and tiles are
//! immutable (a partial one has its width in its name), and `checkpoints/{size}` is the fence
//! for two writers that reached the same size with different trees: only one create succeeds.
//! A create that meets the same bytes (a retry, or Ed25519's deterministic signature of the same
//! tree) is success; other bytes are a fork and stop the log. Only then is `checkpoint`, the
//! spec's name for the newest one, overwritten.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use thiserror::Error;

use super::leaf::Leaf;
use super::merkle::{Tree, leaf_hash};
use super::note::NoteSigner;
use super::tiles::{self, TILE_WIDTH};
use crate::layout;
use crate::store::get_if_exists;

/// Why the log could not be loaded or published.
#[derive(Debug, Error)]
pub enum TlogError {
    /// The store failed.
    #[error("transparency log store: {0}")]
    Store(#[from] object_store::Error),
    /// An object of the log could not be read.
    #[error("transparency log object {key}: {source}")]
    Unreadable {
        /// The object.
        key: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// An entry bundle is missing or does not hold the entries the tree size needs.
    #[error("transparency log object {key}: {reason}")]
    BadBundle {
        /// The bundle.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// What is in the bucket does not add up.
    #[error("transparency log {prefix} is inconsistent: {reason}")]
    Inconsistent {
        /// The log's prefix.
        prefix: String,
        /// What is wrong.
        reason: String,
    },
}

/// The `reason` of the deletion that ends a topic: entries after it belong to a new topic of
/// the same name.
pub const TOPIC_DELETED: &str = "topic_deleted";

/// What the leaves so far say, so an append knows what is new.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogState {
    /// Offset after the newest logged segment; `None` before the first one.
    pub next_offset: Option<u64>,
    /// The log start after the newest deletion (or the first manifest's start).
    pub start_offset: Option<u64>,
    /// Newest logged manifest generation.
    pub manifest_generation: u64,
    /// SHA-256 of the newest logged `topic.json`.
    pub topic_sha256: Option<String>,
}

impl LogState {
    fn apply(&mut self, leaf: &Leaf) {
        match leaf {
            Leaf::Segment { segment, .. } => {
                self.next_offset = Some(segment.last_offset + 1);
                self.start_offset.get_or_insert(segment.base_offset);
            }
            // The topic ended: what follows is a new topic of the same name, whose offsets,
            // manifest generations and `topic.json` start afresh (FORMAT.md, "What is live").
            Leaf::Deletion { reason, .. } if reason == TOPIC_DELETED => *self = LogState::default(),
            Leaf::Deletion { to_offset, .. } => {
                let start = self.start_offset.get_or_insert(*to_offset);
                *start = (*start).max(*to_offset);
            }
            Leaf::Manifest { generation, .. } => self.manifest_generation = *generation,
            Leaf::Topic { sha256, .. } => self.topic_sha256 = Some(sha256.clone()),
        }
    }
}

/// A partition's log, in memory and in the bucket.
#[derive(Debug)]
pub struct PartitionLog {
    prefix: Path,
    origin: String,
    tree: Tree,
    /// Entries from the start of the newest (possibly partial) bundle, plus unpublished ones.
    recent: Vec<Vec<u8>>,
    /// Tree size at the last publish (of `checkpoint`).
    published: u64,
    state: LogState,
}

impl PartitionLog {
    /// The checkpoint origin of a partition's log: `<origin base>/topics/<topic>/<partition>`.
    pub fn origin(base: &str, topic: &str, partition: u32) -> String {
        format!("{base}/topics/{topic}/{partition}")
    }

    /// Loads the log from the bucket (empty when it has none yet), reading every entry bundle:
    /// the tree is rebuilt from them and must match the newest checkpoint's size.
    ///
    /// # Errors
    /// Store failures, and bundles that do not add up to the checkpoint.
    pub async fn load(
        store: &dyn ObjectStore,
        topic: &str,
        partition: u32,
        origin: String,
    ) -> Result<PartitionLog, TlogError> {
        let prefix = layout::tlog_dir(topic, partition);
        let inconsistent = |reason: String| TlogError::Inconsistent {
            prefix: prefix.to_string(),
            reason,
        };
        // A writer that stopped between a signed checkpoint in the history and `checkpoint`
        // left a larger tree, complete and signed: it is the log. The next publish then also
        // writes `checkpoint` (its bundles, tiles and history note exist with the same bytes).
        let (newest, size) = signed_sizes(store, &prefix).await?;
        let mut log = PartitionLog {
            prefix: prefix.clone(),
            origin,
            tree: Tree::default(),
            recent: Vec::new(),
            published: newest,
            state: LogState::default(),
        };
        let first_partial = newest / TILE_WIDTH * TILE_WIDTH;
        for (index, (key, entry)) in read_entries(store, &prefix, size)
            .await?
            .into_iter()
            .enumerate()
        {
            let leaf =
                Leaf::parse(&entry).map_err(|e| inconsistent(format!("bundle {key}: {e}")))?;
            log.state.apply(&leaf);
            log.tree.push(leaf_hash(&entry));
            if index as u64 >= first_partial {
                log.recent.push(entry);
            }
        }
        Ok(log)
    }

    /// What the leaves so far say.
    pub fn state(&self) -> &LogState {
        &self.state
    }

    /// Leaves in the log.
    pub fn size(&self) -> u64 {
        self.tree.size()
    }

    /// Sets where an empty log's history starts (the first manifest's log start), so the first
    /// segment's base offset is not mistaken for a deletion.
    pub fn start_at(&mut self, offset: u64) {
        self.state.start_offset.get_or_insert(offset);
    }

    /// Appends leaves in memory; [`PartitionLog::publish`] writes them.
    pub fn append(&mut self, leaf: &Leaf) {
        let bytes = leaf.to_bytes();
        self.state.apply(leaf);
        self.tree.push(leaf_hash(&bytes));
        self.recent.push(bytes);
    }

    /// Writes new bundles and tiles, then the signed checkpoint. Nothing to do when no leaf
    /// was appended since the last publish.
    ///
    /// # Errors
    /// Store failures, and a fork (other bytes where ours should be).
    pub async fn publish(
        &mut self,
        store: &dyn ObjectStore,
        signer: &NoteSigner,
    ) -> Result<(), TlogError> {
        let size = self.tree.size();
        if size == self.published {
            return Ok(());
        }
        let first_bundle = self.published / TILE_WIDTH;
        for index in first_bundle..size.div_ceil(TILE_WIDTH) {
            let width = (size - index * TILE_WIDTH).min(TILE_WIDTH);
            let start = usize::try_from((index - first_bundle) * TILE_WIDTH).unwrap_or(usize::MAX);
            let end = start + usize::try_from(width).unwrap_or(0);
            let body = tiles::encode_bundle(self.recent[start..end].iter().map(Vec::as_slice));
            let key = tiles::under(&self.prefix, &tiles::bundle_path(index, width));
            self.create(store, &key, body, leaves_covered(0, index, width))
                .await?;
        }
        for (level, index, width) in tiles::tiles_changed(self.published, size) {
            let body = tiles::tile_bytes(&self.tree, level, index, width).unwrap_or_default();
            let key = tiles::under(&self.prefix, &tiles::tile_path(level, index, width));
            self.create(store, &key, body, leaves_covered(level, index, width))
                .await?;
        }
        let note = signer.sign_checkpoint(&self.origin, size, &self.tree.root());
        let history = self
            .prefix
            .clone()
            .join("checkpoints")
            .join(format!("{size:020}"));
        // Never replaced: a signed note in the history is committed.
        self.create(store, &history, note.clone().into_bytes(), 0)
            .await?;
        store
            .put(
                &self.prefix.clone().join("checkpoint"),
                PutPayload::from(note.into_bytes()),
            )
            .await?;
        // Keep only the entries of the newest partial bundle.
        let full = usize::try_from((size / TILE_WIDTH - first_bundle) * TILE_WIDTH).unwrap_or(0);
        self.recent.drain(..full.min(self.recent.len()));
        self.published = size;
        Ok(())
    }

    /// Creates `key` with `body`. The same bytes already there are success; other bytes are a
    /// fork, unless the object covers leaves beyond every signed tree in the bucket now
    /// (`covers` leaves from the start): then a writer stopped before its checkpoint, nothing
    /// verifiable refers to the object, and ours replaces it. (Two live writers of one
    /// partition are fenced by its manifest generations, and the history note stays the
    /// fence between them.)
    async fn create(
        &self,
        store: &dyn ObjectStore,
        key: &Path,
        body: Vec<u8>,
        covers: u64,
    ) -> Result<(), TlogError> {
        let body = Bytes::from(body);
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match store
            .put_opts(key, PutPayload::from(body.clone()), options)
            .await
        {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = store.get(key).await?.bytes().await?;
                if existing == body {
                    Ok(())
                } else if covers > signed_sizes(store, &self.prefix).await?.1 {
                    tracing::warn!(%key, "replacing an unsigned transparency log object left by a writer that stopped before its checkpoint");
                    store.put(key, PutPayload::from(body)).await?;
                    Ok(())
                } else {
                    Err(TlogError::Inconsistent {
                        prefix: self.prefix.to_string(),
                        reason: format!(
                            "{key} exists with other bytes: a second writer forked the log"
                        ),
                    })
                }
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// Every entry of a log of `size` leaves, read from its entry bundles, each with the bundle it
/// came from.
///
/// # Errors
/// [`TlogError::BadBundle`] for a bundle that is missing or does not hold the entries `size`
/// needs, [`TlogError::Unreadable`] for other store failures.
pub async fn read_entries(
    store: &dyn ObjectStore,
    prefix: &Path,
    size: u64,
) -> Result<Vec<(Path, Vec<u8>)>, TlogError> {
    let mut entries = Vec::new();
    for index in 0..size.div_ceil(TILE_WIDTH) {
        let width = (size - index * TILE_WIDTH).min(TILE_WIDTH);
        let key = tiles::under(prefix, &tiles::bundle_path(index, width));
        let bytes = get_if_exists(store, &key)
            .await
            .map_err(|source| TlogError::Unreadable {
                key: key.to_string(),
                source,
            })?;
        let decoded = bytes
            .and_then(|b| tiles::decode_bundle(&b))
            .filter(|e| e.len() as u64 == width)
            .ok_or_else(|| TlogError::BadBundle {
                key: key.to_string(),
                reason: format!("missing or not {width} entries"),
            })?;
        entries.extend(decoded.into_iter().map(|entry| (key.clone(), entry)));
    }
    Ok(entries)
}

/// The tree sizes signed in the bucket now: `checkpoint`'s (0 without one), and the largest,
/// which a newer note in the history may hold.
///
/// # Errors
/// Store failures, and a `checkpoint` without a readable size.
async fn signed_sizes(store: &dyn ObjectStore, prefix: &Path) -> Result<(u64, u64), TlogError> {
    let checkpoint = get_if_exists(store, &prefix.clone().join("checkpoint")).await?;
    let newest = match checkpoint {
        Some(text) => checkpoint_size(&text).ok_or_else(|| TlogError::Inconsistent {
            prefix: prefix.to_string(),
            reason: "unreadable checkpoint".into(),
        })?,
        None => 0,
    };
    let largest = newest_in_history(store, prefix, newest).await?.max(newest);
    Ok((newest, largest))
}

/// How many leaves, from the log's start, a tile (or at level 0, an entry bundle) of `width`
/// entries at `index` covers.
fn leaves_covered(level: usize, index: u64, width: u64) -> u64 {
    let per_entry = u32::try_from(level)
        .ok()
        .and_then(|level| TILE_WIDTH.checked_pow(level))
        .unwrap_or(u64::MAX);
    index
        .saturating_mul(TILE_WIDTH)
        .saturating_add(width)
        .saturating_mul(per_entry)
}

/// The largest tree size in the checkpoint history beyond `after` (0 when none is): history
/// notes are named by their zero-padded size, so only the names after it are listed.
async fn newest_in_history(
    store: &dyn ObjectStore,
    prefix: &Path,
    after: u64,
) -> Result<u64, TlogError> {
    use futures::TryStreamExt;
    let history = prefix.clone().join("checkpoints");
    let from = history.clone().join(format!("{after:020}"));
    let names: Vec<object_store::ObjectMeta> = store
        .list_with_offset(Some(&history), &from)
        .try_collect()
        .await?;
    Ok(names
        .iter()
        .filter_map(|meta| meta.location.filename()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0))
}

/// The size line of a checkpoint note (the second line).
fn checkpoint_size(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.lines().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn topic_leaf(i: u64) -> Leaf {
        Leaf::Topic {
            topic: "t".into(),
            key: format!("k{i}"),
            size: i,
            sha256: format!("{i:064x}"),
        }
    }

    /// Appends in uneven steps across bundle boundaries; a reload sees the same tree and state,
    /// and the spec's objects for that size exist.
    #[tokio::test]
    async fn publish_then_load_gives_the_same_log() {
        let store = InMemory::new();
        let signer = NoteSigner::from_seed("strata-test", [1; 32]).unwrap();
        let origin = PartitionLog::origin("test", "t", 0);
        let mut log = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        let mut appended = 0;
        for step in [1u64, 3, 250, 2, 300, 7] {
            for _ in 0..step {
                log.append(&topic_leaf(appended));
                appended += 1;
            }
            log.publish(&store, &signer).await.unwrap();
            let loaded = PartitionLog::load(&store, "t", 0, origin.clone())
                .await
                .unwrap();
            assert_eq!(loaded.tree, log.tree);
            assert_eq!(loaded.state, log.state);
        }
        assert_eq!(log.size(), 563);
        let prefix = layout::tlog_dir("t", 0);
        for name in [
            "tile/0/000",
            "tile/0/001",
            "tile/0/002.p/51",
            "tile/1/000.p/2",
            "tile/entries/002.p/51",
        ] {
            store.head(&tiles::under(&prefix, name)).await.unwrap();
        }
        let note = store
            .get(&prefix.clone().join("checkpoint"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let opened = signer
            .verifier()
            .open_checkpoint(std::str::from_utf8(&note).unwrap())
            .unwrap();
        assert_eq!((opened.size, opened.root), (563, log.tree.root()));
    }

    fn manifest_leaf(generation: u64) -> Leaf {
        Leaf::Manifest {
            topic: "t".into(),
            partition: 0,
            generation,
            key: format!("m{generation}"),
            size: generation,
            sha256: format!("{generation:064x}"),
        }
    }

    fn deletion_leaf(to_offset: u64, reason: &str) -> Leaf {
        Leaf::Deletion {
            topic: "t".into(),
            partition: 0,
            from_offset: 0,
            to_offset,
            reason: reason.into(),
            policy: String::new(),
            time_ms: 0,
            principal: None,
        }
    }

    /// A topic's deletion ends its history in the log: a new topic of the same name starts at
    /// manifest generation 1 again, and the state after the mark (also when loaded back) must
    /// let it append from there instead of taking its entries for ones already logged.
    #[tokio::test]
    async fn a_topic_deletion_starts_the_state_afresh() {
        let store = InMemory::new();
        let signer = NoteSigner::from_seed("strata-test", [1; 32]).unwrap();
        let origin = PartitionLog::origin("test", "t", 0);
        let mut log = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        log.append(&topic_leaf(1));
        log.append(&manifest_leaf(3));
        log.append(&deletion_leaf(5, "retention"));
        assert_eq!(log.state().start_offset, Some(5));
        assert_eq!(log.state().manifest_generation, 3);
        log.append(&deletion_leaf(9, TOPIC_DELETED));
        assert_eq!(log.state(), &LogState::default());
        log.append(&manifest_leaf(1));
        log.publish(&store, &signer).await.unwrap();
        let loaded = PartitionLog::load(&store, "t", 0, origin).await.unwrap();
        assert_eq!(loaded.state().manifest_generation, 1);
        assert_eq!(loaded.state().start_offset, None);
        assert_eq!(loaded.state().topic_sha256, None);
        assert_eq!(loaded.state, log.state);
    }

    /// A writer that stopped after writing a bundle but before signing it left bytes that no
    /// checkpoint refers to: the next writer replaces them with its own (it used to refuse
    /// them as a fork forever, so a deletion after a kill -9 was never logged).
    #[tokio::test]
    async fn unsigned_leftovers_of_a_stopped_writer_are_replaced() {
        let store = InMemory::new();
        let signer = NoteSigner::from_seed("strata-test", [1; 32]).unwrap();
        let origin = PartitionLog::origin("test", "t", 0);
        let mut log = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        log.append(&topic_leaf(1));
        log.publish(&store, &signer).await.unwrap();
        // The stopped writer's second entry, in its bundle, without a checkpoint.
        let prefix = layout::tlog_dir("t", 0);
        let leftover = tiles::encode_bundle(
            [topic_leaf(1).to_bytes(), topic_leaf(9).to_bytes()]
                .iter()
                .map(Vec::as_slice),
        );
        store
            .put(
                &tiles::under(&prefix, &tiles::bundle_path(0, 2)),
                PutPayload::from(leftover),
            )
            .await
            .unwrap();
        let mut next = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        assert_eq!(next.size(), 1);
        next.append(&topic_leaf(2));
        next.publish(&store, &signer).await.unwrap();
        let loaded = PartitionLog::load(&store, "t", 0, origin).await.unwrap();
        assert_eq!(loaded.tree, next.tree);
        assert_eq!(loaded.state().topic_sha256, Some(format!("{:064x}", 2)));
    }

    /// A writer that stopped between its history note and `checkpoint` left a signed tree:
    /// the next load takes it, and the next publish moves `checkpoint` up to it.
    #[tokio::test]
    async fn a_signed_tree_in_the_history_beyond_checkpoint_is_the_log() {
        let store = InMemory::new();
        let signer = NoteSigner::from_seed("strata-test", [1; 32]).unwrap();
        let origin = PartitionLog::origin("test", "t", 0);
        let mut log = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        log.append(&topic_leaf(1));
        log.publish(&store, &signer).await.unwrap();
        let prefix = layout::tlog_dir("t", 0);
        let pointer = prefix.clone().join("checkpoint");
        let first = store.get(&pointer).await.unwrap().bytes().await.unwrap();
        log.append(&topic_leaf(2));
        log.publish(&store, &signer).await.unwrap();
        store.put(&pointer, PutPayload::from(first)).await.unwrap();

        let mut next = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        assert_eq!(next.size(), 2);
        assert_eq!(next.tree, log.tree);
        next.publish(&store, &signer).await.unwrap();
        let note = store.get(&pointer).await.unwrap().bytes().await.unwrap();
        assert_eq!(checkpoint_size(&note), Some(2));
        // And the log goes on from it.
        let mut other = PartitionLog::load(&store, "t", 0, origin).await.unwrap();
        assert_eq!(other.size(), 2);
        other.append(&topic_leaf(3));
        other.publish(&store, &signer).await.unwrap();
    }

    /// A second writer that appended something else at the same size is refused.
    #[tokio::test]
    async fn a_fork_is_refused() {
        let store = InMemory::new();
        let signer = NoteSigner::from_seed("strata-test", [1; 32]).unwrap();
        let origin = PartitionLog::origin("test", "t", 0);
        let mut first = PartitionLog::load(&store, "t", 0, origin.clone())
            .await
            .unwrap();
        let mut second = PartitionLog::load(&store, "t", 0, origin).await.unwrap();
        first.append(&topic_leaf(1));
        first.publish(&store, &signer).await.unwrap();
        second.append(&topic_leaf(2));
        let error = second.publish(&store, &signer).await.unwrap_err();
        assert!(error.to_string().contains("forked"), "{error}");
        // The first writer's signed bundle is untouched.
        let loaded = PartitionLog::load(&store, "t", 0, PartitionLog::origin("test", "t", 0))
            .await
            .unwrap();
        assert_eq!(loaded.tree, first.tree);
    }
}
