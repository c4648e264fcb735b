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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use omnigraph_validate_wasm::Mode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use utoipa::OpenApi;

use crate::auth::{Actor, Auth, AuthError, Permission, sha256_hex};
use crate::error::{Conflict, EngineError, report_bound};
use crate::graph::{CallerGone, EngineConfig, Graph, LoadRequest, OverwritePublish, Receipt};
use crate::limits::{
    ACCEPT_BACKOFF, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_LOADS_PER_ACTOR, MAX_CONTROL_BODY_BYTES, RETRY_AFTER_SECONDS,
};
use crate::manifest::{MAIN_BRANCH, TableCounts, check_branch_name};
use crate::metrics::Metrics;
use crate::storage::{GraphRoot, StorageOptions};
use crate::validator::Validator;

/// The upload page (`web/`), embedded at build time so the binary serves it
/// from anywhere.
const INDEX_HTML: &str = include_str!("../../../web/index.html");

/// Files under `/web/`: path, content type, bytes. The validator is the very
/// artifact the host runs.
const ASSETS: [(&str, &str, &[u8]); 8] = [
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/app.js")),
    ("load.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/load.js")),
    ("worker.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/worker.js")),
    ("split.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/split.js")),
    ("warm.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/warm.js")),
    ("style.css", "text/css; charset=utf-8", include_bytes!("../../../web/style.css")),
    ("pkg/web/validate.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/pkg/web/validate.js")),
    ("pkg/web/validate_bg.wasm", "application/wasm", crate::validator::ARTIFACT),
];

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// A local directory or `s3://bucket/prefix`; each graph is `<root>/<id>`.
    pub root: String,
    pub storage: StorageOptions,
    pub auth: Auth,
    pub engine: EngineConfig,
    /// Loads one actor may have in flight; more are answered 429.
    pub max_loads_per_actor: usize,
    /// Body bytes held at once over all requests; more are answered 503.
    pub max_inflight_bytes: u64,
    /// Deadline for reading one request body; slower bodies get 408.
    pub body_read_timeout: Duration,
    /// Deadline for a request's head; slower connections are closed.
    pub header_read_timeout: Duration,
    /// How often background maintenance looks for graphs loads changed
    /// (`None`: no background maintenance; run `omnigraph-host optimize`).
    pub maintenance_interval: Option<Duration>,
    /// Wraps every object store of every graph (`GraphRoot::with_store_wrapper`):
    /// metering, or a failing store in tests.
    pub store_wrapper: Option<Arc<dyn lance::io::WrappingObjectStore>>,
}

impl ServerConfig {
    pub fn new(root: String, auth: Auth) -> ServerConfig {
        ServerConfig {
            root,
            storage: StorageOptions::new(),
            auth,
            engine: EngineConfig::default(),
            max_loads_per_actor: DEFAULT_MAX_LOADS_PER_ACTOR,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            maintenance_interval: Some(crate::limits::MAINTENANCE_INTERVAL),
            store_wrapper: None,
        }
    }
}

pub struct AppState {
    config: ServerConfig,
    validator: Arc<Validator>,
    /// Each graph opened once and kept. The map's lock is held only to find
    /// or add a graph's cell, never across opening it (with its recovery):
    /// one graph's slow open blocks no other graph.
    graphs: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Arc<Graph>>>>>,
    /// Writes running on tasks of their own (`run_detached`): shutdown waits
    /// for them too, since a write whose client went away has no connection
    /// left to wait on.
    detached: tokio::sync::watch::Sender<usize>,
    in_flight: Mutex<HashMap<String, usize>>,
    /// One permit per body byte held (`max_inflight_bytes`).
    body_budget: Arc<Semaphore>,
    pub metrics: Metrics,
}

/// An error answer: `{"error", "code", "details"?}`.
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Option<Value>,
    /// `details.report`: the validator's report as it wrote it.
    report: Option<Box<RawValue>>,
    retry_after: bool,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), details: None, report: None, retry_after: false }
    }

    fn details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    fn report(mut self, report_json: &str) -> ApiError {
        self.report = Some(raw_report(report_json).to_owned());
        self
    }
}

/// A validator's report as the validator wrote it: the API carries its very
/// bytes (SPEC §3), neither re-ordered nor re-read into a DOM (the report
/// of a batch of edges whose nodes are stored is larger than the batch).
fn raw_report(report_json: &str) -> &RawValue {
    serde_json::from_str(report_json).unwrap_or(RawValue::NULL)
}

/// An error's JSON body: `details` are the error's own members, then the report.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<ErrorDetails<'a>>,
}

