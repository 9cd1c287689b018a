//! Consumers: readers that catch up to a known end (consume), tail the log while producers
//! write (e2e, by long-poll or SSE), or read as members of one consumer group (groups).
//! Each checks every record's bytes as it arrives and notes where it found it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt as _;

use crate::batch;
use crate::cli::Format;
use crate::client::{CallError, JsonRecord};
use crate::run::Shared;
use crate::stats::Recorder;
use crate::verify::Observations;

/// One fetched record: offset, key and value.
type Fetched<'a> = (u64, Option<&'a [u8]>, Option<&'a [u8]>);

/// What a consumer leaves behind: fetch figures, end-to-end figures and what it read.
pub struct Consumed {
    pub fetches: Recorder,
    pub delivery: Recorder,
    pub seen: Observations,
    pub rebalanced: bool,
}

impl Consumed {
    fn new(shared: &Shared) -> Self {
        Self {
            fetches: shared.recorder(),
            delivery: shared.recorder(),
            seen: Observations::default(),
            rebalanced: false,
        }
    }

    /// Checks and notes fetched records, and their produce-to-delivery latency.
    fn take(&mut self, shared: &Shared, stream: usize, records: &[Fetched<'_>]) {
        let now = Instant::now();
        for &(offset, key, value) in records {
            if let Some(stamp) = value.and_then(|v| shared.payloads.stamp(v)) {
                let sent = shared.start + Duration::from_nanos(stamp.sent_ns);
                self.delivery
                    .record(now, now.saturating_duration_since(sent), 1, 0);
            }
            self.seen
                .observe(&shared.payloads, stream, offset, key, value);
        }
        shared
            .progress
            .consumed
            .fetch_add(records.len() as u64, Ordering::Relaxed);
    }
}

/// Where one stream's reading starts and must end.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub stream: usize,
    pub from: u64,
}

/// Reads each of `spans` in turn up to its end (the consume workload's catch-up reader).
pub async fn catch_up(shared: Arc<Shared>, spans: Vec<Span>) -> Consumed {
    let mut all = Consumed::new(&shared);
    for span in spans {
        let one = tail(Arc::clone(&shared), span, 0).await;
        all.fetches.merge(&one.fetches);
        all.delivery.merge(&one.delivery);
        all.seen.absorb(one.seen);
    }
    all
}

/// Reads `stream` from `span.from` until the producers are done and the end is reached.
pub async fn tail(shared: Arc<Shared>, span: Span, wait_ms: u64) -> Consumed {
    let mut out = Consumed::new(&shared);
    let (topic, partition) = shared.locate(span.stream);
    let mut offset = span.from;
    loop {
        if let Some(end) = shared.end_of(span.stream)
            && offset >= end
        {
            break;
        }
        if shared.gave_up() {
            out.seen.note(format!(
                "stream {}: stopped at offset {offset}: time out",
                span.stream
            ));
            break;
        }
        let started = Instant::now();
        let fetched = fetch(
            &shared,
            &mut out,
            topic,
            partition,
            span.stream,
            offset,
            wait_ms,
        )
        .await;
        let now = Instant::now();
        match fetched {
            Ok((next, records, bytes)) => {
                out.fetches.record(now, now - started, records, bytes);
                offset = next;
            }
            Err(error) => {
                out.fetches.error(now);
                out.seen.note(format!(
                    "stream {}: fetch at {offset}: {error}",
                    span.stream
                ));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    out
}

/// One fetch in the configured format; returns the next offset, records and bytes read.
async fn fetch(
    shared: &Shared,
    out: &mut Consumed,
    topic: &str,
    partition: u32,
    stream: usize,
    offset: u64,
    wait_ms: u64,
) -> Result<(u64, u64, u64), CallError> {
    let max_bytes = shared.args.fetch_bytes;
    match shared.args.fetch_format {
        Format::Raw => {
            let raw = shared
                .client
                .fetch_raw(topic, partition, offset, max_bytes, wait_ms)
                .await?;
            let records = batch::decode(&raw.bytes).map_err(|e| CallError {
                status: None,
                code: format!("bad batches: {e:#}"),
            })?;
            // The first batch may start before the offset asked for (Kafka semantics).
            let wanted: Vec<_> = records
                .iter()
                .filter(|r| r.offset >= offset)
                .map(|r| (r.offset, r.key, r.value))
                .collect();
            out.take(shared, stream, &wanted);
            let _ = raw.high_watermark;
            Ok((raw.next_offset, wanted.len() as u64, raw.bytes.len() as u64))
        }
        Format::Json => {
            let page = shared
                .client
                .fetch_json(topic, partition, offset, max_bytes, wait_ms)
                .await?;
            let (count, bytes) = take_json(shared, out, stream, &page.records);
            let _ = page.high_watermark;
            Ok((page.next_offset, count, bytes))
        }
    }
}

fn take_json(
    shared: &Shared,
    out: &mut Consumed,
    stream: usize,
    records: &[JsonRecord],
) -> (u64, u64) {
    type Owned = (u64, Option<Vec<u8>>, Option<Vec<u8>>);
    let decoded: Vec<Owned> = records
        .iter()
        .map(|r| {
            let value = r
                .value
                .as_deref()
                .and_then(|v| base64_simd::STANDARD.decode_to_vec(v).ok());
            (r.offset, r.key.clone().map(String::into_bytes), value)
        })
        .collect();
    let bytes = decoded
        .iter()
        .map(|(_, k, v)| (k.as_ref().map_or(0, Vec::len) + v.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    let borrowed: Vec<_> = decoded
        .iter()
        .map(|(o, k, v)| (*o, k.as_deref(), v.as_deref()))
        .collect();
    out.take(shared, stream, &borrowed);
    (records.len() as u64, bytes)
}

/// Follows `stream` over one SSE connection (reconnecting from the last offset if it drops).
pub async fn stream(shared: Arc<Shared>, span: Span) -> Consumed {
    let mut out = Consumed::new(&shared);
    let (topic, partition) = shared.locate(span.stream);
    let mut offset = span.from;
    'connect: loop {
        if shared.end_of(span.stream).is_some_and(|end| offset >= end) || shared.gave_up() {
            break;
        }
        let response = match shared.client.stream(topic, partition, offset).await {
            Ok(response) => response,
            Err(error) => {
                out.seen
                    .note(format!("stream {}: SSE connect: {error}", span.stream));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        loop {
            let chunk = tokio::select! {
                chunk = body.next() => chunk,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    if shared.end_of(span.stream).is_some_and(|end| offset >= end) || shared.gave_up() {
                        break 'connect;
                    }
                    continue;
                }
            };
            let Some(Ok(chunk)) = chunk else {
                continue 'connect;
            };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end).collect();
                if let Some(next) = sse_records(&shared, &mut out, span.stream, &event) {
                    offset = next;
                }
            }
            if shared.end_of(span.stream).is_some_and(|end| offset >= end) {
                break 'connect;
            }
        }
    }
    out
}

fn find_event_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| at + 2)
}

/// Takes the records of one SSE event; returns the next offset when it carried records.
fn sse_records(shared: &Shared, out: &mut Consumed, stream: usize, event: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(event).ok()?;
    let mut kind = "message";
    let mut data = String::new();
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            kind = value.trim();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        }
    }
    if kind != "records" {
        return None;
    }
    let page: crate::client::JsonFetch = serde_json::from_str(&data).ok()?;
    let started = Instant::now();
    let (count, bytes) = take_json(shared, out, stream, &page.records);
    out.fetches
        .record(Instant::now(), Instant::now() - started, count, bytes);
    Some(page.next_offset)
}

