//! Server-Sent Events of the streaming endpoints (partition fetch and group-member fetch). The
//! event contract (names, data, ids) is specified in `strata_openapi::streams`.
//!
//! Browsers are the clients this shape is for: every event carries `data` (EventSource drops
//! events without it), the first message sets `retry`, server failures use the `server_error`
//! name (`error` is the browser's own connection-error event), and a stream the server ends on
//! purpose ends with an `end` event that says why.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures::Stream;
use strata_openapi::{ErrorBody, StreamEnd, StreamEndReason, StreamPing};

use super::AppState;
use super::error::ApiError;
use super::fetch::{FetchRequest, Format, Page, ReadAudit, read_page};
use crate::broker::reader::PartitionReader;
use crate::limits::{SSE_RETRY_MS, TOPIC_DELETION_CHECK_MS};
use crate::log::LogOffsets;
use crate::security::{Caller, Operation, Resource};

/// Event name of a batch of records.
pub const RECORDS: &str = "records";
/// Event name of a failure that ends the stream.
pub const SERVER_ERROR: &str = "server_error";
/// Event name of the last event of a stream the server ended on purpose.
pub const END: &str = "end";
/// Event name of an idle stream's keep-alive.
pub const PING: &str = "ping";

/// The `server_error` event for `error`, with the error's own (sanitized) body.
pub fn error_event(error: &ApiError) -> Option<Event> {
    Event::default()
        .event(SERVER_ERROR)
        .json_data(error.body())
        .ok()
}

/// The `server_error` event for a body built elsewhere.
pub fn error_body_event(name: &str, body: &ErrorBody) -> Option<Event> {
    Event::default().event(name).json_data(body).ok()
}

/// The `end` event.
pub fn end_event(reason: StreamEndReason, message: &str) -> Option<Event> {
    let end = StreamEnd {
        reason,
        message: message.to_string(),
    };
    Event::default().event(END).json_data(&end).ok()
}

/// The message every stream starts with: the reconnect delay for browsers, as a comment so no
/// event fires.
pub fn retry_event() -> Event {
    Event::default()
        .retry(Duration::from_millis(SSE_RETRY_MS))
        .comment("strata stream")
}

/// An SSE response that sends a `ping` event (data `{}`) every `ping` while the stream is idle,
/// so proxies keep the connection open and pages can see it is alive.
pub fn with_pings<S>(stream: S, ping: Duration) -> Sse<KeepAliveStream<S>>
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let data = serde_json::to_string(&StreamPing::default()).unwrap_or_else(|_| "{}".into());
    Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(ping)
            .event(Event::default().event(PING).data(data)),
    )
}

/// The `records` event of a partition stream: id = the next offset to read.
fn records_event(read: &Page) -> Option<Event> {
    Event::default()
        .event(RECORDS)
        .id(read.response.next_offset.to_string())
        .json_data(&read.response)
        .ok()
}

/// What ended a stream's wait.
enum Wake {
    Data,
    Gone,
    Stop,
    Check,
}

/// Whether `topic` is still the catalog's topic of that name (not deleted, not re-created).
fn still_exists(state: &AppState, topic: &Arc<crate::topics::catalog::Topic>) -> bool {
    state.broker.is_current(topic)
}

/// Why `caller` may no longer read `topic`: their API key was revoked (401) or a rule now
/// denies the read (403). A stream outlives the request that was checked, so it asks again
/// before each page, as a new request would.
pub(crate) fn refused_now(state: &AppState, caller: &Caller, topic: &str) -> Option<ApiError> {
    if !state.broker.still_authenticated(caller) {
        return Some(super::auth::unauthenticated());
    }
    state
        .broker
        .authorize(caller, Operation::Read, Resource::topic(topic))
        .err()
        .map(ApiError::from)
}

/// Follows a partition's tail from `request.offset` until the client leaves, the topic is
/// deleted, a read fails or the server shuts down. `first` is the read the handler already did.
// A periodic check, a timer rather than a clock reading.
#[allow(clippy::disallowed_methods)]
///
/// Every page after `first` (which the handler recorded) is recorded in the read audit
/// before its event is sent; a failed record ends the stream with a `server_error` event.
pub(crate) fn partition_stream(
    state: AppState,
    audit: ReadAudit,
    log: Arc<PartitionReader>,
    request: FetchRequest,
    first: Option<Page>,
    slot: Option<crate::security::streams::StreamSlot>,
) -> impl IntoResponse {
    let ping = Duration::from_millis(state.config.sse_ping_interval_ms);
    let mut shutdown = state.shutdown.clone();
    let stream = async_stream::stream! {
        // Held while the stream lives: it counts against the principal's open streams.
        let _slot = slot;
        yield Ok::<_, Infallible>(retry_event());
        let mut next = request.offset;
        let mut pending = first;
        let mut offsets = log.subscribe();
        loop {
            let read = match pending.take() {
                Some(read) => Ok(read),
                None => {
                    let woke = {
                        let ready = offsets.wait_for(|o: &LogOffsets| o.high_watermark > next);
                        let stop = shutdown.wait_for(|stopping| *stopping);
                        let check =
                            tokio::time::sleep(Duration::from_millis(TOPIC_DELETION_CHECK_MS));
                        // Map to plain values: the channels' read guards must not live across a
                        // yield.
                        tokio::select! {
                            result = ready => if result.is_ok() { Wake::Data } else { Wake::Gone },
                            _ = stop => Wake::Stop,
                            () = check => Wake::Check,
                        }
                    };
                    match woke {
                        Wake::Gone => break,
                        Wake::Stop => {
                            if let Some(event) = end_event(StreamEndReason::ShuttingDown,
                                "the server is shutting down; reconnect to resume") {
                                yield Ok(event);
                            }
                            break;
                        }
                        Wake::Data | Wake::Check => {}
                    }
                    if !still_exists(&state, &audit.topic) {
                        if let Some(event) = end_event(StreamEndReason::TopicDeleted,
                            &format!("topic {} was deleted", audit.topic.name())) {
                            yield Ok(event);
                        }
                        break;
                    }
                    if let Some(refused) = refused_now(&state, &audit.caller, audit.topic.name()) {
                        if let Some(event) = error_event(&refused) {
                            yield Ok(event);
                        }
                        break;
                    }
                    let high_watermark = offsets.borrow().high_watermark;
                    if high_watermark <= next {
                        continue;
                    }
                    match read_page(&log, &FetchRequest { offset: next, ..request }).await {
                        Ok(page) => audit
                            .sent(&state.broker, Format::Sse, page.disclosed)
                            .await
                            .map(|()| page),
                        Err(error) => Err(error),
                    }
                }
            };
            match read {
                Ok(read) => {
                    read.count(&state.http_stats, "sse");
                    next = read.response.next_offset;
                    if !read.response.records.is_empty()
                        && let Some(event) = records_event(&read)
                    {
                        yield Ok(event);
                    }
                    if let Some(error) = &read.stopped_by {
                        if let Some(event) = error_event(error) {
                            yield Ok(event);
                        }
                        break;
                    }
                }
                Err(error) => {
                    if let Some(event) = error_event(&error) {
                        yield Ok(event);
                    }
                    break;
                }
            }
        }
    };
    with_pings(stream, ping)
}