#[derive(Serialize)]
struct ErrorDetails<'a> {
    #[serde(flatten)]
    members: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a RawValue>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let details = (self.details.is_some() || self.report.is_some())
            .then_some(ErrorDetails { members: self.details.as_ref(), report: self.report.as_deref() });
        let body = ErrorBody { error: &self.message, code: self.code, details };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        match e {
            AuthError::Unauthenticated => {
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", "a valid bearer token is required")
            }
            AuthError::Forbidden { actor, permission } => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("actor {actor:?} lacks the {} permission on this graph", permission.as_str()),
            ),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let message = e.to_string();
        let code = e.code();
        let status = match &e {
            EngineError::InvalidBranchName(_) | EngineError::UnknownType(_) | EngineError::MainBranchProtected => {
                StatusCode::BAD_REQUEST
            }
            EngineError::NoGraph(_) | EngineError::BranchNotFound(_) | EngineError::CommitNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            EngineError::GraphExists(_)
            | EngineError::BranchExists(_)
            | EngineError::CommitConflict { .. }
            | EngineError::TargetMoved { .. } => StatusCode::CONFLICT,
            EngineError::Invalid { report_json } => {
                return match report_bound(report_json) {
                    Some((code, limit)) => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
                        .details(json!({"resource": limit["resource"], "limit": limit["limit"], "actual": limit["actual"]}))
                        .report(report_json),
                    None => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message).report(report_json),
                };
            }
            EngineError::BoundExceeded { code, resource, limit, actual } => {
                return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
                    .details(json!({"resource": resource, "limit": limit, "actual": actual}));
            }
            EngineError::Rejected { report_json, conflicts } => {
                let status = if code == "key_conflict" { StatusCode::CONFLICT } else { StatusCode::UNPROCESSABLE_ENTITY };
                return ApiError::new(status, code, message).details(json!({"conflicts": conflicts})).report(report_json);
            }
            EngineError::Validator(crate::validator::ValidatorError::InputTooLarge { bytes, limit }) => {
                return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "bound_exceeded", message)
                    .details(json!({"resource": "validator_memory", "limit": limit, "actual": bytes}));
            }
            EngineError::LeaseBusy { .. }
            | EngineError::LeaseExpired
            | EngineError::RecoveryRequired { .. }
            | EngineError::RecoveryInProgress
            | EngineError::Validator(_) => {
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
                e.retry_after = true;
                return e;
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, code, message)
    }
}

type ApiResult = Result<Response, ApiError>;

impl AppState {
    pub fn new(config: ServerConfig, validator: Arc<Validator>) -> Arc<AppState> {
        let body_budget = Arc::new(Semaphore::new(config.max_inflight_bytes.min(Semaphore::MAX_PERMITS as u64) as usize));
        Arc::new(AppState {
            config,
            validator,
            graphs: Mutex::new(HashMap::new()),
            detached: tokio::sync::watch::Sender::new(0),
            in_flight: Mutex::new(HashMap::new()),
            body_budget,
            metrics: Metrics::default(),
        })
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Actor, ApiError> {
        Ok(self.config.auth.authenticate(headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes))?)
    }

    /// The graph `id`, opened once and kept. Requests for a graph being
    /// opened wait for that open; requests for other graphs do not.
    async fn graph(&self, id: &str) -> Result<Arc<Graph>, ApiError> {
        let not_found = || ApiError::new(StatusCode::NOT_FOUND, "graph_not_found", format!("no graph {id:?}"));
        check_branch_name(id).map_err(|_| not_found())?;
        let cell = self.graphs.lock().expect("graphs lock").entry(id.to_owned()).or_default().clone();
        let opened = cell
            .get_or_try_init(|| async {
                let root = self.wrapped(GraphRoot::new(&self.graph_location(id), self.config.storage.clone())?);
                Graph::open(root, self.validator.clone(), self.config.engine.clone()).await.map(Arc::new)
            })
            .await;
        match opened {
            Ok(graph) => Ok(graph.clone()),
            Err(e) => {
                // No entry stays for an id that did not open (a missing
                // graph's name must not grow the map).
                let mut graphs = self.graphs.lock().expect("graphs lock");
                if graphs.get(id).is_some_and(|c| Arc::ptr_eq(c, &cell) && !c.initialized()) {
                    graphs.remove(id);
                }
                Err(match e {
                    EngineError::NoGraph(_) => not_found(),
                    e => e.into(),
                })
            }
        }
    }

    fn graph_location(&self, id: &str) -> String {
        format!("{}/{id}", self.config.root.trim_end_matches('/'))
    }

