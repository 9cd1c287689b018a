//! One producer: builds requests of self-verifying records, sends one at a time, and keeps
//! the ledger of what the server acknowledged where.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::batch::{self, ProducerFields};
use crate::cli::{Acks, Format};
use crate::client::ProduceAnswer;
use crate::payload::RecordId;
use crate::run::Shared;
use crate::stats::Recorder;
use crate::verify::Placed;

/// What a producer leaves behind.
pub struct Produced {
    pub recorder: Recorder,
    pub acked: Vec<Placed>,
    pub problems: Vec<String>,
}

/// One request, built.
struct Request {
    path: String,
    content_type: &'static str,
    body: Bytes,
    /// Per record: its id and the partition it must land in (when the generator knows it).
    records: Vec<(RecordId, Option<u32>)>,
    topic: usize,
    payload_bytes: u64,
}

/// Sends until the run ends, the record budget is spent or (open loop) the pacer stops.
pub async fn produce(
    shared: Arc<Shared>,
    index: u32,
    mut tickets: Option<mpsc::UnboundedReceiver<Instant>>,
) -> Produced {
    let mut out = Produced {
        recorder: shared.recorder(),
        acked: Vec::new(),
        problems: Vec::new(),
    };
    let identity = match shared.args.idempotent {
        true => match shared.client.init_producer().await {
            Ok(identity) => Some(identity),
            Err(error) => {
                out.problems.push(format!("producer {index}: {error:#}"));
                return out;
            }
        },
        false => None,
    };
    let mut state = ProducerState {
        index,
        next_seq: 0,
        requests: 0,
        sequences: BTreeMap::new(),
        identity,
        values: Vec::new(),
    };
    if tickets.is_none() && shared.builds_ahead() {
        return produce_built_ahead(shared, state, out).await;
    }
    loop {
        let scheduled = match &mut tickets {
            Some(tickets) => match tickets.recv().await {
                Some(at) => at,
                None => break,
            },
            None => Instant::now(),
        };
        if shared.finished(scheduled) {
            break;
        }
        let budget = shared.take_records(u64::from(shared.args.batch_records));
        if budget == 0 {
            break;
        }
        let request = state.build(&shared, budget, scheduled);
        shared.give_back_records(budget - request.records.len() as u64);
        send(&shared, index, &request, scheduled, &mut out).await;
    }
    out
}

/// The closed loop with each request built on the producer's own thread while the one before
/// it is in flight, as a Kafka producer fills its next batch while the last is being sent. A
/// large request's build (values, encoding, CRC: about 0.15 ms for 1 MiB here) otherwise sits
/// between every answer and the next request and counts against the server; the baselines run
/// the same way. Latency is still measured from each send.
async fn produce_built_ahead(
    shared: Arc<Shared>,
    state: ProducerState,
    mut out: Produced,
) -> Produced {
    let index = state.index;
    let (jobs, job_queue) = std::sync::mpsc::channel::<u64>();
    let (built, mut ready) = mpsc::unbounded_channel::<Request>();
    let builder_shared = Arc::clone(&shared);
    let spawned = std::thread::Builder::new()
        .name(format!("producer-{index}"))
        .spawn(move || build_on_request(&builder_shared, state, &job_queue, &built));
    if let Err(error) = spawned {
        out.problems
            .push(format!("producer {index}: no builder thread: {error}"));
        return out;
    }
    let order = || {
        let budget = shared.take_records(u64::from(shared.args.batch_records));
        budget > 0 && jobs.send(budget).is_ok()
    };
    let mut ordered = order();
    while ordered {
        let Some(request) = ready.recv().await else {
            break;
        };
        let scheduled = Instant::now();
        if shared.finished(scheduled) {
            shared.give_back_records(request.records.len() as u64);
            break;
        }
        ordered = order();
        send(&shared, index, &request, scheduled, &mut out).await;
    }
    out
}

/// The builder thread: builds a request of up to each ordered budget until the producer hangs
/// up, giving back what a request did not use.
fn build_on_request(
    shared: &Shared,
    mut state: ProducerState,
    jobs: &std::sync::mpsc::Receiver<u64>,
    built: &mpsc::UnboundedSender<Request>,
) {
    while let Ok(budget) = jobs.recv() {
        let request = state.build(shared, budget, Instant::now());
        shared.give_back_records(budget - request.records.len() as u64);
        if built.send(request).is_err() {
            return;
        }
    }
}

