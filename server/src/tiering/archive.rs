//! The bucket as an archive: each tiered partition's transparency log (`strata_tiering::tlog`)
//! follows its manifest, and the bucket carries what an auditor needs without Strata (the
//! verification key, `FORMAT.md`, `format.json`).
//!
//! Every manifest change is recorded after the manifest is stored and before anything it
//! dropped is deleted (deletes run later in the sweep, and not at all when recording failed),
//! so no object leaves the bucket without a deletion entry. A crash between the manifest and
//! the log is caught up at the partition's next sweep ([`Change::recovered`]).

use std::path::Path;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use strata_tiering::digest::sha256_hex;
use strata_tiering::layout;
use strata_tiering::manifest;
use strata_tiering::tlog::leaf::Leaf;
use strata_tiering::tlog::log::{LogState, PartitionLog, TOPIC_DELETED};
use strata_tiering::tlog::note::NoteSigner;

use super::{RemotePartition, Tiering, TieringError};

/// Name of the checkpoint signing key this server generates when none is configured.
pub const DEFAULT_KEY_NAME: &str = "strata-archive";

/// The auditor's description of the bucket, written at its root.
pub const FORMAT_MD: &str = include_str!("../../../tiering/archive/FORMAT.md");
/// The same, machine-readable.
pub const FORMAT_JSON: &str = include_str!("../../../tiering/archive/format.json");

/// Why a manifest changed: what a deletion entry records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `upload`, `retention`, `delete_records`, `local_gap`, `cleanup`, `topic_deleted` or
    /// `recovered`.
    pub reason: &'static str,
    /// The rule that decided a deletion (`retention_ms=...,retention_bytes=...`), or empty.
    pub policy: String,
    /// Who asked, when known.
    pub principal: Option<String>,
}

impl Change {
    /// A plain reason without a policy.
    pub fn because(reason: &'static str) -> Change {
        Change {
            reason,
            policy: String::new(),
            principal: None,
        }
    }

    /// What the log did not record before a crash, found at the next sweep.
    pub fn recovered() -> Change {
        Change::because("recovered")
    }
}

/// Loads the signing key from `path` (a `PRIVATE+KEY+...` text), or makes a new one there
/// (mode 0600) when the file does not exist.
///
/// # Errors
/// An unreadable or malformed key file, or one that cannot be created.
pub fn load_or_create_signer(path: &Path) -> Result<NoteSigner, TieringError> {
    let local = |reason: String| TieringError::Local {
        path: path.display().to_string(),
        reason,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => NoteSigner::parse(&text).map_err(|e| local(e.to_string())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).map_err(|e| local(e.to_string()))?;
            let signer =
                NoteSigner::from_seed(DEFAULT_KEY_NAME, seed).map_err(|e| local(e.to_string()))?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| local(e.to_string()))?;
            }
            write_secret(path, &signer.to_secret_text()).map_err(|e| local(e.to_string()))?;
            tracing::info!(path = %path.display(), key = %signer.verifier(), "created the archive signing key");
            Ok(signer)
        }
        Err(error) => Err(local(error.to_string())),
    }
}

/// Refuses to make a signing key for a bucket that already publishes verification keys: the
/// data directory (and its key) was lost or is a fresh one pointed at an old bucket. A new key
/// would sign every later checkpoint, so an auditor who holds the old key could verify nothing
/// from then on, and nothing would say why. The operator gives the old key, or allows a new one.
///
/// # Errors
/// [`TieringError::Local`] naming the bucket's keys and both ways out; store failures.
pub async fn refuse_a_second_key(
    store: &strata_tiering::store::TierStore,
    key_file: &Path,
) -> Result<(), TieringError> {
    let objects = store.scoped();
    let published =
        strata_tiering::store::list_sorted(objects.as_ref(), Some(&layout::tlog_keys_dir()))
            .await
            .map_err(TieringError::KeyList)?;
    let names: Vec<String> = published
        .iter()
        .filter_map(|o| o.location.filename().map(str::to_string))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(TieringError::Local {
        path: key_file.display().to_string(),
        reason: format!(
            "no archive signing key here, but the bucket's transparency logs were signed by \
             {} ({}): give that key with archive_signing_key_file \
             (--archive-signing-key-file, STRATA_ARCHIVE_SIGNING_KEY_FILE; the Helm chart's \
             archive.signingKeySecret), or start a new key on purpose with \
             archive_allow_new_signing_key = true (auditors then need both verification keys)",
            if names.len() == 1 {
                "another key"
            } else {
                "other keys"
            },
            names.join(", ")
        ),
    })
}