    /// `root` behind the configured store wrapper, if any.
    fn wrapped(&self, root: GraphRoot) -> GraphRoot {
        match &self.config.store_wrapper {
            Some(wrapper) => root.with_store_wrapper(wrapper.clone()),
            None => root,
        }
    }

    /// The graphs opened so far.
    fn open_graphs(&self) -> Vec<(String, Arc<Graph>)> {
        let graphs = self.graphs.lock().expect("graphs lock");
        graphs.iter().filter_map(|(id, cell)| cell.get().map(|g| (id.clone(), g.clone()))).collect()
    }

    /// Refuses a store that would make the lease and commit slots
    /// last-writer-wins (`GraphRoot::prove_conditional_create`). `serve`
    /// calls it before it binds its listener (so no request waits on it in
    /// the accept backlog).
    pub async fn check_store(&self) -> Result<(), EngineError> {
        self.wrapped(GraphRoot::create(&self.config.root, self.config.storage.clone())?).prove_conditional_create().await
    }

    /// Counts a load against its actor's admission; the guard releases it.
    fn admit(self: &Arc<Self>, actor: &str) -> Result<Admission, ApiError> {
        let mut in_flight = self.in_flight.lock().expect("admission lock");
        let n = in_flight.entry(actor.to_owned()).or_default();
        if *n >= self.config.max_loads_per_actor {
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_loads",
                format!("actor {actor:?} already has {n} loads in flight (limit {})", self.config.max_loads_per_actor),
            );
            e.retry_after = true;
            return Err(e);
        }
        *n += 1;
        Ok(Admission { state: self.clone(), actor: actor.to_owned() })
    }
}

struct Admission {
    state: Arc<AppState>,
    actor: String,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(n) = self.state.in_flight.lock().expect("admission lock").get_mut(&self.actor) {
            *n -= 1;
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoadQuery {
    /// Target branch (default `main`).
    branch: Option<String>,
    /// Fork the branch from this one if it does not exist.
    from: Option<String>,
    /// `merge` (default), `append` or `overwrite`.
    mode: Option<String>,
    /// The client's name for this batch, kept in the commit (resumable clients).
    batch_key: Option<String>,
}

impl LoadQuery {
    /// A strict load of `batch` as the query describes it.
    fn request(&self, mode: Mode, actor: &Actor, batch: Bytes) -> LoadRequest {
        LoadRequest {
            branch: self.branch.clone().unwrap_or_else(|| MAIN_BRANCH.to_owned()),
            from: self.from.clone(),
            mode,
            strict: true,
            actor: actor.name.clone(),
            // No copy: the body's buffer is handed over whole.
            batch: Arc::new(Vec::from(batch)),
            batch_key: self.batch_key.clone(),
        }
    }
}

fn parse_mode(mode: Option<&str>) -> Result<Mode, ApiError> {
    match mode.unwrap_or("merge") {
        "merge" => Ok(Mode::Merge),
        "append" => Ok(Mode::Append),
        "overwrite" => Ok(Mode::Overwrite),
        other => Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_mode", format!("unknown mode {other:?}"))),
    }
}

/// Content-Length over the bound is refused before anything is read.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
}

/// What a request body is: its media type (else 415), its bound and its
/// 413's code.
#[derive(Clone, Copy)]
enum BodyKind {
    /// An NDJSON batch (strict loads, dry runs): `limits.max_batch_bytes`, SPEC §5.
    Ndjson,
    /// The compat route's JSON wrapper of a batch: the same bound.
    CompatJson,
    /// A small JSON request (branch creation): [`MAX_CONTROL_BODY_BYTES`].
    Control,
}

impl BodyKind {
    fn media_type(self) -> &'static str {
        match self {
            BodyKind::Ndjson => "application/x-ndjson",
            BodyKind::CompatJson | BodyKind::Control => "application/json",
        }
    }

    fn limit(self, state: &AppState) -> u64 {
        match self {
            BodyKind::Ndjson | BodyKind::CompatJson => state.config.engine.limits.max_batch_bytes,
            BodyKind::Control => MAX_CONTROL_BODY_BYTES,
        }
    }

    fn too_large(self, limit: u64, actual: u64) -> ApiError {
        let (code, resource) = match self {
            BodyKind::Ndjson | BodyKind::CompatJson => ("batch_bytes_limit", "batch_bytes"),
            BodyKind::Control => ("body_too_large", "body_bytes"),
        };
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, format!("the body exceeds {limit} bytes"))
            .details(json!({"resource": resource, "limit": limit, "actual": actual}))
    }

    /// 415 unless the request's media type (parameters aside) is this kind's.
    fn check_media_type(self, headers: &HeaderMap) -> Result<(), ApiError> {
        let expected = self.media_type();
        let given = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if given.split(';').next().map(str::trim).is_some_and(|t| t.eq_ignore_ascii_case(expected)) {
            return Ok(());
        }
        Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", format!("this route takes Content-Type: {expected}")))
    }
}