/// Sends one request and records its answer: its latency from `scheduled`, and where the
/// server says its records went.
async fn send(
    shared: &Shared,
    index: u32,
    request: &Request,
    scheduled: Instant,
    out: &mut Produced,
) {
    let answer = shared
        .client
        .produce(
            &request.path,
            request.content_type,
            request.body.clone(),
            request.records.len(),
        )
        .await;
    let now = Instant::now();
    match answer {
        Ok(answer) => {
            out.recorder.record(
                now,
                now - scheduled,
                request.records.len() as u64,
                request.payload_bytes,
            );
            shared
                .progress
                .produced
                .fetch_add(request.records.len() as u64, Ordering::Relaxed);
            place(shared, request, &answer, out);
        }
        Err(error) => {
            out.recorder.error(now);
            shared.progress.errors.fetch_add(1, Ordering::Relaxed);
            if out.problems.len() < 5 {
                out.problems
                    .push(format!("producer {index}: produce failed: {error}"));
            }
        }
    }
}

/// Reads the answer's positions into the ledger, checking they name as many records as sent
/// and, where the generator knows the partition (keys), the right one.
fn place(shared: &Shared, request: &Request, answer: &ProduceAnswer, out: &mut Produced) {
    let partitions = shared.args.partitions as usize;
    let positions: Vec<(u32, u64)> = if answer.partitions.is_empty() {
        answer
            .offsets
            .iter()
            .map(|o| (o.partition, o.offset))
            .collect()
    } else {
        let counted: u64 = answer.partitions.iter().map(|p| p.record_count).sum();
        if counted != request.records.len() as u64 {
            out.problems.push(format!(
                "a compact answer counts {counted} records for {} sent",
                request.records.len()
            ));
            return;
        }
        // Compact answer: records of one partition are consecutive in request order.
        let mut next: BTreeMap<u32, u64> = answer
            .partitions
            .iter()
            .map(|p| (p.partition, p.base_offset))
            .collect();
        request
            .records
            .iter()
            .map(|(_, partition)| {
                let partition = partition.unwrap_or_else(|| answer.partitions[0].partition);
                let offset = next.get(&partition).copied().unwrap_or(u64::MAX);
                next.insert(partition, offset.saturating_add(1));
                (partition, offset)
            })
            .collect()
    };
    if positions.len() != request.records.len() {
        out.problems.push(format!(
            "an answer names {} positions for {} records",
            positions.len(),
            request.records.len()
        ));
        return;
    }
    for (&(id, expected), (partition, offset)) in request.records.iter().zip(positions) {
        if let Some(expected) = expected
            && expected != partition
            && shared.verifying()
        {
            out.problems.push(format!(
                "{id:?} went to partition {partition}, its key's partition is {expected}"
            ));
        }
        out.acked.push(Placed {
            stream: request.topic * partitions + partition as usize,
            offset,
            id,
        });
    }
}

struct ProducerState {
    index: u32,
    next_seq: u64,
    requests: u64,
    /// Next idempotent sequence per (topic, partition).
    sequences: BTreeMap<(usize, u32), i32>,
    identity: Option<(i64, i16)>,
    /// The last request's record values, kept so the next request reuses the allocation
    /// rather than growing a new one (see `memory`).
    values: Vec<u8>,
}

