//! `strata verify`: checks a bucket (or a copy of it) with read access only, as FORMAT.md
//! describes it: each partition's transparency log against its signed checkpoints (and an
//! older checkpoint the auditor kept), the log's entries against the manifests, `topic.json`
//! and every live segment's objects, and the offsets from the log start to the end without a
//! gap that no deletion entry accounts for.

use std::collections::{BTreeMap, HashSet};

use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use strata_tiering::digest::sha256_hex;
use strata_tiering::layout;
use strata_tiering::manifest::RemoteSegment;
use strata_tiering::tlog::leaf::Leaf;
use strata_tiering::tlog::log::{TOPIC_DELETED, TlogError, read_entries};
use strata_tiering::tlog::merkle::{Tree, leaf_hash};
use strata_tiering::tlog::note::{Checkpoint, NoteVerifier};
use strata_tiering::tlog::tiles::{self, TILE_WIDTH};

use super::report::{DeletionSummary, Failure, PartitionReport, Report};
use super::segment_check::check_segment;
use crate::tiering::archive::{FORMAT_JSON, FORMAT_MD};

/// What the auditor brings.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Keys to trust; empty: the ones published in the bucket (weaker).
    pub keys: Vec<NoteVerifier>,
    /// Older checkpoints kept by the auditor, per `(topic, partition)`.
    pub checkpoints: Vec<(String, u32, String)>,
    /// Segments checked at once.
    pub concurrency: usize,
    /// Also recompute each `.log` object's whole SHA-256. Without it every byte of `.log` is
    /// still checked, through the chunk digests the signed entry commits to (via the `.chunks`
    /// object's SHA-256); with it the entry's second digest of the same bytes is checked too,
    /// at twice the hashing cost.
    pub whole_log_sha256: bool,
}

/// Called after each segment is checked (progress bars).
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// Verifies everything in the store.
pub async fn verify(
    store: &dyn ObjectStore,
    options: &VerifyOptions,
    progress: Progress<'_>,
) -> Report {
    let mut report = Report::default();
    check_format_files(store, &mut report).await;
    let published = published_keys(store, &mut report).await;
    let keys = if options.keys.is_empty() {
        report.key_source = "bucket";
        published
    } else {
        report.key_source = "given";
        options.keys.clone()
    };
    report.keys = keys.iter().map(ToString::to_string).collect();
    check_signed_snapshots(store, &keys, &mut report).await;
    if keys.is_empty() {
        report.failures.push(Failure::new(
            "tlog-keys/",
            "no verification key: none given and none published",
        ));
    }
    // Logs first, then the segments of every partition through one pipeline (so the last
    // segments of one partition overlap the first of the next), then manifests and leftovers.
    let mut prepared = Vec::new();
    for topic in list_dirs(store, &layout::topics_root()).await {
        let partitions = list_dirs(store, &layout::topic_root(&topic)).await;
        for number in partitions.iter().filter_map(|p| p.parse::<u32>().ok()) {
            prepared.push(prepare_partition(store, &topic, number, &keys, options).await);
        }
    }
    let jobs = prepared.iter().enumerate().flat_map(|(index, p)| {
        p.live.iter().map(move |segment| async move {
            let check = check_segment(store, segment, options.whole_log_sha256).await;
            progress(1);
            (index, check)
        })
    });
    let checks: Vec<_> = futures::stream::iter(jobs)
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    for (index, check) in checks {
        report.objects_read += check.objects;
        report.bytes_read += check.bytes;
        prepared[index].report.failures.extend(check.failures);
    }
    let mut topic_leaves: BTreeMap<String, Option<String>> = BTreeMap::new();
    for mut p in prepared {
        let topic = p.report.topic.clone();
        if let Some(entries) = &p.entries {
            check_manifests(store, &topic, p.report.partition, entries, &mut p.report).await;
            list_orphans(store, &topic, p.report.partition, entries, &mut p.report).await;
            if p.report.partition == 0 {
                topic_leaves.insert(p.report.topic.clone(), entries.topic.clone());
            }
        }
        topic_leaves.entry(p.report.topic.clone()).or_default();
        report.partitions.push(p.report);
    }
    for (topic, logged) in topic_leaves {
        check_topic_file(store, &topic, logged, &mut report).await;
    }
    report.settle();
    report
}

