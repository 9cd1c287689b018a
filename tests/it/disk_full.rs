//! A real full disk at the engine level: the partition lives on a tiny tmpfs mounted for this
//! test (CI runs as root). Appends fail with ENOSPC while it is full, nothing partial becomes
//! readable, and appends succeed again once space is freed, on both I/O backends.

use bytes::Bytes;
use strata_server::clock::ManualClock;
use strata_server::io::{Io, IoBackendChoice};
use strata_server::log::batch::{BatchOptions, NewRecord, encode_batch};
use strata_server::log::{Acks, AppendError, LogConfig, Partition, RecordBatch};
use strata_tests::Tmpfs;

fn batch(value_len: usize) -> RecordBatch {
    let record = NewRecord {
        timestamp: 1,
        key: None,
        value: Some(Bytes::from(vec![7u8; value_len])),
        headers: Vec::new(),
    };
    RecordBatch::decode_exact(encode_batch(&BatchOptions::default(), &[record]).unwrap()).unwrap()
}

#[test]
fn a_full_disk_fails_appends_cleanly_and_they_resume_when_space_returns() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for choice in [IoBackendChoice::Sync, IoBackendChoice::Uring] {
        runtime.block_on(async {
            let mount = Tmpfs::mount("1m");
            // A filler file that takes most of the space, deleted later to "free the disk".
            let filler = mount.path().join("filler");
            std::fs::write(&filler, vec![0u8; 700 * 1024]).unwrap();
            let (io, _) = Io::start(choice, mount.path()).unwrap();
            let dir = mount.path().join("p");
            let partition = Partition::open(&dir, LogConfig::default(), io, ManualClock::new(0))
                .await
                .unwrap();
            let mut acked = 0u64;
            let error = loop {
                match partition.append(vec![batch(16 * 1024)], Acks::All).await {
                    Ok(acks) => {
                        assert_eq!(acks[0].base_offset, acked);
                        acked += 1;
                        assert!(acked < 1000, "the disk never filled up");
                    }
                    Err(error) => break error,
                }
            };
            match &error {
                AppendError::Io(io_error) => {
                    assert_eq!(io_error.raw_os_error(), Some(libc::ENOSPC), "{io_error}")
                }
                other => panic!("expected ENOSPC, got {other:?}"),
            }
            assert!(acked > 0);
            assert_eq!(partition.offsets().high_watermark, acked);
            assert_eq!(
                partition.offsets().log_end_offset,
                acked,
                "the failed batch took no offset"
            );
            let size: u64 = partition.segments().iter().map(|s| s.durable_size).sum();
            let on_disk: u64 = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum();
            assert_eq!(on_disk, size, "the partial write was cut off the file");
            std::fs::remove_file(&filler).unwrap();
            let acks = partition
                .append(vec![batch(16 * 1024)], Acks::All)
                .await
                .unwrap();
            assert_eq!(
                acks[0].base_offset, acked,
                "appends resume at the next offset"
            );
            let mut offset = 0;
            while offset < acked + 1 {
                let slice = partition.read(offset, 1 << 20).await.unwrap();
                assert!(!slice.data.is_empty());
                offset = slice.next_offset;
            }
            partition.close().await.unwrap();
        });
    }
}