/// A request body and its share of the server's in-flight byte budget;
/// keep `budget` alive as long as the bytes (or a copy of them) are held.
struct HeldBody {
    bytes: Bytes,
    budget: OwnedSemaphorePermit,
}

/// The body, within the server's bounds: refused by media type (415) and by
/// `Content-Length` before reading, refused (503) when the in-flight budget cannot hold it, cut off
/// while reading a body that runs over, and timed out (408) when it trickles.
async fn read_bounded(state: &AppState, headers: &HeaderMap, body: Body, kind: BodyKind) -> Result<HeldBody, ApiError> {
    kind.check_media_type(headers)?;
    let limit = kind.limit(state);
    let declared = content_length(headers);
    if let Some(len) = declared
        && len > limit
    {
        return Err(kind.too_large(limit, len));
    }
    let reserve = declared.unwrap_or(limit).max(1);
    let mut budget = u32::try_from(reserve)
        .ok()
        .and_then(|n| state.body_budget.clone().try_acquire_many_owned(n).ok())
        .ok_or_else(|| {
            let mut e = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                format!("the server holds its limit of {} body bytes in flight", state.config.max_inflight_bytes),
            );
            e.retry_after = true;
            e
        })?;
    let timeout = state.config.body_read_timeout;
    let read = tokio::time::timeout(timeout, axum::body::to_bytes(body, limit as usize)).await.map_err(|_| {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", format!("the body did not arrive within {} ms", timeout.as_millis()))
    })?;
    let bytes = read.map_err(|e| {
        let text = e.to_string();
        if text.contains("length limit") {
            // The stream ran over the bound: the actual size is unknown.
            kind.too_large(limit, limit + 1)
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "body_error", format!("reading the body: {text}"))
        }
    })?;
    // A body of unknown length gives back what it did not use.
    let used = bytes.len().clamp(1, budget.num_permits());
    drop(budget.split(budget.num_permits() - used));
    Ok(HeldBody { bytes, budget })
}

/// An extractor (`Path`, `Query`) whose refusal of a malformed URL is
/// answered as a JSON error (400 `invalid_path` / `invalid_query`) like
/// every other refusal, not as axum's plain text.
struct Checked<E>(E);

trait UrlRejection {
    const CODE: &'static str;
    fn text(&self) -> String;
}

impl UrlRejection for axum::extract::rejection::PathRejection {
    const CODE: &'static str = "invalid_path";
    fn text(&self) -> String {
        self.body_text()
    }
}

impl UrlRejection for axum::extract::rejection::QueryRejection {
    const CODE: &'static str = "invalid_query";
    fn text(&self) -> String {
        self.body_text()
    }
}

impl<E, S> FromRequestParts<S> for Checked<E>
where
    E: FromRequestParts<S>,
    E::Rejection: UrlRejection,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        E::from_request_parts(parts, state)
            .await
            .map(Checked)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, <E::Rejection as UrlRejection>::CODE, e.text()))
    }
}

/// The receipt as the API answers it (SPEC §6).
fn receipt_json(receipt: &Receipt) -> Value {
    json!({
        "branch": receipt.branch,
        "created": receipt.created_from.is_some(),
        "base": receipt.created_from,
        "mode": receipt.mode,
        "counts": receipt.counts(),
        "commit": receipt.commit.as_ref().map(|c| json!({
            "id": c.id, "seq": c.seq, "parent_id": c.parent_id, "actor": c.actor, "time": c.time,
        })),
        "empty": receipt.empty(),
    })
}

/// A write that runs to its end on a task of its own, whatever its
/// connection does. hyper drops a handler whose client went away; a write
/// cut at an await would keep the graph's lease until it expires and leave
/// its recovery record and staged versions behind. The handler only awaits
/// the task: dropping it tells the write its caller is gone, which a load
/// honours only while it waits its turn (nothing written yet). What `write`
/// holds (its admission, its body's budget) is released when it ends.
async fn run_detached<F, Fut>(state: &Arc<AppState>, write: F) -> ApiResult
where
    F: FnOnce(CallerGone<'static>) -> Fut,
    Fut: std::future::Future<Output = ApiResult> + Send + 'static,
{
    let (present, gone) = tokio::sync::oneshot::channel::<std::convert::Infallible>();
    let gone: CallerGone<'static> = Box::pin(async move {
        let _ = gone.await;
    });
    let running = Running::enter(state);
    let write = write(gone);
    let task = tokio::spawn(async move {
        let _running = running;
        write.await
    });
    let answer = task.await;
    drop(present);
    answer.unwrap_or_else(|e| Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", format!("the write stopped: {e}"))))
}

