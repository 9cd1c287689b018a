//! Receiving a large raw produce body while it streams into the partition's log (see
//! `log::stream`): the body is read here, under the deadline the body guard set, and each part
//! that arrives is written into the segment at once, so the append's page-cache copy overlaps
//! the transport instead of following it.
//!
//! The lease is asked for before the first byte is read, while the client is still sending,
//! and only when the partition's writer says it is idle (`Partition::stream_lease`), so the
//! read never waits for a busy writer. Whatever happens to the lease, the whole body is kept in
//! memory too: it is validated as any raw body is, and appended the usual way when the lease
//! was lost. Its in-memory copy is gathered, and its batches' CRCs computed
//! (`log::arriving_crc`), as its frames arrive, so neither waits for the last byte.

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::body_guard::{UnreadBody, timed_out, unreadable};
use super::error::ApiError;
use crate::broker::produce::RawBody;
use crate::broker::{Broker, WritableTopic};
use crate::log::arriving_crc::ArrivingCrcs;
use crate::log::stream::StreamLease;

/// The whole body, the lease its bytes were streamed under (if one was granted and kept), and
/// its batches' CRCs.
///
/// # Errors
/// 408 when the body misses its deadline, 400 when it ends early, 404 for an unknown partition.
pub(super) async fn receive(
    broker: &Broker,
    topic: &WritableTopic,
    partition: u32,
    body: Body,
    unread: UnreadBody,
) -> Result<RawBody, ApiError> {
    let length = unread.length as u64;
    let mut lease = broker.stream_lease(topic, partition, length).await?;
    let mut frames: Vec<Bytes> = Vec::new();
    let mut whole = BytesMut::with_capacity(unread.length);
    let mut crcs = ArrivingCrcs::default();
    let mut stream = body.into_data_stream();
    loop {
        let left = unread.timeout.saturating_sub(unread.started.elapsed());
        match tokio::time::timeout(left, stream.next()).await {
            Err(_) => return Err(timed_out(unread.timeout)),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(unreadable()),
            Ok(Some(Ok(frame))) => {
                if whole.len() + frame.len() > unread.length {
                    return Err(unreadable());
                }
                whole.extend_from_slice(&frame);
                if lease.is_some() {
                    frames.push(frame);
                    advance(&mut lease, &frames, whole.len() as u64);
                }
                crcs.advance(&whole);
            }
        }
    }
    if whole.len() != unread.length {
        return Err(unreadable());
    }
    Ok(RawBody {
        bytes: whole.freeze(),
        lease,
        crcs: crcs.finish(),
    })
}

/// Writes what arrived under the lease; a lost lease is dropped (the writer cuts its bytes).
fn advance(lease: &mut Option<StreamLease>, frames: &[Bytes], received: u64) {
    if let Some(held) = lease.as_mut()
        && !held.advance(frames, received)
    {
        *lease = None;
    }
}
