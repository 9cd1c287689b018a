//! The group-commit log behind the no-storage server's group variant: what group commit on
//! this disk gives the same concurrent producers when nothing else stands in the way.
//!
//! Each request's body is written into the page cache by its own handler, and one thread runs
//! fdatasyncs back to back while written bytes wait: each one covers everything written before
//! it started, so requests that arrive during one sync share the next. No offsets, no
//! validation, no queue and no writer task: a request waits only for the sync that covers it.
//! A storing server's group commit (issue 15's goal 5b) is measured against this, since the
//! disk's rate for one writer of 1 MiB is a line that concurrent 100 KiB requests can only
//! approach through their round trips.
//!
//! Like Strata's writer (its ADR 0015), the log reserves its next bytes ahead of the writes
//! (`fallocate`, 4 MiB at a time), so an fdatasync does not also commit a new file size: the
//! bound gets every trick the server under test has.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use crate::disk::{ROLL_BYTES, drop_cached_behind};

/// A log of two scratch files written in turn (see [`GroupLog::write`]), and its syncer.
pub struct GroupLog {
    files: [File; 2],
    /// Length past which the log moves to its other file.
    roll_bytes: u64,
    state: Mutex<State>,
    /// Wakes the syncer when bytes are written.
    written: Condvar,
    /// How many bytes (counted over the log's whole life) are durable; `None` once a sync
    /// failed, so no request waits for bytes that will never be durable.
    durable: watch::Sender<Option<u64>>,
}

struct State {
    /// The file written now.
    active: usize,
    /// Where the next write goes in the active file.
    end: u64,
    /// Bytes written over the log's life: a request's ticket is this count after its write.
    written: u64,
    /// Writes into each file so far; a sync started when `started` was taken, and finished
    /// once `synced` is, covers the writes up to those counts.
    writes: [u64; 2],
    started: [u64; 2],
    synced: [u64; 2],
    /// How much of the active file has left the page cache.
    dropped: u64,
    /// The active file's reserved length; `u64::MAX` once a reservation failed (a file system
    /// without `fallocate`), so the writes then grow the file.
    reserved: u64,
}

/// Bytes reserved at a time (Strata's default `segment_preallocate_bytes`).
const RESERVE_STEP: u64 = 4 << 20;

/// How long the syncer waits for writes before it checks whether the log is still in use.
const IDLE_CHECK: Duration = Duration::from_millis(100);

impl GroupLog {
    /// A log over two scratch files, with its syncer thread running while the log is in use.
    pub fn start(files: [File; 2]) -> std::io::Result<Arc<Self>> {
        Self::rolling_at(files, ROLL_BYTES)
    }

    fn rolling_at(files: [File; 2], roll_bytes: u64) -> std::io::Result<Arc<Self>> {
        let (durable, _) = watch::channel(Some(0));
        let log = Arc::new(Self {
            files,
            roll_bytes,
            state: Mutex::new(State {
                active: 0,
                end: 0,
                written: 0,
                writes: [0; 2],
                started: [0; 2],
                synced: [0; 2],
                dropped: 0,
                reserved: 0,
            }),
            written: Condvar::new(),
            durable,
        });
        let syncer = Arc::downgrade(&log);
        std::thread::Builder::new()
            .name("group-log-sync".into())
            .spawn(move || {
                while let Some(log) = syncer.upgrade() {
                    if !log.sync_once() {
                        break;
                    }
                }
            })?;
        Ok(log)
    }

    /// Writes `body` at the log's end (page cache only) and returns its ticket for
    /// [`GroupLog::durable`].
    ///
    /// Past `roll_bytes` ([`ROLL_BYTES`]) the log moves to its other file, emptied first, as a
    /// log rolls to a new segment: only once a finished sync covers every write into that file,
    /// so emptying it never takes bytes a sync in flight is making durable; until then it grows
    /// on.
    pub fn write(&self, body: &[u8]) -> std::io::Result<u64> {
        let mut state = self.lock()?;
        let other = 1 - state.active;
        if state.end > self.roll_bytes && state.writes[other] == state.synced[other] {
            self.files[other].set_len(0)?;
            state.active = other;
            state.end = 0;
            state.dropped = 0;
            if state.reserved != u64::MAX {
                state.reserved = 0;
            }
        }
        let active = state.active;
        let end = state.end + body.len() as u64;
        if end > state.reserved {
            let length = (end - state.reserved).max(RESERVE_STEP);
            state.reserved = match reserve(&self.files[active], state.reserved, length) {
                Ok(()) => state.reserved + length,
                Err(_) => u64::MAX,
            };
        }
        self.files[active].write_all_at(body, state.end)?;
        state.end = end;
        state.written += body.len() as u64;
        state.writes[active] += 1;
        self.written.notify_one();
        Ok(state.written)
    }

    /// Bytes written over the log's life.
    pub fn written(&self) -> std::io::Result<u64> {
        Ok(self.lock()?.written)
    }

    /// Waits until the bytes of `ticket` are durable.
    pub async fn durable(&self, ticket: u64) -> std::io::Result<()> {
        let mut durable = self.durable.subscribe();
        let reached = durable
            .wait_for(|durable| durable.is_none_or(|durable| durable >= ticket))
            .await
            .map(|durable| *durable);
        match reached {
            Ok(Some(_)) => Ok(()),
            _ => Err(std::io::Error::other("the group log's fdatasync failed")),
        }
    }