/// One write counted in `AppState::detached` until it ends.
struct Running(Arc<AppState>);

impl Running {
    fn enter(state: &Arc<AppState>) -> Running {
        state.detached.send_modify(|n| *n += 1);
        Running(state.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.detached.send_modify(|n| *n -= 1);
    }
}

/// The shared tail of both load routes (admitted before their bodies were read): the engine.
async fn run_load(state: &AppState, graph: &Graph, request: LoadRequest, gone: CallerGone<'static>) -> ApiResult {
    let bytes = request.batch.len() as u64;
    match graph.load_while_wanted(request, gone).await {
        Ok(receipt) => {
            state.metrics.load("committed", bytes);
            state.metrics.timings(
                receipt.timings.validate,
                receipt.timings.checks,
                receipt.timings.writing(),
            );
            for (table, c) in receipt.counts() {
                state.metrics.rows(table, c.inserted + c.updated);
            }
            Ok(axum::Json(receipt_json(&receipt)).into_response())
        }
        Err(e) => {
            state.metrics.load(e.code(), bytes);
            Err(e.into())
        }
    }
}

/// A load's branch must exist, unless it forks from an existing `from`
/// (which needs `branch_create`).
async fn check_branch(graph: &Graph, actor: &Actor, id: &str, branch: &str, from: Option<&str>) -> Result<(), ApiError> {
    if graph.head(branch).await?.is_none() {
        let Some(base) = from else { return Err(EngineError::BranchNotFound(branch.to_owned()).into()) };
        actor.require(id, Permission::BranchCreate)?;
        graph.head(base).await?.ok_or_else(|| EngineError::BranchNotFound(base.to_owned()))?;
    }
    Ok(())
}

/// Authenticate, resolve the graph, authorize: before any body is read.
async fn authorized(
    state: &Arc<AppState>,
    id: &str,
    headers: &HeaderMap,
    permission: Permission,
) -> Result<(Arc<Graph>, Actor), ApiError> {
    state.metrics.request();
    let actor = state.authenticate(headers)?;
    // Rights first: an actor without them cannot tell a missing graph from
    // an existing one (403 either way).
    actor.require(id, permission)?;
    let graph = state.graph(id).await?;
    Ok((graph, actor))
}

/// Strict load: the body is NDJSON (SPEC §2).
#[utoipa::path(post, path = "/graphs/{id}/load/ndjson", params(("id" = String, Path), LoadQuery),
    request_body(content = String, content_type = "application/x-ndjson"),
    responses((status = 200, description = "committed (or empty)"), (status = 409, description = "key_conflict / lost CAS"),
        (status = 413, description = "bound"), (status = 415, description = "content type"), (status = 422, description = "report"),
        (status = 429, description = "admission")))]
async fn load_ndjson(
    State(state): State<Arc<AppState>>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(Query(query)): Checked<Query<LoadQuery>>,
    request: Request,
) -> ApiResult {
    let (parts, body) = request.into_parts();
    let branch = query.branch.as_deref().unwrap_or(MAIN_BRANCH);
    let (graph, actor) = authorized(&state, &id, &parts.headers, Permission::Change).await?;
    check_branch(&graph, &actor, &id, branch, query.from.as_deref()).await?;
    let mode = parse_mode(query.mode.as_deref())?;
    let admitted = state.admit(&actor.name)?;
    let HeldBody { bytes, budget } = read_bounded(&state, &parts.headers, body, BodyKind::Ndjson).await?;
    let request = query.request(mode, &actor, bytes);
    let task_state = state.clone();
    run_detached(&state, move |gone| async move {
        let _held = (admitted, budget);
        run_load(&task_state, &graph, request, gone).await
    })
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct CompatBody {
    branch: Option<String>,
    from: Option<String>,
    mode: Option<String>,
    /// NDJSON text, read leniently (SPEC §2.6).
    data: String,
}

/// Compatibility loader (deprecated): `{"branch"?, "from"?, "mode"?, "data"}`.
#[utoipa::path(post, path = "/graphs/{id}/load", params(("id" = String, Path)), request_body = CompatBody,
    responses((status = 200, description = "committed; Deprecation and Link headers name the strict route")))]
async fn load_compat(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
    let successor = format!("</graphs/{id}/load/ndjson>; rel=\"successor-version\"");
    let mut response = compat(state, &id, request).await.unwrap_or_else(IntoResponse::into_response);
    response.headers_mut().insert("deprecation", HeaderValue::from_static("true"));
    response.headers_mut().insert(header::LINK, HeaderValue::from_str(&successor).expect("ascii link"));
    Ok(response)
}

