//! One load run: topics, producers (closed or open loop), consumers, the read-back check and
//! the same-run baselines, assembled into a report.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::cli::{Acks, Delivery, LoadArgs, Start};
use crate::client::Strata;
use crate::consumer::{self, Consumed, Span};
use crate::payload::Payloads;
use crate::producer::{self, Produced};
use crate::report::{Baselines, Report, Workload};
use crate::stats::{Recorder, Summary};
use crate::verify::{self, Observations, Placed};

/// Counters the progress bar reads.
#[derive(Debug, Default)]
pub struct Progress {
    pub produced: AtomicU64,
    pub consumed: AtomicU64,
    pub errors: AtomicU64,
}

/// When a phase measures and when it stops.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub window_start: Instant,
    pub window: Duration,
    /// Producers send nothing scheduled after this.
    pub deadline: Option<Instant>,
    /// Records the producers may send in all.
    pub budget: u64,
}

/// What every task of a phase shares.
pub struct Shared {
    pub args: LoadArgs,
    pub client: Strata,
    pub payloads: Payloads,
    pub topics: Vec<String>,
    /// Time zero of the run: records carry their send time relative to it.
    pub start: Instant,
    pub progress: Arc<Progress>,
    timing: Timing,
    budget: AtomicU64,
    verifying: bool,
    /// Per stream, the offset consumers must reach, once the producers are done.
    ends: Mutex<Option<Vec<u64>>>,
    producers_done: AtomicBool,
    give_up_at: Mutex<Option<Instant>>,
    /// Closed-loop producers may build their next request ahead (see `producer::prebuilt`);
    /// not when records' send times are measured (e2e, groups), since a request built ahead
    /// carries a stamp from before its send.
    ahead: bool,
}

/// Values per request from which a closed-loop producer builds its next request on its own
/// thread while the current one is in flight: building 1 MiB costs the generator about
/// 0.15 ms here, worth a thread hop; a small request's build costs less than the hop.
const BUILD_AHEAD_FROM_BYTES: f64 = 64.0 * 1024.0;

impl Shared {
    /// Whether producers build each request while the one before it is in flight: for large
    /// requests, and only while every producer's builder can have a core of its own. With
    /// more producers than that, the others' requests keep the server busy while one builds,
    /// and the builders only take cores from it (8 producers of 100 KiB on 2 cores: 0.92x).
    pub fn builds_ahead(&self) -> bool {
        let values = f64::from(self.args.batch_records) * self.args.record_size.mean();
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        self.ahead
            && self.args.rate.is_none()
            && values >= BUILD_AHEAD_FROM_BYTES
            && (self.args.producers as usize) < cores
    }

    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.timing.window_start, self.timing.window)
    }

    pub fn verifying(&self) -> bool {
        self.verifying
    }

    /// True once a request scheduled at `at` is past the phase's end.
    pub fn finished(&self, at: Instant) -> bool {
        self.timing.deadline.is_some_and(|deadline| at >= deadline)
    }

    /// Reserves up to `wanted` records of the budget; returns how many were granted.
    pub fn take_records(&self, wanted: u64) -> u64 {
        let mut granted = 0;
        let _ = self
            .budget
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                granted = left.min(wanted);
                Some(left - granted)
            });
        granted
    }

    pub fn give_back_records(&self, unused: u64) {
        if unused > 0 {
            self.budget.fetch_add(unused, Ordering::AcqRel);
        }
    }

    /// Topic name and partition of a stream.
    pub fn locate(&self, stream: usize) -> (&str, u32) {
        let partitions = self.args.partitions as usize;
        (
            &self.topics[stream / partitions],
            (stream % partitions) as u32,
        )
    }

    pub fn end_of(&self, stream: usize) -> Option<u64> {
        self.ends
            .lock()
            .as_ref()
            .and_then(|ends| ends.get(stream).copied())
    }

    pub fn producers_done(&self) -> bool {
        self.producers_done.load(Ordering::Acquire)
    }

    /// Consumers give up this long after the producers finished (a lost record would
    /// otherwise keep them waiting forever; the verification then reports it).
    pub fn gave_up(&self) -> bool {
        self.give_up_at
            .lock()
            .is_some_and(|at| Instant::now() >= at)
    }

    fn streams(&self) -> usize {
        self.topics.len() * self.args.partitions as usize
    }

    fn finish_producing(&self, ends: Vec<u64>) {
        *self.ends.lock() = Some(ends);
        *self.give_up_at.lock() = Some(Instant::now() + Duration::from_secs(30));
        self.producers_done.store(true, Ordering::Release);
    }
}

