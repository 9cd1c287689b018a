//! `strata archive read`: the records of a partition's offset or time range, from the bucket
//! alone, as NDJSON (one object per record: offset, timestamp, key, value, headers; text when
//! the bytes are UTF-8, else `*_base64`).

use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Map, Value, json};
use strata_tiering::manifest;

use crate::log::{Record, RecordBatch};

/// Which records.
#[derive(Debug, Clone)]
pub struct ReadRange {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// First offset (inclusive).
    pub from_offset: u64,
    /// Last offset (inclusive).
    pub to_offset: u64,
    /// Earliest timestamp (ms, inclusive).
    pub from_time: i64,
    /// Latest timestamp (ms, inclusive).
    pub to_time: i64,
}

fn field(object: &mut Map<String, Value>, name: &str, bytes: Option<&Bytes>) {
    match bytes {
        None => {
            object.insert(name.to_string(), Value::Null);
        }
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => {
                object.insert(name.to_string(), Value::from(text));
            }
            Err(_) => {
                object.insert(
                    format!("{name}_base64"),
                    Value::from(STANDARD.encode(bytes)),
                );
            }
        },
    }
}

/// Prints the range's records to `out`; returns how many.
///
/// # Errors
/// A partition without a manifest, unreadable objects, and batches that fail their CRC.
pub async fn read(
    store: &dyn ObjectStore,
    range: &ReadRange,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    visit(store, range, &mut |offset, record| {
        let mut line = Map::new();
        line.insert("offset".into(), json!(offset));
        line.insert("timestamp".into(), json!(record.timestamp));
        field(&mut line, "key", record.key.as_ref());
        field(&mut line, "value", record.value.as_ref());
        let mut headers = Map::new();
        for header in &record.headers {
            field(&mut headers, &header.key, header.value.as_ref());
        }
        line.insert("headers".into(), Value::Object(headers));
        writeln!(out, "{}", Value::Object(line))?;
        Ok(())
    })
    .await
}

/// Calls `each` with the offset and record of every record in the range, in offset order;
/// returns how many.
///
/// # Errors
/// A partition without a manifest, unreadable objects, batches that fail their CRC, and
/// whatever `each` returns.
pub async fn visit(
    store: &dyn ObjectStore,
    range: &ReadRange,
    each: &mut dyn FnMut(u64, &Record) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let manifest = manifest::load_latest(store, &range.topic, range.partition)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}/{} has no manifest in this bucket",
                range.topic,
                range.partition
            )
        })?;
    visit_manifest(store, &manifest, range, each).await
}

/// [`visit`] over a manifest already loaded.
///
/// # Errors
/// Unreadable objects, batches that fail their CRC, and whatever `each` returns.
pub async fn visit_manifest(
    store: &dyn ObjectStore,
    manifest: &manifest::Manifest,
    range: &ReadRange,
    each: &mut dyn FnMut(u64, &Record) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut visited = 0;
    for segment in &manifest.segments {
        if segment.last_offset < range.from_offset.max(manifest.log_start_offset)
            || segment.base_offset > range.to_offset
            || segment.max_timestamp < range.from_time
            || segment.first_timestamp > range.to_time
        {
            continue;
        }
        let bytes = store
            .get(&Path::from(segment.log.key.as_str()))
            .await?
            .bytes()
            .await?;
        let mut position = 0;
        while position < bytes.len() {
            let batch = RecordBatch::decode_first(&bytes.slice(position..))
                .map_err(|e| anyhow::anyhow!("{} at byte {position}: {e}", segment.log.key))?;
            position += batch.len();
            for record in batch.records() {
                let record = record?;
                let offset = u64::try_from(record.offset).unwrap_or(0);
                if offset < range.from_offset.max(manifest.log_start_offset)
                    || offset > range.to_offset
                    || record.timestamp < range.from_time
                    || record.timestamp > range.to_time
                {
                    continue;
                }
                each(offset, &record)?;
                visited += 1;
            }
        }
    }
    Ok(visited)
}