/// The compat route's work; its branch is inside the body, so the branch
/// check follows the (bounded) body read.
async fn compat(state: Arc<AppState>, id: &str, request: Request) -> ApiResult {
    let (parts, body) = request.into_parts();
    let (graph, actor) = authorized(&state, id, &parts.headers, Permission::Change).await?;
    let admitted = state.admit(&actor.name)?;
    let HeldBody { bytes, budget } = read_bounded(&state, &parts.headers, body, BodyKind::CompatJson).await?;
    let parsed: CompatBody = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", format!("compat body: {e}")))?;
    let branch = parsed.branch.unwrap_or_else(|| MAIN_BRANCH.to_owned());
    check_branch(&graph, &actor, id, &branch, parsed.from.as_deref()).await?;
    let request = LoadRequest {
        branch,
        from: parsed.from,
        mode: parse_mode(parsed.mode.as_deref())?,
        strict: false,
        actor: actor.name.clone(),
        batch: Arc::new(parsed.data.into_bytes()),
        batch_key: None,
    };
    drop(bytes);
    let task_state = state.clone();
    run_detached(&state, move |gone| async move {
        let _held = (admitted, budget);
        run_load(&task_state, &graph, request, gone).await
    })
    .await
}

/// Dry run: the report and the stateful checks against the branch head.
#[utoipa::path(post, path = "/graphs/{id}/validate", params(("id" = String, Path), LoadQuery),
    request_body(content = String, content_type = "application/x-ndjson"),
    responses((status = 200, description = "{ok, report, conflicts, counts}; nothing written")))]
async fn validate(
    State(state): State<Arc<AppState>>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(Query(query)): Checked<Query<LoadQuery>>,
    request: Request,
) -> ApiResult {
    let (parts, body) = request.into_parts();
    let (graph, actor) = authorized(&state, &id, &parts.headers, Permission::Read).await?;
    let HeldBody { bytes, budget: _held } = read_bounded(&state, &parts.headers, body, BodyKind::Ndjson).await?;
    let request = query.request(parse_mode(query.mode.as_deref())?, &actor, bytes);
    let answer = |ok, report_json: &str, conflicts: &[Conflict], counts: &BTreeMap<String, TableCounts>| {
        axum::Json(DryRunBody { ok, report: raw_report(report_json), conflicts, counts }).into_response()
    };
    match graph.dry_run(&request).await {
        Ok(dry) => Ok(answer(dry.conflicts.is_empty(), &dry.report_json, &dry.conflicts, &dry.counts)),
        Err(EngineError::Invalid { report_json }) if report_bound(&report_json).is_none() => {
            Ok(answer(false, &report_json, &[], &BTreeMap::new()))
        }
        Err(e) => Err(e.into()),
    }
}

/// A dry run's answer: the report as the validator wrote it, the stateful
/// checks' conflicts and the counts.
#[derive(Serialize)]
struct DryRunBody<'a> {
    ok: bool,
    report: &'a RawValue,
    conflicts: &'a [Conflict],
    counts: &'a BTreeMap<String, TableCounts>,
}

/// The schema source, its hash and the compiled catalog.
#[utoipa::path(get, path = "/graphs/{id}/schema", params(("id" = String, Path)), responses((status = 200, description = "schema")))]
async fn schema(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    Ok(axum::Json(json!({
        "source": graph.schema_source(),
        "schema_hash": graph.schema().hash(),
        "catalog": serde_json::from_str::<Value>(graph.schema().canonical_json()).unwrap_or(Value::Null),
    }))
    .into_response())
}

/// What a client needs to prove it validates with the host's rules.
#[utoipa::path(get, path = "/graphs/{id}/rules", params(("id" = String, Path)), responses((status = 200, description = "rules")))]
async fn rules(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    Ok(axum::Json(json!({
        "validator_version": omnigraph_validate_wasm::VALIDATOR_VERSION,
        "abi_version": omnigraph_validate_wasm::abi::ABI_VERSION,
        "validator_sha256": graph.validator().artifact_sha256(),
        "schema_hash": graph.schema().hash(),
        "bounds": graph.limits(),
        "legacy_identity": graph.settings().legacy_identity,
    }))
    .into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AccessQuery {
    /// `read` (default), `change`, `branch_create` or `admin`.
    permission: Option<String>,
}

/// Whether the caller may do something on a graph: 204, or exactly the
/// 401/403/404 a request needing that permission would get. Gateways ask
/// this before they validate anything for a caller (a cheap authorized call).
#[utoipa::path(get, path = "/graphs/{id}/access", params(("id" = String, Path), AccessQuery),
    responses((status = 204, description = "granted"), (status = 401, description = "no valid token"),
        (status = 403, description = "not granted")))]