/// Milliseconds since the Unix epoch, for record timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs `workload` as `args` describe and returns its report.
pub async fn run(workload: Workload, args: LoadArgs) -> anyhow::Result<Report> {
    args.validate()?;
    let mut id_bytes = [0u8; 8];
    getrandom::fill(&mut id_bytes).context("no randomness for the run id")?;
    let run_id = u64::from_le_bytes(id_bytes);
    let client = Strata::new(&args.url, args.token.clone(), args.ca.as_deref())?;
    let base = args
        .topic
        .clone()
        .unwrap_or_else(|| format!("loadtest-{:08x}", run_id as u32));
    let topics: Vec<String> = match args.topics {
        1 => vec![base],
        n => (0..n).map(|i| format!("{base}-{i}")).collect(),
    };
    for topic in &topics {
        client.ensure_topic(topic, args.partitions).await?;
    }
    let payloads = Payloads::new(run_id, args.record_size, args.keys.clone());
    let progress = Arc::new(Progress::default());
    let bar = crate::progress::start(&args, Arc::clone(&progress));
    let start = Instant::now();
    let context = Context0 {
        workload,
        args: args.clone(),
        client: client.clone(),
        payloads,
        topics: topics.clone(),
        start,
        progress,
    };
    let mut starts = Vec::new();
    for stream in 0..topics.len() * args.partitions as usize {
        let partitions = args.partitions as usize;
        let (low, high) = client
            .offsets(&topics[stream / partitions], (stream % partitions) as u32)
            .await?;
        starts.push((low, high));
    }
    let mut report = Report::new(workload, &args, client.version().await, run_id);
    let outcome = match workload {
        Workload::Produce => produce_only(&context, &starts).await,
        Workload::Consume => consume(&context, &starts).await,
        Workload::E2e | Workload::Groups => produce_and_consume(&context, workload, &starts).await,
    };
    report.fill(&outcome);
    if !args.no_verify {
        let seen = read_back(&outcome.shared, &starts, &outcome.ends).await;
        let mut verdict = verify::check(outcome.shared.streams(), &outcome.acked, seen, false);
        for problem in &outcome.producer_problems {
            verdict.passed = false;
            verdict.problems.push(problem.clone());
        }
        report.verification = Some(verdict);
        if let Some(seen) = outcome.consumer_seen {
            let duplicates_allowed = workload == Workload::Groups && outcome.rebalanced;
            report.consumer_verification = Some(verify::check(
                outcome.shared.streams(),
                &outcome.acked,
                seen,
                duplicates_allowed,
            ));
        }
    }
    crate::progress::finish(bar);
    if args.baselines {
        report.baselines = Some(baselines(&context, &report).await?);
    }
    report.compute_ratios();
    Ok(report)
}

/// What stays the same across a run's phases.
struct Context0 {
    workload: Workload,
    args: LoadArgs,
    client: Strata,
    payloads: Payloads,
    topics: Vec<String>,
    start: Instant,
    progress: Arc<Progress>,
}

impl Context0 {
    fn shared(&self, client: Strata, timing: Timing, verifying: bool) -> Arc<Shared> {
        Arc::new(Shared {
            args: self.args.clone(),
            client,
            payloads: self.payloads.clone(),
            topics: self.topics.clone(),
            start: self.start,
            progress: Arc::clone(&self.progress),
            timing,
            budget: AtomicU64::new(timing.budget),
            verifying,
            ends: Mutex::new(None),
            producers_done: AtomicBool::new(false),
            give_up_at: Mutex::new(None),
            ahead: matches!(self.workload, Workload::Produce | Workload::Consume),
        })
    }

