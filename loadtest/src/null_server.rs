//! The no-storage HTTP server: the same routes and answer shapes as Strata's produce path,
//! answered without storing anything, on the same HTTP stack (axum, hyper). What a request
//! costs in transport alone: the ceiling a storing server is measured against.
//!
//! Its durable variant appends each produce body to one file and fdatasyncs it on the worker
//! thread before answering: the least any HTTP server that makes every request durable can do,
//! with no offsets, no validation, no group commit and no thread hand-off. Adding the
//! no-storage round trip and a separate write + fdatasync assumes the two costs do not meet;
//! on a machine whose two cores run the generator, the server and the disk's completions, they
//! do, and this variant measures what they cost together.
//!
//! Its group variant writes each body in its handler and answers once a shared fdatasync
//! covers it (`group_log`): the least an HTTP server that group-commits can do, the bound for
//! concurrent producers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

use crate::disk::ScratchLog;
use crate::group_log::GroupLog;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use serde::Deserialize;
use serde_json::json;

/// A running no-storage server.
pub struct NullServer {
    pub url: String,
}

#[derive(Default)]
struct Counters {
    next_offset: AtomicU64,
    storage: Storage,
}

/// The durable variant's log; one writer at a time, as one partition.
struct DurableFile {
    log: Mutex<ScratchLog>,
}

impl DurableFile {
    /// Appends `body` and waits for fdatasync, on this thread.
    fn append(&self, body: &[u8]) -> std::io::Result<()> {
        let mut log = self
            .log
            .lock()
            .map_err(|_| std::io::Error::other("durable file lock poisoned"))?;
        log.append(body)?;
        log.release_behind()
    }
}

#[derive(Deserialize)]
struct AnswerQuery {
    answer: Option<String>,
}

fn router(storage: Storage) -> Router {
    Router::new()
        .route("/v1/topics", post(|| async { (StatusCode::CREATED, "{}") }))
        .route(
            "/v1/producers",
            post(|| async { axum::Json(json!({"producer_id": 1, "producer_epoch": 0})) }),
        )
        .route("/v1/topics/{topic}/records", post(produce_topic))
        .route(
            "/v1/topics/{topic}/partitions/{partition}/records",
            post(produce_partition),
        )
        .route(
            "/v1/topics/{topic}/partitions/{partition}/offsets",
            get(|| async { axum::Json(json!({"earliest": 0, "latest": 0, "log_end": 0})) }),
        )
        .with_state(Arc::new(Counters {
            next_offset: AtomicU64::new(0),
            storage,
        }))
}

/// Where a variant stores bodies.
#[derive(Default)]
enum Storage {
    /// Nowhere: the transport alone.
    #[default]
    Nothing,
    /// Appended with one fdatasync each, in the handler.
    Durable(DurableFile),
    /// Appended in the handler and group-committed.
    Group(Arc<GroupLog>),
}