async fn access(
    State(state): State<Arc<AppState>>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(Query(query)): Checked<Query<AccessQuery>>,
    headers: HeaderMap,
) -> ApiResult {
    let name = query.permission.as_deref().unwrap_or("read");
    let permission = Permission::parse(name)
        .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", format!("unknown permission {name:?}")))?;
    authorized(&state, &id, &headers, permission).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchQuery {
    branch: Option<String>,
    /// A commit sequence number on the branch (time travel).
    commit: Option<u64>,
}

/// Branches with their heads.
#[utoipa::path(get, path = "/graphs/{id}/branches", params(("id" = String, Path)), responses((status = 200, description = "branches")))]
async fn list_branches(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    let heads = graph.branches().await?;
    let list: Vec<Value> = heads.iter().map(|c| json!({"name": c.branch, "head": {"id": c.id, "seq": c.seq, "time": c.time, "actor": c.actor}})).collect();
    Ok(axum::Json(json!({"branches": list})).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct NewBranch {
    name: String,
    /// The base branch (default `main`).
    from: Option<String>,
    /// Types whose tables start empty on the new branch: the work branch of
    /// a multi-batch overwrite (see `POST /graphs/{id}/overwrite`).
    #[serde(default)]
    clear: Vec<String>,
}

/// Create a branch from a base's head (no data copied).
#[utoipa::path(post, path = "/graphs/{id}/branches", params(("id" = String, Path)), request_body = NewBranch,
    responses((status = 201, description = "created"), (status = 409, description = "exists")))]
async fn create_branch(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
    let (parts, body) = request.into_parts();
    let (graph, actor) = authorized(&state, &id, &parts.headers, Permission::BranchCreate).await?;
    let body = read_bounded(&state, &parts.headers, body, BodyKind::Control).await?;
    let new: NewBranch = serde_json::from_slice(&body.bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", format!("branch body: {e}")))?;
    run_detached(&state, move |_| async move {
        let from = new.from.as_deref().unwrap_or(MAIN_BRANCH);
        let commit = graph.create_work_branch(&new.name, from, &new.clear, &actor.name).await?;
        let created = json!({"name": commit.branch, "head": {"id": commit.id, "seq": commit.seq}, "base": commit.parent});
        Ok((StatusCode::CREATED, axum::Json(created)).into_response())
    })
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct OverwriteBody {
    /// The branch whose types are replaced (default `main`).
    branch: Option<String>,
    /// The work branch holding the new contents (created with `clear`).
    from: String,
    /// The target's head `seq` the work branch was forked from.
    base_seq: u64,
    /// The replaced types: the work branch's cleared types.
    types: Vec<String>,
    batch_key: Option<String>,
}

/// Publish a multi-batch overwrite: the types' tables of `from` replace the
/// branch's in one commit (409 `target_moved` if the branch moved since the
/// fork); the work branch is then deleted.
#[utoipa::path(post, path = "/graphs/{id}/overwrite", params(("id" = String, Path)), request_body = OverwriteBody,
    responses((status = 200, description = "committed"), (status = 409, description = "target_moved"),
        (status = 413, description = "removed_ids_limit"), (status = 422, description = "stranded edges")))]
async fn publish_overwrite(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
    let (parts, body) = request.into_parts();
    let (graph, actor) = authorized(&state, &id, &parts.headers, Permission::Change).await?;
    let body = read_bounded(&state, &parts.headers, body, BodyKind::Control).await?;
    let publish: OverwriteBody = serde_json::from_slice(&body.bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", format!("overwrite body: {e}")))?;
    let publish = OverwritePublish {
        branch: publish.branch.unwrap_or_else(|| MAIN_BRANCH.to_owned()),
        work: publish.from,
        base_seq: publish.base_seq,
        types: publish.types,
        actor: actor.name.clone(),
        batch_key: publish.batch_key,
    };
    run_detached(&state, move |_| async move {
        let receipt = graph.publish_overwrite(publish).await?;
        Ok(axum::Json(receipt_json(&receipt)).into_response())
    })
    .await
}

/// Delete a branch (admin).
#[utoipa::path(delete, path = "/graphs/{id}/branches/{name}", params(("id" = String, Path), ("name" = String, Path)),
    responses((status = 200, description = "deleted"), (status = 404, description = "no such branch")))]
