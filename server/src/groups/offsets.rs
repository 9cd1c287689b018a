//! Committed offsets, stored as records of the internal compacted topic `__consumer_offsets`.
//!
//! Key: JSON `{"group","topic","partition"}`; value: JSON `{"offset","metadata","commit_time_ms"}`
//! (the **next** offset to read), or null (a tombstone) when a group's offsets are deleted. A
//! commit of many partitions is one batch, acknowledged after its fsync. The latest value per key
//! is cached in memory and rebuilt from the topic at start-up; concurrent commits are ordered by
//! their position in the log, so the cache always equals "the last record per key". Appends
//! finish in log order but their callers may apply them to the cache in any order: a tombstone
//! is remembered (`removed`) while other appends are in flight, so an older commit of the same
//! key that is applied after it cannot bring the key back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::assignment::TopicPartition;
use crate::log::batch::BatchOptions;
use crate::log::{Acks, AppendError, BatchHeader, NewRecord, Partition, ReadError, RecordBatch};

/// Name of the internal topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct OffsetKey {
    group: String,
    topic: String,
    partition: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OffsetValue {
    offset: u64,
    metadata: String,
    commit_time_ms: i64,
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The next offset to read.
    pub offset: u64,
    /// Free text the client stored with it.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_time_ms: i64,
    /// Where the commit record sits in `__consumer_offsets`, to order concurrent commits.
    log_offset: u64,
}

/// One offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// Next offset to read.
    pub offset: u64,
    /// Free text kept with it.
    pub metadata: String,
}

