//! The results of a run: settings, machine, figures, verification, baselines and ratios, as
//! JSON (for files and `compare`) and as a short summary for people.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::cli::LoadArgs;
use crate::disk::DiskSummary;
use crate::run::Outcome;
use crate::stats::Summary;
use crate::verify::Verdict;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Produce,
    Consume,
    E2e,
    Groups,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub tool_version: String,
    pub strata_version: String,
    pub workload: Workload,
    pub run_id: String,
    /// Seconds since the Unix epoch.
    pub started_at: u64,
    pub machine: Machine,
    pub settings: serde_json::Value,
    /// Length of the measured window (warm-up excluded).
    pub measured_s: f64,
    pub produce: Option<Summary>,
    /// Fetch requests (consumers).
    pub fetch: Option<Summary>,
    /// Produce-to-delivery latency per record (e2e, groups).
    pub end_to_end: Option<Summary>,
    /// The log read back after the run.
    pub verification: Option<Verdict>,
    /// What the consumers received.
    pub consumer_verification: Option<Verdict>,
    pub baselines: Option<Baselines>,
    pub ratios: Vec<Ratio>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baselines {
    /// The same producers against the no-storage server.
    pub null_server: Summary,
    /// The same producers against the durable no-storage server (body appended and
    /// fdatasynced before the answer). Absent in results of older versions.
    #[serde(default)]
    pub durable_server: Option<Summary>,
    /// The same producers against the group variant (bodies written by their handlers, one
    /// fdatasync at a time covering all written): measured for `acks=all` with more than one
    /// producer, where group commit is what the server does.
    #[serde(default)]
    pub group_server: Option<Summary>,
    /// write + fdatasync of one request's stored bytes.
    pub disk: DiskSummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ratio {
    pub name: String,
    pub value: f64,
    pub meaning: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub cpus: usize,
    pub kernel: String,
    pub memory_gib: f64,
    /// 1, 5 and 15 minute load averages when the run started.
    pub load_average: String,
}

impl Machine {
    fn here() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let memory_kib: f64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
            memory_gib: memory_kib / (1 << 20) as f64,
            load_average: read("/proc/loadavg")
                .split(' ')
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

impl Report {
    pub fn new(workload: Workload, args: &LoadArgs, strata_version: String, run_id: u64) -> Self {
        Self {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            strata_version,
            workload,
            run_id: format!("{run_id:016x}"),
            started_at: crate::run::now_ms() as u64 / 1000,
            machine: Machine::here(),
            settings: serde_json::to_value(args).unwrap_or_default(),
            measured_s: 0.0,
            produce: None,
            fetch: None,
            end_to_end: None,
            verification: None,
            consumer_verification: None,
            baselines: None,
            ratios: Vec::new(),
        }
    }

    pub fn fill(&mut self, outcome: &Outcome) {
        self.measured_s = outcome.measured_s;
        // Whether producers built each request while the last was in flight: how the figures
        // were taken, so part of the settings.
        if let Some(settings) = self.settings.as_object_mut() {
            let ahead = outcome.shared.builds_ahead();
            settings.insert("built_ahead".into(), serde_json::Value::Bool(ahead));
        }
        let summary =
            |r: &Option<crate::stats::Recorder>| r.as_ref().map(|r| r.summary(outcome.measured_s));
        self.produce = summary(&outcome.produce);
        self.fetch = summary(&outcome.fetches);
        self.end_to_end = summary(&outcome.delivery);
    }

    /// True unless a verification ran and failed.
    pub fn passed(&self) -> bool {
        self.verification.as_ref().is_none_or(|v| v.passed)
            && self.consumer_verification.as_ref().is_none_or(|v| v.passed)
    }

    /// About how many bytes one produce request stores: payload plus RecordBatch overhead
    /// (61 bytes per batch, about 8 per record).
    pub fn stored_bytes_per_request(&self, args: &LoadArgs) -> u64 {
        let Some(produce) = &self.produce else {
            return args.record_size.mean() as u64;
        };
        let requests = produce.requests.max(1);
        let records = produce.records as f64 / requests as f64;
        (produce.bytes as f64 / requests as f64 + 61.0 + 8.0 * records) as u64
    }

    pub fn compute_ratios(&mut self) {
        self.ratios.clear();
        let (Some(produce), Some(baselines)) = (&self.produce, &self.baselines) else {
            return;
        };
        let null = &baselines.null_server;
        let disk = &baselines.disk.summary;
        let mut push = |name: &str, value: f64, meaning: &str| {
            if value.is_finite() {
                self.ratios.push(Ratio {
                    name: name.into(),
                    value,
                    meaning: meaning.into(),
                });
            }
        };
        push(
            "produce_mean_over_transport_plus_disk",
            produce.latency_ms.mean / (null.latency_ms.mean + disk.latency_ms.mean),
            "time per produce request / (no-storage round trip + write+fdatasync of its bytes); 1.0 is the bound",
        );
        push(
            "produce_p99_over_transport_p99",
            produce.latency_ms.p99 / null.latency_ms.p99,
            "produce p99 / no-storage server p99 under the same load",
        );
        push(
            "produce_rate_over_transport_rate",
            produce.requests_per_s / null.requests_per_s,
            "produce requests/s / no-storage server requests/s",
        );
        push(
            "produce_p99_over_transport_plus_disk_p99",
            produce.latency_ms.p99 / (null.latency_ms.p99 + disk.latency_ms.p99),
            "produce p99 / (no-storage p99 + write+fdatasync p99, paced as the producers)",
        );
        if let Some(durable) = &baselines.durable_server {
            push(
                "produce_mean_over_durable_server",
                produce.latency_ms.mean / durable.latency_ms.mean,
                "time per produce request / the durable no-storage server's (write + fdatasync of the body in its handler)",
            );
            push(
                "produce_p99_over_durable_server_p99",
                produce.latency_ms.p99 / durable.latency_ms.p99,
                "produce p99 / the durable no-storage server's p99 under the same load",
            );
        }
        if let Some(group) = &baselines.group_server {
            push(
                "produce_rate_over_group_server_rate",
                produce.requests_per_s / group.requests_per_s,
                "produce requests/s / the group-commit no-storage server's (bodies written in their handlers, one fdatasync covering all written)",
            );
        }
        push(
            "produce_bytes_over_disk_bytes",
            produce.mib_per_s / disk.mib_per_s,
            "payload MiB/s / write+fdatasync MiB/s of one request's size, one writer",
        );
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a strata-loadtest result", path.display()))
    }

    /// The summary for people.
    pub fn print(&self) {
        println!(
            "strata-loadtest {} against Strata {} · {:?} · {:.1} s measured · {} CPUs, load {}",
            self.tool_version,
            self.strata_version,
            self.workload,
            self.measured_s,
            self.machine.cpus,
            self.machine.load_average
        );
        let line = |name: &str, s: &Summary| {
            println!(
                "{name:<10} {:>10.0} req/s {:>11.0} rec/s {:>8.1} MiB/s  latency ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}  errors {}",
                s.requests_per_s,
                s.records_per_s,
                s.mib_per_s,
                s.latency_ms.p50,
                s.latency_ms.p99,
                s.latency_ms.p999,
                s.latency_ms.max,
                s.errors
            );
        };
        for (name, summary) in [
            ("produce", &self.produce),
            ("fetch", &self.fetch),
            ("e2e", &self.end_to_end),
        ] {
            if let Some(s) = summary {
                line(name, s);
            }
        }
        if let Some(b) = &self.baselines {
            line("no-storage", &b.null_server);
            if let Some(durable) = &b.durable_server {
                line("durable no-storage", durable);
            }
            if let Some(group) = &b.group_server {
                line("group-commit no-storage", group);
            }
            line(
                &format!("disk {}B", b.disk.bytes_per_write),
                &b.disk.summary,
            );
        }
        for ratio in &self.ratios {
            println!(
                "ratio {:<40} {:>7.3}  ({})",
                ratio.name, ratio.value, ratio.meaning
            );
        }
        for (name, verdict) in [
            ("log", &self.verification),
            ("consumers", &self.consumer_verification),
        ] {
            let Some(v) = verdict else { continue };
            println!(
                "verify {name:<9} {}: {} acknowledged, {} read, {} lost, {} duplicated, {} misplaced, {} out of order, {} corrupt, {} unacknowledged but stored",
                if v.passed { "PASSED" } else { "FAILED" },
                v.acknowledged,
                v.read,
                v.lost,
                v.duplicates,
                v.misplaced,
                v.out_of_order,
                v.corrupt,
                v.unacknowledged_stored
            );
            for problem in &v.problems {
                println!("  {problem}");
            }
        }
    }
}

/// Prints the figures of two results side by side, with B / A.
pub fn compare(a: &Report, b: &Report) {
    println!("{:<28} {:>14} {:>14} {:>8}", "metric", "A", "B", "B/A");
    let row = |name: String, x: f64, y: f64| {
        let ratio = if x != 0.0 {
            format!("{:.3}", y / x)
        } else {
            "-".into()
        };
        println!("{name:<28} {x:>14.3} {y:>14.3} {ratio:>8}");
    };
    for (name, x, y) in [
        ("produce", &a.produce, &b.produce),
        ("fetch", &a.fetch, &b.fetch),
        ("e2e", &a.end_to_end, &b.end_to_end),
    ] {
        let (Some(x), Some(y)) = (x, y) else { continue };
        row(
            format!("{name} requests/s"),
            x.requests_per_s,
            y.requests_per_s,
        );
        row(
            format!("{name} records/s"),
            x.records_per_s,
            y.records_per_s,
        );
        row(format!("{name} MiB/s"), x.mib_per_s, y.mib_per_s);
        row(
            format!("{name} latency mean ms"),
            x.latency_ms.mean,
            y.latency_ms.mean,
        );
        row(
            format!("{name} latency p50 ms"),
            x.latency_ms.p50,
            y.latency_ms.p50,
        );
        row(
            format!("{name} latency p99 ms"),
            x.latency_ms.p99,
            y.latency_ms.p99,
        );
        row(
            format!("{name} latency p99.9 ms"),
            x.latency_ms.p999,
            y.latency_ms.p999,
        );
        row(
            format!("{name} latency max ms"),
            x.latency_ms.max,
            y.latency_ms.max,
        );
        row(format!("{name} errors"), x.errors as f64, y.errors as f64);
    }
}
