//! The route handlers of SPEC §6, each in the order of checks the module
//! doc of `http` lists; writes run on tasks of their own (`run_detached`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::auth::{Actor, Permission};
use crate::error::{Conflict, EngineError, report_bound};
use crate::graph::{CallerGone, Graph, LoadRequest, OverwritePublish, Receipt};
use crate::manifest::{MAIN_BRANCH, TableCounts};

use super::body::*;
use super::error::*;
use super::request::*;
use super::state::*;

/// The receipt as the API answers it (SPEC §6).
pub(super) fn receipt_json(receipt: &Receipt) -> Value {
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
pub(super) async fn run_detached<F, Fut>(state: &Arc<AppState>, write: F) -> ApiResult
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
pub(super) struct Running(Arc<AppState>);

impl Running {
    pub(super) fn enter(state: &Arc<AppState>) -> Running {
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
pub(super) async fn run_load(state: &AppState, graph: &Graph, request: LoadRequest, gone: CallerGone<'static>) -> ApiResult {
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
pub(super) async fn check_branch(graph: &Graph, actor: &Actor, id: &str, branch: &str, from: Option<&str>) -> Result<(), ApiError> {
    if graph.head(branch).await?.is_none() {
        let Some(base) = from else { return Err(EngineError::BranchNotFound(branch.to_owned()).into()) };
        actor.require(id, Permission::BranchCreate)?;
        graph.head(base).await?.ok_or_else(|| EngineError::BranchNotFound(base.to_owned()))?;
    }
    Ok(())
}

/// Authenticate, resolve the graph, authorize: before any body is read.
pub(super) async fn authorized(
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
pub(super) async fn load_ndjson(
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
pub(super) struct CompatBody {
    pub(super) branch: Option<String>,
    pub(super) from: Option<String>,
    pub(super) mode: Option<String>,
    /// NDJSON text, read leniently (SPEC §2.6).
    pub(super) data: String,
}

/// Compatibility loader (deprecated): `{"branch"?, "from"?, "mode"?, "data"}`.
#[utoipa::path(post, path = "/graphs/{id}/load", params(("id" = String, Path)), request_body = CompatBody,
    responses((status = 200, description = "committed; Deprecation and Link headers name the strict route")))]
pub(super) async fn load_compat(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
    let successor = format!("</graphs/{id}/load/ndjson>; rel=\"successor-version\"");
    let mut response = compat(state, &id, request).await.unwrap_or_else(IntoResponse::into_response);
    response.headers_mut().insert("deprecation", HeaderValue::from_static("true"));
    response.headers_mut().insert(header::LINK, HeaderValue::from_str(&successor).expect("ascii link"));
    Ok(response)
}

/// The compat route's work; its branch is inside the body, so the branch
/// check follows the (bounded) body read.
pub(super) async fn compat(state: Arc<AppState>, id: &str, request: Request) -> ApiResult {
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
        unchanged_since: None,
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
pub(super) async fn validate(
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
pub(super) struct DryRunBody<'a> {
    pub(super) ok: bool,
    pub(super) report: &'a RawValue,
    pub(super) conflicts: &'a [Conflict],
    pub(super) counts: &'a BTreeMap<String, TableCounts>,
}

/// The schema source, its hash and the compiled catalog.
#[utoipa::path(get, path = "/graphs/{id}/schema", params(("id" = String, Path)), responses((status = 200, description = "schema")))]
pub(super) async fn schema(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
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
pub(super) async fn rules(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
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
    pub(super) permission: Option<String>,
}

/// Whether the caller may do something on a graph: 204, or exactly the
/// 401/403/404 a request needing that permission would get. Gateways ask
/// this before they validate anything for a caller (a cheap authorized call).
#[utoipa::path(get, path = "/graphs/{id}/access", params(("id" = String, Path), AccessQuery),
    responses((status = 204, description = "granted"), (status = 401, description = "no valid token"),
        (status = 403, description = "not granted")))]
pub(super) async fn access(
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
    pub(super) branch: Option<String>,
    /// A commit sequence number on the branch (time travel).
    pub(super) commit: Option<u64>,
}

/// Branches with their heads.
#[utoipa::path(get, path = "/graphs/{id}/branches", params(("id" = String, Path)), responses((status = 200, description = "branches")))]
pub(super) async fn list_branches(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    let heads = graph.branches().await?;
    let list: Vec<Value> = heads.iter().map(|c| json!({"name": c.branch, "head": {"id": c.id, "seq": c.seq, "time": c.time, "actor": c.actor}})).collect();
    Ok(axum::Json(json!({"branches": list})).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct NewBranch {
    pub(super) name: String,
    /// The base branch (default `main`).
    pub(super) from: Option<String>,
    /// Types whose tables start empty on the new branch: the work branch of
    /// a multi-batch overwrite (see `POST /graphs/{id}/overwrite`).
    #[serde(default)]
    pub(super) clear: Vec<String>,
}

/// Create a branch from a base's head (no data copied).
#[utoipa::path(post, path = "/graphs/{id}/branches", params(("id" = String, Path)), request_body = NewBranch,
    responses((status = 201, description = "created"), (status = 409, description = "exists")))]
pub(super) async fn create_branch(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
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
pub(super) struct OverwriteBody {
    /// The branch whose types are replaced (default `main`).
    pub(super) branch: Option<String>,
    /// The work branch holding the new contents (created with `clear`).
    pub(super) from: String,
    /// The target's head `seq` the work branch was forked from.
    pub(super) base_seq: u64,
    /// The replaced types: the work branch's cleared types.
    pub(super) types: Vec<String>,
    pub(super) batch_key: Option<String>,
}

/// Publish a multi-batch overwrite: the types' tables of `from` replace the
/// branch's in one commit (409 `target_moved` if the branch moved since the
/// fork); the work branch is then deleted.
#[utoipa::path(post, path = "/graphs/{id}/overwrite", params(("id" = String, Path)), request_body = OverwriteBody,
    responses((status = 200, description = "committed"), (status = 409, description = "target_moved"),
        (status = 413, description = "removed_ids_limit"), (status = 422, description = "stranded edges")))]
pub(super) async fn publish_overwrite(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, request: Request) -> ApiResult {
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
pub(super) async fn delete_branch(State(state): State<Arc<AppState>>, Checked(Path((id, name))): Checked<Path<(String, String)>>, headers: HeaderMap) -> ApiResult {
    let (graph, actor) = authorized(&state, &id, &headers, Permission::Admin).await?;
    run_detached(&state, move |_| async move {
        let tombstone = graph.delete_branch(&name, &actor.name).await?;
        Ok(axum::Json(json!({"name": name, "deleted_at": {"id": tombstone.id, "seq": tombstone.seq}})).into_response())
    })
    .await
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CommitsQuery {
    pub(super) branch: Option<String>,
    /// At most this many commits (the newest); the walk stops there.
    pub(super) limit: Option<usize>,
    /// Only commits whose batch key starts with this (a client's own).
    pub(super) batch_key_prefix: Option<String>,
}

/// A branch's commits, newest first.
#[utoipa::path(get, path = "/graphs/{id}/commits", params(("id" = String, Path), CommitsQuery), responses((status = 200, description = "commits")))]
pub(super) async fn commits(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, Checked(Query(q)): Checked<Query<CommitsQuery>>, headers: HeaderMap) -> ApiResult {
    let (graph, _) = authorized(&state, &id, &headers, Permission::Read).await?;
    let prefix = q.batch_key_prefix.as_deref();
    let keyed = |commit: &crate::manifest::Commit| prefix.is_none_or(|p| commit.batch_key.as_deref().is_some_and(|k| k.starts_with(p)));
    let log = graph.log_matching(q.branch.as_deref().unwrap_or(MAIN_BRANCH), q.limit.unwrap_or(usize::MAX), keyed).await?;
    Ok(axum::Json(json!({"commits": log})).into_response())
}

/// Every record of a branch head (or commit) as strict NDJSON, streamed.
#[utoipa::path(get, path = "/graphs/{id}/export", params(("id" = String, Path), BranchQuery),
    responses((status = 200, description = "NDJSON", content_type = "application/x-ndjson")))]
pub(super) async fn export(State(state): State<Arc<AppState>>, Checked(Path(id)): Checked<Path<String>>, Checked(Query(q)): Checked<Query<BranchQuery>>, headers: HeaderMap) -> ApiResult {
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
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text")))]
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}
