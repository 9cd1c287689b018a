//! The process, under the names Prometheus' own process collectors use
//! (`process_resident_memory_bytes`, `process_open_fds`, ...), read from `/proc/self` at scrape.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::Exporter;

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
            whole(rss),
        );
    }
    if let Some(open) = open_fds() {
        registry.register("process_open_fds", "Open file descriptors", whole(open));
    }
    if let Ok((soft, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
        registry.register(
            "process_max_fds",
            "Open file descriptor limit (soft)",
            whole(soft),
        );
    }
}

fn whole(value: u64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
        let rss = resident_bytes().unwrap();
        assert!(rss > 1 << 20, "{rss}");
        let before = open_fds().unwrap();
        let _file = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(open_fds().unwrap(), before + 1);
    }
}