/// The bucket's FORMAT.md and format.json must be this version's, byte for byte.
async fn check_format_files(store: &dyn ObjectStore, report: &mut Report) {
    for (name, text) in [("FORMAT.md", FORMAT_MD), ("format.json", FORMAT_JSON)] {
        match get(store, &Path::from(name)).await {
            Ok(Some(bytes)) if bytes == text.as_bytes() => {}
            Ok(Some(_)) => report.failures.push(Failure::new(
                name,
                "differs from the format description of this version",
            )),
            Ok(None) => report.warnings.push(format!("{name} is missing")),
            Err(error) => report.failures.push(Failure::new(name, error)),
        }
    }
}

/// The signed snapshots outside the topics.
async fn check_signed_snapshots(
    store: &dyn ObjectStore,
    keys: &[NoteVerifier],
    report: &mut Report,
) {
    for key in [layout::group_offsets_file(), layout::acls_file()] {
        check_signed_note(store, keys, &key, report).await;
    }
}

/// A signed JSON snapshot (`groups/offsets.note`, `security/acls.note`), when present, must
/// carry a valid signature of one of `keys` over a JSON text.
async fn check_signed_note(
    store: &dyn ObjectStore,
    keys: &[NoteVerifier],
    key: &Path,
    report: &mut Report,
) {
    let name = key.to_string();
    let bytes = match get(store, key).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return,
        Err(error) => return report.failures.push(Failure::new(&name, error)),
    };
    let Ok(note) = std::str::from_utf8(&bytes) else {
        return report.failures.push(Failure::new(&name, "not UTF-8 text"));
    };
    match keys.iter().find_map(|k| k.open_note(note).ok()) {
        Some(text) if serde_json::from_str::<serde_json::Value>(text).is_ok() => {}
        Some(_) => report
            .failures
            .push(Failure::new(&name, "signed, but its text is not JSON")),
        None => report.failures.push(Failure::new(
            &name,
            "no valid signature of a verification key",
        )),
    }
}

/// Keys in `tlog-keys/`; each must parse and be stored under its own id.
async fn published_keys(store: &dyn ObjectStore, report: &mut Report) -> Vec<NoteVerifier> {
    let mut keys = Vec::new();
    let listed = strata_tiering::store::list_sorted(store, Some(&layout::tlog_keys_dir())).await;
    for object in listed.unwrap_or_default() {
        let key = object.location.to_string();
        match get(store, &object.location).await {
            Ok(Some(bytes)) => match NoteVerifier::parse(&String::from_utf8_lossy(&bytes)) {
                // Exactly the text Strata writes: the parser forgives surrounding whitespace.
                Ok(verifier) if bytes != format!("{verifier}\n").as_bytes() => report
                    .failures
                    .push(Failure::new(key, "not exactly `name+id+key` and a newline")),
                Ok(verifier) if layout::tlog_key(verifier.id()) == object.location => {
                    keys.push(verifier)
                }
                Ok(_) => report
                    .failures
                    .push(Failure::new(key, "key stored under another key's id")),
                Err(error) => report.failures.push(Failure::new(key, error.to_string())),
            },
            Ok(None) => {}
            Err(error) => report.failures.push(Failure::new(key, error)),
        }
    }
    keys
}

/// `topic.json` must be the one partition 0's log last recorded.
async fn check_topic_file(
    store: &dyn ObjectStore,
    topic: &str,
    logged: Option<String>,
    report: &mut Report,
) {
    let key = layout::topic_file(topic);
    match (get(store, &key).await, logged) {
        (Ok(Some(bytes)), Some(sha)) if sha256_hex(&bytes) == sha => {}
        (Ok(Some(_)), Some(_)) => report.failures.push(Failure::new(
            key.to_string(),
            "differs from the version its log recorded",
        )),
        (Ok(Some(_)), None) => report.warnings.push(format!(
            "{key} is not recorded in a transparency log (written before logging began)"
        )),
        (Ok(None), _) => {}
        (Err(error), _) => report.failures.push(Failure::new(key.to_string(), error)),
    }
}