/// Why offsets could not be committed or loaded.
#[derive(Debug, Error)]
pub enum OffsetStoreError {
    /// Appending to `__consumer_offsets` failed.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// Reading `__consumer_offsets` failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A stored batch or record does not decode.
    #[error("__consumer_offsets holds an invalid record at offset {offset}: {reason}")]
    Corrupt {
        /// Offset of the record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

pub type GroupOffsets = BTreeMap<TopicPartition, Committed>;

/// The committed offsets of every group.
#[derive(Debug)]
pub struct OffsetStore {
    log: Arc<Partition>,
    cache: RwLock<BTreeMap<String, GroupOffsets>>,
    /// Log offset of the last tombstone applied per (group, topic, partition), kept while
    /// appends are in flight (see the module doc); emptied whenever none is.
    removed: Mutex<HashMap<OffsetKey, u64>>,
    /// Appends enqueued and not yet applied to the cache.
    in_flight: AtomicUsize,
    /// Invalid records skipped while loading, for logs and metrics.
    skipped: AtomicU64,
}

impl OffsetStore {
    /// Loads every commit from the topic's partition. A record that is not a commit (a bad key
    /// or value) or a batch that fails validation is logged, counted in
    /// [`OffsetStore::skipped_records`] and skipped: one bad record on disk must never keep the
    /// server from starting, and every other group's commits stay served.
    ///
    /// # Errors
    /// Only when the partition cannot be read at all.
    pub async fn open(log: Arc<Partition>) -> Result<OffsetStore, OffsetStoreError> {
        let store = OffsetStore {
            log,
            cache: RwLock::new(BTreeMap::new()),
            removed: Mutex::new(HashMap::new()),
            in_flight: AtomicUsize::new(0),
            skipped: AtomicU64::new(0),
        };
        let mut offset = store.log.offsets().log_start_offset;
        loop {
            let slice = store.log.read(offset, 4 << 20).await?;
            if slice.data.is_empty() {
                break;
            }
            let mut rest = slice.data.clone();
            while !rest.is_empty() {
                let batch = match RecordBatch::decode_first(&rest) {
                    Ok(batch) => batch,
                    Err(error) => {
                        // Skip what the header says the batch spans, or the rest of the slice
                        // when even the header is unreadable.
                        let span = BatchHeader::parse(&rest)
                            .map_or(rest.len(), |h| h.total_len().clamp(1, rest.len()));
                        store.skip(offset, &error.to_string());
                        rest = rest.slice(span..);
                        continue;
                    }
                };
                for record in batch.records() {
                    match record {
                        Ok(record) => {
                            let log_offset = u64::try_from(record.offset).unwrap_or(0);
                            if let Err(error) = store.apply(
                                record.key.as_deref(),
                                record.value.as_deref(),
                                log_offset,
                            ) {
                                store.skip(log_offset, &error.to_string());
                            }
                        }
                        Err(error) => {
                            store.skip(offset, &error.to_string());
                            break;
                        }
                    }
                }
                offset = offset.max(u64::try_from(batch.header().last_offset()).unwrap_or(0) + 1);
                rest = rest.slice(batch.len()..);
            }
            offset = offset.max(slice.next_offset);
        }
        // Loaded in log order: no tombstone needs remembering.
        store.forget_removed_if_idle();
        let skipped = store.skipped_records();
        if skipped > 0 {
            tracing::warn!(
                skipped,
                "{OFFSETS_TOPIC}: skipped records that are not commits"
            );
        }
        Ok(store)
    }

    fn skip(&self, offset: u64, reason: &str) {
        tracing::warn!(
            offset,
            reason,
            "{OFFSETS_TOPIC}: skipping an invalid record"
        );
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// Records of `__consumer_offsets` that the last load skipped because they were not valid
    /// commits.
    pub fn skipped_records(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    fn apply(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        log_offset: u64,
    ) -> Result<(), OffsetStoreError> {
        let corrupt = |reason: String| OffsetStoreError::Corrupt {
            offset: log_offset,
            reason,
        };
        let key: OffsetKey =
            serde_json::from_slice(key.unwrap_or_default()).map_err(|e| corrupt(e.to_string()))?;
        let mut cache = self.cache.write();
        let mut removed = self.removed.lock();
        if removed.get(&key).is_some_and(|&at| at > log_offset) {
            return Ok(());
        }
        let group = cache.entry(key.group.clone()).or_default();
        let tp = (key.topic.clone(), key.partition);
        if group.get(&tp).is_some_and(|c| c.log_offset > log_offset) {
            return Ok(());
        }
        match value {
            None => {
                group.remove(&tp);
                if group.is_empty() {
                    cache.remove(&key.group);
                }
                removed.insert(key, log_offset);
            }
            Some(value) => {
                let value: OffsetValue =
                    serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
                removed.remove(&key);
                group.insert(
                    tp,
                    Committed {
                        offset: value.offset,
                        metadata: value.metadata,
                        commit_time_ms: value.commit_time_ms,
                        log_offset,
                    },
                );
            }
        }
        Ok(())
    }

    /// Durably commits offsets for one group (one batch, acknowledged after fsync).
    ///
    /// # Errors
    /// The append failed; nothing was committed.
    pub async fn commit(
        &self,
        group: &str,
        commits: &[Commit],
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let records: Vec<NewRecord> = commits
            .iter()
            .map(|c| commit_record(group, c, now_ms))
            .collect();
        self.append(records).await
    }

    /// Durably writes commits brought back from an archive, each with its original commit
    /// time (one batch per group, acknowledged after fsync).
    ///
    /// # Errors
    /// The append failed; nothing was committed.
    pub async fn restore_commits(
        &self,
        group: &str,
        commits: &[(Commit, i64)],
    ) -> Result<(), OffsetStoreError> {
        let records = commits
            .iter()
            .map(|(c, commit_time_ms)| commit_record(group, c, *commit_time_ms))
            .collect();
        self.append(records).await
    }

    /// Every group's committed offsets, as of now.
    pub fn snapshot(&self) -> BTreeMap<String, GroupOffsets> {
        self.cache.read().clone()
    }

    /// Deletes every committed offset of a group (tombstones).
    ///
    /// # Errors
    /// The append failed.
    pub async fn delete_group(&self, group: &str, now_ms: i64) -> Result<usize, OffsetStoreError> {
        self.forget_where(|g, _, _| g == group, now_ms).await
    }

    /// Deletes a group's committed offsets of one topic, or of one of its partitions
    /// (tombstones), as Kafka's OffsetDelete; returns how many there were.
    ///
    /// # Errors
    /// The append failed.
    pub async fn delete_partitions(
        &self,
        group: &str,
        topic: &str,
        partition: Option<u32>,
        now_ms: i64,
    ) -> Result<usize, OffsetStoreError> {
        let picked = |g: &str, t: &str, p: u32| {
            g == group && t == topic && partition.is_none_or(|only| only == p)
        };
        self.forget_where(picked, now_ms).await
    }

    /// Deletes every group's committed offsets of topics that `gone` names (tombstones): a
    /// deleted topic's offsets must not carry over to a new topic of the same name, whose
    /// offsets start again at 0 (a group would skip its first records without a word).
    ///
    /// # Errors
    /// The append failed.
    pub async fn forget_topics(
        &self,
        gone: impl Fn(&str) -> bool,
        now_ms: i64,
    ) -> Result<usize, OffsetStoreError> {
        self.forget_where(|_, topic, _| gone(topic), now_ms).await
    }

    /// Tombstones every committed offset whose (group, topic, partition) `forget` picks.
    async fn forget_where(
        &self,
        forget: impl Fn(&str, &str, u32) -> bool,
        now_ms: i64,
    ) -> Result<usize, OffsetStoreError> {
        let records: Vec<NewRecord> = {
            let cache = self.cache.read();
            cache
                .iter()
                .flat_map(|(group, offsets)| {
                    offsets
                        .keys()
                        .map(move |(topic, partition)| (group, topic, partition))
                })
                .filter(|(group, topic, partition)| forget(group, topic, **partition))
                .map(|(group, topic, partition)| {
                    let key = OffsetKey {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                    };
                    NewRecord {
                        timestamp: now_ms,
                        key: Some(Bytes::from(serde_json::to_vec(&key).unwrap_or_default())),
                        value: None,
                        headers: Vec::new(),
                    }
                })
                .collect()
        };
        let count = records.len();
        self.append(records).await?;
        Ok(count)
    }

    async fn append(&self, records: Vec<NewRecord>) -> Result<(), OffsetStoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let batch = RecordBatch::encode(&BatchOptions::default(), &records).map_err(|e| {
            OffsetStoreError::Corrupt {
                offset: 0,
                reason: e.to_string(),
            }
        })?;
        let _counted = InFlight::enter(self);
        let acks = self.log.append(vec![batch], Acks::All).await?;
        let base = acks.first().map_or(0, |a| a.base_offset);
        for (i, record) in records.iter().enumerate() {
            self.apply(
                record.key.as_deref(),
                record.value.as_deref(),
                base + i as u64,
            )?;
        }
        Ok(())
    }

    /// Empties `removed` when no append is in flight: one enqueued later gets a higher log
    /// offset than every tombstone applied so far. Checked under the cache's lock, which every
    /// apply takes, so a tombstone applied meanwhile by another append is not lost.
    fn forget_removed_if_idle(&self) {
        if self.removed.lock().is_empty() {
            return;
        }
        let _cache = self.cache.write();
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            self.removed.lock().clear();
        }
    }

    /// A group's committed offsets.
    pub fn committed(&self, group: &str) -> GroupOffsets {
        self.cache.read().get(group).cloned().unwrap_or_default()
    }

    /// One committed offset.
    pub fn get(&self, group: &str, topic: &str, partition: u32) -> Option<Committed> {
        self.cache
            .read()
            .get(group)
            .and_then(|g| g.get(&(topic.to_string(), partition)).cloned())
    }

    /// Groups with at least one committed offset.
    pub fn groups(&self) -> Vec<String> {
        self.cache.read().keys().cloned().collect()
    }
}

/// Counts one append in [`OffsetStore::in_flight`] until it is applied, or dropped: a caller
/// that goes away mid-append (a client gone, shutdown) must not leave it counted, or the
/// tombstones remembered meanwhile would never be let go.
struct InFlight<'a>(&'a OffsetStore);

impl<'a> InFlight<'a> {
    fn enter(store: &'a OffsetStore) -> Self {
        store.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(store)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.forget_removed_if_idle();
    }
}

/// The `__consumer_offsets` record of one commit.
fn commit_record(group: &str, commit: &Commit, commit_time_ms: i64) -> NewRecord {
    let key = OffsetKey {
        group: group.to_string(),
        topic: commit.topic.clone(),
        partition: commit.partition,
    };
    let value = OffsetValue {
        offset: commit.offset,
        metadata: commit.metadata.clone(),
        commit_time_ms,
    };
    NewRecord {
        timestamp: commit_time_ms,
        key: Some(Bytes::from(serde_json::to_vec(&key).unwrap_or_default())),
        value: Some(Bytes::from(serde_json::to_vec(&value).unwrap_or_default())),
        headers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::io::{Io, IoBackendChoice};
    use crate::log::LogConfig;

    /// The offsets partition in `dir`, opened (again).
    async fn open_log(dir: &std::path::Path, io: &Io) -> Arc<Partition> {
        Arc::new(
            Partition::open(dir, LogConfig::default(), io.clone(), ManualClock::new(0))
                .await
                .unwrap(),
        )
    }

    fn commit(topic: &str, partition: u32, offset: u64) -> Commit {
        Commit {
            topic: topic.into(),
            partition,
            offset,
            metadata: format!("m{offset}"),
        }
    }

    #[tokio::test]
    async fn commits_survive_restart_and_deletes_are_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let open = || open_log(dir.path(), &io);
        let log = open().await;
        let store = OffsetStore::open(Arc::clone(&log)).await.unwrap();
        store
            .commit("g1", &[commit("t", 0, 42), commit("t", 1, 7)], 100)
            .await
            .unwrap();
        store
            .commit("g1", &[commit("t", 0, 50)], 200)
            .await
            .unwrap();
        store.commit("g2", &[commit("t", 0, 3)], 300).await.unwrap();
        assert_eq!(store.get("g1", "t", 0).unwrap().offset, 50);
        assert_eq!(store.delete_group("g2", 400).await.unwrap(), 1);
        log.close().await.unwrap();
        drop((store, log));
        let store = OffsetStore::open(open().await).await.unwrap();
        let g1 = store.committed("g1");
        assert_eq!(g1.len(), 2);
        assert_eq!(g1[&("t".to_string(), 0)].offset, 50);
        assert_eq!(g1[&("t".to_string(), 0)].metadata, "m50");
        assert_eq!(g1[&("t".to_string(), 1)].commit_time_ms, 100);
        assert_eq!(store.groups(), vec!["g1".to_string()]);
    }

    /// Two appends of one key finish in log order, but their callers apply them in whatever
    /// order they are scheduled: a delete (tombstone at 11) applied before an older commit (10)
    /// must still win, as it does in the log and so after a restart.
    #[tokio::test]
    async fn an_older_commit_applied_after_a_newer_tombstone_stays_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let store = OffsetStore::open(open_log(dir.path(), &io).await)
            .await
            .unwrap();
        let older = commit_record("g", &commit("t", 0, 5), 100);
        // Both appends are in flight while they are applied.
        store.in_flight.fetch_add(2, Ordering::SeqCst);
        store.apply(older.key.as_deref(), None, 11).unwrap();
        store
            .apply(older.key.as_deref(), older.value.as_deref(), 10)
            .unwrap();
        assert_eq!(store.get("g", "t", 0), None, "the tombstone is newer");
        // A newer commit of the key brings it back.
        store
            .apply(older.key.as_deref(), older.value.as_deref(), 12)
            .unwrap();
        assert_eq!(store.get("g", "t", 0).unwrap().offset, 5);
        store.in_flight.fetch_sub(2, Ordering::SeqCst);

        // An append whose caller goes away mid-way is no longer counted.
        let commits = [commit("t", 0, 6)];
        let mut abandoned = Box::pin(store.commit("g", &commits, 150));
        assert!(futures::FutureExt::now_or_never(&mut abandoned).is_none());
        assert_eq!(store.in_flight.load(Ordering::SeqCst), 1);
        drop(abandoned);
        assert_eq!(store.in_flight.load(Ordering::SeqCst), 0);

        // With nothing in flight, what a delete remembers is let go: it stays bounded.
        store.commit("h", &[commit("t", 0, 1)], 200).await.unwrap();
        assert_eq!(store.delete_group("h", 300).await.unwrap(), 1);
        assert!(store.removed.lock().is_empty());
        assert_eq!(store.get("h", "t", 0), None);
    }