/// One member of the run's consumer group, reading with commits until the producers are done
/// and a long-poll comes back empty. Rebalances (new generations) are followed.
pub async fn member(
    shared: Arc<Shared>,
    group: String,
    topics: Vec<String>,
    ready: Arc<tokio::sync::Barrier>,
) -> Consumed {
    let mut out = Consumed::new(&shared);
    let client = &shared.client;
    let joined = client.join(&group, &topics).await;
    ready.wait().await;
    let mut membership = match joined {
        Ok(m) => m,
        Err(error) => {
            out.seen.note(format!("join {group}: {error:#}"));
            return out;
        }
    };
    let member = membership.member_id.clone();
    // Every member joined before any reads: settle on the generation that holds them all, so
    // a later generation means a real rebalance (and re-delivery is then allowed).
    for _ in 0..100 {
        match client
            .heartbeat(&group, &member, membership.generation)
            .await
        {
            Ok(next) => membership = next,
            Err(error) => out.seen.note(format!("heartbeat: {error}")),
        }
        if !membership.rebalancing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started_at = membership.generation;
    let mut last_beat = Instant::now();
    let mut empty_after_end = 0;
    while !shared.gave_up() {
        if last_beat.elapsed() >= Duration::from_millis(500) || membership.rebalancing {
            match client
                .heartbeat(&group, &member, membership.generation)
                .await
            {
                Ok(next) => membership = next,
                Err(error) => out.seen.note(format!("heartbeat: {error}")),
            }
            last_beat = Instant::now();
        }
        if membership.generation != started_at {
            out.rebalanced = true;
        }
        let started = Instant::now();
        let fetched = client
            .member_fetch(
                &group,
                &member,
                membership.generation,
                shared.args.fetch_bytes,
                200,
            )
            .await;
        let now = Instant::now();
        match fetched {
            Ok(page) => {
                let partitions = shared.args.partitions as usize;
                let mut count = 0;
                let mut bytes = 0;
                for record in &page.records {
                    let topic_index = shared
                        .topics
                        .iter()
                        .position(|t| Some(t) == record.topic.as_ref())
                        .unwrap_or(0);
                    let stream = topic_index * partitions + record.partition as usize;
                    let (c, b) = take_json(&shared, &mut out, stream, std::slice::from_ref(record));
                    count += c;
                    bytes += b;
                }
                out.fetches.record(now, now - started, count, bytes);
                if page.records.is_empty() && shared.producers_done() {
                    empty_after_end += 1;
                    if empty_after_end >= 2 {
                        break;
                    }
                } else {
                    empty_after_end = 0;
                }
            }
            Err(error) => {
                out.fetches.error(now);
                // A new generation: the next heartbeat fetches the assignment.
                if error.code != "stale_generation" && error.code != "rebalance_in_progress" {
                    out.seen.note(format!("member fetch: {error}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                last_beat = Instant::now() - Duration::from_secs(10);
                out.rebalanced = true;
            }
        }
    }
    client.leave(&group, &member).await;
    out
}