/// A log's entries, interpreted.
#[derive(Debug, Default)]
struct Entries {
    segments: BTreeMap<u64, RemoteSegment>,
    start: Option<u64>,
    deletions: Vec<DeletionSummary>,
    manifests: BTreeMap<u64, String>,
    topic: Option<String>,
    keys: HashSet<String>,
}

/// Reads of one partition's log while a running server keeps signing larger trees.
const LIVE_ATTEMPTS: u32 = 3;

/// One partition after its log was read: what remains is checking its segments.
struct Prepared {
    report: PartitionReport,
    entries: Option<Entries>,
    live: Vec<RemoteSegment>,
}

async fn prepare_partition(
    store: &dyn ObjectStore,
    topic: &str,
    number: u32,
    keys: &[NoteVerifier],
    options: &VerifyOptions,
) -> Prepared {
    let prefix = layout::tlog_dir(topic, number);
    // A running server may publish while we read: a tree signed after the log was loaded is
    // read again, a few times, rather than taken for a rewritten history.
    let mut attempts = 0;
    let (mut report, checkpoint, tree, raw) = loop {
        attempts += 1;
        let mut attempt = PartitionReport {
            topic: topic.to_string(),
            partition: number,
            ..PartitionReport::default()
        };
        let Some((checkpoint, tree, raw)) = load_log(store, &prefix, keys, &mut attempt).await
        else {
            return Prepared {
                report: attempt,
                entries: None,
                live: Vec::new(),
            };
        };
        let newer = check_history(store, &prefix, keys, &tree, &mut attempt).await;
        if newer.is_none() || attempts == LIVE_ATTEMPTS {
            if let Some(size) = newer {
                attempt.warnings.push(format!(
                    "{prefix}: a tree of {size} entries was signed while this verification \
                     ran; it covers the {} verified here, run verify again to check it",
                    tree.size()
                ));
            }
            break (attempt, checkpoint, tree, raw);
        }
    };
    report.tree_size = checkpoint.size;
    for (t, p, note) in &options.checkpoints {
        if t == topic && *p == number {
            check_older(note, keys, &tree, &prefix, &mut report);
        }
    }
    let entries = interpret(topic, number, &raw, &prefix, &mut report);
    let live = live_segments(&entries, &mut report);
    Prepared {
        report,
        entries: Some(entries),
        live,
    }
}