    /// Measured timing: warm-up, then the window; bounded by time and `--count`.
    fn measured(&self) -> Timing {
        let warmup = Duration::from_secs_f64(self.args.warmup_s);
        let window = Duration::from_secs_f64(self.args.duration_s);
        let window_start = Instant::now() + warmup;
        Timing {
            window_start,
            window,
            deadline: Some(window_start + window),
            budget: self.args.count.unwrap_or(u64::MAX),
        }
    }
}

/// The outcome of a run's phases.
pub struct Outcome {
    pub shared: Arc<Shared>,
    pub produce: Option<Recorder>,
    pub fetches: Option<Recorder>,
    pub delivery: Option<Recorder>,
    pub measured_s: f64,
    pub acked: Vec<Placed>,
    pub producer_problems: Vec<String>,
    pub consumer_seen: Option<Observations>,
    pub rebalanced: bool,
    /// Per stream, one past the last acknowledged offset (at least the start).
    pub ends: Vec<u64>,
}

async fn run_producers(shared: &Arc<Shared>) -> (Recorder, Vec<Placed>, Vec<String>) {
    let producers = shared.args.producers;
    let mut receivers: Vec<Option<mpsc::UnboundedReceiver<Instant>>> =
        (0..producers).map(|_| None).collect();
    if let Some(rate) = shared.args.rate {
        let mut senders = Vec::new();
        for slot in &mut receivers {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            *slot = Some(rx);
        }
        let (origin, deadline) = (Instant::now(), shared.timing.deadline);
        std::thread::spawn(move || crate::pacer::pace(rate, origin, deadline, senders));
    }
    let tasks: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(index, tickets)| {
            tokio::spawn(producer::produce(Arc::clone(shared), index as u32, tickets))
        })
        .collect();
    let mut recorder = shared.recorder();
    let mut acked = Vec::new();
    let mut problems = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Produced {
                recorder: r,
                acked: a,
                problems: p,
            }) => {
                recorder.merge(&r);
                acked.extend(a);
                problems.extend(p);
            }
            Err(error) => problems.push(format!("a producer task failed: {error}")),
        }
    }
    (recorder, acked, problems)
}

fn ends_of(streams: usize, starts: &[(u64, u64)], acked: &[Placed]) -> Vec<u64> {
    let mut ends: Vec<u64> = (0..streams)
        .map(|s| starts.get(s).map_or(0, |s| s.1))
        .collect();
    for placed in acked {
        if let Some(end) = ends.get_mut(placed.stream) {
            *end = (*end).max(placed.offset + 1);
        }
    }
    ends
}

fn measured_seconds(timing: &Timing, finished: Instant) -> f64 {
    let end = finished.min(timing.window_start + timing.window);
    end.saturating_duration_since(timing.window_start)
        .as_secs_f64()
}

async fn produce_only(context: &Context0, starts: &[(u64, u64)]) -> Outcome {
    let timing = context.measured();
    let shared = context.shared(context.client.clone(), timing, true);
    let (recorder, acked, problems) = run_producers(&shared).await;
    let measured_s = measured_seconds(&timing, Instant::now());
    let ends = ends_of(shared.streams(), starts, &acked);
    Outcome {
        shared,
        produce: Some(recorder),
        fetches: None,
        delivery: None,
        measured_s,
        acked,
        producer_problems: problems,
        consumer_seen: None,
        rebalanced: false,
        ends,
    }
}

