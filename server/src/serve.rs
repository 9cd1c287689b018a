//! Accepting connections: the one place that sees sockets. Every accepted socket gets
//! TCP_NODELAY (small produce answers must not wait for Nagle), a connection slot (beyond
//! `max_connections` the client gets a 503 `busy` and the socket closes, instead of the server
//! running out of file descriptors), a deadline for its request headers, and TLS when
//! configured. The client certificate's principal travels with every request of the
//! connection as a [`ClientIdentity`]. Shutdown stops accepting and lets open requests finish.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use strata_openapi::{ErrorBody, ErrorCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use crate::security::tls::{PrincipalFrom, TlsSource, principal_of};

/// The principal of a verified client certificate, for the request's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity(pub String);

/// The client's socket address, on every request (the read audit records it).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub std::net::SocketAddr);

/// How connections are accepted.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Deadline for a request's headers.
    pub header_read_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// HTTPS, when configured.
    pub tls: Option<Arc<TlsSource>>,
    /// Which certificate name is the principal.
    pub principal_from: PrincipalFrom,
}

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` turns true, then waits for open requests.
///
/// # Errors
/// None today: accept errors (such as the file limit) are logged and retried.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: ConnectionSettings,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(settings.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed; retrying shortly");
                // Out of file descriptors: give open connections a moment to close.
                #[allow(clippy::disallowed_methods)]
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tokio::spawn(refuse(stream, settings.tls.is_some()));
            continue;
        };
        let connection = Connection {
            peer: ClientAddress(peer),
            app: app.clone(),
            builder: builder.clone(),
            tls: settings.tls.clone(),
            principal_from: settings.principal_from,
        };
        let watcher = graceful.watcher();
        tokio::spawn(connection.run(stream, slot, watcher));
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

struct Connection {
    peer: ClientAddress,
    app: Router,
    builder: Builder<TokioExecutor>,
    tls: Option<Arc<TlsSource>>,
    principal_from: PrincipalFrom,
}

impl Connection {
    async fn run(
        self,
        stream: TcpStream,
        _slot: OwnedSemaphorePermit,
        watcher: hyper_util::server::graceful::Watcher,
    ) {
        let Some(tls) = &self.tls else {
            let service = service(self.app.clone(), self.peer, None);
            let connection = self
                .builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service);
            let _ = watcher.watch(connection.into_owned()).await;
            return;
        };
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream));
        let stream = match handshake.await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%error, "TLS handshake failed");
                return;
            }
            Err(_) => return,
        };
        let identity = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| principal_of(cert.as_ref(), self.principal_from))
            .map(ClientIdentity);
        let service = service(self.app.clone(), self.peer, identity);
        let connection = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service);
        let _ = watcher.watch(connection.into_owned()).await;
    }
}

fn service(
    app: Router,
    peer: ClientAddress,
    identity: Option<ClientIdentity>,
) -> hyper_util::service::TowerToHyperService<
    impl tower::Service<
        hyper::Request<Incoming>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future = impl Send,
    > + Clone,
> {
    let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(peer);
        if let Some(identity) = &identity {
            request.extensions_mut().insert(identity.clone());
        }
        app.clone().oneshot(request)
    });
    hyper_util::service::TowerToHyperService::new(service)
}

/// A connection over the limit: a plain-HTTP client gets a 503 it can read; a TLS client only
/// the closed socket (answering would need the handshake the limit exists to avoid).
async fn refuse(mut stream: TcpStream, tls: bool) {
    if tls {
        return;
    }
    let body = ErrorBody::new(
        ErrorCode::Busy,
        "the server has as many open connections as it allows; retry shortly",
    );
    let body = serde_json::to_string(&body).unwrap_or_default();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client already sent before closing: closing with unread bytes resets
        // the connection, and a reset can destroy the answer before the client reads it.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