/// The checkpoint (signed by a trusted key), every entry bundle, and the tiles for its size,
/// which must all agree with the tree rebuilt from the entries.
async fn load_log(
    store: &dyn ObjectStore,
    prefix: &Path,
    keys: &[NoteVerifier],
    report: &mut PartitionReport,
) -> Option<(Checkpoint, Tree, Vec<(String, Vec<u8>)>)> {
    let key = prefix.clone().join("checkpoint");
    let text = match get(store, &key).await {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => {
            report.failures.push(Failure::new(
                key.to_string(),
                "missing: the partition has no transparency log",
            ));
            return None;
        }
        Err(error) => {
            report.failures.push(Failure::new(key.to_string(), error));
            return None;
        }
    };
    let Some(mut checkpoint) = open(&text, keys) else {
        report.failures.push(Failure::new(
            key.to_string(),
            "no signature of a trusted key verifies",
        ));
        return None;
    };
    // As the writer loads it (ADR 0010): a writer stopped between the history note and
    // `checkpoint` leaves a larger signed tree in the history, and that is the log.
    let signed_checkpoint = checkpoint.clone();
    if let Some(newest) = newest_history_note(store, prefix, keys).await
        && newest.size > checkpoint.size
    {
        report.warnings.push(format!(
            "{key} signs {} entries, a history note {}: a writer stopped between the two; \
             verified the larger tree",
            checkpoint.size, newest.size
        ));
        checkpoint = newest;
    }
    let size = checkpoint.size;
    let entries: Vec<(String, Vec<u8>)> = match read_entries(store, prefix, size).await {
        Ok(entries) => entries
            .into_iter()
            .map(|(key, e)| (key.to_string(), e))
            .collect(),
        Err(error) => {
            let failure = match error {
                TlogError::Unreadable { key, source } => {
                    Failure::new(key, format!("unreadable: {source}"))
                }
                TlogError::BadBundle { key, reason } => Failure::new(key, reason),
                other => Failure::new(prefix.to_string(), other.to_string()),
            };
            report.failures.push(failure);
            return None;
        }
    };
    let tree = Tree::from_leaf_hashes(entries.iter().map(|(_, e)| leaf_hash(e)));
    if tree.root() != checkpoint.root {
        let culprits = bundles_disagreeing_with_tiles(store, prefix, size, &tree).await;
        if culprits.is_empty() {
            report.failures.push(Failure::new(
                key.to_string(),
                "the entries do not hash to the checkpoint's root",
            ));
        }
        for bundle in culprits {
            report.failures.push(Failure::new(
                bundle,
                "entries differ from the log's signed tree",
            ));
        }
        return None;
    }
    // A `checkpoint` behind the history must be a prefix of the tree it verifies.
    if tree.prefix_root(signed_checkpoint.size) != Some(signed_checkpoint.root) {
        report.failures.push(Failure::new(
            key.to_string(),
            "not consistent with the larger tree its history note signs: the log forked",
        ));
        return None;
    }
    for (level, index, width) in tiles::tiles_changed(0, size) {
        let tile = tiles::under(prefix, &tiles::tile_path(level, index, width));
        if !matches!(get(store, &tile).await, Ok(Some(_))) {
            report
                .failures
                .push(Failure::new(tile.to_string(), "tile missing"));
        }
    }
    check_tile_objects(store, prefix, &tree, &entries, report).await;
    Some((checkpoint, tree, entries))
}

/// When the entries do not give the signed root: the bundles whose entries disagree with the
/// stored level-0 tiles (which the signed root covers), so the report names the damaged object.
async fn bundles_disagreeing_with_tiles(
    store: &dyn ObjectStore,
    prefix: &Path,
    size: u64,
    tree: &Tree,
) -> Vec<String> {
    let mut culprits = Vec::new();
    for index in 0..size.div_ceil(TILE_WIDTH) {
        let width = (size - index * TILE_WIDTH).min(TILE_WIDTH);
        let tile = tiles::under(prefix, &tiles::tile_path(0, index, width));
        let ours = tiles::tile_bytes(tree, 0, index, width);
        if let Ok(Some(stored)) = get(store, &tile).await
            && Some(stored.to_vec()) != ours
        {
            culprits.push(tiles::under(prefix, &tiles::bundle_path(index, width)).to_string());
        }
    }
    culprits
}

/// Every tile and bundle object (older partial ones too) holds exactly what the current log
/// has at its place: a partial tile of an older size is a prefix of today's.
async fn check_tile_objects(
    store: &dyn ObjectStore,
    prefix: &Path,
    tree: &Tree,
    entries: &[(String, Vec<u8>)],
    report: &mut PartitionReport,
) {
    let dir = prefix.clone().join("tile");
    let listed = strata_tiering::store::list_sorted(store, Some(&dir))
        .await
        .unwrap_or_default();
    let prefix_text = format!("{prefix}/");
    for object in listed {
        let key = object.location.to_string();
        let Some(name) = key
            .strip_prefix(&prefix_text)
            .and_then(tiles::parse_tile_path)
        else {
            report
                .failures
                .push(Failure::new(key, "not a tile or entry bundle name"));
            continue;
        };
        let expected = match name.level {
            Some(level) => tiles::tile_bytes(tree, level, name.index, name.width),
            None => {
                let start = usize::try_from(name.index * TILE_WIDTH).unwrap_or(usize::MAX);
                let end = start.saturating_add(usize::try_from(name.width).unwrap_or(0));
                entries
                    .get(start..end)
                    .map(|slice| tiles::encode_bundle(slice.iter().map(|(_, e)| e.as_slice())))
            }
        };
        let covered = signed_part(tree, entries, &name);
        match (get(store, &object.location).await, expected) {
            (Ok(Some(bytes)), Some(expected)) if bytes == expected => {}
            (Ok(None), _) => {}
            (Err(error), _) => report.failures.push(Failure::new(key, error)),
            (Ok(Some(_)), Some(_)) => report
                .failures
                .push(Failure::new(key, "differs from the log's entries")),
            // Not covered by any signature, so it claims nothing: a publish in progress
            // writes bundles and tiles before it signs, and a writer stopped there leaves
            // them for the next one to replace.
            (Ok(Some(bytes)), None) if !bytes.starts_with(&covered) => report.failures.push(
                Failure::new(key, "differs from the log's entries where it is signed"),
            ),
            (Ok(Some(_)), None) => report.warnings.push(format!(
                "{key}: beyond the signed log (a publish in progress, or one a stopped writer \
                 left unsigned)"
            )),
        }
    }
}

