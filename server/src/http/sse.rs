//! Pieces shared by the SSE endpoints (partition fetch and group-member fetch).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures::Stream;
use strata_openapi::{ErrorBody, ErrorCode};

/// The `error` event that ends a stream which cannot continue.
pub fn error_event(code: ErrorCode) -> Option<Event> {
    let body = ErrorBody::new(code, "the stream cannot continue");
    Event::default().event("error").json_data(&body).ok()
}

/// An SSE response that sends a `ping` event every `ping` while the stream is idle, so proxies
/// keep the connection open.
pub fn with_pings<S>(stream: S, ping: Duration) -> Sse<KeepAliveStream<S>>
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(ping)
            .event(Event::default().event("ping")),
    )
}