    #[tokio::test]
    async fn a_record_that_is_not_a_commit_is_skipped_and_the_rest_load() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let open = || open_log(dir.path(), &io);
        let log = open().await;
        let store = OffsetStore::open(Arc::clone(&log)).await.unwrap();
        store.commit("g1", &[commit("t", 0, 5)], 100).await.unwrap();
        // What the public produce endpoint used to let anyone write: a key that is no commit key
        // and a JSON number as value, then a good key with a bad value.
        let foreign = [
            (Some(&b"x"[..]), Some(&b"1"[..])),
            (None, Some(&b"1"[..])),
            (
                Some(&br#"{"group":"g1","topic":"t","partition":1}"#[..]),
                Some(&b"not json"[..]),
            ),
        ];
        for (key, value) in foreign {
            let record = NewRecord {
                timestamp: 0,
                key: key.map(Bytes::copy_from_slice),
                value: value.map(Bytes::copy_from_slice),
                headers: Vec::new(),
            };
            let batch = RecordBatch::encode(&BatchOptions::default(), &[record]).unwrap();
            log.append(vec![batch], Acks::All).await.unwrap();
        }
        store.commit("g2", &[commit("t", 0, 9)], 200).await.unwrap();
        log.close().await.unwrap();
        drop((store, log));
        let store = OffsetStore::open(open().await).await.unwrap();
        assert_eq!(store.skipped_records(), 3);
        assert_eq!(store.get("g1", "t", 0).unwrap().offset, 5);
        assert_eq!(store.get("g2", "t", 0).unwrap().offset, 9);
        assert!(store.get("g1", "t", 1).is_none());
    }
}