async fn delete_branch(State(state): State<Arc<AppState>>, Checked(Path((id, name))): Checked<Path<(String, String)>>, headers: HeaderMap) -> ApiResult {
    let (graph, actor) = authorized(&state, &id, &headers, Permission::Admin).await?;
    run_detached(&state, move |_| async move {
        let tombstone = graph.delete_branch(&name, &actor.name).await?;
        Ok(axum::Json(json!({"name": name, "deleted_at": {"id": tombstone.id, "seq": tombstone.seq}})).into_response())
    })
    .await
}

/// A branch's commits, newest first.
#[utoipa::path(get, path = "/graphs/{id}/commits", params(("id" = String, Path), BranchQuery), responses((status = 200, description = "commits")))]
async fn commits(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, Checked(Query(q)): Checked<Query<BranchQuery>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    let log = graph.log(q.branch.as_deref().unwrap_or(MAIN_BRANCH)).await?;
    Ok(axum::Json(json!({"commits": log})).into_response())
}

/// Every record of a branch head (or commit) as strict NDJSON, streamed.
#[utoipa::path(get, path = "/graphs/{id}/export", params(("id" = String, Path), BranchQuery),
    responses((status = 200, description = "NDJSON", content_type = "application/x-ndjson")))]
async fn export(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, Checked(Query(q)): Checked<Query<BranchQuery>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    let branch = q.branch.unwrap_or_else(|| MAIN_BRANCH.to_owned());
    // Resolve first, so a missing branch or commit is a 404, not a cut stream.
    match q.commit {
        Some(seq) => graph.commit_at(&branch, seq).await.map(drop)?,
        None => graph.head(&branch).await?.map(drop).ok_or_else(|| EngineError::BranchNotFound(branch.clone()))?,
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let sink = tx.clone();
        let result = graph
            .export(&branch, q.commit, move |chunk| {
                let sink = sink.clone();
                async move { sink.send(Ok(Bytes::from(chunk))).await.map_err(|_| EngineError::Storage("client went away".into())) }
            })
            .await;
        if let Err(e) = result {
            let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|chunk| (chunk, rx)) });
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(stream)).into_response())
}

#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "alive")))]
async fn healthz() -> &'static str {
    "ok\n"
}

#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text")))]
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "this document")))]
async fn openapi() -> Response {
    axum::Json(ApiDoc::openapi()).into_response()
}

/// The upload page.
#[utoipa::path(get, path = "/", responses((status = 200, description = "the upload page")))]
async fn index(headers: HeaderMap) -> Response {
    static TAG: LazyLock<String> = LazyLock::new(|| entity_tag(INDEX_HTML.as_bytes()));
    revalidated(&headers, &TAG, "text/html; charset=utf-8", INDEX_HTML.as_bytes())
}

/// A strong entity tag for an embedded file: its SHA-256.
fn entity_tag(bytes: &[u8]) -> String {
    format!("\"{}\"", sha256_hex(bytes))
}

/// An embedded file that browsers keep but ask about on every visit
/// (`no-cache`): a page reload moves 304s, not the 1 MB validator.
fn revalidated(headers: &HeaderMap, tag: &str, content_type: &'static str, bytes: &'static [u8]) -> Response {
    let cache = [(header::CACHE_CONTROL, "no-cache"), (header::ETAG, tag)];
    let unchanged = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == tag);
    if unchanged {
        (StatusCode::NOT_MODIFIED, cache).into_response()
    } else {
        (cache, [(header::CONTENT_TYPE, content_type)], bytes).into_response()
    }
}

/// The upload page's scripts, styles and the validator module.
#[utoipa::path(get, path = "/web/{path}", params(("path" = String, Path)),
    responses((status = 200, description = "the file"), (status = 404, description = "no such file")))]
async fn asset(Checked(Path(path)): Checked<Path<String>>, headers: HeaderMap) -> Response {
    static TAGS: LazyLock<Vec<String>> = LazyLock::new(|| ASSETS.iter().map(|(_, _, bytes)| entity_tag(bytes)).collect());
    match ASSETS.iter().position(|(name, _, _)| *name == path) {
        Some(i) => revalidated(&headers, &TAGS[i], ASSETS[i].1, ASSETS[i].2),
        None => ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no file /web/{path}")).into_response(),
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "OmniGraph ingest", description = "Validate and commit graph batches (SPEC §6)"),
    paths(load_ndjson, load_compat, validate, schema, rules, list_branches, create_branch, delete_branch, publish_overwrite,
        access, commits, export, healthz, metrics, openapi, index, asset)
)]
pub struct ApiDoc;

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
        .route("/openapi.json", get(openapi))
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