/// Stores `body` as the variant does; an error answer when that fails.
async fn store(counters: &Counters, body: &[u8]) -> Result<(), Response> {
    let stored = match &counters.storage {
        Storage::Nothing => Ok(()),
        Storage::Durable(durable) => durable.append(body),
        Storage::Group(group) => match group.write(body) {
            Ok(ticket) => group.durable(ticket).await,
            Err(error) => Err(error),
        },
    };
    stored.map_err(|error| (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response())
}

async fn produce_topic(
    State(counters): State<Arc<Counters>>,
    Query(query): Query<AnswerQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(error) = store(&counters, &body).await {
        return error;
    }
    answer(&counters, 0, &query, &headers)
}

async fn produce_partition(
    State(counters): State<Arc<Counters>>,
    Path((_, partition)): Path<(String, u32)>,
    Query(query): Query<AnswerQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(error) = store(&counters, &body).await {
        return error;
    }
    answer(&counters, partition, &query, &headers)
}

/// An answer of the shape Strata gives: one offset per record, or the compact form.
fn answer(
    counters: &Counters,
    partition: u32,
    query: &AnswerQuery,
    headers: &HeaderMap,
) -> Response {
    let records: u64 = headers
        .get("loadtest-records")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let base = counters.next_offset.fetch_add(records, Ordering::Relaxed);
    let answer = if query.answer.as_deref() == Some("compact") {
        json!({"partitions": [{"partition": partition, "base_offset": base, "record_count": records}], "duplicate": false})
    } else {
        let offsets: Vec<_> = (0..records)
            .map(|i| json!({"partition": partition, "offset": base + i, "timestamp": 1_700_000_000_000i64}))
            .collect();
        json!({"offsets": offsets, "duplicate": false})
    };
    axum::Json(answer).into_response()
}

/// Starts the server on 127.0.0.1 on its own two-thread runtime (as a server process would
/// have), so it does not share the generator's threads.
pub fn spawn() -> anyhow::Result<NullServer> {
    spawn_with(Storage::default())
}

/// Starts the durable variant, appending bodies to a scratch file in `dir` (removed when the
/// process ends or the server's runtime stops).
pub fn spawn_durable(dir: &std::path::Path) -> anyhow::Result<NullServer> {
    let file = scratch_file(dir)?;
    spawn_with(Storage::Durable(DurableFile {
        log: Mutex::new(ScratchLog::new(file)),
    }))
}

/// Starts the group variant, group-committing bodies to scratch files in `dir`.
pub fn spawn_group(dir: &std::path::Path) -> anyhow::Result<NullServer> {
    spawn_with(Storage::Group(start_group_log(dir)?))
}

/// A group-commit log over two scratch files in `dir`, its syncer running.
pub(crate) fn start_group_log(dir: &std::path::Path) -> anyhow::Result<Arc<GroupLog>> {
    let files = [scratch_file(dir)?, scratch_file(dir)?];
    GroupLog::start(files).context("starting the group log's syncer")
}

/// An unlinked scratch file in `dir`: the open handle keeps it until the process ends.
fn scratch_file(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let file = tempfile::Builder::new()
        .prefix(".strata-loadtest-durable")
        .tempfile_in(dir)
        .with_context(|| format!("a scratch file in {}", dir.display()))?;
    let (file, path) = file.keep().context("keeping the scratch file")?;
    std::fs::remove_file(&path).context("unlinking the scratch file")?;
    Ok(file)
}

fn spawn_with(storage: Storage) -> anyhow::Result<NullServer> {
    let addr = serve_on_own_runtime(|listener| async move {
        let _ = axum::serve(listener.tap_io(nodelay), router(storage)).await;
    })?;
    Ok(NullServer {
        url: format!("http://{addr}"),
    })
}

/// Runs `serve` on a listener bound to 127.0.0.1 on its own two-thread runtime and thread (as
/// a server process would have), so a baseline server does not share the generator's threads.
/// Returns the listener's address once it is bound.
pub(crate) fn serve_on_own_runtime<F, Fut>(serve: F) -> anyhow::Result<SocketAddr>
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel::<anyhow::Result<SocketAddr>>();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                let _ = tx.send(Err(error.into()));
                return;
            }
        };
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(listener) => listener,
                Err(error) => {
                    let _ = tx.send(Err(error.into()));
                    return;
                }
            };
            let _ = tx.send(listener.local_addr().map_err(Into::into));
            serve(listener).await;
        });
    });
    rx.recv()?
}

/// Serves until killed (the `null-server` subcommand).
pub async fn serve(listen: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener.tap_io(nodelay), router(Storage::default())).await?;
    Ok(())
}

fn nodelay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn the_durable_variant_appends_bodies_in_order() {
        let mut scratch = tempfile::tempfile().expect("scratch file");
        let durable = DurableFile {
            log: Mutex::new(ScratchLog::new(scratch.try_clone().expect("clone"))),
        };
        durable.append(b"first,").expect("appended");
        durable.append(b"second").expect("appended");
        let mut text = String::new();
        scratch.read_to_string(&mut text).expect("read back");
        assert_eq!(text, "first,second");
    }
}