/// What an object reaching beyond the signed log must begin with: its part the signed tree
/// covers (a tile holds node hashes and a bundle length-prefixed entries, so a wider one
/// begins with every narrower one).
fn signed_part(tree: &Tree, entries: &[(String, Vec<u8>)], name: &tiles::TileName) -> Vec<u8> {
    let start = name.index * TILE_WIDTH;
    match name.level {
        Some(level) => {
            let available = tree.level(level * tiles::TILE_HEIGHT).len() as u64;
            let width = name.width.min(available.saturating_sub(start));
            tiles::tile_bytes(tree, level, name.index, width).unwrap_or_default()
        }
        None => {
            let from = usize::try_from(start)
                .unwrap_or(usize::MAX)
                .min(entries.len());
            let width = usize::try_from(name.width).unwrap_or(usize::MAX);
            let to = from.saturating_add(width).min(entries.len());
            tiles::encode_bundle(entries[from..to].iter().map(|(_, e)| e.as_slice()))
        }
    }
}

/// Every checkpoint in `checkpoints/` is signed and has the root of the log's first entries.
/// Returns the size of a signed tree larger than `tree` (signed after the log was read),
/// which cannot be checked against it.
async fn check_history(
    store: &dyn ObjectStore,
    prefix: &Path,
    keys: &[NoteVerifier],
    tree: &Tree,
    report: &mut PartitionReport,
) -> Option<u64> {
    let mut newer = None;
    let dir = prefix.clone().join("checkpoints");
    let listed = strata_tiering::store::list_sorted(store, Some(&dir))
        .await
        .unwrap_or_default();
    for object in listed {
        let key = object.location.to_string();
        let text = match get(store, &object.location).await {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => continue,
            Err(error) => {
                report.failures.push(Failure::new(key, error));
                continue;
            }
        };
        match open(&text, keys) {
            None => report
                .failures
                .push(Failure::new(key, "no signature of a trusted key verifies")),
            Some(old)
                if object.location.filename() != Some(format!("{:020}", old.size).as_str()) =>
            {
                report
                    .failures
                    .push(Failure::new(key, "stored under another size"));
            }
            Some(old) if old.size > tree.size() => newer = newer.max(Some(old.size)),
            Some(old) if tree.prefix_root(old.size) != Some(old.root) => {
                report.failures.push(Failure::new(
                    key,
                    "not consistent with the current log: history was rewritten",
                ));
            }
            Some(_) => {}
        }
    }
    newer
}

/// The largest tree a history note in `checkpoints/` signs with a trusted key, under its own
/// size's name.
async fn newest_history_note(
    store: &dyn ObjectStore,
    prefix: &Path,
    keys: &[NoteVerifier],
) -> Option<Checkpoint> {
    let dir = prefix.clone().join("checkpoints");
    let listed = strata_tiering::store::list_sorted(store, Some(&dir))
        .await
        .unwrap_or_default();
    // Names are zero-padded sizes, so the last that verifies is the largest.
    for object in listed.iter().rev() {
        let Ok(Some(bytes)) = get(store, &object.location).await else {
            continue;
        };
        let Some(note) = open(&String::from_utf8_lossy(&bytes), keys) else {
            continue;
        };
        if object.location.filename() == Some(format!("{:020}", note.size).as_str()) {
            return Some(note);
        }
    }
    None
}

