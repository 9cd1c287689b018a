//! Receiving a large raw produce body while it streams into the partition's log (see
//! `log::stream`): the body is read here, under the deadline the body guard set, and each part
//! that arrives is written into the segment at once, so the append's page-cache copy overlaps
//! the transport instead of following it.
//!
//! The lease is asked for before the first byte is read, while the client is still sending,
//! and only when the partition's writer says it is idle (`Partition::stream_lease`), so the
//! read never waits for a busy writer. Whatever happens to the lease, the whole body is kept in
//! memory too: it is validated as any raw body is, and appended the usual way when the lease
//! was lost.

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::body_guard::{UnreadBody, timed_out, unreadable};
use super::error::ApiError;
use crate::broker::{Broker, WritableTopic};
use crate::log::stream::StreamLease;

/// The whole body, and the lease its bytes were streamed under (if one was granted and kept).
///
/// # Errors
/// 408 when the body misses its deadline, 400 when it ends early, 404 for an unknown partition.
pub(super) async fn receive(
    broker: &Broker,
    topic: &WritableTopic,
    partition: u32,
    body: Body,
    unread: UnreadBody,
) -> Result<(Bytes, Option<StreamLease>), ApiError> {
    let length = unread.length as u64;
    let mut lease = broker.stream_lease(topic, partition, length).await?;
    let mut frames: Vec<Bytes> = Vec::new();
    let mut received = 0u64;
    let mut stream = body.into_data_stream();
    loop {
        let left = unread.timeout.saturating_sub(unread.started.elapsed());
        match tokio::time::timeout(left, stream.next()).await {
            Err(_) => return Err(timed_out(unread.timeout)),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(unreadable()),
            Ok(Some(Ok(frame))) => {
                received += frame.len() as u64;
                frames.push(frame);
                advance(&mut lease, &frames, received);
            }
        }
    }
    if received != length {
        return Err(unreadable());
    }

    Ok((concat(frames, unread.length), lease))
}

/// Writes what arrived under the lease; a lost lease is dropped (the writer cuts its bytes).
fn advance(lease: &mut Option<StreamLease>, frames: &[Bytes], received: u64) {
    if let Some(held) = lease.as_mut()
        && !held.advance(frames, received)
    {
        *lease = None;
    }
}

/// The body as one buffer: the frame itself when it came whole.
fn concat(mut frames: Vec<Bytes>, length: usize) -> Bytes {
    if frames.len() == 1 {
        return frames.pop().unwrap_or_default();
    }
    let mut body = BytesMut::with_capacity(length);
    for frame in frames {
        body.extend_from_slice(&frame);
    }
    body.freeze()
}
