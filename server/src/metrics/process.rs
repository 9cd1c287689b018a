//! The process, under the names Prometheus' own process collectors use
//! (`process_resident_memory_bytes`, `process_open_fds`, ...), read from `/proc/self` at scrape.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::Exporter;
use super::families::gauge;

pub(super) fn register(registry: &mut Registry, exporter: &Exporter) {
    let uptime: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
    uptime.set(exporter.started.elapsed().as_secs_f64());
    registry.register_with_unit(
        "strata_uptime",
        "Time since the server started",
        Unit::Seconds,
        uptime,
    );
    if let Some(rss) = resident_bytes() {
        registry.register_with_unit(
            "process_resident_memory",
            "Resident memory size",
            Unit::Bytes,
            gauge(rss),
        );
    }
    if let Some(seconds) = cpu_seconds() {
        let cpu: prometheus_client::metrics::counter::Counter<f64, std::sync::atomic::AtomicU64> =
            Default::default();
        cpu.inc_by(seconds);
        registry.register_with_unit(
            "process_cpu",
            "User and system CPU time spent",
            Unit::Seconds,
            cpu,
        );
    }
    if let Some(open) = open_fds() {
        registry.register("process_open_fds", "Open file descriptors", gauge(open));
    }
    if let Ok((soft, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
        registry.register(
            "process_max_fds",
            "Open file descriptor limit (soft)",
            gauge(soft),
        );
    }
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `utime + stime` of `/proc/self/stat`, in seconds. Those fields count clock ticks of
/// `USER_HZ`, which the kernel fixes at 100 for every user-space ABI on Linux.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start with field 3 (state), so utime (14) and stime (15) are at 11 and 12 from there.
    let after_name = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Entries of `/proc/self/fd` (the directory handle itself included, as every collector does).
fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_figures_are_read() {
        let before_cpu = cpu_seconds().unwrap();
        // Burn at least a few clock ticks (10 ms each) of CPU.
        let mut spin = 0u64;
        for _ in 0..5_000 {
            if cpu_seconds().unwrap() >= before_cpu + 0.05 {
                break;
            }
            for i in 0..1_000_000u64 {
                spin = std::hint::black_box(spin.wrapping_add(i));
            }
        }
        assert!(cpu_seconds().unwrap() >= before_cpu + 0.05, "{spin}");
        let rss = resident_bytes().unwrap();
        assert!(rss > 1 << 20, "{rss}");
        // Other tests of this process open and close files at the same time: the count must
        // track one more open file in some quiet moment out of many tries.
        let tracked = (0..200).any(|_| {
            let before = open_fds().unwrap();
            let file = std::fs::File::open("/proc/self/status").unwrap();
            let after = open_fds().unwrap();
            drop(file);
            after == before + 1
        });
        assert!(tracked, "open_fds never counted a newly opened file");
    }
}