/// Preloads the records (verified, not measured), then times consumers reading them all.
async fn consume(context: &Context0, starts: &[(u64, u64)]) -> Outcome {
    let preload = Timing {
        window_start: Instant::now(),
        window: Duration::ZERO,
        deadline: None,
        budget: context.args.count.unwrap_or(100_000),
    };
    let loader = context.shared(context.client.clone(), preload, true);
    let (_, acked, problems) = run_producers(&loader).await;
    let ends = ends_of(loader.streams(), starts, &acked);
    let began = Instant::now();
    let timing = Timing {
        window_start: began,
        window: Duration::from_secs(24 * 3600),
        deadline: None,
        budget: 0,
    };
    let shared = context.shared(context.client.clone(), timing, true);
    shared.finish_producing(ends.clone());
    let spans: Vec<Span> = (0..shared.streams())
        .map(|stream| Span {
            stream,
            from: match context.args.from {
                Start::Earliest => starts[stream].0,
                Start::Latest => starts[stream].1,
            },
        })
        .collect();
    let consumed = run_consumers(&shared, spans, 0).await;
    let measured_s = began.elapsed().as_secs_f64();
    Outcome {
        shared,
        produce: None,
        fetches: Some(consumed.fetches),
        delivery: None,
        measured_s,
        acked,
        producer_problems: problems,
        consumer_seen: Some(consumed.seen),
        rebalanced: false,
        ends,
    }
}

/// Catch-up (`wait_ms == 0`): `--consumers` readers, each reading its share of the streams
/// in turn. Tailing: one reader per stream, by long-poll or SSE.
async fn run_consumers(shared: &Arc<Shared>, spans: Vec<Span>, wait_ms: u64) -> Consumed {
    let mut tasks = Vec::new();
    if wait_ms == 0 {
        let readers = shared.args.consumers as usize;
        let mut shares: Vec<Vec<Span>> = vec![Vec::new(); readers];
        for (i, span) in spans.into_iter().enumerate() {
            shares[i % readers].push(span);
        }
        for share in shares {
            tasks.push(tokio::spawn(consumer::catch_up(Arc::clone(shared), share)));
        }
        return gather(shared, tasks).await;
    }
    for span in spans {
        let shared = Arc::clone(shared);
        tasks.push(tokio::spawn(async move {
            match shared.args.delivery {
                Delivery::Sse => consumer::stream(shared, span).await,
                Delivery::Poll => consumer::tail(shared, span, wait_ms).await,
            }
        }));
    }
    gather(shared, tasks).await
}

async fn gather(shared: &Shared, tasks: Vec<tokio::task::JoinHandle<Consumed>>) -> Consumed {
    let mut all = Consumed {
        fetches: shared.recorder(),
        delivery: shared.recorder(),
        seen: Observations::default(),
        rebalanced: false,
    };
    for task in tasks {
        match task.await {
            Ok(one) => {
                all.fetches.merge(&one.fetches);
                all.delivery.merge(&one.delivery);
                all.seen.absorb(one.seen);
                all.rebalanced |= one.rebalanced;
            }
            Err(error) => all.seen.note(format!("a consumer task failed: {error}")),
        }
    }
    all
}

/// Producers and consumers at once: tailing readers (e2e) or group members (groups).
async fn produce_and_consume(
    context: &Context0,
    workload: Workload,
    starts: &[(u64, u64)],
) -> Outcome {
    let timing = context.measured();
    let shared = context.shared(context.client.clone(), timing, true);
    let consumers = match workload {
        Workload::Groups => {
            let group =
                context.args.group.clone().unwrap_or_else(|| {
                    format!("loadtest-{:08x}", context.payloads.run_id() as u32)
                });
            let members = context.args.consumers as usize;
            let ready = Arc::new(tokio::sync::Barrier::new(members));
            let tasks: Vec<_> = (0..members)
                .map(|_| {
                    tokio::spawn(consumer::member(
                        Arc::clone(&shared),
                        group.clone(),
                        shared.topics.clone(),
                        Arc::clone(&ready),
                    ))
                })
                .collect();
            let shared = Arc::clone(&shared);
            tokio::spawn(async move { gather(&shared, tasks).await })
        }
        _ => {
            let spans: Vec<Span> = (0..shared.streams())
                .map(|stream| Span {
                    stream,
                    from: starts[stream].1,
                })
                .collect();
            let shared = Arc::clone(&shared);
            tokio::spawn(async move { run_consumers(&shared, spans, 1000).await })
        }
    };
    let (recorder, acked, problems) = run_producers(&shared).await;
    let measured_s = measured_seconds(&timing, Instant::now());
    let ends = ends_of(shared.streams(), starts, &acked);
    shared.finish_producing(ends.clone());
    let (fetches, delivery, seen, rebalanced) = match consumers.await {
        Ok(c) => (c.fetches, c.delivery, c.seen, c.rebalanced),
        Err(error) => {
            let mut seen = Observations::default();
            seen.note(format!("consumers failed: {error}"));
            (shared.recorder(), shared.recorder(), seen, false)
        }
    };
    Outcome {
        shared,
        produce: Some(recorder),
        fetches: Some(fetches),
        delivery: Some(delivery),
        measured_s,
        acked,
        producer_problems: problems,
        consumer_seen: Some(seen),
        rebalanced,
        ends,
    }
}