    /// One fdatasync of everything written so far, once something is written within
    /// [`IDLE_CHECK`]; `false` once a sync fails (the waiting requests are then told so).
    fn sync_once(&self) -> bool {
        let Ok(state) = self.lock() else {
            return false;
        };
        let waited = self
            .written
            .wait_timeout_while(state, IDLE_CHECK, |state| state.writes == state.started);
        let Ok((mut state, timeout)) = waited else {
            return false;
        };
        if timeout.timed_out() {
            return true;
        }
        let target = state.written;
        let covers = state.writes;
        let synced = state.synced;
        state.started = covers;
        drop(state);
        for (index, file) in self.files.iter().enumerate() {
            if covers[index] != synced[index] && file.sync_data().is_err() {
                self.durable.send_replace(None);
                return false;
            }
        }
        let Ok(mut state) = self.lock() else {
            self.durable.send_replace(None);
            return false;
        };
        state.synced = covers;
        let State {
            active,
            end,
            dropped,
            ..
        } = &mut *state;
        drop_cached_behind(&self.files[*active], *end, dropped);
        drop(state);
        self.durable.send_replace(Some(target));
        true
    }

    fn lock(&self) -> std::io::Result<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| std::io::Error::other("group log lock poisoned"))
    }
}

/// `fallocate(fd, 0, offset, length)`: blocks reserved as unwritten extents, the size grown.
fn reserve(file: &File, offset: u64, length: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let (Ok(offset), Ok(length)) = (libc::off_t::try_from(offset), libc::off_t::try_from(length))
    else {
        return Err(std::io::Error::other("reservation out of range"));
    };
    // SAFETY: fallocate only reads its integer arguments; the fd is open because `file` is
    // borrowed for the call, and a reservation never changes bytes already written.
    let code = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, length) };
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn scratch() -> (File, File) {
        let file = tempfile::tempfile().expect("scratch file");
        let reader = file.try_clone().expect("clone");
        (file, reader)
    }

    #[tokio::test]
    async fn a_written_body_becomes_durable_in_order() {
        let (first, mut reader) = scratch();
        let (second, _) = scratch();
        let log = GroupLog::start([first, second]).expect("started");
        let one = log.write(b"first,").expect("written");
        let two = log.write(b"second").expect("written");
        assert_eq!((one, two), (6, 12));
        tokio::time::timeout(Duration::from_secs(10), log.durable(two))
            .await
            .expect("the syncer covers every written byte")
            .expect("durable");
        let mut text = [0u8; 12];
        reader.read_exact(&mut text).expect("read back");
        assert_eq!(&text, b"first,second");
    }

    #[tokio::test]
    async fn past_its_length_the_log_moves_to_its_other_file_emptied() {
        let (first, first_reader) = scratch();
        let (second, mut second_reader) = scratch();
        let log = GroupLog::rolling_at([first, second], 10).expect("started");
        let ticket = log.write(b"0123456789ab").expect("written");
        log.durable(ticket).await.expect("durable");
        // The second file holds stale bytes, as a file written a roll ago would.
        log.files[1]
            .write_all_at(b"stale", RESERVE_STEP + 10)
            .expect("stale bytes");
        let ticket = log.write(b"next").expect("written");
        log.durable(ticket).await.expect("durable");
        let mut moved = [0u8; 4];
        second_reader.read_exact(&mut moved).expect("read back");
        assert_eq!(&moved, b"next", "the write went to the other file, emptied");
        assert_eq!(
            second_reader.metadata().expect("metadata").len(),
            RESERVE_STEP,
            "emptied (the stale bytes past the reservation are gone), then reserved again"
        );
        let mut kept = [0u8; 12];
        first_reader.read_exact_at(&mut kept, 0).expect("read back");
        assert_eq!(&kept, b"0123456789ab", "the first file is left as it was");
    }

    #[tokio::test]
    async fn writes_reserve_the_bytes_ahead_of_them() {
        let (first, reader) = scratch();
        let (second, _) = scratch();
        let log = GroupLog::start([first, second]).expect("started");
        log.write(&[7u8; 100]).expect("written");
        let length = reader.metadata().expect("metadata").len();
        assert_eq!(
            length, RESERVE_STEP,
            "one reservation covers the first write"
        );
        let big = vec![9u8; RESERVE_STEP as usize];
        log.write(&big).expect("written");
        let length = reader.metadata().expect("metadata").len();
        assert_eq!(length, 2 * RESERVE_STEP, "reserved past the end again");
    }

    #[tokio::test]
    async fn a_ticket_past_what_was_written_is_not_durable() {
        let (first, _) = scratch();
        let (second, _) = scratch();
        let log = GroupLog::start([first, second]).expect("started");
        let ticket = log.write(b"bytes").expect("written");
        log.durable(ticket).await.expect("durable");
        let later = tokio::time::timeout(Duration::from_millis(50), log.durable(ticket + 1)).await;
        assert!(later.is_err(), "nothing was written past the ticket");
    }
}