fn write_secret(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

impl Tiering {
    /// Publishes the verification key (create-only: a key id names one key forever) and the
    /// format description at the bucket's root.
    ///
    /// # Errors
    /// Store failures.
    pub(super) async fn publish_archive_metadata(&self) -> Result<(), TieringError> {
        let verifier = self.signer.verifier();
        let key = layout::tlog_key(verifier.id());
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let body = Bytes::from(format!("{verifier}\n"));
        match self
            .objects
            .put_opts(&key, PutPayload::from(body), options)
            .await
        {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        for (name, text) in [("FORMAT.md", FORMAT_MD), ("format.json", FORMAT_JSON)] {
            let path = object_store::path::Path::from(name);
            let current =
                strata_tiering::store::get_if_exists(self.objects.as_ref(), &path).await?;
            if current.as_deref() != Some(text.as_bytes()) {
                self.objects
                    .put(&path, PutPayload::from(Bytes::from_static(text.as_bytes())))
                    .await?;
            }
        }
        Ok(())
    }

    /// Brings the partition's log up to its newest manifest ([`Tiering::append_changes`]), then
    /// publishes the new checkpoint.
    ///
    /// # Errors
    /// Store failures and an inconsistent log; the caller must then not delete anything.
    pub(crate) async fn record(
        &self,
        remote: &RemotePartition,
        change: &Change,
    ) -> Result<(), TieringError> {
        let mut guard = remote.tlog.lock().await;
        let log = self.loaded_log(remote, &mut guard).await?;
        self.append_changes(remote, log, change);
        log.publish(self.objects.as_ref(), &self.signer).await?;
        Ok(())
    }

    /// The partition's log, loaded from the bucket on first use.
    async fn loaded_log<'a>(
        &self,
        remote: &RemotePartition,
        slot: &'a mut Option<PartitionLog>,
    ) -> Result<&'a mut PartitionLog, TieringError> {
        if let Some(log) = slot.take() {
            return Ok(slot.insert(log));
        }
        let origin = PartitionLog::origin(self.signer.name(), &remote.topic, remote.partition);
        let loaded = PartitionLog::load(
            self.objects.as_ref(),
            &remote.topic,
            remote.partition,
            origin,
        )
        .await?;
        Ok(slot.insert(loaded))
    }

    /// Appends what the newest manifest says that the log does not yet: a deletion entry when
    /// the log start moved, a segment entry per new segment, the manifest generation, and
    /// (partition 0) the topic metadata.
    fn append_changes(&self, remote: &RemotePartition, log: &mut PartitionLog, change: &Change) {
        let manifest = remote.manifest();
        log.start_at(manifest.log_start_offset);
        let (topic, partition) = (remote.topic.clone(), remote.partition);
        let state = log.state().clone();
        if let Some(start) = state
            .start_offset
            .filter(|s| *s < manifest.log_start_offset)
        {
            log.append(&Leaf::Deletion {
                topic: topic.clone(),
                partition,
                from_offset: start,
                to_offset: manifest.log_start_offset,
                reason: change.reason.to_string(),
                policy: change.policy.clone(),
                time_ms: self.clock.now_ms(),
                principal: change.principal.clone(),
            });
        }
        for segment in &manifest.segments {
            if state
                .next_offset
                .is_none_or(|next| segment.base_offset >= next)
            {
                log.append(&Leaf::Segment {
                    topic: topic.clone(),
                    partition,
                    segment: segment.clone(),
                });
            }
        }
        if manifest.generation > state.manifest_generation {
            let bytes = manifest::to_bytes(&manifest);
            log.append(&Leaf::Manifest {
                topic: topic.clone(),
                partition,
                generation: manifest.generation,
                key: layout::manifest_file(&topic, partition, manifest.generation).to_string(),
                size: bytes.len() as u64,
                sha256: sha256_hex(&bytes),
            });
        }
        if partition == 0 {
            let published = self.published_topics.lock().get(&topic).cloned();
            if let Some(body) = published {
                let sha256 = sha256_hex(&body);
                if state.topic_sha256.as_deref() != Some(sha256.as_str()) {
                    log.append(&Leaf::Topic {
                        topic: topic.clone(),
                        key: layout::topic_file(&topic).to_string(),
                        size: body.len() as u64,
                        sha256,
                    });
                }
            }
        }
    }

    /// Records that a deleted topic's offsets are gone in the log of every partition the
    /// bucket holds (loaded here or not), before its objects are deleted; returns the
    /// partitions whose deletion is logged (or that have no manifest, so nothing to log). The
    /// logs themselves stay in the bucket.
    pub(crate) async fn record_topic_deletion(
        &self,
        topic: &str,
        loaded: Vec<std::sync::Arc<RemotePartition>>,
    ) -> Vec<u32> {
        let mut numbers: Vec<u32> = loaded.iter().map(|r| r.partition).collect();
        let root = layout::topic_root(topic);
        if let Ok(listing) = self.objects.list_with_delimiter(Some(&root)).await {
            numbers.extend(
                listing
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().and_then(|n| n.parse::<u32>().ok())),
            );
        }
        numbers.sort_unstable();
        numbers.dedup();
        let mut logged = Vec::new();
        for number in numbers {
            let remote = match loaded.iter().find(|r| r.partition == number) {
                Some(remote) => std::sync::Arc::clone(remote),
                None => match manifest::load_latest(self.objects.as_ref(), topic, number).await {
                    Ok(Some(found)) => std::sync::Arc::new(RemotePartition::new(found)),
                    // No manifest: nothing the log lacks. Manifests are deleted only after the
                    // deletion is logged, so a repeated removal finds the log already marked.
                    Ok(None) => {
                        logged.push(number);
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(topic, partition = number, %error, "could not load the manifest of a deleted topic's partition");
                        continue;
                    }
                },
            };
            let _work = remote.work.lock().await;
            match self.record_deleted(&remote).await {
                Ok(()) => logged.push(number),
                Err(error) => {
                    tracing::warn!(topic, partition = number, %error, "could not record the topic's deletion; its objects stay")
                }
            }
        }
        logged
    }

    /// What the manifest says that the log lacks, then the whole remaining range as deleted,
    /// in one checkpoint.
    async fn record_deleted(&self, remote: &RemotePartition) -> Result<(), TieringError> {
        let mut guard = remote.tlog.lock().await;
        let log = self.loaded_log(remote, &mut guard).await?;
        self.append_changes(remote, log, &Change::recovered());
        let state = log.state().clone();
        // Always marked, even when nothing is live any more: the mark is where a new topic of
        // the same name starts its history in this log.
        if state != LogState::default() {
            let start = state
                .start_offset
                .unwrap_or(remote.manifest().log_start_offset);
            let end = state.next_offset.unwrap_or(start).max(start);
            log.append(&Leaf::Deletion {
                topic: remote.topic.clone(),
                partition: remote.partition,
                from_offset: start,
                to_offset: end,
                reason: TOPIC_DELETED.into(),
                policy: String::new(),
                time_ms: self.clock.now_ms(),
                principal: None,
            });
        }
        log.publish(self.objects.as_ref(), &self.signer).await?;
        Ok(())
    }
}