/// Reads every stream from where the run started to past its last acknowledged offset, in
/// stored batches, checking every record.
async fn read_back(shared: &Arc<Shared>, starts: &[(u64, u64)], ends: &[u64]) -> Observations {
    let mut seen = Observations::default();
    for (stream, &end) in ends.iter().enumerate() {
        let (topic, partition) = shared.locate(stream);
        let mut offset = starts[stream].1;
        let mut idle = 0;
        loop {
            let fetched = shared
                .client
                .fetch_raw(topic, partition, offset, 4 << 20, 500)
                .await;
            match fetched {
                Ok(raw) => {
                    match crate::batch::decode(&raw.bytes) {
                        Ok(records) => {
                            for r in records.iter().filter(|r| r.offset >= offset) {
                                seen.observe(&shared.payloads, stream, r.offset, r.key, r.value);
                            }
                        }
                        Err(error) => {
                            seen.corrupt += 1;
                            seen.note(format!("stream {stream} at {offset}: {error:#}"));
                            break;
                        }
                    }
                    if raw.next_offset == offset {
                        idle += 1;
                    }
                    offset = raw.next_offset;
                    if offset >= end && offset >= raw.high_watermark {
                        break;
                    }
                    if idle > 20 {
                        seen.note(format!(
                            "stream {stream}: read back stalled at {offset} (end {end})"
                        ));
                        break;
                    }
                }
                Err(error) => {
                    seen.note(format!("stream {stream}: read back at {offset}: {error}"));
                    break;
                }
            }
        }
    }
    seen
}

/// The same produce load against the no-storage server (and its durable variants), and write
/// + fdatasync of the same request sizes, measured now.
async fn baselines(context: &Context0, report: &Report) -> anyhow::Result<Baselines> {
    let server = crate::null_server::spawn().context("starting the no-storage server")?;
    let null_server = produce_against(context, &server.url).await?;
    let durable = crate::null_server::spawn_durable(&context.args.disk_dir)
        .context("starting the durable no-storage server")?;
    let durable_server = produce_against(context, &durable.url).await?;
    let group_server = if context.args.producers > 1 && context.args.acks == Acks::All {
        let group = crate::null_server::spawn_group(&context.args.disk_dir)
            .context("starting the group-commit no-storage server")?;
        Some(produce_against(context, &group.url).await?)
    } else {
        None
    };
    let request_bytes = report.stored_bytes_per_request(&context.args);
    let disk = crate::disk::measure(
        &context.args.disk_dir,
        request_bytes,
        Duration::from_secs_f64(context.args.duration_s.min(3.0)),
        context.args.rate,
    )?;
    Ok(Baselines {
        null_server,
        durable_server: Some(durable_server),
        group_server,
        disk,
    })
}

/// The run's produce load (same producers, schedule and duration) against a baseline server.
async fn produce_against(context: &Context0, url: &str) -> anyhow::Result<Summary> {
    let client = Strata::new(url, None, None)?;
    let timing = context.measured();
    let shared = context.shared(client, timing, false);
    let (recorder, _, _) = run_producers(&shared).await;
    let measured_s = measured_seconds(&timing, Instant::now());
    Ok(recorder.summary(measured_s))
}
