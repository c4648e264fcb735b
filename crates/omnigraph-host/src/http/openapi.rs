//! The OpenAPI document of every route (utoipa), served at `/openapi.json`.

use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;

// Glob imports: each handler with the path item its `#[utoipa::path]` made
// (named paths would tag every route with its module).
use super::assets::*;
use super::routes::*;

#[derive(OpenApi)]
#[openapi(
    info(title = "OmniGraph ingest", description = "Validate and commit graph batches (SPEC §6)"),
    paths(load_ndjson, load_compat, validate, schema, rules, list_branches, create_branch, delete_branch, publish_overwrite,
        access, commits, export, healthz, metrics, openapi, index, asset)
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "this document")))]
pub(super) async fn openapi() -> Response {
    axum::Json(ApiDoc::openapi()).into_response()
}
