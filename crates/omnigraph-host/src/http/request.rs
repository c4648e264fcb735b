//! What a request names: the load query and its mode, and path and query
//! extractors that refuse as JSON 400s (`invalid_path`, `invalid_query`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use omnigraph_validate_wasm::Mode;
use serde::Deserialize;

use crate::auth::Actor;
use crate::graph::LoadRequest;
use crate::manifest::MAIN_BRANCH;

use super::error::*;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoadQuery {
    /// Target branch (default `main`).
    pub(super) branch: Option<String>,
    /// Fork the branch from this one if it does not exist.
    pub(super) from: Option<String>,
    /// `merge` (default), `append` or `overwrite`.
    pub(super) mode: Option<String>,
    /// The client's name for this batch, kept in the commit (resumable clients).
    pub(super) batch_key: Option<String>,
    /// Commit only if no commit after this one (a sequence number of the
    /// branch) changed its rows; else 409 `target_moved`, nothing written.
    pub(super) unchanged_since: Option<u64>,
}

impl LoadQuery {
    /// A strict load of `batch` as the query describes it.
    pub(super) fn request(&self, mode: Mode, actor: &Actor, batch: Bytes) -> LoadRequest {
        LoadRequest {
            branch: self.branch.clone().unwrap_or_else(|| MAIN_BRANCH.to_owned()),
            from: self.from.clone(),
            mode,
            strict: true,
            actor: actor.name.clone(),
            // No copy: the body's buffer is handed over whole.
            batch: Arc::new(Vec::from(batch)),
            batch_key: self.batch_key.clone(),
            unchanged_since: self.unchanged_since,
        }
    }
}

pub(super) fn parse_mode(mode: Option<&str>) -> Result<Mode, ApiError> {
    match mode.unwrap_or("merge") {
        "merge" => Ok(Mode::Merge),
        "append" => Ok(Mode::Append),
        "overwrite" => Ok(Mode::Overwrite),
        other => Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_mode", format!("unknown mode {other:?}"))),
    }
}

/// An extractor (`Path`, `Query`) whose refusal of a malformed URL is
/// answered as a JSON error (400 `invalid_path` / `invalid_query`) like
/// every other refusal, not as axum's plain text.
pub(super) struct Checked<E>(pub(super) E);

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