/// A checkpoint the auditor kept must be consistent with the current log.
fn check_older(
    note: &str,
    keys: &[NoteVerifier],
    tree: &Tree,
    prefix: &Path,
    report: &mut PartitionReport,
) {
    let name = format!("{prefix}/checkpoint (given)");
    match open(note, keys) {
        None => report.failures.push(Failure::new(
            name,
            "the given checkpoint is not signed by a trusted key",
        )),
        Some(old) => match tree.prefix_root(old.size) {
            Some(root) if root == old.root => {}
            Some(_) => report.failures.push(Failure::new(
                name,
                "not consistent with the current log: history was rewritten",
            )),
            None => report.failures.push(Failure::new(
                name,
                format!(
                    "size {} is beyond the current log: entries were removed",
                    old.size
                ),
            )),
        },
    }
}

fn open(text: &str, keys: &[NoteVerifier]) -> Option<Checkpoint> {
    keys.iter().find_map(|key| key.open_checkpoint(text).ok())
}

/// Parses every entry; later segment entries with the same base replace earlier ones.
fn interpret(
    topic: &str,
    number: u32,
    raw: &[(String, Vec<u8>)],
    prefix: &Path,
    report: &mut PartitionReport,
) -> Entries {
    let mut entries = Entries::default();
    for (index, (bundle, bytes)) in raw.iter().enumerate() {
        let leaf = match Leaf::parse(bytes) {
            Ok(leaf) => leaf,
            Err(error) => {
                report.failures.push(Failure::new(
                    bundle.clone(),
                    format!("entry {index}: {error}"),
                ));
                continue;
            }
        };
        let (leaf_topic, leaf_partition) = match &leaf {
            Leaf::Segment {
                topic, partition, ..
            }
            | Leaf::Deletion {
                topic, partition, ..
            }
            | Leaf::Manifest {
                topic, partition, ..
            } => (topic.as_str(), Some(*partition)),
            Leaf::Topic { topic, .. } => (topic.as_str(), None),
        };
        if leaf_topic != topic || leaf_partition.is_some_and(|p| p != number) {
            report.failures.push(Failure::new(
                format!("{prefix}"),
                format!("entry {index} belongs to another partition"),
            ));
            continue;
        }
        match leaf {
            Leaf::Segment { segment, .. } => {
                entries.start.get_or_insert(segment.base_offset);
                for object in segment.objects() {
                    entries.keys.insert(object.key.clone());
                }
                entries.segments.insert(segment.base_offset, segment);
            }
            Leaf::Deletion {
                from_offset,
                to_offset,
                reason,
                policy,
                time_ms,
                ..
            } => {
                let start = entries.start.get_or_insert(to_offset);
                *start = (*start).max(to_offset);
                let ended = reason == TOPIC_DELETED;
                entries.deletions.push(DeletionSummary {
                    from_offset,
                    to_offset,
                    reason,
                    policy,
                    time_ms,
                });
                if ended {
                    // A new topic of the same name may follow, from offset 0 and manifest
                    // generation 1 again. The old one's keys stay known (its objects are
                    // accounted for), its segments and manifests are history.
                    entries.segments.clear();
                    entries.manifests.clear();
                    entries.start = None;
                    entries.topic = None;
                }
            }
            Leaf::Manifest {
                generation, sha256, ..
            } => {
                entries.manifests.insert(generation, sha256);
            }
            Leaf::Topic { sha256, .. } => entries.topic = Some(sha256),
        }
    }
    report.deletions = entries.deletions.clone();
    entries
}