impl ProducerState {
    fn build(&mut self, shared: &Shared, budget: u64, scheduled: Instant) -> Request {
        let args = &shared.args;
        let topic = (self.index % args.topics) as usize;
        let sent_ns = scheduled.saturating_duration_since(shared.start).as_nanos() as u64;
        let keyed = shared.payloads.keys().is_keyed();
        // Keyless records, and every raw request, go to one partition per request.
        let round_robin =
            ((u64::from(self.index) + self.requests) % u64::from(args.partitions)) as u32;
        self.requests += 1;
        let byte_limit = args.batch_bytes.unwrap_or(u64::MAX);
        let mut records = Vec::new();
        let mut values = std::mem::take(&mut self.values);
        values.clear();
        let mut ends = Vec::new();
        let mut payload_bytes = 0u64;
        while (records.len() as u64) < budget && (records.is_empty() || payload_bytes < byte_limit)
        {
            let id = RecordId {
                producer: self.index,
                seq: self.next_seq,
            };
            self.next_seq += 1;
            shared.payloads.write_value(id, sent_ns, &mut values);
            ends.push(values.len());
            let key = shared.payloads.key(id);
            payload_bytes +=
                (shared.payloads.value_len(id) + key.as_ref().map_or(0, String::len)) as u64;
            let partition = match (&key, args.format) {
                (Some(key), Format::Json) => Some(kafka_partition(key.as_bytes(), args.partitions)),
                _ => Some(round_robin),
            };
            records.push((id, partition, key));
        }
        let topic_name = &shared.topics[topic];
        let acks = match args.acks {
            Acks::All => "all",
            Acks::Leader => "leader",
        };
        let answer = if args.compact_answer {
            "&answer=compact"
        } else {
            ""
        };
        let value_at = |i: usize| &values[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
        let (path, content_type, body) = match args.format {
            Format::Json => {
                let mut body = String::with_capacity(values.len() * 4 / 3 + records.len() * 64);
                body.push_str("{\"records\":[");
                for (i, (_, _, key)) in records.iter().enumerate() {
                    if i > 0 {
                        body.push(',');
                    }
                    body.push('{');
                    if let Some(key) = key {
                        let _ = write!(body, "\"key\":\"{key}\",");
                    }
                    body.push_str("\"value\":\"");
                    base64_simd::STANDARD.encode_append(value_at(i), &mut body);
                    body.push_str("\"}");
                }
                body.push(']');
                if let Some((id, epoch)) = self.identity {
                    let _ = write!(
                        body,
                        ",\"producer\":{{\"producer_id\":{id},\"producer_epoch\":{epoch},\"sequences\":{{"
                    );
                    let mut counts: BTreeMap<u32, i32> = BTreeMap::new();
                    for (_, partition, _) in &records {
                        *counts.entry(partition.unwrap_or(round_robin)).or_default() += 1;
                    }
                    for (i, (partition, count)) in counts.into_iter().enumerate() {
                        let next = self.sequences.entry((topic, partition)).or_default();
                        if i > 0 {
                            body.push(',');
                        }
                        let _ = write!(body, "\"{partition}\":{next}");
                        *next = next.wrapping_add(count);
                    }
                    body.push_str("}}");
                }
                body.push('}');
                let path = if keyed {
                    format!(
                        "/v1/topics/{topic_name}/records?value_format=base64&acks={acks}{answer}"
                    )
                } else {
                    format!(
                        "/v1/topics/{topic_name}/partitions/{round_robin}/records?value_format=base64&acks={acks}{answer}"
                    )
                };
                (path, "application/json", Bytes::from(body))
            }
            Format::Raw => {
                let pairs: Vec<(Option<&[u8]>, &[u8])> = records
                    .iter()
                    .enumerate()
                    .map(|(i, (_, _, key))| (key.as_deref().map(str::as_bytes), value_at(i)))
                    .collect();
                let producer = self.identity.map(|(id, epoch)| {
                    let next = self.sequences.entry((topic, round_robin)).or_default();
                    let base_sequence = *next;
                    *next = next.wrapping_add(pairs.len() as i32);
                    ProducerFields {
                        id,
                        epoch,
                        base_sequence,
                    }
                });
                let mut body = Vec::with_capacity(values.len() + records.len() * 24 + 64);
                batch::encode(&pairs, crate::run::now_ms(), producer, &mut body);
                let path = format!(
                    "/v1/topics/{topic_name}/partitions/{round_robin}/records?acks={acks}{answer}"
                );
                (
                    path,
                    "application/vnd.strata.record-batches",
                    Bytes::from(body),
                )
            }
        };
        self.values = values;
        Request {
            path,
            content_type,
            body,
            records: records
                .into_iter()
                .map(|(id, partition, _)| (id, partition))
                .collect(),
            topic,
            payload_bytes,
        }
    }
}

/// The partition Kafka's default partitioner gives a key: murmur2, made positive, modulo the
/// partition count (what Strata does for keyed records).
pub fn kafka_partition(key: &[u8], partitions: u32) -> u32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}
