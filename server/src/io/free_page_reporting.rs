//! Whether this machine hands free memory back to its host page by page, which decides the
//! default page-cache window (ADR 0014).
//!
//! On a VM with virtio-balloon free page reporting, memory the guest frees goes back to the host
//! and costs a host fault when touched again, so a log that keeps all it wrote in the page cache
//! makes every write take such pages; dropping durable bytes behind a small window lets writes
//! reuse pages instead (3-5x faster large appends there). Elsewhere, fresh pages are cheap and
//! the window would only send replays of recent data to the disk, so it stays off.

use std::path::Path;

/// Where Linux lists the devices bound to the virtio balloon driver.
const BALLOON_DRIVER: &str = "/sys/bus/virtio/drivers/virtio_balloon";
/// `VIRTIO_BALLOON_F_REPORTING`: the device takes reports of free guest pages.
const REPORTING_FEATURE_BIT: usize = 5;

/// True when a virtio balloon with free page reporting is bound on this machine.
pub fn active() -> bool {
    active_in(Path::new(BALLOON_DRIVER))
}

/// [`active`] over a driver directory whose `virtio*` entries hold a `features` file: one
/// `0`/`1` character per feature bit, bit 0 first.
fn active_in(driver: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(driver) else {
        return false;
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("virtio"))
        .any(|device| {
            std::fs::read_to_string(device.path().join("features"))
                .is_ok_and(|bits| bits.as_bytes().get(REPORTING_FEATURE_BIT) == Some(&b'1'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver_with(features: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("uevent"), "DRIVER=virtio_balloon\n").unwrap();
        for (i, bits) in features.iter().enumerate() {
            let device = dir.path().join(format!("virtio{i}"));
            std::fs::create_dir(&device).unwrap();
            std::fs::write(device.join("features"), format!("{bits}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn a_balloon_with_the_reporting_bit_is_detected() {
        // This machine's balloon: bits 1, 2, 5 and 32.
        let dir = driver_with(&["0110010100000000000000000000000010000000"]);
        assert!(active_in(dir.path()));
        let second = driver_with(&["0110000000", "0000010000"]);
        assert!(active_in(second.path()), "any bound balloon counts");
    }

    #[test]
    fn no_balloon_or_no_reporting_bit_is_not() {
        assert!(!active_in(Path::new("/nonexistent/virtio_balloon")));
        assert!(!active_in(driver_with(&[]).path()));
        assert!(!active_in(driver_with(&["0110000000000000"]).path()));
        assert!(
            !active_in(driver_with(&["01100"]).path()),
            "a short bit string"
        );
    }
}
