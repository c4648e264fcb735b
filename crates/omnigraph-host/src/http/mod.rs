//! The HTTP API (SPEC §6) over every graph under one root: axum routes,
//! the order of checks per load, error mapping, admission, the in-flight
//! body budget, body deadlines, streamed export and the OpenAPI document
//! (utoipa). A report goes out as the validator wrote it: a `RawValue`,
//! never a DOM, so a client can compare it with its own build's report byte
//! for byte; the server reads from it only what it needs (the refs, the size
//! bound).
//!
//! The server runs its own HTTP/1.1 accept loop (hyper, header-read timeout)
//! with graceful shutdown. Every write runs on a task of its own
//! (`run_detached`), so it outlives its connection and shutdown waits for
//! it. Each graph is opened in a cell of its own (the map's lock is never
//! held across an open). The store's conditional create is proven before
//! `serve` binds (`AppState::check_store`).
//!
//! A load is handled in this order (SPEC §6); a refused request's body is
//! never read:
//!
//! ```text
//! accept loop: a request head must arrive within header_read_timeout (else the connection is
//! closed); hyper refuses heads over 100 headers / ~400 KiB (431)
//! POST /graphs/{id}/load/ndjson
//!   authenticate (401) → authorize change on the graph id (403) → resolve graph (404) → branch exists, or `from`
//!   exists and branch_create is granted (404/403) → per-actor admission (429; the slot is held
//!   until the response) → Content-Type (415) → Content-Length ≤ bound (413) → reserve the body's
//!   bytes (Content-Length, else the bound) in the server's in-flight budget (503 server_busy) →
//!   read the body within the bound (413) and body_read_timeout (408) → Graph::load_while_wanted on
//!   a task of its own (run_detached), which holds the reservation and the admission slot until the
//!   load ends, whatever the connection does
//! ```
//!
//! A client that goes away does not stop its load: hyper drops the handler,
//! which only awaited the task. Dropping the handler tells the load its caller
//! is gone; the load honours that only while it waits for the writer lock or
//! another host's lease (nothing written yet: `caller_gone`, its place in line
//! given back). Once it holds the lease it runs to its end: committed, or given
//! up with its lease released. Branch creation, overwrite publishes and branch
//! deletions run the same way. Shutdown waits for these tasks too.
//!
//! Nothing after a refusal runs. Malformed paths and query strings are JSON
//! 400s (`invalid_path`, `invalid_query`) like every other refusal. The
//! compat route reads its (bounded) body before the branch check, because
//! the branch is named inside it.
//!
//! The files: `state.rs` (configuration, graphs, admission), `request.rs`
//! and `body.rs` (what a request names and carries), `error.rs` (error
//! answers), `routes.rs` (the handlers), `assets.rs` (the page),
//! `openapi.rs` (the document); here the router and the accept loop.

mod assets;
mod body;
mod error;
mod openapi;
mod request;
mod routes;
mod state;

pub use openapi::ApiDoc;
pub use state::{AppState, ServerConfig};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::error::EngineError;
use crate::limits::ACCEPT_BACKOFF;

use assets::{asset, index};
use routes::*;

/// Every route of SPEC §6.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/graphs/{id}/load/ndjson", post(load_ndjson))
        .route("/graphs/{id}/load", post(load_compat))
        .route("/graphs/{id}/validate", post(validate))
        .route("/graphs/{id}/schema", get(schema))
        .route("/graphs/{id}/rules", get(rules))
        .route("/graphs/{id}/branches", get(list_branches).post(create_branch))
        .route("/graphs/{id}/branches/{name}", delete(delete_branch))
        .route("/graphs/{id}/overwrite", post(publish_overwrite))
        .route("/graphs/{id}/access", get(access))
        .route("/graphs/{id}/commits", get(commits))
        .route("/graphs/{id}/export", get(export))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi::openapi))
        .route("/", get(index))
        .route("/web/{*path}", get(asset))
        // Bodies are bounded per route (read_body); axum's own 2 MiB default would cut loads short.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

/// Serves HTTP/1.1 until `shutdown` resolves; in-flight requests (loads)
/// and the maintenance step in flight finish first, so a stopped server
/// leaves every table at its published version. A connection whose request
/// head does not arrive within `header_read_timeout` is closed (slow-loris
/// heads; bodies have `body_read_timeout`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_read_timeout = state.config.header_read_timeout;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let maintenance = state
        .config
        .maintenance_interval
        .map(|every| crate::graph::spawn_maintenance(maintain_forever(state.clone(), every, stopping.clone())))
        .transpose()?;
    let mut detached = state.detached.subscribe();
    let app = router(state);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: back off, keep serving.
                Err(_) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = async { stopping.wait_for(|stop| *stop).await.is_ok() } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = stop.send(true);
    if let Some(maintenance) = maintenance {
        let _ = maintenance.await;
    }
    while connections.join_next().await.is_some() {}
    let _ = detached.wait_for(|running| *running == 0).await;
    Ok(())
}

/// The server's maintenance (SPEC §4.7): every `every`, each open graph
/// that loads changed gets maintenance steps until it needs none. A step
/// holds the graph's writer lock, so a load waits for at most one step; a
/// graph another host holds the lease of is tried again later.
///
/// When `stopping` turns true it returns between steps, never inside one
/// (a step cut at an await would leave a table version above its pin for
/// the next writer to restore away); the wait and a version cleanup, which
/// only deletes what nothing pins, are cut short.
async fn maintain_forever(state: Arc<AppState>, every: Duration, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let mut cleaned_at: HashMap<String, std::time::Instant> = HashMap::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        for (id, graph) in state.open_graphs() {
            // Unpinned versions: rarely (cleanup walks the history), and
            // the first time an hour after the graph was first maintained.
            let last = *cleaned_at.entry(id.clone()).or_insert_with(std::time::Instant::now);
            if last.elapsed() >= crate::limits::CLEANUP_INTERVAL {
                cleaned_at.insert(id.clone(), std::time::Instant::now());
                tokio::select! {
                    cleaned = graph.cleanup_versions(crate::limits::VERSION_RETENTION) => {
                        if let Err(e) = cleaned {
                            eprintln!("version cleanup of graph {id} stopped: {e}");
                        }
                    }
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
            }
            let maintained = graph.maintain_if_due(|| *stopping.borrow(), |_| state.metrics.maintenance_step()).await;
            if let Err(e) = maintained
                && !matches!(e, EngineError::LeaseBusy { .. } | EngineError::RecoveryInProgress)
            {
                eprintln!("maintenance of graph {id} stopped: {e}");
            }
        }
    }
}