/// Segments at or above the log start, which must follow each other without a gap.
fn live_segments(entries: &Entries, report: &mut PartitionReport) -> Vec<RemoteSegment> {
    let start = entries.start.unwrap_or(0);
    let live: Vec<RemoteSegment> = entries
        .segments
        .values()
        .filter(|s| s.last_offset >= start)
        .cloned()
        .collect();
    let mut expected = start;
    for segment in &live {
        if segment.base_offset > expected {
            report.failures.push(
                Failure::new(&segment.log.key, "offsets before this segment are missing and no deletion entry accounts for them")
                    .at(expected, segment.base_offset - 1),
            );
        }
        expected = expected.max(segment.last_offset + 1);
    }
    report.log_start_offset = start;
    report.next_offset = expected.max(start);
    report.records = report.next_offset - start;
    report.segments = live.len() as u64;
    report.bytes = live.iter().map(|s| s.size).sum();
    report.first_timestamp = live.iter().map(|s| s.first_timestamp).min();
    report.last_timestamp = live.iter().map(|s| s.max_timestamp).max();
    live
}

/// Every manifest in the bucket is one the log recorded; the newest agrees with the log.
async fn check_manifests(
    store: &dyn ObjectStore,
    topic: &str,
    number: u32,
    entries: &Entries,
    report: &mut PartitionReport,
) {
    let dir = layout::manifest_dir(topic, number);
    let listed = strata_tiering::store::list_sorted(store, Some(&dir))
        .await
        .unwrap_or_default();
    let newest_logged = entries.manifests.keys().next_back().copied().unwrap_or(0);
    let mut newest = None;
    for object in listed {
        let key = object.location.to_string();
        let Some(generation) = layout::parse_manifest_generation(&object.location) else {
            report.warnings.push(format!("{key}: not a manifest name"));
            continue;
        };
        let bytes = match get(store, &object.location).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(error) => {
                report.failures.push(Failure::new(key, error));
                continue;
            }
        };
        match entries.manifests.get(&generation) {
            Some(sha) if *sha == sha256_hex(&bytes) => newest = Some((key, bytes)),
            Some(_) => report.failures.push(Failure::new(key, "differs from the version the log recorded")),
            None if generation > newest_logged => report
                .warnings
                .push(format!("{key}: newer than the log (a crash before the log caught up; the next sweep records it)")),
            None => report.failures.push(Failure::new(key, "a manifest the log never recorded")),
        }
    }
    if let Some((key, bytes)) = newest {
        match serde_json::from_slice::<strata_tiering::manifest::Manifest>(&bytes) {
            Ok(manifest) => {
                for segment in &manifest.segments {
                    if entries.segments.get(&segment.base_offset) != Some(segment) {
                        report.failures.push(
                            Failure::new(key.clone(), "lists a segment the log does not")
                                .at(segment.base_offset, segment.last_offset),
                        );
                    }
                }
            }
            Err(error) => report.failures.push(Failure::new(key, error.to_string())),
        }
    }
}

/// Objects under `segments/` that no entry names: leftovers of interrupted uploads.
async fn list_orphans(
    store: &dyn ObjectStore,
    topic: &str,
    number: u32,
    entries: &Entries,
    report: &mut PartitionReport,
) {
    let dir = layout::segments_dir(topic, number);
    let listed = strata_tiering::store::list_sorted(store, Some(&dir))
        .await
        .unwrap_or_default();
    for object in listed {
        if !entries.keys.contains(object.location.as_ref()) {
            report.warnings.push(format!(
                "{}: no log entry names it (an interrupted upload)",
                object.location
            ));
        }
    }
}

/// Child directories of `dir` (topics, partitions).
async fn list_dirs(store: &dyn ObjectStore, dir: &Path) -> Vec<String> {
    match store.list_with_delimiter(Some(dir)).await {
        Ok(listing) => listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// An object's bytes; `None` when it does not exist.
async fn get(store: &dyn ObjectStore, key: &Path) -> Result<Option<bytes::Bytes>, String> {
    strata_tiering::store::get_if_exists(store, key)
        .await
        .map_err(|e| format!("unreadable: {e}"))
}
